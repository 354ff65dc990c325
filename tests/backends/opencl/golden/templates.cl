/* OpenCL C translation of templates.cu by porter (CUDA -> OpenCL C 1.2). */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

// Templates instantiated from launch sites (also through a host template), multi-line launches.
__kernel void scale_float_2(__global float* data, float factor, int n)
{
    int base = ((uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0)) * 2;
    for (int u = 0; u < 2; ++u) {
        if (base + u < n) data[base + u] *= factor;
    }
}

__kernel void scale_double_2(__global double* data, double factor, int n)
{
    int base = ((uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0)) * 2;
    for (int u = 0; u < 2; ++u) {
        if (base + u < n) data[base + u] *= factor;
    }
}

__kernel void scale_int_4(__global int* data, int factor, int n)
{
    int base = ((uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0)) * 4;
    for (int u = 0; u < 4; ++u) {
        if (base + u < n) data[base + u] *= factor;
    }
}

/* porter: template kernel never_launched not instantiated (no launch with known arguments) */
