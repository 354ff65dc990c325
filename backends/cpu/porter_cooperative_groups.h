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
template <unsigned PorterN>
inline unsigned tile_first() { return block_rank() & ~(PorterN - 1u); }
template <unsigned PorterN>
inline lanemask_t tile_lanes() {
    unsigned base = (unsigned)g_cur->lane & ~(PorterN - 1u);
    return (PorterN >= 64 ? ~0ull : ((1ull << (PorterN % 64)) - 1ull)) << base;
}

// The tile's barrier: a warp collective of its lanes, or the group barrier of its threads.
template <unsigned PorterN>
inline void tile_barrier() {
    if constexpr (PorterN <= PORTER_WARP_SIZE) {
        warp_op(OP_SYNC, tile_lanes<PorterN>(), 0, 0, 0);
    } else {
        group_barrier((int)tile_first<PorterN>(), (int)PorterN);
    }
}

// A value of any trivially copyable type through a warp collective, 8 bytes at a time.
template <class PorterT>
inline PorterT warp_move(int op, lanemask_t mask, const PorterT& v, int arg, int width, int line = 0,
                         const char* file = nullptr) {
    static_assert(std::is_trivially_copyable<PorterT>::value, "cooperative groups move trivially copyable values only");
    PorterT out = v;
    unsigned char* o = reinterpret_cast<unsigned char*>(&out);
    const unsigned char* in = reinterpret_cast<const unsigned char*>(&v);
    for (size_t at = 0; at < sizeof(PorterT); at += 8) {
        size_t n = sizeof(PorterT) - at < 8 ? sizeof(PorterT) - at : 8;
        uint64_t b = 0;
        memcpy(&b, in + at, n);
        b = warp_op(op, mask, b, arg, width, 0, line, file);
        memcpy(o + at, &b, n);
    }
    return out;
}

// One slot per thread of the block: what a thread offers a tile collective.
constexpr size_t SLOT_BYTES = 64;
alignas(64) inline unsigned char g_slots[PORTER_MAX_BLOCK][SLOT_BYTES];

template <class PorterT>
inline void slot_put(const PorterT& v) {
    static_assert(std::is_trivially_copyable<PorterT>::value, "cooperative groups move trivially copyable values only");
    static_assert(sizeof(PorterT) <= SLOT_BYTES, "cooperative groups collectives of values over 64 bytes are not emulated");
    memcpy(g_slots[block_rank()], &v, sizeof(PorterT));
}
template <class PorterT>
inline PorterT slot_get(unsigned index, const PorterT& like) {
    PorterT out = like;
    memcpy(&out, g_slots[index], sizeof(PorterT));
    return out;
}
// A thread of the block that takes part (it exists and has not exited: it wrote its slot).
inline bool member(unsigned index) {
    return index < (unsigned)g_block.nthreads && g_threads[index].state != DONE;
}

// Write the caller's value, wait for the tile, read (every thread has written), wait again (no slot is
// overwritten by a later collective before every thread has read).
template <unsigned PorterN, class PorterT, class PorterRead>
inline auto exchange(const PorterT& mine, PorterRead read) -> decltype(read()) {
    slot_put(mine);
    tile_barrier<PorterN>();
    auto r = read();
    tile_barrier<PorterN>();
    return r;
}

// op folded over the values of the tile's members of rank first..last-1 (in rank order); `none` when
// there is none.
template <unsigned PorterN, class PorterR, class PorterT, class PorterOp>
inline PorterR fold(unsigned last, const PorterT& like, PorterOp& op, const PorterR& none) {
    unsigned first = tile_first<PorterN>();
    bool any = false;
    PorterR acc = none;
    for (unsigned i = first; i < last; ++i) {
        if (!member(i)) continue;
        PorterT v = slot_get(i, like);
        acc = any ? PorterR(op(acc, v)) : PorterR(v);
        any = true;
    }
    return acc;
}

template <unsigned PorterN>
class tile_base {
    static_assert(PorterN >= 1 && PorterN <= 1024 && (PorterN & (PorterN - 1)) == 0,
                  "thread_block_tile<PorterN>: PorterN must be a power of two from 1 to 1024");
    static constexpr bool in_warp = PorterN <= PORTER_WARP_SIZE;

protected:
    unsigned meta_rank_, meta_size_;

public:
    tile_base(unsigned meta_rank, unsigned meta_size) : meta_rank_(meta_rank), meta_size_(meta_size) {}
    static constexpr unsigned int num_threads() { return PorterN; }
    static constexpr unsigned int size() { return PorterN; }
    static unsigned int thread_rank() { return block_rank() & (PorterN - 1u); }
    unsigned int meta_group_rank() const { return meta_rank_; }
    unsigned int meta_group_size() const { return meta_size_; }
    static constexpr bool is_valid() { return true; }
    static void sync() { tile_barrier<PorterN>(); }

    template <class PorterT>
    PorterT shfl(PorterT var, int src_rank, int porter_line = __builtin_LINE(),
                 const char* porter_file = __builtin_FILE()) const {
        if constexpr (in_warp) {
            return warp_move(OP_SHFL_IDX, tile_lanes<PorterN>(), var, src_rank, (int)PorterN, porter_line, porter_file);
        } else {
            unsigned src = tile_first<PorterN>() + ((unsigned)src_rank & (PorterN - 1u));
            return exchange<PorterN>(var, [&] { return member(src) ? slot_get(src, var) : var; });
        }
    }
    template <class PorterT>
    PorterT shfl_down(PorterT var, unsigned int delta, int porter_line = __builtin_LINE(),
                      const char* porter_file = __builtin_FILE()) const {
        static_assert(in_warp, "thread_block_tile::shfl_down: tiles of at most warpSize threads");
        return warp_move(OP_SHFL_DOWN, tile_lanes<PorterN>(), var, (int)delta, (int)PorterN, porter_line, porter_file);
    }
    template <class PorterT>
    PorterT shfl_up(PorterT var, unsigned int delta, int porter_line = __builtin_LINE(),
                    const char* porter_file = __builtin_FILE()) const {
        static_assert(in_warp, "thread_block_tile::shfl_up: tiles of at most warpSize threads");
        return warp_move(OP_SHFL_UP, tile_lanes<PorterN>(), var, (int)delta, (int)PorterN, porter_line, porter_file);
    }
    template <class PorterT>
    PorterT shfl_xor(PorterT var, unsigned int lane_mask, int porter_line = __builtin_LINE(),
                     const char* porter_file = __builtin_FILE()) const {
        static_assert(in_warp, "thread_block_tile::shfl_xor: tiles of at most warpSize threads");
        return warp_move(OP_SHFL_XOR, tile_lanes<PorterN>(), var, (int)lane_mask, (int)PorterN, porter_line, porter_file);
    }
    int any(int predicate) const {
        if constexpr (in_warp) {
            return (int)warp_op(OP_ANY, tile_lanes<PorterN>(), predicate != 0, 0, 0);
        } else {
            auto either = [](int a, int b) { return (int)(a || b); };
            return exchange<PorterN>((int)(predicate != 0), [&] { return fold<PorterN>(tile_first<PorterN>() + PorterN, 0, either, 0); });
        }
    }
    int all(int predicate) const {
        if constexpr (in_warp) {
            return (int)warp_op(OP_ALL, tile_lanes<PorterN>(), predicate != 0, 0, 0);
        } else {
            auto both = [](int a, int b) { return (int)(a && b); };
            return exchange<PorterN>((int)(predicate != 0), [&] { return fold<PorterN>(tile_first<PorterN>() + PorterN, 0, both, 1); });
        }
    }
    mask_t ballot(int predicate) const {
        static_assert(in_warp, "thread_block_tile::ballot: tiles of at most warpSize threads");
        unsigned base = (unsigned)g_cur->lane & ~(PorterN - 1u);
        return (mask_t)(warp_op(OP_BALLOT, tile_lanes<PorterN>(), predicate != 0, 0, 0) >> base);
    }
    template <class PorterT>
    mask_t match_any(PorterT value) const {
        static_assert(in_warp, "thread_block_tile::match_any: tiles of at most warpSize threads");
        unsigned base = (unsigned)g_cur->lane & ~(PorterN - 1u);
        return (mask_t)(warp_op(OP_MATCH_ANY, tile_lanes<PorterN>(), to_bits(value), 0, 0) >> base);
    }
    template <class PorterT>
    mask_t match_all(PorterT value, int& pred) const {
        static_assert(in_warp, "thread_block_tile::match_all: tiles of at most warpSize threads");
        unsigned base = (unsigned)g_cur->lane & ~(PorterN - 1u);
        mask_t r = (mask_t)(warp_op(OP_MATCH_ALL, tile_lanes<PorterN>(), to_bits(value), 0, 0) >> base);
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

template <unsigned int PorterN, class PorterParent = void>
class thread_block_tile : public porter_emu::cg::tile_base<PorterN> {
public:
    thread_block_tile(unsigned meta_rank, unsigned meta_size) : porter_emu::cg::tile_base<PorterN>(meta_rank, meta_size) {}
    // a tile converts to one of the same size with another (or no) parent type
    template <class PorterP>
    thread_block_tile(const thread_block_tile<PorterN, PorterP>& t)
        : porter_emu::cg::tile_base<PorterN>(t.meta_group_rank(), t.meta_group_size()) {}
};

template <unsigned int PorterN>
static inline thread_block_tile<PorterN, thread_block> tiled_partition(const thread_block& parent) {
    return thread_block_tile<PorterN, thread_block>(parent.thread_rank() / PorterN, (parent.size() + PorterN - 1) / PorterN);
}
template <unsigned int PorterN, unsigned int PorterM, class PorterP>
static inline thread_block_tile<PorterN, thread_block_tile<PorterM, PorterP>> tiled_partition(const thread_block_tile<PorterM, PorterP>& parent) {
    static_assert(PorterN <= PorterM, "tiled_partition<PorterN>(tile): PorterN must not exceed the parent tile's size");
    return thread_block_tile<PorterN, thread_block_tile<PorterM, PorterP>>(parent.thread_rank() / PorterN, PorterM / PorterN);
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
template <class PorterT>
struct plus {
    PorterT operator()(PorterT a, PorterT b) const { return a + b; }
};
template <class PorterT>
struct less {  // the smaller (the first of equal ones)
    PorterT operator()(PorterT a, PorterT b) const { return (b < a) ? b : a; }
};
template <class PorterT>
struct greater {  // the larger (the first of equal ones)
    PorterT operator()(PorterT a, PorterT b) const { return (a < b) ? b : a; }
};
template <class PorterT>
struct bit_and {
    PorterT operator()(PorterT a, PorterT b) const { return a & b; }
};
template <class PorterT>
struct bit_or {
    PorterT operator()(PorterT a, PorterT b) const { return a | b; }
};
template <class PorterT>
struct bit_xor {
    PorterT operator()(PorterT a, PorterT b) const { return a ^ b; }
};

// op over the values of every thread of the tile, in rank order; each thread gets the result.
template <unsigned int PorterN, class PorterP, class PorterT, class PorterOp>
static inline auto reduce(const thread_block_tile<PorterN, PorterP>&, const PorterT& val, PorterOp&& op) ->
    typename std::decay<decltype(op(val, val))>::type {
    using PorterR = typename std::decay<decltype(op(val, val))>::type;
    using namespace porter_emu::cg;
    return exchange<PorterN>(val, [&] { return fold<PorterN>(tile_first<PorterN>() + PorterN, val, op, PorterR(val)); });
}
// op over the values of the threads of rank 0..thread_rank() (inclusive) or 0..thread_rank()-1
// (exclusive: rank 0 gets a value-initialised result).
template <unsigned int PorterN, class PorterP, class PorterT, class PorterOp>
static inline auto inclusive_scan(const thread_block_tile<PorterN, PorterP>&, const PorterT& val, PorterOp&& op) ->
    typename std::decay<decltype(op(val, val))>::type {
    using PorterR = typename std::decay<decltype(op(val, val))>::type;
    using namespace porter_emu::cg;
    return exchange<PorterN>(val, [&] { return fold<PorterN>(block_rank() + 1, val, op, PorterR(val)); });
}
template <unsigned int PorterN, class PorterP, class PorterT, class PorterOp>
static inline auto exclusive_scan(const thread_block_tile<PorterN, PorterP>&, const PorterT& val, PorterOp&& op) ->
    typename std::decay<decltype(op(val, val))>::type {
    using PorterR = typename std::decay<decltype(op(val, val))>::type;
    using namespace porter_emu::cg;
    return exchange<PorterN>(val, [&] { return fold<PorterN>(block_rank(), val, op, PorterR{}); });
}
template <unsigned int PorterN, class PorterP, class PorterT>
static inline PorterT inclusive_scan(const thread_block_tile<PorterN, PorterP>& g, const PorterT& val) {
    return inclusive_scan(g, val, plus<PorterT>());
}
template <unsigned int PorterN, class PorterP, class PorterT>
static inline PorterT exclusive_scan(const thread_block_tile<PorterN, PorterP>& g, const PorterT& val) {
    return exclusive_scan(g, val, plus<PorterT>());
}

}  // namespace cooperative_groups

#endif  // PORTER_COOPERATIVE_GROUPS_H
