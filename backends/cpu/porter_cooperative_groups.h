// porter_cooperative_groups.h -- cooperative groups on porter's CPU emulator (porter's own header).
//
// porter_emu.h includes it, so every kernel and program the emulator builds sees namespace
// cooperative_groups as <cooperative_groups.h> (with <cooperative_groups/reduce.h> and
// <cooperative_groups/scan.h>) and HIP's <hip/hip_cooperative_groups.h> declare it:
//
//  * thread_block: this_thread_block() (with or without a block_tile_memory), sync, thread_rank,
//    size / num_threads, group_index, thread_index, group_dim / dim_threads;
//  * thread_block_tile<N> = tiled_partition<N>(block or tile), N a power of two from 1 to 1024:
//    thread_rank, size / num_threads, meta_group_rank, meta_group_size, sync, shfl, any, all; within a
//    warp also shfl_up / shfl_down / shfl_xor, ballot, match_any, match_all;
//  * this_thread(), and the free functions sync, thread_rank, group_size, is_valid;
//  * reduce, inclusive_scan, exclusive_scan over a tile with plus, less, greater, bit_and, bit_or,
//    bit_xor or any function object.
//
// A tile within a warp (N <= warpSize) is a set of lanes of one warp, and each of its operations is one of
// the emulator's warp collectives with the tile's lanes as mask and N as width: it completes, deadlocks and
// reads a lane that takes no part exactly as __shfl_sync / __ballot_sync do.  A tile of several warps
// waits at the emulator's group barrier of its threads (porter_emu::group_barrier).  reduce and the scans
// exchange values through a slot per thread between two barriers of the tile and fold the slots of the
// tile's threads that have not exited in rank order, so every thread gets the same value.
//
// Grid and multi-grid groups, coalesced groups, labeled / binary partitions, tiles of a size known only at
// run time (thread_group) and the asynchronous reductions are refused before compiling
// (dialect.toml [[refuse]]), so a kernel using them is never emulated with a wrong meaning.
#ifndef PORTER_COOPERATIVE_GROUPS_H
#define PORTER_COOPERATIVE_GROUPS_H

namespace porter_emu __attribute__((visibility("hidden"))) {
namespace cg {

#if PORTER_WARP_SIZE == 64
typedef unsigned long long mask_t;  // a tile's ballot and match results: its threads' bits, rank 0 first
#else
typedef unsigned int mask_t;
#endif

// the calling thread's rank in its block (threads numbered x fastest, as run_block lays them out)
inline unsigned block_rank() { return (unsigned)(g_cur - g_threads); }
inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }

// The first thread (block rank) of the caller's tile of N threads, and the tile's lanes in its warp.
template <unsigned N>
inline unsigned tile_first() { return block_rank() & ~(N - 1u); }
template <unsigned N>
inline lanemask_t tile_lanes() {
    unsigned base = (unsigned)g_cur->lane & ~(N - 1u);
    return (N >= 64 ? ~0ull : ((1ull << (N % 64)) - 1ull)) << base;
}

// The tile's barrier: a warp collective of its lanes, or the group barrier of its threads.
template <unsigned N>
inline void tile_barrier() {
    if constexpr (N <= PORTER_WARP_SIZE) {
        warp_op(OP_SYNC, tile_lanes<N>(), 0, 0, 0);
    } else {
        group_barrier((int)tile_first<N>(), (int)N);
    }
}

// A value of any trivially copyable type through a warp collective, 8 bytes at a time.
template <class T>
inline T warp_move(int op, lanemask_t mask, const T& v, int arg, int width) {
    static_assert(std::is_trivially_copyable<T>::value, "cooperative groups move trivially copyable values only");
    T out = v;
    unsigned char* o = reinterpret_cast<unsigned char*>(&out);
    const unsigned char* in = reinterpret_cast<const unsigned char*>(&v);
    for (size_t at = 0; at < sizeof(T); at += 8) {
        size_t n = sizeof(T) - at < 8 ? sizeof(T) - at : 8;
        uint64_t b = 0;
        memcpy(&b, in + at, n);
        b = warp_op(op, mask, b, arg, width);
        memcpy(o + at, &b, n);
    }
    return out;
}

// One slot per thread of the block: what a thread offers a tile collective.
constexpr size_t SLOT_BYTES = 64;
alignas(64) inline unsigned char g_slots[PORTER_MAX_BLOCK][SLOT_BYTES];

template <class T>
inline void slot_put(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "cooperative groups move trivially copyable values only");
    static_assert(sizeof(T) <= SLOT_BYTES, "cooperative groups collectives of values over 64 bytes are not emulated");
    memcpy(g_slots[block_rank()], &v, sizeof(T));
}
template <class T>
inline T slot_get(unsigned index, const T& like) {
    T out = like;
    memcpy(&out, g_slots[index], sizeof(T));
    return out;
}
// A thread of the block that takes part (it exists and has not exited: it wrote its slot).
inline bool member(unsigned index) {
    return index < (unsigned)g_block.nthreads && g_threads[index].state != DONE;
}

// Write the caller's value, wait for the tile, read (every thread has written), wait again (no slot is
// overwritten by a later collective before every thread has read).
template <unsigned N, class T, class Read>
inline auto exchange(const T& mine, Read read) -> decltype(read()) {
    slot_put(mine);
    tile_barrier<N>();
    auto r = read();
    tile_barrier<N>();
    return r;
}

// op folded over the values of the tile's members of rank first..last-1 (in rank order); `none` when
// there is none.
template <unsigned N, class R, class T, class Op>
inline R fold(unsigned last, const T& like, Op& op, const R& none) {
    unsigned first = tile_first<N>();
    bool any = false;
    R acc = none;
    for (unsigned i = first; i < last; ++i) {
        if (!member(i)) continue;
        T v = slot_get(i, like);
        acc = any ? R(op(acc, v)) : R(v);
        any = true;
    }
    return acc;
}

template <unsigned N>
class tile_base {
    static_assert(N >= 1 && N <= 1024 && (N & (N - 1)) == 0,
                  "thread_block_tile<N>: N must be a power of two from 1 to 1024");
    static constexpr bool in_warp = N <= PORTER_WARP_SIZE;

protected:
    unsigned meta_rank_, meta_size_;

public:
    tile_base(unsigned meta_rank, unsigned meta_size) : meta_rank_(meta_rank), meta_size_(meta_size) {}
    static constexpr unsigned int num_threads() { return N; }
    static constexpr unsigned int size() { return N; }
    static unsigned int thread_rank() { return block_rank() & (N - 1u); }
    unsigned int meta_group_rank() const { return meta_rank_; }
    unsigned int meta_group_size() const { return meta_size_; }
    static constexpr bool is_valid() { return true; }
    static void sync() { tile_barrier<N>(); }

    template <class T>
    T shfl(T var, int src_rank) const {
        if constexpr (in_warp) {
            return warp_move(OP_SHFL_IDX, tile_lanes<N>(), var, src_rank, (int)N);
        } else {
            unsigned src = tile_first<N>() + ((unsigned)src_rank & (N - 1u));
            return exchange<N>(var, [&] { return member(src) ? slot_get(src, var) : var; });
        }
    }
    template <class T>
    T shfl_down(T var, unsigned int delta) const {
        static_assert(in_warp, "thread_block_tile::shfl_down: tiles of at most warpSize threads");
        return warp_move(OP_SHFL_DOWN, tile_lanes<N>(), var, (int)delta, (int)N);
    }
    template <class T>
    T shfl_up(T var, unsigned int delta) const {
        static_assert(in_warp, "thread_block_tile::shfl_up: tiles of at most warpSize threads");
        return warp_move(OP_SHFL_UP, tile_lanes<N>(), var, (int)delta, (int)N);
    }
    template <class T>
    T shfl_xor(T var, unsigned int lane_mask) const {
        static_assert(in_warp, "thread_block_tile::shfl_xor: tiles of at most warpSize threads");
        return warp_move(OP_SHFL_XOR, tile_lanes<N>(), var, (int)lane_mask, (int)N);
    }
    int any(int predicate) const {
        if constexpr (in_warp) {
            return (int)warp_op(OP_ANY, tile_lanes<N>(), predicate != 0, 0, 0);
        } else {
            auto either = [](int a, int b) { return (int)(a || b); };
            return exchange<N>((int)(predicate != 0), [&] { return fold<N>(tile_first<N>() + N, 0, either, 0); });
        }
    }
    int all(int predicate) const {
        if constexpr (in_warp) {
            return (int)warp_op(OP_ALL, tile_lanes<N>(), predicate != 0, 0, 0);
        } else {
            auto both = [](int a, int b) { return (int)(a && b); };
            return exchange<N>((int)(predicate != 0), [&] { return fold<N>(tile_first<N>() + N, 0, both, 1); });
        }
    }
    mask_t ballot(int predicate) const {
        static_assert(in_warp, "thread_block_tile::ballot: tiles of at most warpSize threads");
        unsigned base = (unsigned)g_cur->lane & ~(N - 1u);
        return (mask_t)(warp_op(OP_BALLOT, tile_lanes<N>(), predicate != 0, 0, 0) >> base);
    }
    template <class T>
    mask_t match_any(T value) const {
        static_assert(in_warp, "thread_block_tile::match_any: tiles of at most warpSize threads");
        unsigned base = (unsigned)g_cur->lane & ~(N - 1u);
        return (mask_t)(warp_op(OP_MATCH_ANY, tile_lanes<N>(), to_bits(value), 0, 0) >> base);
    }
    template <class T>
    mask_t match_all(T value, int& pred) const {
        static_assert(in_warp, "thread_block_tile::match_all: tiles of at most warpSize threads");
        unsigned base = (unsigned)g_cur->lane & ~(N - 1u);
        mask_t r = (mask_t)(warp_op(OP_MATCH_ALL, tile_lanes<N>(), to_bits(value), 0, 0) >> base);
        pred = g_warps[g_cur->warp].pred[g_cur->lane];
        return r;
    }
};

}  // namespace cg
}  // namespace porter_emu

namespace cooperative_groups {

// The scratch CUDA asks for tiles of several warps on GPUs before sm_80; the emulator needs none.
template <unsigned int MaxBlockSize = 1024>
struct block_tile_memory {
    unsigned char reserved[16];
};

struct thread_block {
    static void sync() { __syncthreads(); }
    static unsigned int thread_rank() {
        return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    }
    static unsigned int size() { return blockDim.x * blockDim.y * blockDim.z; }
    static unsigned int num_threads() { return size(); }
    static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    static dim3 group_dim() { return blockDim; }
    static dim3 dim_threads() { return blockDim; }
    static constexpr bool is_valid() { return true; }
};
static inline thread_block this_thread_block() { return thread_block(); }
template <unsigned int MaxBlockSize>
static inline thread_block this_thread_block(block_tile_memory<MaxBlockSize>&) {
    return thread_block();
}

template <unsigned int N, class Parent = void>
class thread_block_tile : public porter_emu::cg::tile_base<N> {
public:
    thread_block_tile(unsigned meta_rank, unsigned meta_size) : porter_emu::cg::tile_base<N>(meta_rank, meta_size) {}
    // a tile converts to one of the same size with another (or no) parent type
    template <class P>
    thread_block_tile(const thread_block_tile<N, P>& t)
        : porter_emu::cg::tile_base<N>(t.meta_group_rank(), t.meta_group_size()) {}
};

template <unsigned int N>
static inline thread_block_tile<N, thread_block> tiled_partition(const thread_block& parent) {
    return thread_block_tile<N, thread_block>(parent.thread_rank() / N, (parent.size() + N - 1) / N);
}
template <unsigned int N, unsigned int M, class P>
static inline thread_block_tile<N, thread_block_tile<M, P>> tiled_partition(const thread_block_tile<M, P>& parent) {
    static_assert(N <= M, "tiled_partition<N>(tile): N must not exceed the parent tile's size");
    return thread_block_tile<N, thread_block_tile<M, P>>(parent.thread_rank() / N, M / N);
}
static inline thread_block_tile<1, void> this_thread() {
    return thread_block_tile<1, void>(porter_emu::cg::block_rank(), porter_emu::cg::block_threads());
}

template <class Group>
static inline void sync(const Group& g) {
    g.sync();
}
template <class Group>
static inline auto thread_rank(const Group& g) -> decltype(g.thread_rank()) {
    return g.thread_rank();
}
template <class Group>
static inline auto group_size(const Group& g) -> decltype(g.num_threads()) {
    return g.num_threads();
}
template <class Group>
static inline bool is_valid(const Group& g) {
    return g.is_valid();
}

// The operators of cg::reduce and the scans.
template <class T>
struct plus {
    T operator()(T a, T b) const { return a + b; }
};
template <class T>
struct less {  // the smaller (the first of equal ones)
    T operator()(T a, T b) const { return (b < a) ? b : a; }
};
template <class T>
struct greater {  // the larger (the first of equal ones)
    T operator()(T a, T b) const { return (a < b) ? b : a; }
};
template <class T>
struct bit_and {
    T operator()(T a, T b) const { return a & b; }
};
template <class T>
struct bit_or {
    T operator()(T a, T b) const { return a | b; }
};
template <class T>
struct bit_xor {
    T operator()(T a, T b) const { return a ^ b; }
};

// op over the values of every thread of the tile, in rank order; each thread gets the result.
template <unsigned int N, class P, class T, class Op>
static inline auto reduce(const thread_block_tile<N, P>&, const T& val, Op&& op) ->
    typename std::decay<decltype(op(val, val))>::type {
    using R = typename std::decay<decltype(op(val, val))>::type;
    using namespace porter_emu::cg;
    return exchange<N>(val, [&] { return fold<N>(tile_first<N>() + N, val, op, R(val)); });
}
// op over the values of the threads of rank 0..thread_rank() (inclusive) or 0..thread_rank()-1
// (exclusive: rank 0 gets a value-initialised result).
template <unsigned int N, class P, class T, class Op>
static inline auto inclusive_scan(const thread_block_tile<N, P>&, const T& val, Op&& op) ->
    typename std::decay<decltype(op(val, val))>::type {
    using R = typename std::decay<decltype(op(val, val))>::type;
    using namespace porter_emu::cg;
    return exchange<N>(val, [&] { return fold<N>(block_rank() + 1, val, op, R(val)); });
}
template <unsigned int N, class P, class T, class Op>
static inline auto exclusive_scan(const thread_block_tile<N, P>&, const T& val, Op&& op) ->
    typename std::decay<decltype(op(val, val))>::type {
    using R = typename std::decay<decltype(op(val, val))>::type;
    using namespace porter_emu::cg;
    return exchange<N>(val, [&] { return fold<N>(block_rank(), val, op, R{}); });
}
template <unsigned int N, class P, class T>
static inline T inclusive_scan(const thread_block_tile<N, P>& g, const T& val) {
    return inclusive_scan(g, val, plus<T>());
}
template <unsigned int N, class P, class T>
static inline T exclusive_scan(const thread_block_tile<N, P>& g, const T& val) {
    return exclusive_scan(g, val, plus<T>());
}

}  // namespace cooperative_groups

#endif  // PORTER_COOPERATIVE_GROUPS_H
