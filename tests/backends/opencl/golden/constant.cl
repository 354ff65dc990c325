/* OpenCL C translation of constant.cu by porter (CUDA -> OpenCL C 1.2). */

// __constant__ memory becomes __constant kernel arguments, threaded through helpers.
#define TAPS 5

/* porter: __constant__ float weights[TAPS]; is a __constant kernel argument */
/* porter: __constant__ float bias; is a __constant kernel argument */

float weighted(__global const float* x, int i, __constant float* weights)
{
    float acc = 0.0f;
    for (int k = 0; k < TAPS; ++k) acc += weights[k] * x[i + k];
    return acc;
}

__kernel void fir(__global const float* x, __global float* y, int n, __constant float* bias, __constant float* weights)
{
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (i + TAPS <= n) y[i] = weighted(x, i, weights) + (*bias);
}
