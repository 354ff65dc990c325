/* OpenCL C translation of builtins_barriers.cu by porter (CUDA -> OpenCL C 1.2). */

// Built-ins in three dimensions, barriers and fences.

__kernel void index3d(__global float* out, int nx, int ny)
{
    int x = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    int y = (uint)get_group_id(1) * (uint)get_local_size(1) + (uint)get_local_id(1);
    int z = (uint)get_group_id(2) * (uint)get_local_size(2) + (uint)get_local_id(2);
    unsigned int groups = (uint)get_num_groups(0) * (uint)get_num_groups(1) * (uint)get_num_groups(2);
    out[(z * ny + y) * nx + x] = (float)groups;
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);  // the kernel writes global memory: both fences
}

__kernel void read_only_(__global const int* in, ulong n)
{
    if ((uint)get_local_id(0) == 0 && in[0] > 0) {
        printf("n = %lu\n", (unsigned long)n);
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // nothing global is written: local fence only
    mem_fence(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
}
