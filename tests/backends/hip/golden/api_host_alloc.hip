// Pinned host memory: cudaHostAlloc and its flags, registration, the driver's cuMemHostAlloc (names as the
// CUDA reference spells them), written for porter's tests.
#include <hip/hip_runtime.h>
#include <hip/hip_runtime.h>

int run_host(size_t n) {
    float *h, *mapped, *device_view, *legacy;
    void* raw;
    hipSetDeviceFlags(hipDeviceMapHost);
    hipHostMalloc((void**)&h, n, hipHostMallocDefault);
    hipHostMalloc((void**)&mapped, n, hipHostMallocMapped | hipHostMallocPortable | hipHostMallocWriteCombined);
    hipHostGetDevicePointer((void**)&device_view, mapped, 0);
    unsigned int flags = 0;
    hipHostGetFlags(&flags, mapped);
    static float buffer[1024];
    hipHostRegister(buffer, sizeof buffer, hipHostRegisterMapped | hipHostRegisterPortable);
    hipHostUnregister(buffer);
    hipHostMalloc(&raw, n, hipHostMallocPortable | hipHostMallocMapped);
    hipHostFree(raw);
    hipHostMalloc((void**)&legacy, n);
    hipHostFree(legacy);
    hipHostFree(mapped);
    hipHostFree(h);
    return (int)flags;
}
