/* OpenCL C translation of shared.cu by porter (CUDA -> OpenCL C 1.2). */

// Static __shared__ (also in a nested block), extern __shared__ arrays and pointers into them.
#define TILE 32

__kernel void tile_transpose(__global const float* in, __global float* out, int n)
{
    __local int flag;
    __local float tile[TILE][TILE + 1];
    int x = (uint)get_group_id(0) * TILE + (uint)get_local_id(0);
    int y = (uint)get_group_id(1) * TILE + (uint)get_local_id(1);
    if (x < n && y < n) {
        tile[(uint)get_local_id(1)][(uint)get_local_id(0)] = in[y * n + x];
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (n > 0) {
        /* porter: __local declaration moved to the kernel's top */  /* hoisted to the kernel's top */
        flag = 1;
    }
    x = (uint)get_group_id(1) * TILE + (uint)get_local_id(0);
    y = (uint)get_group_id(0) * TILE + (uint)get_local_id(1);
    if (x < n && y < n) {
        out[y * n + x] = tile[(uint)get_local_id(0)][(uint)get_local_id(1)];
    }
}

__kernel void two_extern(__global const float* in, __global float* out, __local float* sdata)
{
    __local int* sidx = (__local int*)sdata;
    /* porter: extern __shared__ sdata: a __local kernel argument */
    /* porter: extern __shared__ sidx: a __local kernel argument */  // aliases sdata, as in CUDA
    __local float* half_ = sdata + (uint)get_local_size(0) / 2;
    __global const float* src = in + (uint)get_group_id(0) * (uint)get_local_size(0);
    sdata[(uint)get_local_id(0)] = src[(uint)get_local_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    __local int* bits = (__local int*)sdata;
    out[(uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0)] = half_[0] + (float)(bits[0] & 1) + (float)sidx[1];
}
