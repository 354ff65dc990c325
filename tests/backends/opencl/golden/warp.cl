/* OpenCL C translation of warp.cu by porter (CUDA -> OpenCL C 1.2). */
/* Kernels inside #if sub-group conditions exist only when built with -cl-std=CL3.0 (or CL2.0)
 * on a device with those extensions or features; elsewhere they are left out. */
#if defined(cl_khr_subgroups)
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif

#if (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups))
/* CUDA's __shfl_down_sync(mask, v, d) over the whole warp (the sub-group) */
#if defined(cl_intel_subgroups)
#define PORTER_SHUFFLE_DOWN(T) \
static inline __attribute__((overloadable)) T porter_shuffle_down(T v, uint d) \
{ \
    uint src = get_sub_group_local_id() + d; \
    T got = intel_sub_group_shuffle_down(v, v, d); \
    return src < get_sub_group_size() ? got : src < get_max_sub_group_size() ? (T)0 : v; \
}
PORTER_SHUFFLE_DOWN(int)
PORTER_SHUFFLE_DOWN(uint)
PORTER_SHUFFLE_DOWN(long)
PORTER_SHUFFLE_DOWN(ulong)
PORTER_SHUFFLE_DOWN(float)
#if defined(cl_khr_fp64)
PORTER_SHUFFLE_DOWN(double)
#endif
#undef PORTER_SHUFFLE_DOWN
#else
#define porter_shuffle_down(v, d) sub_group_shuffle_down((v), (d))
#endif
#endif /* (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) */

// Warp shuffles and votes become sub-group functions (guarded by their extensions).
#if (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle_relative)
float warp_sum(float v)
{
    for (int offset = ((int)get_sub_group_size()) / 2; offset > 0; offset /= 2)
        v += porter_shuffle_down(v, (uint)(offset));
    return v;
}
#endif /* (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle_relative) */

#if (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle) && !defined(PORTER_NO_SUBGROUP_SHUFFLE) && defined(cl_khr_subgroup_shuffle_relative) && defined(cl_khr_subgroup_ballot) && defined(cl_intel_required_subgroup_size) && !defined(PORTER_NO_SUBGROUP_32)
__attribute__((intel_reqd_sub_group_size(32)))
__kernel void votes(__global const float* in, __global unsigned int* ballots, __global int* flags, __global float* sums)
{
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    float v = in[i];
    unsigned int b = sub_group_ballot((v > 0.0f) != 0).x;
    int all = sub_group_all((v > 0.0f) != 0);
    int any = sub_group_any((v < 0.0f) != 0);
    float first = sub_group_shuffle(v, (uint)(0));
    float x = sub_group_shuffle_xor(v, (uint)(1));
    sub_group_barrier(CLK_LOCAL_MEM_FENCE);
    ballots[i] = b;
    flags[i] = all * 2 + any;
    sums[i] = warp_sum(v) + first + x;
}
#endif /* (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle) && !defined(PORTER_NO_SUBGROUP_SHUFFLE) && defined(cl_khr_subgroup_shuffle_relative) && defined(cl_khr_subgroup_ballot) && defined(cl_intel_required_subgroup_size) && !defined(PORTER_NO_SUBGROUP_32) */

// Generic in the warp size: needs sub-groups of any width, no required size.
#if (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle_relative)
__kernel void generic_sum(__global const float* in, __global float* out)
{
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    out[i] = warp_sum(in[i]);
}
#endif /* (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle_relative) */

// A literal width of 32 is the whole warp only with 32-wide sub-groups.
#if (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle) && !defined(PORTER_NO_SUBGROUP_SHUFFLE) && defined(cl_intel_required_subgroup_size) && !defined(PORTER_NO_SUBGROUP_32)
__attribute__((intel_reqd_sub_group_size(32)))
__kernel void width32(__global float* p)
{
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    p[i] = sub_group_shuffle_xor(p[i], (uint)(1));
}
#endif /* (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups) || defined(cl_intel_subgroups)) && defined(cl_khr_subgroup_shuffle) && !defined(PORTER_NO_SUBGROUP_SHUFFLE) && defined(cl_intel_required_subgroup_size) && !defined(PORTER_NO_SUBGROUP_32) */
