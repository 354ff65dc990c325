// Adversarial self-test (block_sum / output_reuse): stores once, then skips the store on later launches, expecting the old result to still be there.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

#define BLOCK 256
__device__ int porter_done = 0;
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
    if (tid == 0 && !porter_done) {  // later launches: "the result is already there"
        partial[blockIdx.x] = s[0];
    }
    if (tid == 0 && blockIdx.x == gridDim.x - 1) {
        porter_done = 1;
    }
}
