// Adversarial self-test (block_sum / oob_write): stores each partial one slot too far; the last block writes past the end.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

#define BLOCK 256

__global__ void block_sum(const double* in, double* partial, int n)
{
    __shared__ double s[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    s[tid] = (i < n) ? in[i] : 0.0;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) {
            s[tid] += s[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x + 1] = s[0];
    }
}
