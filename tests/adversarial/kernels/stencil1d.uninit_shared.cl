// Adversarial self-test (stencil1d / uninit_shared, OpenCL): the right halo is never loaded. Must be rejected.
#define RADIUS 1
#define BLOCK 128
__kernel void stencil1d(__global const float* in, __global float* out, int n)
{
    __local float tile[BLOCK + 2 * RADIUS];
    int i = get_global_id(0);
    int lid = get_local_id(0);
    int t = lid + RADIUS;
    tile[t] = in[min(i, n - 1)];
    if (lid < RADIUS) {
        tile[t - RADIUS] = in[max(i - RADIUS, 0)];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n) {
        out[i] = 0.25f * tile[t - 1] + 0.5f * tile[t] + 0.25f * tile[t + 1];
    }
}
