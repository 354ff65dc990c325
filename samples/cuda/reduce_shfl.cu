// reduce_shfl.cu -- float sum reduction with warp shuffles.
//
// Exercises the warp-size-32 assumptions typical of 2016-2020 code, which are
// HAZARDS on 64-wide AMD wavefronts and must be flagged by porter:
//   * `__shfl_down_sync(0xffffffff, v, offset)` -- a full 32-bit lane mask;
//   * shuffle loops starting at offset 16 (i.e. warpSize / 2 hard-coded);
//   * `lane = threadIdx.x % 32`, `warp = threadIdx.x / 32`;
//   * a dynamically sized `extern __shared__` array holding one partial per
//     warp, sized at the launch (third <<<>>> argument);
//   * a final float atomicAdd of each block's partial into a single output.
// Float atomics make the summation order nondeterministic: compare with a
// relative tolerance against a double-precision CPU reference.
#include "common.cuh"

__inline__ __device__ float warp_reduce_sum(float v)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_down_sync(0xffffffff, v, offset);
    }
    return v;
}

__global__ void reduce_sum(const float* in, float* out, int n)
{
    extern __shared__ float warp_sums[];

    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    int num_warps = blockDim.x / 32;

    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        v += in[i];
    }

    v = warp_reduce_sum(v);
    if (lane == 0) {
        warp_sums[warp] = v;
    }
    __syncthreads();

    if (warp == 0) {
        v = (lane < num_warps) ? warp_sums[lane] : 0.0f;
        for (int offset = warpSize / 2; offset > 0; offset >>= 1) {
            v += __shfl_down_sync(0xffffffff, v, offset);
        }
        if (lane == 0) {
            atomicAdd(out, v);
        }
    }
}

int main(void)
{
    const int n = 1 << 24;
    size_t bytes = n * sizeof(float);

    float* h_in = new float[n];
    for (int i = 0; i < n; ++i) {
        // Positive values keep the relative error meaningful.
        h_in[i] = (float)((i * 37) % 1000) / 1000.0f + 0.5f;
    }

    float *d_in, *d_out;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_out, 0, sizeof(float)));

    int threads = 512;
    int blocks = (n + threads - 1) / threads;
    if (blocks > 2048) blocks = 2048;
    size_t smem = (threads / 32) * sizeof(float);
    reduce_sum<<<blocks, threads, smem>>>(d_in, d_out, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());

    float h_out = 0.0f;
    CUDA_CHECK(cudaMemcpy(&h_out, d_out, sizeof(float), cudaMemcpyDeviceToHost));

    double ref = 0.0;
    for (int i = 0; i < n; ++i) {
        ref += h_in[i];
    }
    double rel = fabs((double)h_out - ref) / fabs(ref);

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    delete[] h_in;

    if (rel > 5e-4) {
        printf("FAIL (got %f expected %f, rel error %g)\n", h_out, ref, rel);
        return 1;
    }
    printf("PASS (sum %f, rel error %g)\n", h_out, rel);
    return 0;
}
