// warp.cu -- warp intrinsics with masks and widths; warpSize kept.
#include <cuda_runtime.h>

__device__ float sum_full(float v)
{
    for (int o = warpSize / 2; o > 0; o /= 2)
        v += __shfl_down_sync(0xffffffff, v, o);
    return v;
}

__device__ float variants(float v, unsigned mask, int lane)
{
    v += __shfl_sync(0xFFFFFFFFu, v, 0);
    v += __shfl_up_sync(~0u, v, 1, 32);
    v += __shfl_xor_sync(mask, v, 2);
    v += __shfl_down_sync(0xffffffff, /* all */ v, 4, warpSize);
    unsigned long long b = __ballot_sync(0xffffffff, v > 0.0f);
    if (__any_sync(0xffffffff, lane == 0) && __all_sync(mask, v > 1.0f)) v += (float)b;
    return v;
}

__global__ void warp_kernel(float* x)
{
    x[threadIdx.x] = variants(sum_full(x[threadIdx.x]), 0xffffffffu, threadIdx.x % warpSize);
}
