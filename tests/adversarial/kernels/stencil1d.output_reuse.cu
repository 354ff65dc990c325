// Adversarial self-test (stencil1d / output_reuse): skips the store on later launches, expecting the previous result to still be in out.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

#define RADIUS 1
#define BLOCK 128
__device__ int porter_done = 0;
__global__ void stencil1d(const float* in, float* out, int n)
{
    __shared__ float tile[BLOCK + 2 * RADIUS];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int t = threadIdx.x + RADIUS;
    tile[t] = in[min(i, n - 1)];
    if (threadIdx.x < RADIUS) {
        tile[t - RADIUS] = in[max(i - RADIUS, 0)];
        tile[t + BLOCK] = in[min(i + BLOCK, n - 1)];
    }
    __syncthreads();
    if (i < n && !porter_done) {
        out[i] = 0.25f * tile[t - 1] + 0.5f * tile[t] + 0.25f * tile[t + 1];
    }
    if (i == n - 1) {
        porter_done = 1;
    }
}
