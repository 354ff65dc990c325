// histogram.cu -- 256-bin histogram of an unsigned char buffer.
//
// Exercises: a per-block privatized histogram in static __shared__ memory,
// atomicAdd on shared memory (per element) and on global memory (one merge
// per bin per block), __syncthreads between the zero / accumulate / merge
// phases, a grid-stride loop, cudaMemset of the output, `#define N` size.
// The result is exact (integer counts), so validation is bit-exact.
#include "common.cuh"

#define N (1 << 22)
#define NUM_BINS 256

__global__ void histogram_shared(const unsigned char* data, unsigned int* hist, int n)
{
    __shared__ unsigned int local_hist[NUM_BINS];

    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
        local_hist[b] = 0;
    }
    __syncthreads();

    int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&local_hist[data[i]], 1u);
    }
    __syncthreads();

    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) {
        unsigned int count = local_hist[b];
        if (count != 0) {
            atomicAdd(&hist[b], count);
        }
    }
}

int main(void)
{
    unsigned char* h_data = (unsigned char*)malloc(N * sizeof(unsigned char));
    unsigned int* h_hist = (unsigned int*)malloc(NUM_BINS * sizeof(unsigned int));
    unsigned int* h_ref = (unsigned int*)calloc(NUM_BINS, sizeof(unsigned int));

    // Skewed data so some bins are hot (contention on the shared atomics).
    unsigned int s = 2024u;
    for (int i = 0; i < N; ++i) {
        s = s * 1103515245u + 12345u;
        unsigned int r = (s >> 16) & 0xff;
        h_data[i] = (unsigned char)((i % 7 == 0) ? (r & 0x0f) : r);
    }

    unsigned char* d_data;
    unsigned int* d_hist;
    CUDA_CHECK(cudaMalloc(&d_data, N * sizeof(unsigned char)));
    CUDA_CHECK(cudaMalloc(&d_hist, NUM_BINS * sizeof(unsigned int)));
    CUDA_CHECK(cudaMemcpy(d_data, h_data, N * sizeof(unsigned char), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_hist, 0, NUM_BINS * sizeof(unsigned int)));

    int n = N;
    int block = 256;
    int grid = (n + block - 1) / block;
    if (grid > 1024) grid = 1024;  // each thread loops over several elements
    histogram_shared<<<grid, block>>>(d_data, d_hist, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_hist, d_hist, NUM_BINS * sizeof(unsigned int), cudaMemcpyDeviceToHost));

    for (int i = 0; i < N; ++i) {
        h_ref[h_data[i]]++;
    }
    int errors = 0;
    unsigned long long total = 0;
    for (int b = 0; b < NUM_BINS; ++b) {
        total += h_hist[b];
        if (h_hist[b] != h_ref[b]) {
            if (errors < 10) printf("bin %d: got %u expected %u\n", b, h_hist[b], h_ref[b]);
            ++errors;
        }
    }

    CUDA_CHECK(cudaFree(d_data));
    CUDA_CHECK(cudaFree(d_hist));
    free(h_data);
    free(h_hist);
    free(h_ref);

    if (errors != 0 || total != (unsigned long long)N) {
        printf("FAIL (%d wrong bins, total %llu of %d)\n", errors, total, N);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
