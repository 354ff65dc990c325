/* Sub-group probe, built with -cl-std=CL3.0 (or CL2.0) on devices that claim sub-groups:
 * porter_subgroup_size reports the largest sub-group size; porter_subgroup_32 reports, per
 * work-item, its sub-group size and whether its sub-group lane is local id % 32;
 * porter_subgroup_32_sum is the warp reduction ported CUDA code does (shuffle down by 16, 8, 4, 2, 1,
 * the first work-item stores its sub-group's sum of local ids, 496, at its group's index),
 * which some runtimes get wrong (Intel's CPU runtime: 0). */
#if defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)
__kernel void porter_subgroup_size(__global int* out)
{
    out[get_global_id(0)] = (int)get_max_sub_group_size();
}
#endif

#if (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)) && defined(cl_intel_required_subgroup_size)
__attribute__((intel_reqd_sub_group_size(32)))
__kernel void porter_subgroup_32(__global int* out)
{
    uint lid = get_local_id(0);
    int lane_ok = get_sub_group_local_id() == lid % 32u;
    out[get_global_id(0)] = lane_ok ? (int)get_sub_group_size() : -1;
}

#if defined(cl_khr_subgroup_shuffle_relative)
__attribute__((intel_reqd_sub_group_size(32)))
__kernel void porter_subgroup_32_sum(__global int* out)
{
    int v = out[get_global_id(0)] + (int)(get_local_id(0) % 32u) + 7;  /* out holds -7: a value loaded */
    for (uint d = 16; d > 0; d >>= 1) v += sub_group_shuffle_down(v, d);
    if (get_local_id(0) == 0) out[get_group_id(0)] = v;  /* the first work-item stores, as CUDA code does */
}
#endif
#endif
