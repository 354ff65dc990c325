// legacy_texture.cu -- 2011-era code using APIs REMOVED in CUDA 12/13.
//
// Exercises (hazards porter must flag as removed-api / texture-api):
//   * a legacy texture reference `texture<float, 1, cudaReadModeElementType>`
//     read with tex1Dfetch in the kernel, bound with cudaBindTexture and
//     released with cudaUnbindTexture (texture references: removed in CUDA 12);
//   * cudaThreadSetCacheConfig and cudaThreadSynchronize (deprecated since
//     CUDA 4, removed from the CUDA 13 runtime headers).
// This file deliberately does NOT build with CUDA 12+/13 -- that is the point.
// The second kernel, saxpy_plain, uses none of the removed APIs and is the
// part a translator can port unchanged (plain pointers, bounds check).
#include "common.cuh"

texture<float, 1, cudaReadModeElementType> tex_in;

__global__ void scale_tex(float* out, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = alpha * tex1Dfetch(tex_in, i);
    }
}

__global__ void saxpy_plain(int n, float a, const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

int main(void)
{
    int n = 500000;
    float alpha = 3.0f;
    float a = 0.75f;
    size_t bytes = n * sizeof(float);

    float* h_in = (float*)malloc(bytes);
    float* h_y = (float*)malloc(bytes);
    float* h_scaled = (float*)malloc(bytes);
    float* h_out = (float*)malloc(bytes);
    fill_random(h_in, n, 11u);
    fill_random(h_y, n, 13u);

    float *d_in, *d_out, *d_y;
    CUDA_CHECK(cudaMalloc((void**)&d_in, bytes));
    CUDA_CHECK(cudaMalloc((void**)&d_out, bytes));
    CUDA_CHECK(cudaMalloc((void**)&d_y, bytes));
    CUDA_CHECK(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_y, h_y, bytes, cudaMemcpyHostToDevice));

    CUDA_CHECK(cudaThreadSetCacheConfig(cudaFuncCachePreferL1));
    CUDA_CHECK(cudaBindTexture(0, tex_in, d_in, bytes));

    int block = BLOCK_SIZE;
    int grid = (n + block - 1) / block;
    scale_tex<<<grid, block>>>(d_out, alpha, n);
    CUDA_CHECK(cudaGetLastError());
    saxpy_plain<<<grid, block>>>(n, a, d_in, d_y);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaThreadSynchronize());

    CUDA_CHECK(cudaMemcpy(h_scaled, d_out, bytes, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(h_out, d_y, bytes, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaUnbindTexture(tex_in));

    int errors = 0;
    for (int i = 0; i < n; ++i) {
        float ref_scaled = alpha * h_in[i];
        float ref_y = a * h_in[i] + h_y[i];
        if (fabsf(h_scaled[i] - ref_scaled) > 1e-5f || fabsf(h_out[i] - ref_y) > 1e-5f) {
            ++errors;
        }
    }

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_y));
    free(h_in);
    free(h_y);
    free(h_scaled);
    free(h_out);

    if (errors) {
        printf("FAIL (%d mismatches)\n", errors);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
