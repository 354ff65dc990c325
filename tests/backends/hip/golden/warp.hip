// warp.cu -- warp intrinsics with masks and widths; warpSize kept.
#include <hip/hip_runtime.h>

__device__ float sum_full(float v)
{
    for (int o = warpSize / 2; o > 0; o /= 2)
        v += __shfl_down(v, o);
    return v;
}

__device__ float variants(float v, unsigned mask, int lane)
{
    v += __shfl(v, 0);
    v += __shfl_up(v, 1, 32);
    v += __shfl_xor(v, 2);
    v += __shfl_down(/* all */ v, 4, warpSize);
    unsigned long long b = __ballot(v > 0.0f);
    if (__any(lane == 0) && __all(v > 1.0f)) v += (float)b;
    return v;
}

__global__ void warp_kernel(float* x)
{
    x[threadIdx.x] = variants(sum_full(x[threadIdx.x]), 0xffffffffu, threadIdx.x % warpSize);
}
