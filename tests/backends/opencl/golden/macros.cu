/* Object-like and function-like macros, a local include, comments. */
#include "golden_macros.cuh"
#include <cuda_runtime.h>

#define BLOCK 128
#define SYNC() __syncthreads()
#define BIG 1ULL << 40

// Every comment is kept.
__global__ void magnitudes(const float2* v, float* out, int n)
{
    __shared__ float cache[BLOCK];
    int i = GLOBAL_TID;  /* macro with built-ins */
    cache[threadIdx.x] = i < n ? norm2(v[i].x, v[i].y) : 0.0f;
    SYNC();
    if (i < n) out[i] = cache[threadIdx.x] + (float)(BIG >> 40) - 1.0f;
}
