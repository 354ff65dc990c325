// Macros and constants of the CUDA headers a program tests or uses (CUDA Runtime API, math_constants.h);
// CUDART_VERSION has no HIP counterpart: its #if takes the other branch under HIP.
#include <hip/hip_runtime.h>
#include <hip/hip_math_constants.h>
#include <cstdio>

#if defined(__HIPCC__)
#define ON_DEVICE_COMPILER 1
#endif

#if CUDART_VERSION >= 11000
#define HAS_CUDA_11 1
#endif

__global__ void limits(float* out)
{
#ifdef __HIP_DEVICE_COMPILE__
    out[0] = HIP_INF_F;
    out[1] = HIP_PI_F;
    out[2] = HIP_NAN_F;
#endif
}

int main()
{
    int version = 0;
    hipRuntimeGetVersion(&version);
    hipSetDeviceFlags(hipDeviceScheduleBlockingSync | hipDeviceMapHost);
    float* host = nullptr;
    hipHostMalloc(&host, 3 * sizeof(float), hipHostMallocMapped | hipHostMallocPortable);
    float* dev = nullptr;
    hipHostGetDevicePointer((void**)&dev, host, 0);
    limits<<<1, 1>>>(dev);
    hipError_t err = hipDeviceSynchronize();
    if (err != hipSuccess) {
        printf("%s: %s\n", hipGetErrorName(err), hipGetErrorString(err));
        return 1;
    }
    printf("runtime %d inf %f\n", version, host[0]);
    hipHostFree(host);
    return 0;
}
