// smooth_kernels.cuh -- the device code of the smooth sample program, kept in a header as many
// real projects do (Rodinia's *_kernel.cu, CUDA samples' *_kernel.cuh).
#ifndef SMOOTH_KERNELS_CUH
#define SMOOTH_KERNELS_CUH

#define RADIUS 2

// 1-D box filter of width 2*RADIUS+1 with clamped edges.
__global__ void box_smooth(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = 0.0f;
    for (int d = -RADIUS; d <= RADIUS; ++d) {
        int j = min(max(i + d, 0), n - 1);
        sum += in[j];
    }
    out[i] = sum / (2 * RADIUS + 1);
}

// out[i] = scale * in[i] + offset
__global__ void affine(const float* in, float* out, float scale, float offset, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = scale * in[i] + offset;
}

#endif
