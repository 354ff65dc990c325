/* Sub-group probe, built with -cl-std=CL3.0 (or CL2.0) on devices that claim sub-groups:
 * porter_subgroup_size reports the largest sub-group size; porter_subgroup_32 reports, per
 * work-item, its sub-group size and whether its sub-group lane is local id % 32;
 * porter_subgroup_32_sum is the warp reduction ported CUDA code does (shuffle down by 16, 8, 4, 2, 1
 * through porter_shuffle_down, the translation's own helper, the first work-item storing its sub-group's
 * sum of local ids, 496, at its group's index), which some runtimes get wrong;
 * porter_subgroup_xor_sum is the same shape through the general shuffles a translation emits
 * (sub_group_shuffle_xor, a butterfly sum), in a 32-wide sub-group where sizes can be required, else in
 * the device's own (Intel's CPU runtime 2025 gets the 32-wide one wrong: 42). */
#if defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)
PORTER_WARP_HELPERS

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
    for (uint d = 16; d > 0; d >>= 1) v += porter_shuffle_down(v, d);
    if (get_local_id(0) == 0) out[get_group_id(0)] = v;  /* the first work-item stores, as CUDA code does */
}
#endif
#endif

#if (defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)) && defined(cl_khr_subgroup_shuffle)
#if defined(cl_intel_required_subgroup_size)
__attribute__((intel_reqd_sub_group_size(32)))
__kernel void porter_subgroup_xor_sum(__global int* out)
{
    int v = out[get_global_id(0)] + (int)(get_local_id(0) % 32u) + 7;  /* out holds -7: a value loaded */
    for (uint m = 16; m > 0; m >>= 1) v += sub_group_shuffle_xor(v, m);
    if (get_local_id(0) == 0) out[get_group_id(0)] = v;  /* every lane has the sum (496); the first stores it */
}
#else
__kernel void porter_subgroup_xor_sum(__global int* out)
{
    int v = out[get_global_id(0)] + (int)get_sub_group_local_id() + 7;
    for (uint m = get_sub_group_size() / 2u; m > 0; m >>= 1) v += sub_group_shuffle_xor(v, m);
    if (get_local_id(0) == 0) out[get_group_id(0)] = v;  /* n(n-1)/2 in sub-groups of a power-of-two size n */
}
#endif
#endif
