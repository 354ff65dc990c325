// Pinned host memory: cudaHostAlloc and its flags, registration, the driver's cuMemHostAlloc (names as the
// CUDA reference spells them), written for porter's tests.
#include <cuda_runtime.h>
#include <cuda.h>

int run_host(size_t n) {
    float *h, *mapped, *device_view, *legacy;
    void* raw;
    cudaSetDeviceFlags(cudaDeviceMapHost);
    cudaHostAlloc((void**)&h, n, cudaHostAllocDefault);
    cudaHostAlloc((void**)&mapped, n, cudaHostAllocMapped | cudaHostAllocPortable | cudaHostAllocWriteCombined);
    cudaHostGetDevicePointer((void**)&device_view, mapped, 0);
    unsigned int flags = 0;
    cudaHostGetFlags(&flags, mapped);
    static float buffer[1024];
    cudaHostRegister(buffer, sizeof buffer, cudaHostRegisterMapped | cudaHostRegisterPortable);
    cudaHostUnregister(buffer);
    cuMemHostAlloc(&raw, n, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    cuMemFreeHost(raw);
    cudaMallocHost((void**)&legacy, n);
    cudaFreeHost(legacy);
    cudaFreeHost(mapped);
    cudaFreeHost(h);
    return (int)flags;
}
