// Adversarial self-test (stencil1d / missing_barrier, OpenCL): no barrier after the tile loads. Must be rejected.
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
        tile[t + BLOCK] = in[min(i + BLOCK, n - 1)];
    }

    if (i < n) {
        out[i] = 0.25f * tile[t - 1] + 0.5f * tile[t] + 0.25f * tile[t + 1];
    }
}
