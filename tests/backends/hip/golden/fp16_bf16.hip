// Half and bfloat16 arithmetic as the CUDA Math API documents it (cuda_fp16.h, cuda_bf16.h).
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>
#include <hip/hip_runtime.h>

__global__ void axpy_half(int n, float a, const __half* x, __half* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __half ah = __float2half(a);
        y[i] = __hadd(__hmul(ah, x[i]), y[i]);
    }
}

__global__ void scale_half2(int n, const half2* x, half2* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        half2 two = __floats2half2_rn(2.0f, 2.0f);
        y[i] = __hmul2(two, x[i]);
    }
}

__global__ void to_float(int n, const __hip_bfloat16* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __bfloat162float(x[i]) + __half2float(__float2half(1.0f));
}

__global__ void from_float(int n, const float* x, __hip_bfloat16* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __float2bfloat16(x[i]);
}

void run(int n, float a, __half* x, __half* y, hipStream_t s)
{
    axpy_half<<<(n + 255) / 256, 256, 0, s>>>(n, a, x, y);
    hipStreamSynchronize(s);
}
