// stencil2d.cu -- one 5-point Jacobi step on a 2D grid: out = avg(in neighbours).
//
// Exercises: a 2D kernel with 16x16 blocks and a dim3 grid, reading `in` and
// writing a separate `out` (no in-place hazard), boundary handling (edge
// cells are copied unchanged), row-major indexing `y * nx + x`, sizes that are
// not multiples of 16 in either dimension, and ping-pong iterations on the
// host (swapping device pointers between launches).
#include "common.cuh"

#define BLOCK_X 16
#define BLOCK_Y 16

__global__ void jacobi_step(const float* in, float* out, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) {
        return;
    }
    int idx = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[idx] = in[idx];
        return;
    }
    out[idx] = 0.2f * (in[idx] + in[idx - 1] + in[idx + 1] + in[idx - nx] + in[idx + nx]);
}

static void jacobi_cpu(const float* in, float* out, int nx, int ny)
{
    for (int y = 0; y < ny; ++y) {
        for (int x = 0; x < nx; ++x) {
            int idx = y * nx + x;
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
                out[idx] = in[idx];
            } else {
                out[idx] = 0.2f * (in[idx] + in[idx - 1] + in[idx + 1] + in[idx - nx] + in[idx + nx]);
            }
        }
    }
}

int main(void)
{
    const int nx = 2000;
    const int ny = 1500;
    const int iterations = 10;
    size_t bytes = (size_t)nx * ny * sizeof(float);

    float* h_grid = (float*)malloc(bytes);
    float* h_out = (float*)malloc(bytes);
    float* h_a = (float*)malloc(bytes);
    float* h_b = (float*)malloc(bytes);
    fill_random(h_grid, nx * ny, 99u);

    float *d_a, *d_b;
    CUDA_CHECK(cudaMalloc(&d_a, bytes));
    CUDA_CHECK(cudaMalloc(&d_b, bytes));
    CUDA_CHECK(cudaMemcpy(d_a, h_grid, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_b, h_grid, bytes, cudaMemcpyHostToDevice));

    dim3 block(BLOCK_X, BLOCK_Y);
    dim3 grid((nx + BLOCK_X - 1) / BLOCK_X, (ny + BLOCK_Y - 1) / BLOCK_Y);
    for (int it = 0; it < iterations; ++it) {
        jacobi_step<<<grid, block>>>(d_a, d_b, nx, ny);
        CUDA_CHECK(cudaGetLastError());
        float* tmp = d_a;
        d_a = d_b;
        d_b = tmp;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_out, d_a, bytes, cudaMemcpyDeviceToHost));

    memcpy(h_a, h_grid, bytes);
    for (int it = 0; it < iterations; ++it) {
        jacobi_cpu(h_a, h_b, nx, ny);
        float* tmp = h_a;
        h_a = h_b;
        h_b = tmp;
    }

    int errors = 0;
    for (int i = 0; i < nx * ny; ++i) {
        if (fabsf(h_out[i] - h_a[i]) > 1e-5f) {
            if (errors < 10) printf("mismatch at %d: got %f expected %f\n", i, h_out[i], h_a[i]);
            ++errors;
        }
    }

    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_b));
    free(h_grid);
    free(h_out);
    free(h_a);
    free(h_b);

    if (errors) {
        printf("FAIL (%d mismatches)\n", errors);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
