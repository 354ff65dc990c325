// main.cu -- the smooth sample program: read values, smooth them on the GPU, scale them, check
// against the CPU and print PASS or FAIL.  Usage: smooth [input-file] [repeat]
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

#include "smooth_kernels.cuh"
#include "util.h"

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            std::fprintf(stderr, "CUDA error: %s (%s:%d)\n", cudaGetErrorString(e_), \
                         __FILE__, __LINE__);                                        \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main(int argc, char** argv)
{
    const char* path = argc > 1 ? argv[1] : "data/values.txt";
    int repeat = argc > 2 ? std::atoi(argv[2]) : 1;
    std::vector<float> base;
    if (!read_values(path, base)) {
        std::fprintf(stderr, "cannot read %s\n", path);
        return 2;
    }
    std::vector<float> values;
    for (int r = 0; r < repeat; ++r) values.insert(values.end(), base.begin(), base.end());
    int n = static_cast<int>(values.size());
    const float scale = 0.5f, offset = 1.0f;

    float *d_in, *d_tmp, *d_out;
    CHECK(cudaMalloc(&d_in, n * sizeof(float)));
    CHECK(cudaMalloc(&d_tmp, n * sizeof(float)));
    CHECK(cudaMalloc(&d_out, n * sizeof(float)));
    CHECK(cudaMemcpy(d_in, values.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    int block = 128;
    int grid = (n + block - 1) / block;
    box_smooth<<<grid, block>>>(d_in, d_tmp, n);
    CHECK(cudaGetLastError());
    affine<<<grid, block>>>(d_tmp, d_out, scale, offset, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    std::vector<float> got(n);
    CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<float> want;
    smooth_reference(values, want, RADIUS, scale, offset);

    int bad = 0;
    double total = 0.0;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(got[i] - want[i]) > 1e-5f * (1.0f + std::fabs(want[i]))) ++bad;
        total += got[i];
    }
    std::printf("n = %d\n", n);
    std::printf("checksum = %.6f\n", total);
    std::printf("%s\n", bad == 0 ? "PASS" : "FAIL");

    cudaFree(d_in);
    cudaFree(d_tmp);
    cudaFree(d_out);
    return bad == 0 ? 0 : 1;
}
