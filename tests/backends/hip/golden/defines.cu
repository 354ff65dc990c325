// Macros and constants of the CUDA headers a program tests or uses (CUDA Runtime API, math_constants.h);
// CUDART_VERSION has no HIP counterpart: its #if takes the other branch under HIP.
#include <cuda_runtime.h>
#include <math_constants.h>
#include <cstdio>

#if defined(__CUDACC__)
#define ON_DEVICE_COMPILER 1
#endif

#if CUDART_VERSION >= 11000
#define HAS_CUDA_11 1
#endif

__global__ void limits(float* out)
{
#ifdef __CUDA_ARCH__
    out[0] = CUDART_INF_F;
    out[1] = CUDART_PI_F;
    out[2] = CUDART_NAN_F;
#endif
}

int main()
{
    int version = 0;
    cudaRuntimeGetVersion(&version);
    cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync | cudaDeviceMapHost);
    float* host = nullptr;
    cudaHostAlloc(&host, 3 * sizeof(float), cudaHostAllocMapped | cudaHostAllocPortable);
    float* dev = nullptr;
    cudaHostGetDevicePointer((void**)&dev, host, 0);
    limits<<<1, 1>>>(dev);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        printf("%s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
        return 1;
    }
    printf("runtime %d inf %f\n", version, host[0]);
    cudaFreeHost(host);
    return 0;
}
