// headers.cu -- CUDA headers become HIP headers; local and system headers stay.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_cooperative_groups.h>
#include <hip/hip_runtime_api.h>
#include <cstdio>
#include <vector>
#include "local_helpers.cuh"
// #include <cuda.h>   (a comment: left alone)
#include <cudnn.h>

__global__ void half_scale(__half* x, __half s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __hmul(x[i], s);
}
