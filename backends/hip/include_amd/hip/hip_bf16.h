/* hip/hip_bf16.h for a HIP that lacks it (porter's fallback, written by hand): the bfloat16 names porter
   translates CUDA's cuda_bf16.h to (__nv_bfloat16 -> __hip_bfloat16, __float2bfloat16, __bfloat162float),
   over the hip_bfloat16 type of older HIP (5.2: hip/hip_bfloat16.h, rounding to nearest even).  Where the
   installed HIP has its own hip_bf16.h (ROCm 5.7+), that one is used. */
#pragma once
#if defined(__has_include_next) && __has_include_next(<hip/hip_bf16.h>)
#include_next <hip/hip_bf16.h>
#else
#include <hip/hip_bfloat16.h>
typedef hip_bfloat16 __hip_bfloat16;
__host__ __device__ inline __hip_bfloat16 __float2bfloat16(float f) { return hip_bfloat16(f); }
__host__ __device__ inline float __bfloat162float(__hip_bfloat16 b) { return static_cast<float>(b); }
__host__ __device__ inline __hip_bfloat16 __hadd(__hip_bfloat16 a, __hip_bfloat16 b)
{
    return hip_bfloat16(static_cast<float>(a) + static_cast<float>(b));
}
__host__ __device__ inline __hip_bfloat16 __hmul(__hip_bfloat16 a, __hip_bfloat16 b)
{
    return hip_bfloat16(static_cast<float>(a) * static_cast<float>(b));
}
#endif
