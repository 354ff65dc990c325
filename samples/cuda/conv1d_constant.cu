// conv1d_constant.cu -- 1D convolution with filter taps in __constant__ memory.
//
// Exercises: `__constant__ float coeffs[KSIZE]` uploaded with
// cudaMemcpyToSymbol, a `__device__` helper function (clamped load), an
// `__forceinline__` device function, zero-padding at the edges, a size given
// as `#define N (1 << 20)` plus a 4-argument launch <<<grid, block, 0, stream>>>
// on a user-created stream with cudaMemcpyAsync and cudaStreamSynchronize.
#include "common.cuh"

#define N (1 << 20)
#define KSIZE 9
#define RADIUS (KSIZE / 2)

__constant__ float coeffs[KSIZE];

__device__ float load_or_zero(const float* x, int i, int n)
{
    return (i >= 0 && i < n) ? x[i] : 0.0f;
}

__device__ __forceinline__ float tap(const float* x, int center, int k, int n)
{
    return coeffs[k] * load_or_zero(x, center + k - RADIUS, n);
}

__global__ void conv1d(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < KSIZE; ++k) {
        acc += tap(x, i, k, n);
    }
    y[i] = acc;
}

int main(void)
{
    int n = N;
    float h_coeffs[KSIZE];
    float norm = 0.0f;
    for (int k = 0; k < KSIZE; ++k) {
        h_coeffs[k] = (float)(RADIUS + 1 - abs(k - RADIUS));
        norm += h_coeffs[k];
    }
    for (int k = 0; k < KSIZE; ++k) h_coeffs[k] /= norm;

    float* h_x = new float[n];
    float* h_y = new float[n];
    fill_random(h_x, n, 321u);

    float *d_x, *d_y;
    CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_y, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpyToSymbol(coeffs, h_coeffs, KSIZE * sizeof(float)));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(cudaMemcpyAsync(d_x, h_x, n * sizeof(float), cudaMemcpyHostToDevice, stream));

    int block = 128;
    int grid = (n + block - 1) / block;
    conv1d<<<grid, block, 0, stream>>>(d_x, d_y, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(h_y, d_y, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    int errors = 0;
    for (int i = 0; i < n; ++i) {
        double ref = 0.0;
        for (int k = 0; k < KSIZE; ++k) {
            int j = i + k - RADIUS;
            if (j >= 0 && j < n) ref += (double)h_coeffs[k] * (double)h_x[j];
        }
        if (fabs((double)h_y[i] - ref) > 1e-5) {
            if (errors < 10) printf("mismatch at %d: got %f expected %f\n", i, h_y[i], ref);
            ++errors;
        }
    }

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
    delete[] h_x;
    delete[] h_y;

    if (errors) {
        printf("FAIL (%d mismatches)\n", errors);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
