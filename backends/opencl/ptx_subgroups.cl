/* porter: OpenCL sub-groups where the device's OpenCL has none but its compiler takes inline PTX (NVIDIA's
 * OpenCL: a work-group runs as warps of 32 consecutive work-items, x fastest, as a CUDA block does).  A
 * sub-group is that warp; the cl_khr_subgroups functions a translation calls are the warp instructions CUDA's
 * own intrinsics compile to (shfl.sync, vote.sync, bar.warp.sync) over the sub-group's lanes.  Built only
 * where the host defines PORTER_PTX_SUBGROUPS, after checking the device lacks sub-groups and passing
 * porter's sub-group probe with this very text (backends/opencl/devices.py). */
#define cl_khr_subgroups 1
#define cl_khr_subgroup_shuffle 1
#define cl_khr_subgroup_shuffle_relative 1
#define cl_khr_subgroup_ballot 1
#define cl_khr_subgroup_non_uniform_arithmetic 1
#define cl_khr_subgroup_clustered_reduce 1
/* a warp is always 32 wide: the attribute that asks for it has nothing to ask */
#define cl_intel_required_subgroup_size 1
#define intel_reqd_sub_group_size(n)

#define PORTER_WARP 32u
#define PORTER_OVL static inline __attribute__((overloadable))

static inline uint porter_ptx_linear_id(void)
{
    return (uint)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2)));
}
static inline uint porter_ptx_group_size(void)
{
    return (uint)(get_local_size(0) * get_local_size(1) * get_local_size(2));
}
static inline uint porter_ptx_sub_group_local_id(void) { return porter_ptx_linear_id() % PORTER_WARP; }
static inline uint porter_ptx_sub_group_id(void) { return porter_ptx_linear_id() / PORTER_WARP; }
static inline uint porter_ptx_num_sub_groups(void) { return (porter_ptx_group_size() + PORTER_WARP - 1u) / PORTER_WARP; }
static inline uint porter_ptx_sub_group_size(void)
{
    uint left = porter_ptx_group_size() - porter_ptx_sub_group_id() * PORTER_WARP;
    return left < PORTER_WARP ? left : PORTER_WARP;
}
static inline uint porter_ptx_max_sub_group_size(void) { return PORTER_WARP; }
/* the lanes of the caller's sub-group: every lane of a whole warp, the first `size` of the group's last one */
static inline uint porter_ptx_mask(void)
{
    uint n = porter_ptx_sub_group_size();
    return n >= PORTER_WARP ? 0xffffffffu : (1u << n) - 1u;
}
#define get_sub_group_local_id porter_ptx_sub_group_local_id
#define get_sub_group_id porter_ptx_sub_group_id
#define get_num_sub_groups porter_ptx_num_sub_groups
#define get_enqueued_num_sub_groups porter_ptx_num_sub_groups
#define get_sub_group_size porter_ptx_sub_group_size
#define get_max_sub_group_size porter_ptx_max_sub_group_size

/* 32-bit lane moves: shfl.sync in `MODE` with `C`, PTX's clamp/segment operand for a whole warp (0x1f, or 0 for up) */
#define PORTER_PTX_SHFL(MODE, C)                                                                        \
    static inline uint porter_ptx_shfl_##MODE(uint v, uint b, uint mask)                                \
    {                                                                                                   \
        uint r;                                                                                         \
        __asm__ __volatile__("shfl.sync." #MODE ".b32 %0, %1, %2, " #C ", %3;"                          \
                             : "=r"(r) : "r"(v), "r"(b), "r"(mask));                                    \
        return r;                                                                                       \
    }
PORTER_PTX_SHFL(idx, 0x1f)
PORTER_PTX_SHFL(down, 0x1f)
PORTER_PTX_SHFL(up, 0x0)
PORTER_PTX_SHFL(bfly, 0x1f)

/* A lane the caller's partial sub-group lacks reads 0, one past the warp its own value (CUDA's rule, and
 * the NVIDIA GPU's); a source lane of the caller's sub-group reads that lane's value.  An index of an
 * indexed shuffle counts modulo the warp, as CUDA's __shfl_sync does. */
#define PORTER_PTX_MOVES_32(T, AS)                                                                      \
    PORTER_OVL T porter_ptx_sub_group_shuffle(T v, uint lane)                                           \
    {                                                                                                   \
        uint mask = porter_ptx_mask();                                                                  \
        T got = AS(porter_ptx_shfl_idx(as_uint(v), lane, mask));                                        \
        return lane % PORTER_WARP < porter_ptx_sub_group_size() ? got : (T)0;                           \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_shuffle_down(T v, uint d)                                         \
    {                                                                                                   \
        uint src = porter_ptx_sub_group_local_id() + d;                                                 \
        T got = AS(porter_ptx_shfl_down(as_uint(v), d, porter_ptx_mask()));                             \
        return src < porter_ptx_sub_group_size() ? got : src < PORTER_WARP ? (T)0 : v;                  \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_shuffle_up(T v, uint d)                                           \
    {                                                                                                   \
        T got = AS(porter_ptx_shfl_up(as_uint(v), d, porter_ptx_mask()));                               \
        return d <= porter_ptx_sub_group_local_id() ? got : v;                                          \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_shuffle_xor(T v, uint m)                                          \
    {                                                                                                   \
        uint src = porter_ptx_sub_group_local_id() ^ m;                                                 \
        T got = AS(porter_ptx_shfl_bfly(as_uint(v), m, porter_ptx_mask()));                             \
        return src < porter_ptx_sub_group_size() ? got : src < PORTER_WARP ? (T)0 : v;                  \
    }

#define PORTER_PTX_MOVES_64(T, AS)                                                                      \
    PORTER_OVL T porter_ptx_sub_group_shuffle(T v, uint lane)                                           \
    {                                                                                                   \
        uint mask = porter_ptx_mask();                                                                  \
        uint2 h = as_uint2(v);                                                                          \
        h = (uint2)(porter_ptx_shfl_idx(h.x, lane, mask), porter_ptx_shfl_idx(h.y, lane, mask));        \
        return lane % PORTER_WARP < porter_ptx_sub_group_size() ? AS(h) : (T)0;                         \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_shuffle_down(T v, uint d)                                         \
    {                                                                                                   \
        uint mask = porter_ptx_mask(), src = porter_ptx_sub_group_local_id() + d;                       \
        uint2 h = as_uint2(v);                                                                          \
        h = (uint2)(porter_ptx_shfl_down(h.x, d, mask), porter_ptx_shfl_down(h.y, d, mask));            \
        return src < porter_ptx_sub_group_size() ? AS(h) : src < PORTER_WARP ? (T)0 : v;                \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_shuffle_up(T v, uint d)                                           \
    {                                                                                                   \
        uint mask = porter_ptx_mask();                                                                  \
        uint2 h = as_uint2(v);                                                                          \
        h = (uint2)(porter_ptx_shfl_up(h.x, d, mask), porter_ptx_shfl_up(h.y, d, mask));                \
        return d <= porter_ptx_sub_group_local_id() ? AS(h) : v;                                        \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_shuffle_xor(T v, uint m)                                          \
    {                                                                                                   \
        uint mask = porter_ptx_mask(), src = porter_ptx_sub_group_local_id() ^ m;                       \
        uint2 h = as_uint2(v);                                                                          \
        h = (uint2)(porter_ptx_shfl_bfly(h.x, m, mask), porter_ptx_shfl_bfly(h.y, m, mask));            \
        return src < porter_ptx_sub_group_size() ? AS(h) : src < PORTER_WARP ? (T)0 : v;                \
    }

/* Reductions over the sub-group's lanes (a partial one's too): shuffles down, then lane 0's result to all.
 * Scans: shuffles up.  Clustered reductions: a butterfly inside each cluster of `n` lanes. */
#define PORTER_PTX_REDUCE(T, NAME, OP)                                                                  \
    PORTER_OVL T porter_ptx_sub_group_reduce_##NAME(T v)                                                \
    {                                                                                                   \
        uint lane = porter_ptx_sub_group_local_id(), size = porter_ptx_sub_group_size();                \
        for (uint d = PORTER_WARP / 2u; d > 0u; d >>= 1) {                                              \
            T o = porter_ptx_sub_group_shuffle_down(v, d);                                              \
            if (lane + d < size) v = OP(v, o);                                                          \
        }                                                                                               \
        return porter_ptx_sub_group_shuffle(v, 0u);                                                     \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_clustered_reduce_##NAME(T v, uint n)                              \
    {                                                                                                   \
        uint lane = porter_ptx_sub_group_local_id(), size = porter_ptx_sub_group_size();                \
        for (uint m = n / 2u; m > 0u; m >>= 1) {                                                        \
            T o = porter_ptx_sub_group_shuffle_xor(v, m);                                               \
            if ((lane ^ m) < size) v = OP(v, o);                                                        \
        }                                                                                               \
        return v;                                                                                       \
    }

#define PORTER_PTX_SCAN(T, NAME, IDENTITY, OP)                                                          \
    PORTER_OVL T porter_ptx_sub_group_scan_inclusive_##NAME(T v)                                        \
    {                                                                                                   \
        uint lane = porter_ptx_sub_group_local_id();                                                    \
        for (uint d = 1u; d < PORTER_WARP; d <<= 1) {                                                   \
            T o = porter_ptx_sub_group_shuffle_up(v, d);                                                \
            if (lane >= d) v = OP(v, o);                                                                \
        }                                                                                               \
        return v;                                                                                       \
    }                                                                                                   \
    PORTER_OVL T porter_ptx_sub_group_scan_exclusive_##NAME(T v)                                        \
    {                                                                                                   \
        T in = porter_ptx_sub_group_scan_inclusive_##NAME(v);                                           \
        T before = porter_ptx_sub_group_shuffle_up(in, 1u);                                             \
        return porter_ptx_sub_group_local_id() == 0u ? (T)(IDENTITY) : before;                          \
    }

#define PORTER_PTX_ADD(a, b) ((a) + (b))
#define PORTER_PTX_AND(a, b) ((a) & (b))
#define PORTER_PTX_OR(a, b) ((a) | (b))
#define PORTER_PTX_XOR(a, b) ((a) ^ (b))
#define PORTER_PTX_MIN(a, b) ((b) < (a) ? (b) : (a))
#define PORTER_PTX_MAX(a, b) ((a) < (b) ? (b) : (a))

#define PORTER_PTX_ARITH(T, LOWEST, HIGHEST)                                                            \
    PORTER_PTX_REDUCE(T, add, PORTER_PTX_ADD)                                                           \
    PORTER_PTX_REDUCE(T, min, PORTER_PTX_MIN)                                                           \
    PORTER_PTX_REDUCE(T, max, PORTER_PTX_MAX)                                                           \
    PORTER_PTX_SCAN(T, add, 0, PORTER_PTX_ADD)                                                          \
    PORTER_PTX_SCAN(T, min, HIGHEST, PORTER_PTX_MIN)                                                    \
    PORTER_PTX_SCAN(T, max, LOWEST, PORTER_PTX_MAX)

#define PORTER_PTX_BITS(T)                                                                              \
    PORTER_PTX_REDUCE(T, and, PORTER_PTX_AND)                                                           \
    PORTER_PTX_REDUCE(T, or, PORTER_PTX_OR)                                                             \
    PORTER_PTX_REDUCE(T, xor, PORTER_PTX_XOR)

PORTER_PTX_MOVES_32(int, as_int)
PORTER_PTX_MOVES_32(uint, as_uint)
PORTER_PTX_MOVES_32(float, as_float)
PORTER_PTX_MOVES_64(long, as_long)
PORTER_PTX_MOVES_64(ulong, as_ulong)
PORTER_PTX_ARITH(int, INT_MIN, INT_MAX)
PORTER_PTX_ARITH(uint, 0u, UINT_MAX)
PORTER_PTX_ARITH(long, LONG_MIN, LONG_MAX)
PORTER_PTX_ARITH(ulong, 0ul, ULONG_MAX)
PORTER_PTX_ARITH(float, -INFINITY, INFINITY)
PORTER_PTX_BITS(int)
PORTER_PTX_BITS(uint)
PORTER_PTX_BITS(long)
PORTER_PTX_BITS(ulong)
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
PORTER_PTX_MOVES_64(double, as_double)
PORTER_PTX_ARITH(double, -INFINITY, INFINITY)
#endif

/* votes: a predicate per lane of the sub-group */
static inline int porter_ptx_sub_group_all(int p)
{
    int r;
    __asm__ __volatile__("{ .reg .pred p, q; setp.ne.s32 p, %1, 0; vote.sync.all.pred q, p, %2; selp.s32 %0, 1, 0, q; }"
                 : "=r"(r) : "r"(p), "r"(porter_ptx_mask()));
    return r;
}
static inline int porter_ptx_sub_group_any(int p)
{
    int r;
    __asm__ __volatile__("{ .reg .pred p, q; setp.ne.s32 p, %1, 0; vote.sync.any.pred q, p, %2; selp.s32 %0, 1, 0, q; }"
                 : "=r"(r) : "r"(p), "r"(porter_ptx_mask()));
    return r;
}
static inline uint4 porter_ptx_sub_group_ballot(int p)
{
    uint r;
    __asm__ __volatile__("{ .reg .pred p; setp.ne.s32 p, %1, 0; vote.sync.ballot.b32 %0, p, %2; }"
                 : "=r"(r) : "r"(p), "r"(porter_ptx_mask()));
    return (uint4)(r, 0u, 0u, 0u);
}
static inline int porter_ptx_clustered_logical_and(int p, uint n)
{
    return porter_ptx_sub_group_clustered_reduce_and(p != 0 ? 1 : 0, n);
}
static inline int porter_ptx_clustered_logical_or(int p, uint n)
{
    return porter_ptx_sub_group_clustered_reduce_or(p != 0 ? 1 : 0, n);
}
/* the sub-group's lanes meet; their memory operations before it are seen by each other after it */
static inline void porter_ptx_sub_group_barrier(cl_mem_fence_flags flags)
{
    (void)flags;
    __asm__ __volatile__("bar.warp.sync %0;" : : "r"(porter_ptx_mask()) : "memory");
}

#define sub_group_shuffle porter_ptx_sub_group_shuffle
#define sub_group_shuffle_down porter_ptx_sub_group_shuffle_down
#define sub_group_shuffle_up porter_ptx_sub_group_shuffle_up
#define sub_group_shuffle_xor porter_ptx_sub_group_shuffle_xor
#define sub_group_broadcast porter_ptx_sub_group_shuffle
#define sub_group_reduce_add porter_ptx_sub_group_reduce_add
#define sub_group_reduce_min porter_ptx_sub_group_reduce_min
#define sub_group_reduce_max porter_ptx_sub_group_reduce_max
#define sub_group_reduce_and porter_ptx_sub_group_reduce_and
#define sub_group_reduce_or porter_ptx_sub_group_reduce_or
#define sub_group_reduce_xor porter_ptx_sub_group_reduce_xor
#define sub_group_scan_inclusive_add porter_ptx_sub_group_scan_inclusive_add
#define sub_group_scan_inclusive_min porter_ptx_sub_group_scan_inclusive_min
#define sub_group_scan_inclusive_max porter_ptx_sub_group_scan_inclusive_max
#define sub_group_scan_exclusive_add porter_ptx_sub_group_scan_exclusive_add
#define sub_group_scan_exclusive_min porter_ptx_sub_group_scan_exclusive_min
#define sub_group_scan_exclusive_max porter_ptx_sub_group_scan_exclusive_max
#define sub_group_clustered_reduce_add porter_ptx_sub_group_clustered_reduce_add
#define sub_group_clustered_reduce_min porter_ptx_sub_group_clustered_reduce_min
#define sub_group_clustered_reduce_max porter_ptx_sub_group_clustered_reduce_max
#define sub_group_clustered_reduce_and porter_ptx_sub_group_clustered_reduce_and
#define sub_group_clustered_reduce_or porter_ptx_sub_group_clustered_reduce_or
#define sub_group_clustered_reduce_xor porter_ptx_sub_group_clustered_reduce_xor
#define sub_group_clustered_reduce_logical_and porter_ptx_clustered_logical_and
#define sub_group_clustered_reduce_logical_or porter_ptx_clustered_logical_or
#define sub_group_all porter_ptx_sub_group_all
#define sub_group_any porter_ptx_sub_group_any
#define sub_group_ballot porter_ptx_sub_group_ballot
#define sub_group_barrier porter_ptx_sub_group_barrier
