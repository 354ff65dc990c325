// Adversarial self-test: the CORRECT reference kernel of the block_sum family (double precision).
// One partial sum per block of 256 elements; planted-defect variants are block_sum.<defect>.cu.
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
        partial[blockIdx.x] = s[0];
    }
}
