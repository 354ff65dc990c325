#include <hip/hip_runtime.h>
#line 1
// libraries.cu -- cuBLAS, cuRAND (host and device) and cuFFT calls that are plain renames.
#include <hipblas/hipblas.h>
#include <hiprand/hiprand.h>
#include <hiprand/hiprand_kernel.h>
#include <hipfft/hipfft.h>

__global__ void init_rng(hiprandState* states, unsigned long long seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    hiprand_init(seed, i, 0, &states[i]);
}

__global__ void draw(hiprandState* states, float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    hiprandState local = states[i];
    out[i] = hiprand_uniform(&local) + hiprand_normal(&local);
    states[i] = local;
}

int gemm(int n, const float* A, const float* B, float* C)
{
    hipblasHandle_t handle;
    if (hipblasCreate(&handle) != HIPBLAS_STATUS_SUCCESS) return 1;
    const float alpha = 1.0f, beta = 0.0f;
    hipblasSgemm(handle, HIPBLAS_OP_N, HIPBLAS_OP_T, n, n, n, &alpha, A, n, B, n, &beta, C, n);
    hipblasDestroy(handle);
    return 0;
}

int random_host(float* d, size_t n)
{
    hiprandGenerator_t gen;
    hiprandCreateGenerator(&gen, HIPRAND_RNG_PSEUDO_DEFAULT);
    hiprandSetPseudoRandomGeneratorSeed(gen, 1234ULL);
    hiprandGenerateUniform(gen, d, n);
    return hiprandDestroyGenerator(gen) == HIPRAND_STATUS_SUCCESS ? 0 : 1;
}

int fft(hipfftComplex* data, int n)
{
    hipfftHandle plan;
    if (hipfftPlan1d(&plan, n, HIPFFT_C2C, 1) != HIPFFT_SUCCESS) return 1;
    hipfftExecC2C(plan, data, data, HIPFFT_FORWARD);
    hipfftExecC2C(plan, data, data, HIPFFT_BACKWARD);
    hipfftDestroy(plan);
    return 0;
}
