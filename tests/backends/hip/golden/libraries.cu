// libraries.cu -- cuBLAS, cuRAND (host and device) and cuFFT calls that are plain renames.
#include <cublas_v2.h>
#include <curand.h>
#include <curand_kernel.h>
#include <cufft.h>

__global__ void init_rng(curandState* states, unsigned long long seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    curand_init(seed, i, 0, &states[i]);
}

__global__ void draw(curandState* states, float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    curandState local = states[i];
    out[i] = curand_uniform(&local) + curand_normal(&local);
    states[i] = local;
}

int gemm(int n, const float* A, const float* B, float* C)
{
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
    const float alpha = 1.0f, beta = 0.0f;
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &alpha, A, n, B, n, &beta, C, n);
    cublasDestroy(handle);
    return 0;
}

int random_host(float* d, size_t n)
{
    curandGenerator_t gen;
    curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_DEFAULT);
    curandSetPseudoRandomGeneratorSeed(gen, 1234ULL);
    curandGenerateUniform(gen, d, n);
    return curandDestroyGenerator(gen) == CURAND_STATUS_SUCCESS ? 0 : 1;
}

int fft(cufftComplex* data, int n)
{
    cufftHandle plan;
    if (cufftPlan1d(&plan, n, CUFFT_C2C, 1) != CUFFT_SUCCESS) return 1;
    cufftExecC2C(plan, data, data, CUFFT_FORWARD);
    cufftExecC2C(plan, data, data, CUFFT_INVERSE);
    cufftDestroy(plan);
    return 0;
}
