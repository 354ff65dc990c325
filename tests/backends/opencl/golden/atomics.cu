// Integer atomics on global and local memory, float and double atomicAdd, 64-bit atomics.
__global__ void atomics(int* counters, unsigned int* ucounters, float* fsum, double* dsum,
                        unsigned long long* big, const float* x, int n)
{
    __shared__ float block_sum;
    __shared__ unsigned int hits;
    if (threadIdx.x == 0) {
        block_sum = 0.0f;
        hits = 0u;
    }
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&block_sum, x[i]);
        atomicAdd(&hits, 1u);
        atomicMax(&counters[0], i);
        atomicMin(&counters[1], -i);
        atomicSub(&counters[2], 1);
        atomicOr(&ucounters[0], 1u << (i % 32));
        atomicInc(&ucounters[1], 7u);
        atomicCAS(&counters[3], 0, i + 1);
        atomicAdd(dsum, (double)x[i]);
        atomicAdd(big, 1ULL);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(fsum, block_sum);
        atomicAdd(&ucounters[2], hits);
        atomicExch(&fsum[1], 2.5f);
    }
}
