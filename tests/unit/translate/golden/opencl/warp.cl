/* OpenCL C translation of warp.cu by porter (CUDA -> OpenCL C 1.2). */
#if defined(cl_khr_subgroup_ballot)
#pragma OPENCL EXTENSION cl_khr_subgroup_ballot : enable
#endif
#if defined(cl_khr_subgroup_shuffle)
#pragma OPENCL EXTENSION cl_khr_subgroup_shuffle : enable
#endif
#if defined(cl_khr_subgroup_shuffle_relative)
#pragma OPENCL EXTENSION cl_khr_subgroup_shuffle_relative : enable
#endif
#if defined(cl_khr_subgroups)
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif

// Warp shuffles and votes become sub-group functions (guarded by their extensions).
#if defined(cl_khr_subgroup_shuffle_relative) && defined(cl_khr_subgroups)
float warp_sum(float v)
{
    for (int offset = ((int)get_sub_group_size()) / 2; offset > 0; offset /= 2)
        v += sub_group_shuffle_down(v, (uint)(offset));
    return v;
}
#endif /* defined(cl_khr_subgroup_shuffle_relative) && defined(cl_khr_subgroups) */

#if defined(cl_khr_subgroup_ballot) && defined(cl_khr_subgroup_shuffle) && defined(cl_khr_subgroup_shuffle_relative) && defined(cl_khr_subgroups)
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
#endif /* defined(cl_khr_subgroup_ballot) && defined(cl_khr_subgroup_shuffle) && defined(cl_khr_subgroup_shuffle_relative) && defined(cl_khr_subgroups) */
