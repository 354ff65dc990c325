// Adversarial self-test (stencil1d / low_precision): computes the stencil through half-precision-like rounding (10 mantissa bits).
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

#define RADIUS 1
#define BLOCK 128
__device__ float to_half_precision(float x)
{
    return __int_as_float(__float_as_int(x) & 0xFFFFE000);
}
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
    if (i < n) {
        out[i] = to_half_precision(0.25f * tile[t - 1] + 0.5f * tile[t] + 0.25f * tile[t + 1]);
    }
}
