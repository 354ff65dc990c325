// vector_add.cu -- the classic first CUDA program: c[i] = a[i] + b[i].
//
// Exercises: a 1D map kernel with a bounds check, n = 1000000 which is NOT a
// multiple of the block size (tail block partially idle), BLOCK_SIZE from
// common.cuh, malloc'd host buffers, cudaMalloc/cudaMemcpy with byte sizes
// written as `n * sizeof(float)`, a CPU reference and PASS/FAIL exit status.
#include "common.cuh"

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

int main(void)
{
    int n = 1000000;
    size_t bytes = n * sizeof(float);

    float* h_a = (float*)malloc(bytes);
    float* h_b = (float*)malloc(bytes);
    float* h_c = (float*)malloc(bytes);
    float* h_ref = (float*)malloc(bytes);
    if (!h_a || !h_b || !h_c || !h_ref) {
        fprintf(stderr, "host allocation failed\n");
        return 1;
    }
    fill_random(h_a, n, 1234u);
    fill_random(h_b, n, 5678u);

    float *d_a, *d_b, *d_c;
    CUDA_CHECK(cudaMalloc((void**)&d_a, bytes));
    CUDA_CHECK(cudaMalloc((void**)&d_b, bytes));
    CUDA_CHECK(cudaMalloc((void**)&d_c, bytes));
    CUDA_CHECK(cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice));

    int block = BLOCK_SIZE;
    int grid = (n + block - 1) / block;
    vector_add<<<grid, block>>>(d_a, d_b, d_c, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());

    CUDA_CHECK(cudaMemcpy(h_c, d_c, bytes, cudaMemcpyDeviceToHost));

    for (int i = 0; i < n; ++i) {
        h_ref[i] = h_a[i] + h_b[i];
    }
    int errors = 0;
    for (int i = 0; i < n; ++i) {
        if (fabsf(h_c[i] - h_ref[i]) > 1e-6f) {
            if (errors < 10) {
                printf("mismatch at %d: got %f expected %f\n", i, h_c[i], h_ref[i]);
            }
            ++errors;
        }
    }

    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_c));
    free(h_a);
    free(h_b);
    free(h_c);
    free(h_ref);

    if (errors != 0) {
        printf("FAIL (%d mismatches)\n", errors);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
