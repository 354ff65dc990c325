// Adversarial self-test (block_sum / input_mutation): zeroes the input after loading it.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

#define BLOCK 256

__global__ void block_sum(const double* in, double* partial, int n)
{
    __shared__ double s[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    s[tid] = (i < n) ? in[i] : 0.0;
    if (i < n) {
        ((double*)in)[i] = 0.0;
    }
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) {
            s[tid] += s[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x] = s[0];
    }
}
