/* Barrier probe: a tree sum in local memory whose barriers sit in a loop in each branch of an if/else on the
 * work-group's id -- a branch every work-item of a group takes alike, so the barriers are legal (the shape of
 * a reduction that treats the last, partial group apart).  Each group stores its sum of 1 + local id % 7: 253
 * over 64 work-items for every group but the last, 122 over 32 for the last.  Debian's PoCL 3.1 returns one
 * element instead of each group's sum (pocl/pocl#553, #1167: barriers in uniform conditionals), which a
 * translated kernel of that shape inherits. */
#define PORTER_PROBE_N 64
__kernel void porter_branch_barriers(__global int* out)
{
    __local int part[PORTER_PROBE_N];
    int g = (int)get_group_id(0), t = (int)get_local_id(0), i;
    part[t] = 1 + t % 7;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (g != (int)get_num_groups(0) - 1) {
        for (i = 2; i <= PORTER_PROBE_N; i = 2 * i) {
            if ((t + 1) % i == 0) part[t] = part[t] + part[t - i / 2];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (t == PORTER_PROBE_N - 1) out[g] = part[t];
    } else {
        for (i = 2; i <= PORTER_PROBE_N / 2; i = 2 * i) {
            if ((t + 1) % i == 0) part[t] = part[t] + part[t - i / 2];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (t == PORTER_PROBE_N / 2 - 1) out[g] = part[t];
    }
}
