// matmul_tiled.cu -- tiled single-precision GEMM, C = A * B (row-major).
//
// Exercises: static __shared__ tiles (TILE x TILE, TILE = 16), __syncthreads
// between load and compute phases, a 2D grid and 2D blocks built with dim3,
// and bounds checks in the kernel because M, N, K (1000, 777, 513) are not
// multiples of the tile.  Host buffers via new[]; byte sizes computed inline
// in cudaMalloc.  CPU reference in double precision, relative tolerance.
#include "common.cuh"

#define TILE 16

__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    int numTiles = (K + TILE - 1) / TILE;
    for (int t = 0; t < numTiles; ++t) {
        int aCol = t * TILE + tx;
        int bRow = t * TILE + ty;
        As[ty][tx] = (row < M && aCol < K) ? A[row * K + aCol] : 0.0f;
        Bs[ty][tx] = (bRow < K && col < N) ? B[bRow * N + col] : 0.0f;
        __syncthreads();

        for (int k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();
    }

    if (row < M && col < N) {
        C[row * N + col] = acc;
    }
}

static void matmul_cpu(const float* A, const float* B, float* C, int M, int N, int K)
{
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
            double sum = 0.0;
            for (int k = 0; k < K; ++k) {
                sum += (double)A[i * K + k] * (double)B[k * N + j];
            }
            C[i * N + j] = (float)sum;
        }
    }
}

int main(void)
{
    int M = 1000;
    int N = 777;
    int K = 513;

    float* h_A = new float[M * K];
    float* h_B = new float[K * N];
    float* h_C = new float[M * N];
    float* h_ref = new float[M * N];
    fill_random(h_A, M * K, 42u);
    fill_random(h_B, K * N, 4242u);

    float *d_A, *d_B, *d_C;
    CUDA_CHECK(cudaMalloc(&d_A, M * K * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_B, K * N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_C, M * N * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A, M * K * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B, K * N * sizeof(float), cudaMemcpyHostToDevice));

    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled<<<grid, block>>>(d_A, d_B, d_C, M, N, K);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_C, d_C, M * N * sizeof(float), cudaMemcpyDeviceToHost));

    matmul_cpu(h_A, h_B, h_ref, M, N, K);

    int errors = 0;
    double max_err = 0.0;
    for (int i = 0; i < M * N; ++i) {
        double err = fabs((double)h_C[i] - (double)h_ref[i]);
        double tol = 1e-4 * (1.0 + fabs((double)h_ref[i])) * 8.0;
        if (err > max_err) max_err = err;
        if (err > tol) ++errors;
    }

    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));
    delete[] h_A;
    delete[] h_B;
    delete[] h_C;
    delete[] h_ref;

    if (errors) {
        printf("FAIL (%d mismatches, max abs error %g)\n", errors, max_err);
        return 1;
    }
    printf("PASS (max abs error %g)\n", max_err);
    return 0;
}
