// Adversarial self-test (stencil1d / uninit_shared): never loads the right halo, then reads it.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

#define RADIUS 1
#define BLOCK 128

__global__ void stencil1d(const float* in, float* out, int n)
{
    __shared__ float tile[BLOCK + 2 * RADIUS];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int t = threadIdx.x + RADIUS;
    tile[t] = in[min(i, n - 1)];
    if (threadIdx.x < RADIUS) {
        tile[t - RADIUS] = in[max(i - RADIUS, 0)];
    }
    __syncthreads();
    if (i < n) {
        out[i] = 0.25f * tile[t - 1] + 0.5f * tile[t] + 0.25f * tile[t + 1];
    }
}
