// porter_emu.h -- CPU emulation of CUDA / HIP device code (porter's own header).
//
// Every CUDA thread of a block is a coroutine with its own stack; one OS thread runs the
// coroutines of one block at a time.  __syncthreads, __syncwarp and the warp collectives
// (shuffles, votes, match, reduce) yield to the scheduler, which resumes the block's ready
// threads in a seeded random order at every phase, so a missing barrier shows up as results
// that change from run to run.  Shared memory is poisoned (0xFF bytes: NaN for floats, -1 for
// ints) at every block start; uninitialised locals are poisoned by the compiler flag
// -ftrivial-auto-var-init=pattern.  Limits: docs/EMULATOR.md.
//
// The kernel source is compiled with this header force-included; porter rewrites each
// `__shared__` declaration (see backends/cpu/source.py) to use PORTER_SHARED_* below.
#ifndef PORTER_EMU_H
#define PORTER_EMU_H

#include <assert.h>
#include <fenv.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <type_traits>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define PORTER_ASAN 1
#endif

#ifndef PORTER_WARP_SIZE
#define PORTER_WARP_SIZE 32
#endif
#ifndef PORTER_STACK_BYTES
#define PORTER_STACK_BYTES (256 * 1024)
#endif
#ifndef PORTER_MAX_DYN_SMEM
#define PORTER_MAX_DYN_SMEM (227 * 1024)
#endif
#define PORTER_MAX_BLOCK 1024

// --------------------------------------------------------------------------- qualifiers

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
// No macro for __noinline__: libstdc++ spells `__attribute__((__noinline__))` (shared_ptr_base.h; more
// headers from GCC 13), which `#define __noinline__ __attribute__((noinline))` breaks in any standard
// header read after it (a kernel file that includes <memory>, or a header that does).  porter spells
// the device code's own __noinline__ as the attribute instead (backends/cpu/source.py spell_noinline:
// the kernel's file, its rewritten headers, and a whole program's files).
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
// A whole program (PORTER_PROGRAM, porter_runtime.h) is host and device code in one pass: the
// device-pass macros stay undefined there, so `#ifdef __CUDA_ARCH__` host/device splits take the host
// side, which every function can run on the CPU.  A kernel replayed from such a program's capture is
// compiled the same way (PORTER_HOST_PASS), so it takes the paths the captured run took.
#if defined(PORTER_HIP)
#define __HIPCC__ 1
#if !defined(PORTER_PROGRAM) && !defined(PORTER_HOST_PASS)
#define __HIP_DEVICE_COMPILE__ 1
// HIP at 32 lanes is HIP on NVIDIA (CUDA's rules, below), whose device pass is nvcc's: __CUDA_ARCH__ is
// defined there, as for CUDA code here, so a port's `#if __CUDA_ARCH__ >= 800` takes the original's branch
// (the CUDA samples' reduce7 sums a warp with __reduce_add_sync there, its shuffle loop elsewhere).  At 64
// lanes (AMD) it stays undefined, as HIP-Clang leaves it.
#if PORTER_WARP_SIZE == 32 && !defined(__CUDA_ARCH__)
#define __CUDA_ARCH__ 800
#endif
#endif
#else
#define __CUDACC__ 1
#if defined(PORTER_PROGRAM)
#define __NVCC__ 1
#endif
#if !defined(__CUDA_ARCH__) && !defined(PORTER_PROGRAM) && !defined(PORTER_HOST_PASS)
#define __CUDA_ARCH__ 800
#endif
#endif
#define PORTER_EMULATOR 1

// --------------------------------------------------------------------------- vector types

#include "porter_cuda_types.h"

// --------------------------------------------------------------------------- texture references
// Legacy 1-D texture references over linear memory (`texture<T, 1, cudaReadModeElementType> t;` at file
// scope, bound with cudaBindTexture, read with tex1Dfetch): in effect a global pointer and a size.  A
// fetch outside the bound range (or from an unbound texture) returns zero, as CUDA's does.  Filtering,
// normalized coordinates and address modes do not apply to tex1Dfetch; 2-D/3-D textures, CUDA arrays and
// normalized-float reads are refused before a build (dialect.toml).  The bound range is the first two
// words of every texture reference, so a replay binds one by writing them (backends/cpu/__init__.py
// bind_texture), as porter's HIP translation's porter_texref<T> (backends/hip/texrefs.py) lays them out.  The
// types are porter_cuda_types.h's (included above), shared with the OpenCL program runtime.
template <class T, enum cudaTextureReadMode M>
static inline T tex1Dfetch(const texture<T, 1, M>& t, int i) {
    static_assert(M == cudaReadModeElementType, "porter: only cudaReadModeElementType textures are emulated");
    const T* p = static_cast<const T*>(t.porter_ptr);
    if (p == nullptr || i < 0 || (size_t)i >= t.porter_bytes / sizeof(T)) return T();
    return p[i];
}

// --------------------------------------------------------------------------- runtime state

namespace porter_emu __attribute__((visibility("hidden"))) {

enum State { READY = 0, WAIT_BAR = 1, WAIT_WARP = 2, DONE = 3, WAIT_GROUP = 4 };

enum WarpOp {
    OP_SYNC, OP_SHFL_IDX, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR, OP_BALLOT, OP_ALL, OP_ANY,
    OP_MATCH_ANY, OP_MATCH_ALL, OP_RED_ADD, OP_RED_MIN_I, OP_RED_MAX_I, OP_RED_MIN_U, OP_RED_MAX_U,
    OP_RED_AND, OP_RED_OR, OP_RED_XOR
};

typedef unsigned long long lanemask_t;

// ------------------------------------------------------------------ coroutine contexts
// x86-64: a hand-written switch of the callee-saved registers (no signal-mask syscalls);
// elsewhere (or with -DPORTER_UCONTEXT): POSIX ucontext.
#if defined(__x86_64__) && !defined(PORTER_UCONTEXT)
#define PORTER_FAST_SWITCH 1
extern "C" void porter_emu_switch(void** save_sp, void* new_sp);
__asm__(
    ".text\n"
    ".hidden porter_emu_switch\n"
    ".weak porter_emu_switch\n"  /* weak: every translation unit of a program defines it */
    ".type porter_emu_switch, @function\n"
    "porter_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size porter_emu_switch, .-porter_emu_switch\n");

struct Context {
    void* sp;
};
inline void ctx_init(Context& c, void* stack_lo, size_t size, void (*fn)()) {
    uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = nullptr;        // fake return address of fn (it never returns)
    *--sp = (void*)fn;      // popped by `ret`
    for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
    c.sp = sp;
}
inline void ctx_switch(Context& from, Context& to) { porter_emu_switch(&from.sp, to.sp); }
inline void ctx_jump(Context& to) {
    void* discard;
    porter_emu_switch(&discard, to.sp);
}
#else
struct Context {
    ucontext_t uc;
};
inline void ctx_init(Context& c, void* stack_lo, size_t size, void (*fn)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack_lo;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, fn, 0);
}
inline void ctx_switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
inline void ctx_jump(Context& to) { setcontext(&to.uc); }
#endif

struct Thread {
    Context ctx;
    uint3 tid;
    int state;
    int lane;
    int warp;
    int group_first, group_count;  // WAIT_GROUP: the threads [first, first + count) of the block it waits for
    void* stack;
#if defined(PORTER_ASAN)
    void* fake_stack;
#endif
};

struct Warp {
    lanemask_t live;     // lanes that exist and have not exited
    lanemask_t exists;   // lanes that exist (the block's last wavefront may be partial)
    lanemask_t arrived;  // lanes waiting at a warp collective
    lanemask_t mask[64];
    int op[64];
    uint64_t val[64];
    int arg[64];
    int width[64];
    uint64_t result[64];
    int pred[64];
    int strict[64];  // a HIP *_sync call at 64 lanes: its mask must name exactly the lanes that call with it
    int line[64];    // where each lane called the collective from (__builtin_LINE / __builtin_FILE at the call)
    const char* file[64];
};

struct GroupWait {  // threads waiting at the barrier of a group of consecutive threads (a multi-warp tile)
    int first, count, waiting;
};

struct Block {
    uint3 index;  // blockIdx
    int nthreads;
    int live;
    int bar_arrived;
    int bar_op;  // 0 plain, 1 count, 2 and, 3 or
    long long bar_acc;
    long long bar_result;
    int ngroups;  // groups with threads waiting (GroupWait)
    GroupWait groups[PORTER_MAX_BLOCK];
};

struct Launch {
    void (*body)(void*);
    void* body_ctx;
    unsigned long long rng;
    unsigned long long shared_bytes;
    int failed;
    char error[512];
};

inline Thread g_threads[PORTER_MAX_BLOCK];
inline Warp g_warps[PORTER_MAX_BLOCK / 32 + 1];
inline Block g_block;
inline Launch g_launch;
inline Thread* g_cur = nullptr;
inline Context g_sched;
inline unsigned long long g_block_epoch = 0;
inline char* g_stacks = nullptr;
inline const void* g_sched_stack_bottom = nullptr;  // AddressSanitizer fiber annotations
inline size_t g_sched_stack_size = 0;
inline size_t g_stack_count = 0;
alignas(256) inline unsigned char g_dyn_smem[PORTER_MAX_DYN_SMEM];

struct SharedReg {
    void* addr;
    size_t bytes;
    SharedReg* next;
};
inline SharedReg* g_shared_globals = nullptr;

struct SharedGlobal {
    SharedReg reg;
    SharedGlobal(void* a, size_t n) : reg{a, n, g_shared_globals} { g_shared_globals = &reg; }
};

inline void fail(const char* msg) {
    if (!g_launch.failed) {
        g_launch.failed = 1;
        snprintf(g_launch.error, sizeof g_launch.error, "%s", msg);
    }
}

inline unsigned long long next_random() {  // splitmix64
    unsigned long long z = (g_launch.rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline void shuffle(int* v, int n) {
    for (int i = n - 1; i > 0; --i) {
        int j = (int)(next_random() % (unsigned long long)(i + 1));
        int t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

// Switch from the current coroutine back to the scheduler.  The empty asm statements with a
// memory clobber keep the compiler from caching shared or global memory across a yield.
inline void yield() {
    Thread* self = g_cur;
    __asm__ __volatile__("" ::: "memory");
#if defined(PORTER_ASAN)
    __sanitizer_start_switch_fiber(&self->fake_stack, g_sched_stack_bottom, g_sched_stack_size);
#endif
    ctx_switch(self->ctx, g_sched);
#if defined(PORTER_ASAN)
    __sanitizer_finish_switch_fiber(self->fake_stack, &g_sched_stack_bottom, &g_sched_stack_size);
#endif
    __asm__ __volatile__("" ::: "memory");
}

// Poison a function-scope __shared__ variable the first time a thread of the block reaches
// its declaration (C++ scoping guarantees no thread uses it before that).
inline void shared_touch(void* addr, size_t bytes, unsigned long long* epoch) {
    __asm__ __volatile__("" : : "r"(addr) : "memory");
    if (*epoch != g_block_epoch) {
        *epoch = g_block_epoch;
        memset(addr, 0xFF, bytes);
    }
}

inline int lane_id() { return g_cur->lane; }

// ------------------------------------------------------------------ block barrier

inline void release_barrier() {
    Block& b = g_block;
    b.bar_result = b.bar_acc;
    b.bar_arrived = 0;
    b.bar_acc = 0;
    for (int i = 0; i < b.nthreads; ++i)
        if (g_threads[i].state == WAIT_BAR) g_threads[i].state = READY;
}

// op: 0 plain, 1 count, 2 and, 3 or.  Returns the combined predicate.
inline int barrier(int op, int pred) {
    Block& b = g_block;
    if (b.bar_arrived == 0) {
        b.bar_op = op;
        b.bar_acc = (op == 2) ? 1 : 0;
    }
    if (op == 1) b.bar_acc += pred ? 1 : 0;
    else if (op == 2) b.bar_acc = b.bar_acc && pred;
    else if (op == 3) b.bar_acc = b.bar_acc || pred;
    b.bar_arrived += 1;
    g_cur->state = WAIT_BAR;
    if (b.bar_arrived == b.live) release_barrier();
    yield();
    return (int)b.bar_result;
}

// ------------------------------------------------------------------ group barrier
// The barrier of the threads [first, first + count) of the block (a cooperative-groups tile wider than a
// warp): it completes when every thread of the range that has not exited has arrived.  Threads beyond
// the block (a partial last tile) are not waited for.

// Release the group `k` of g_block.groups when every thread of its range not exited waits at it.
inline bool try_release_group(int k) {
    Block& b = g_block;
    GroupWait& g = b.groups[k];
    int end = g.first + g.count < b.nthreads ? g.first + g.count : b.nthreads;
    // no thread of the range exited: it completes at its last arrival (the common case, no scan)
    if (g.waiting + (b.nthreads - b.live) < end - g.first) return false;
    int live = 0;
    for (int i = g.first; i < end; ++i) live += g_threads[i].state != DONE;
    if (g.waiting < live) return false;
    for (int i = g.first; i < end; ++i) {
        Thread& t = g_threads[i];
        if (t.state == WAIT_GROUP && t.group_first == g.first && t.group_count == g.count) t.state = READY;
    }
    b.groups[k] = b.groups[--b.ngroups];
    return true;
}

inline void group_barrier(int first, int count) {
    Block& b = g_block;
    Thread* t = g_cur;
    int k = 0;
    while (k < b.ngroups && !(b.groups[k].first == first && b.groups[k].count == count)) ++k;
    if (k == b.ngroups) b.groups[b.ngroups++] = GroupWait{first, count, 0};
    b.groups[k].waiting += 1;
    t->group_first = first;
    t->group_count = count;
    t->state = WAIT_GROUP;
    try_release_group(k);
    yield();
}

// A thread exited: the groups of its range that now have every other thread waiting complete.
inline void release_groups_of(int index) {
    Block& b = g_block;
    for (int k = 0; k < b.ngroups;) {
        GroupWait& g = b.groups[k];
        if (index >= g.first && index < g.first + g.count && try_release_group(k)) continue;  // k now holds another
        ++k;
    }
}

// ------------------------------------------------------------------ warp collectives

inline lanemask_t lane_bit(int lane) { return 1ull << lane; }
[[noreturn]] inline void leave_thread() noexcept;

// HIP on AMD (PORTER_HIP at 64 lanes) holds the *_sync masks to amd_warp_sync_functions.h's rules: a 64-bit
// mask type (a static_assert there and here), the caller's own lane in its mask, and the mask equal to the
// lanes that call with it (__hip_check_mask asserts MASK == __ballot(true)).  CUDA code, and HIP at 32
// lanes (HIP on NVIDIA: CUDA's rules), keep CUDA's reading: exited lanes named in a mask are ignored.
#if defined(PORTER_HIP) && PORTER_WARP_SIZE == 64
#define PORTER_STRICT_MASKS 1
#else
#define PORTER_STRICT_MASKS 0
#endif

inline const char* warp_op_name(int op) {
    static const char* const names[] = {"__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                        "__shfl_xor_sync", "__ballot_sync", "__all_sync", "__any_sync",
                                        "__match_any_sync", "__match_all_sync", "__reduce_add_sync",
                                        "__reduce_min_sync", "__reduce_max_sync", "__reduce_min_sync",
                                        "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
                                        "__reduce_xor_sync"};
    return op >= 0 && op < (int)(sizeof names / sizeof names[0]) ? names[op] : "a warp collective";
}

// A shuffle whose source lane takes no part -- outside the caller's mask, exited, or beyond the block's
// last thread -- reads a value CUDA leaves undefined (HIP on NVIDIA too).  It reads 0 here, as NVIDIA GPUs
// do; other devices read what the lane last held (Intel's OpenCL runtimes).  Each such read is counted
// per launch, the first described, so a replay can run the launch again with them reading
// PORTER_UNDEFINED_LANE instead (g_undefined.poison; CpuProgram.set_undefined_lanes): a result that
// changes depends on them (porter.harness.checks.check_defined).  HIP at 64 lanes: AMD's ds_bpermute
// reads 0 from an inactive lane, a defined value, not counted.
#define PORTER_UNDEFINED_LANE 0x7FF8DEAD7FC0DEADull  // a NaN as float and as double; 2143346349 as int
#if defined(PORTER_HIP) && PORTER_WARP_SIZE == 64
#define PORTER_INACTIVE_LANES_READ_ZERO 1
#else
#define PORTER_INACTIVE_LANES_READ_ZERO 0
#endif
struct UndefinedReads {
    int poison;                // read PORTER_UNDEFINED_LANE instead of 0
    unsigned long long count;  // in the current launch
    char first[480];           // the first of them, in words
};
inline UndefinedReads g_undefined;

inline const char* where_called(const char* file, int line, char* buf, size_t size) {
    if (line <= 0 || file == nullptr) return "";
    const char* base = file;  // (no strrchr: an untrusted kernel's library imports only what dialect.toml lists)
    for (const char* c = file; *c; ++c)
        if (*c == '/') base = c + 1;
    if (strcmp(base, "kernel.cu") == 0) snprintf(buf, size, ", source line %d", line);
    else snprintf(buf, size, ", %s line %d", base, line);
    return buf;
}

inline uint64_t undefined_read(Warp& w, int lane, int src) {
    if (PORTER_INACTIVE_LANES_READ_ZERO) return 0;
    if (g_undefined.count++ == 0) {
        lanemask_t mask = w.mask[lane];
        bool exists = src >= 0 && src < 64 && (w.exists & lane_bit(src));
        bool in_mask = src >= 0 && src < 64 && (mask & lane_bit(src));
        const char* why = !exists ? (in_mask ? "beyond the block's last thread" : "outside its mask and beyond the block's last thread")
                          : !in_mask ? "outside its mask"
                          : !(w.live & lane_bit(src)) ? "which has exited"
                          : "which does not call with its mask";
        char at[160] = "";
        where_called(w.file[lane], w.line[lane], at, sizeof at);
        snprintf(g_undefined.first, sizeof g_undefined.first,
                 "lane %d of warp %d in block (%u,%u,%u) reads lane %d through %s with mask 0x%llx: %s%s",
                 lane, (int)(&w - g_warps), g_block.index.x, g_block.index.y, g_block.index.z, src, warp_op_name(w.op[lane]),
                 (unsigned long long)(mask & (PORTER_WARP_SIZE == 64 ? ~0ull : 0xFFFFFFFFull)), why, at);
    }
    return g_undefined.poison ? PORTER_UNDEFINED_LANE : 0;
}

inline uint64_t compute_warp_result(Warp& w, int lane, lanemask_t group) {
    int op = w.op[lane];
    int width = w.width[lane];
    if (width <= 0 || width > PORTER_WARP_SIZE) width = PORTER_WARP_SIZE;
    int seg = lane - (lane % width);
    int src = lane;
    switch (op) {
        case OP_SYNC: return 0;
        case OP_SHFL_IDX: src = seg + (((w.arg[lane] % width) + width) % width); break;
        case OP_SHFL_UP: src = (lane - seg) >= w.arg[lane] ? lane - w.arg[lane] : lane; break;
        case OP_SHFL_DOWN: src = (lane - seg) + w.arg[lane] < width ? lane + w.arg[lane] : lane; break;
        case OP_SHFL_XOR: src = lane ^ w.arg[lane]; if (src >= seg + width) src = lane; break;
        default: break;
    }
    if (op >= OP_SHFL_IDX && op <= OP_SHFL_XOR) {
        // A source lane that takes no part (exited, beyond the block's last wavefront, or calling with
        // another mask) reads 0.  64 lanes: AMD's ds_bpermute reads 0 from an inactive lane.  32 lanes:
        // CUDA leaves it undefined, and NVIDIA GPUs read 0 there too, which code in the wild relies on
        // (the CUDA samples' reduce7 sums a partial warp with a mask of the lanes that have a value):
        // counted, and poisoned on request (undefined_read).
        if (src < 0 || src >= 64 || !(group & lane_bit(src))) return undefined_read(w, lane, src);
        return w.val[src];
    }
    uint64_t acc = 0;
    bool first = true;
    for (int l = 0; l < PORTER_WARP_SIZE; ++l) {
        if (!(group & lane_bit(l))) continue;
        uint64_t v = w.val[l];
        switch (op) {
            case OP_BALLOT: if (v) acc |= lane_bit(l); break;
            case OP_ALL: acc = first ? (v != 0) : (acc && v != 0); break;
            case OP_ANY: acc = first ? (v != 0) : (acc || v != 0); break;
            case OP_MATCH_ANY: if (v == w.val[lane]) acc |= lane_bit(l); break;
            case OP_MATCH_ALL: if (v != w.val[lane]) { w.pred[lane] = 0; return 0; } acc = group; w.pred[lane] = 1; break;
            case OP_RED_ADD: acc = first ? v : (uint64_t)(uint32_t)((uint32_t)acc + (uint32_t)v); break;
            case OP_RED_MIN_I: acc = first || (int32_t)v < (int32_t)acc ? v : acc; break;
            case OP_RED_MAX_I: acc = first || (int32_t)v > (int32_t)acc ? v : acc; break;
            case OP_RED_MIN_U: acc = first || (uint32_t)v < (uint32_t)acc ? v : acc; break;
            case OP_RED_MAX_U: acc = first || (uint32_t)v > (uint32_t)acc ? v : acc; break;
            case OP_RED_AND: acc = first ? v : (acc & v); break;
            case OP_RED_OR: acc = first ? v : (acc | v); break;
            case OP_RED_XOR: acc = first ? v : (acc ^ v); break;
            default: break;
        }
        first = false;
    }
    return acc;
}

// Complete every group of waiting lanes whose participants (mask & live) have all arrived
// with the same mask.
inline void try_release_warp(Warp& w, int warp_index) {
    lanemask_t pending = w.arrived;
    while (pending) {
        int lane = __builtin_ctzll(pending);
        lanemask_t m = w.mask[lane];
        lanemask_t need = m & w.live;
        lanemask_t same = 0;
        for (lanemask_t rest = w.arrived; rest; rest &= rest - 1) {
            int l = __builtin_ctzll(rest);
            if (w.mask[l] == m) same |= lane_bit(l);
        }
        pending &= ~same;
        if ((need & ~same) != 0) continue;
        if (w.strict[lane] && (m & ~same) != 0) {  // HIP at 64 lanes: the mask names lanes that are not active
            char msg[400];
            snprintf(msg, sizeof msg,
                     "%s with mask 0x%016llx in wavefront %d: the mask names lanes that are not active (exited, "
                     "or beyond the block: active 0x%016llx); HIP on a 64-lane wavefront requires the mask to "
                     "equal the lanes that call (__hip_check_mask: MASK == __ballot(true))",
                     warp_op_name(w.op[lane]), m, warp_index, same);
            fail(msg);
            return;
        }
        for (lanemask_t rest = same; rest; rest &= rest - 1) {
            int l = __builtin_ctzll(rest);
            w.result[l] = compute_warp_result(w, l, same);
        }
        w.arrived &= ~same;
        int base = warp_index * PORTER_WARP_SIZE;
        for (lanemask_t rest = same; rest; rest &= rest - 1) {
            int l = __builtin_ctzll(rest);
            g_threads[base + l].state = READY;
        }
    }
}

inline uint64_t warp_op(int op, lanemask_t mask, uint64_t val, int arg, int width, int strict = 0, int line = 0,
                        const char* file = nullptr) {
    Thread* t = g_cur;
    Warp& w = g_warps[t->warp];
    int lane = t->lane;
    if (op >= OP_SHFL_IDX && op <= OP_SHFL_XOR && (width < 1 || width > PORTER_WARP_SIZE || (width & (width - 1)))) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: width %d is not a power of two from 1 to warpSize (%d)", warp_op_name(op),
                 width, PORTER_WARP_SIZE);
        fail(msg);
        leave_thread();
    }
    if (strict && !(mask & lane_bit(lane))) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "%s with mask 0x%016llx called by lane %d of a 64-lane wavefront: the mask leaves out the caller's "
                 "own lane (a 32-lane mask?); HIP requires each caller's bit in its mask",
                 warp_op_name(op), mask, lane);
        fail(msg);
        leave_thread();
    }
    mask |= lane_bit(lane);
    w.strict[lane] = strict;
    w.mask[lane] = mask;
    w.op[lane] = op;
    w.val[lane] = val;
    w.arg[lane] = arg;
    w.width[lane] = width;
    w.pred[lane] = 0;
    w.line[lane] = line;
    w.file[lane] = file;
    w.arrived |= lane_bit(lane);
    t->state = WAIT_WARP;
    try_release_warp(w, t->warp);
    yield();
    return w.result[lane];
}

inline lanemask_t live_mask() { return g_warps[g_cur->warp].live; }
inline lanemask_t existing_lanes() { return g_warps[g_cur->warp].exists; }

template <class T>
inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp shuffles of types wider than 8 bytes are not emulated");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

// ------------------------------------------------------------------ scheduler

inline void thread_exit_bookkeeping(Thread* t) {
    Block& b = g_block;
    b.live -= 1;
    Warp& w = g_warps[t->warp];
    w.live &= ~lane_bit(t->lane);
    if (b.bar_arrived > 0 && b.bar_arrived == b.live) release_barrier();
    if (w.arrived) try_release_warp(w, t->warp);
    if (b.ngroups) release_groups_of((int)(t - g_threads));
}

inline void trampoline() {
#if defined(PORTER_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &g_sched_stack_bottom, &g_sched_stack_size);
#endif
    g_launch.body(g_launch.body_ctx);
    Thread* t = g_cur;
    t->state = DONE;
    thread_exit_bookkeeping(t);
#if defined(PORTER_ASAN)
    __sanitizer_start_switch_fiber(nullptr, g_sched_stack_bottom, g_sched_stack_size);
#endif
    ctx_jump(g_sched);
}

inline bool ensure_stacks(size_t n) {
    if (g_stack_count >= n) return true;
    if (g_stacks) munmap(g_stacks, g_stack_count * PORTER_STACK_BYTES);
    g_stacks = (char*)mmap(nullptr, n * PORTER_STACK_BYTES, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g_stacks == MAP_FAILED) {
        g_stacks = nullptr;
        g_stack_count = 0;
        return false;
    }
    for (size_t i = 0; i < n; ++i) mprotect(g_stacks + i * PORTER_STACK_BYTES, 4096, PROT_NONE);  // guard page
    g_stack_count = n;
    return true;
}

}  // namespace porter_emu

// --------------------------------------------------------------------------- built-in variables

inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
static constexpr int warpSize = PORTER_WARP_SIZE;  // a variable, not a macro: `prop.warpSize` stays a field

#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)
// HIP 1.x kernels take a first parameter of this type, which the hipLaunchKernel macro passes (HIP's
// nvcc path: an int, 0); porter_hip_names.h says the same for programs
#ifndef hipLaunchParm
#define hipLaunchParm int
#endif

#define PORTER_SHARED_INIT(name)                                                                        \
    do {                                                                                                \
        static unsigned long long porter_epoch_ = 0;                                                    \
        porter_emu::shared_touch((void*)&(name), sizeof(name), &porter_epoch_);                         \
    } while (0)
#define PORTER_SHARED_GLOBAL(name) \
    static porter_emu::SharedGlobal porter_shared_reg_##name((void*)&(name), sizeof(name))
#define PORTER_DYN_SHARED(T) (*reinterpret_cast<T(*)[]>(porter_emu::g_dyn_smem))
#define HIP_DYNAMIC_SHARED(type, var) type(&var)[] = PORTER_DYN_SHARED(type);
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

// --------------------------------------------------------------------------- barriers & fences

static inline void __syncthreads() { porter_emu::barrier(0, 0); }
static inline int __syncthreads_count(int p) { return porter_emu::barrier(1, p); }
static inline int __syncthreads_and(int p) { return porter_emu::barrier(2, p); }
static inline int __syncthreads_or(int p) { return porter_emu::barrier(3, p); }
static inline void __threadfence() { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence_block() { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence_system() { __asm__ __volatile__("" ::: "memory"); }
// The *_sync masks: HIP on a 64-lane wavefront takes only a 64-bit integer (amd_warp_sync_functions.h's
// static_assert, with its words); everywhere else any integer converts to 64 bits, as CUDA's unsigned does.
#define PORTER_MASK_TYPE(M)                                                                              \
    static_assert(!PORTER_STRICT_MASKS || (std::is_integral<M>::value && sizeof(M) == 8),             \
                  "The mask must be a 64-bit integer. Implicitly promoting a smaller integer is almost " \
                  "always an error. (HIP on a 64-lane wavefront: 0xffffffff leaves lanes 32-63 out)")
static inline void __syncwarp() { porter_emu::warp_op(porter_emu::OP_SYNC, ~0ull, 0, 0, 0); }
template <class M>
static inline void __syncwarp(M mask) {
    PORTER_MASK_TYPE(M);
    porter_emu::warp_op(porter_emu::OP_SYNC, (unsigned long long)mask, 0, 0, 0, PORTER_STRICT_MASKS);
}

// --------------------------------------------------------------------------- cooperative groups
// The thread block, its tiles and their collectives (cg::reduce, the scans): porter's own header, built on
// the warp collectives above and the group barrier.  Grid, coalesced and partitioned groups are refused
// before compiling (dialect.toml [[refuse]]).
#include "porter_cooperative_groups.h"
[[noreturn]] static inline void __trap() {
    porter_emu::fail("kernel executed __trap()");
    porter_emu::ctx_jump(porter_emu::g_sched);
    abort();
}
// A free-running counter, as the SM's clock: the time-stamp counter where there is one (no call into the
// C library, so an untrusted kernel's library imports nothing for it).
static inline long long clock64() {
#if defined(__x86_64__) || defined(__i386__)
    return (long long)__builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
#endif
}
// __nanosleep lets the block's other threads run (a thread spinning on a flag another thread of its block
// sets sees it set); blocks run one after another here, so a wait on another block never ends: after
// PORTER_MAX_SPINS sleeps in one block the launch fails, naming it, instead of hanging.
#ifndef PORTER_MAX_SPINS
#define PORTER_MAX_SPINS (1ull << 24)
#endif
namespace porter_emu __attribute__((visibility("hidden"))) {
inline unsigned long long g_spins = 0, g_spin_epoch = 0;
// Abandon the current emulated thread (the launch has failed): back to the scheduler for good.
// noexcept (callable from the C library's __assert_fail, which is): the calls below go through aliases
// declared noexcept, so no exception table (and no import of the C++ runtime's personality) is needed.
extern "C" void porter_switch_nothrow(void** save_sp, void* new_sp) noexcept __asm__("porter_emu_switch");
extern "C" int porter_setcontext_nothrow(const ucontext_t*) noexcept __asm__("setcontext");
#if defined(PORTER_ASAN)
extern "C" void porter_start_fiber_nothrow(void**, const void*, size_t) noexcept __asm__(
    "__sanitizer_start_switch_fiber");
#endif
[[noreturn]] inline void leave_thread() noexcept {
#if defined(PORTER_ASAN)
    porter_start_fiber_nothrow(nullptr, g_sched_stack_bottom, g_sched_stack_size);
#endif
#if defined(PORTER_FAST_SWITCH)
    void* discard;
    porter_switch_nothrow(&discard, g_sched.sp);
#else
    porter_setcontext_nothrow(&g_sched.uc);
#endif
    abort();
}
extern "C" int porter_printf_nothrow(const char*, ...) noexcept __asm__("printf");
extern "C" int porter_fprintf_nothrow(FILE*, const char*, ...) noexcept __asm__("fprintf");
}  // namespace porter_emu
static inline void __nanosleep(unsigned int) {
    using namespace porter_emu;
    if (g_cur == nullptr) return;  // host code of a whole program
    if (g_spin_epoch != g_block_epoch) {
        g_spin_epoch = g_block_epoch;
        g_spins = 0;
    }
    if (++g_spins > PORTER_MAX_SPINS) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "thread (%u,%u,%u) of block (%u,%u,%u) still waits after %llu __nanosleep calls in its block: "
                 "blocks run one at a time on the emulator, so a wait on another block never ends",
                 threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z, (unsigned long long)PORTER_MAX_SPINS);
        fail(msg);
        leave_thread();
    }
    yield();  // stays READY: resumed in the block's next round
}
// assert() in device code: a failed assertion fails the launch (as cudaErrorAssert does) with the
// expression and place, instead of aborting the process; in host code it aborts, as the C library's.
extern "C" inline void __assert_fail(const char* expr, const char* file, unsigned int line,
                                  const char* function) noexcept {
    using namespace porter_emu;
    if (g_cur != nullptr) {
        if (!g_launch.failed) {
            g_launch.failed = 1;
            snprintf(g_launch.error, sizeof g_launch.error,
                     "%s:%u: %s: block (%u,%u,%u), thread (%u,%u,%u) Assertion `%s` failed.", file, line, function,
                     blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z, expr);
        }
        leave_thread();
    }
#if defined(PORTER_PROGRAM)
    porter_fprintf_nothrow(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, function, expr);
#else
    porter_printf_nothrow("%s:%u: %s: Assertion `%s' failed.\n", file, line, function, expr);
#endif
    abort();
}
static inline long long wall_clock64() { return clock64(); }
static inline unsigned int __lane_id() { return (unsigned)porter_emu::lane_id(); }
// The lanes below / at / above this one (HIP's __lanemask_*; PTX's %lanemask_* registers).
static inline porter_emu::lanemask_t __lanemask_eq() { return 1ull << porter_emu::lane_id(); }
#if defined(PORTER_HIP)  // HIP: `mask & __ballot64(1)`, the active lanes (amd_device_functions.h); here the
#define PORTER_LANEMASK_ACTIVE porter_emu::existing_lanes()  // lanes that exist: no lane past a partial wavefront
#else  // CUDA: PTX's %lanemask_* registers, active or not
#define PORTER_LANEMASK_ACTIVE ~0ull
#endif
static inline porter_emu::lanemask_t __lanemask_lt() {
    return ((1ull << porter_emu::lane_id()) - 1ull) & PORTER_LANEMASK_ACTIVE;
}
static inline porter_emu::lanemask_t __lanemask_le() { return (2ull << porter_emu::lane_id()) - 1ull; }
static inline porter_emu::lanemask_t __lanemask_gt() {
    return ~__lanemask_le() & (PORTER_WARP_SIZE == 64 ? ~0ull : 0xFFFFFFFFull) & PORTER_LANEMASK_ACTIVE;
}
static inline porter_emu::lanemask_t __lanemask_ge() {
    return ~__lanemask_lt() & (PORTER_WARP_SIZE == 64 ? ~0ull : 0xFFFFFFFFull);
}
static inline void __prof_trigger(int) {}
[[noreturn]] static inline void __brkpt() {  // no debugger attached: the launch stops, as on a GPU
    porter_emu::fail("kernel executed __brkpt() (a breakpoint, with no debugger attached)");
    porter_emu::leave_thread();
}
// Optimiser hints: the condition is type-checked, never evaluated.
#define __builtin_assume(e) ((void)sizeof((e) ? 1 : 0))
#define __assume(e) ((void)sizeof((e) ? 1 : 0))

// --------------------------------------------------------------------------- warp intrinsics

#if PORTER_WARP_SIZE == 64
typedef unsigned long long porter_ballot_t;
#else
typedef unsigned int porter_ballot_t;
#endif

// The spellings without a mask (HIP's, CUDA's legacy ones) take every lane of the warp that has not
// exited, as the full mask does: one rule for both.  (Taking the live lanes at the call would give
// lanes that arrive before and after another lane exits different masks, and none would complete.)
#define PORTER_ALL_LANES (~0ull)
// The caller's line and file (default arguments, evaluated where the shuffle is called) name an undefined
// read (porter_emu::undefined_read).
#define PORTER_SHFL(NAME, OP)                                                                          \
    template <class M, class T>                                                                         \
    static inline T NAME##_sync(M mask, T var, int arg, int width = PORTER_WARP_SIZE,                  \
                                int porter_line = __builtin_LINE(),                                     \
                                const char* porter_file = __builtin_FILE()) {                           \
        PORTER_MASK_TYPE(M);                                                                            \
        return porter_emu::from_bits<T>(porter_emu::warp_op(OP, (unsigned long long)mask,               \
                                                            porter_emu::to_bits(var), arg, width,       \
                                                            PORTER_STRICT_MASKS, porter_line,           \
                                                            porter_file));                              \
    }                                                                                                   \
    template <class T>                                                                                  \
    static inline T NAME(T var, int arg, int width = PORTER_WARP_SIZE, int porter_line = __builtin_LINE(), \
                         const char* porter_file = __builtin_FILE()) {                                  \
        return porter_emu::from_bits<T>(porter_emu::warp_op(OP, PORTER_ALL_LANES, porter_emu::to_bits(var), \
                                                            arg, width, 0, porter_line, porter_file));  \
    }
PORTER_SHFL(__shfl, porter_emu::OP_SHFL_IDX)
PORTER_SHFL(__shfl_up, porter_emu::OP_SHFL_UP)
PORTER_SHFL(__shfl_down, porter_emu::OP_SHFL_DOWN)
PORTER_SHFL(__shfl_xor, porter_emu::OP_SHFL_XOR)

template <class M>
static inline porter_ballot_t __ballot_sync(M mask, int pred) {
    PORTER_MASK_TYPE(M);
    return (porter_ballot_t)porter_emu::warp_op(porter_emu::OP_BALLOT, (unsigned long long)mask, pred != 0, 0, 0,
                                                PORTER_STRICT_MASKS);
}
template <class M>
static inline int __all_sync(M mask, int pred) {
    PORTER_MASK_TYPE(M);
    return (int)porter_emu::warp_op(porter_emu::OP_ALL, (unsigned long long)mask, pred != 0, 0, 0, PORTER_STRICT_MASKS);
}
template <class M>
static inline int __any_sync(M mask, int pred) {
    PORTER_MASK_TYPE(M);
    return (int)porter_emu::warp_op(porter_emu::OP_ANY, (unsigned long long)mask, pred != 0, 0, 0, PORTER_STRICT_MASKS);
}
template <class M>
static inline int __uni_sync(M mask, int pred) {
    return __all_sync(mask, pred) || !__any_sync(mask, pred);
}
static inline porter_ballot_t __ballot(int pred) {
    return (porter_ballot_t)porter_emu::warp_op(porter_emu::OP_BALLOT, PORTER_ALL_LANES, pred != 0, 0, 0);
}
static inline int __all(int pred) { return (int)porter_emu::warp_op(porter_emu::OP_ALL, PORTER_ALL_LANES, pred != 0, 0, 0); }
static inline int __any(int pred) { return (int)porter_emu::warp_op(porter_emu::OP_ANY, PORTER_ALL_LANES, pred != 0, 0, 0); }
#if PORTER_WARP_SIZE == 64
// AMD: __activemask() is __ballot(true) (amd_warp_functions.h), a wavefront operation: here the lanes that
// have not exited once every one of them has arrived (or exited).
static inline porter_ballot_t __activemask() {
    return (porter_ballot_t)porter_emu::warp_op(porter_emu::OP_BALLOT, PORTER_ALL_LANES, 1, 0, 0);
}
#else
// CUDA: not a synchronisation; the lanes of the warp that have not exited when the caller asks.
static inline porter_ballot_t __activemask() { return (porter_ballot_t)porter_emu::live_mask(); }
#endif

// __match_*: 4- and 8-byte integers and floating point only (CUDA's and HIP's documented types).
#define PORTER_MATCH_TYPE(T)                                                                            \
    static_assert((std::is_integral<T>::value || std::is_floating_point<T>::value) &&                   \
                      (sizeof(T) == 4 || sizeof(T) == 8),                                               \
                  "__match_any / __match_all take a 32- or 64-bit integer, a float or a double")
template <class M, class T>
static inline porter_ballot_t __match_any_sync(M mask, T value) {
    PORTER_MASK_TYPE(M);
    PORTER_MATCH_TYPE(T);
    return (porter_ballot_t)porter_emu::warp_op(porter_emu::OP_MATCH_ANY, (unsigned long long)mask,
                                                porter_emu::to_bits(value), 0, 0, PORTER_STRICT_MASKS);
}
template <class M, class T>
static inline porter_ballot_t __match_all_sync(M mask, T value, int* pred) {
    PORTER_MASK_TYPE(M);
    PORTER_MATCH_TYPE(T);
    porter_ballot_t r = (porter_ballot_t)porter_emu::warp_op(porter_emu::OP_MATCH_ALL, (unsigned long long)mask,
                                                             porter_emu::to_bits(value), 0, 0, PORTER_STRICT_MASKS);
    *pred = porter_emu::g_warps[porter_emu::g_cur->warp].pred[porter_emu::g_cur->lane];
    return r;
}
#if defined(PORTER_HIP)
// HIP's mask-less spellings: every active lane of the wavefront.
template <class T>
static inline porter_ballot_t __match_any(T value) {
    PORTER_MATCH_TYPE(T);
    return (porter_ballot_t)porter_emu::warp_op(porter_emu::OP_MATCH_ANY, PORTER_ALL_LANES, porter_emu::to_bits(value), 0, 0);
}
template <class T>
static inline porter_ballot_t __match_all(T value, int* pred) {
    PORTER_MATCH_TYPE(T);
    porter_ballot_t r = (porter_ballot_t)porter_emu::warp_op(porter_emu::OP_MATCH_ALL, PORTER_ALL_LANES,
                                                             porter_emu::to_bits(value), 0, 0);
    *pred = porter_emu::g_warps[porter_emu::g_cur->warp].pred[porter_emu::g_cur->lane];
    return r;
}
#endif

#define PORTER_REDUCE(NAME, T, OP)                                                                      \
    template <class M>                                                                                  \
    static inline T NAME(M mask, T value) {                                                             \
        PORTER_MASK_TYPE(M);                                                                            \
        return (T)(uint32_t)porter_emu::warp_op(OP, (unsigned long long)mask, (uint64_t)(uint32_t)value, 0, 0, \
                                                PORTER_STRICT_MASKS);                                   \
    }
PORTER_REDUCE(__reduce_add_sync, int, porter_emu::OP_RED_ADD)
PORTER_REDUCE(__reduce_add_sync, unsigned, porter_emu::OP_RED_ADD)
PORTER_REDUCE(__reduce_min_sync, int, porter_emu::OP_RED_MIN_I)
PORTER_REDUCE(__reduce_min_sync, unsigned, porter_emu::OP_RED_MIN_U)
PORTER_REDUCE(__reduce_max_sync, int, porter_emu::OP_RED_MAX_I)
PORTER_REDUCE(__reduce_max_sync, unsigned, porter_emu::OP_RED_MAX_U)
PORTER_REDUCE(__reduce_and_sync, unsigned, porter_emu::OP_RED_AND)
PORTER_REDUCE(__reduce_or_sync, unsigned, porter_emu::OP_RED_OR)
PORTER_REDUCE(__reduce_xor_sync, unsigned, porter_emu::OP_RED_XOR)

// --------------------------------------------------------------------------- atomics
// Only one emulated thread runs at a time, so every atomic is a plain read-modify-write.

#define PORTER_ATOMIC_SCOPES(RET, NAME, ARGS, CALL) \
    static inline RET NAME##_block ARGS { return NAME CALL; } \
    static inline RET NAME##_system ARGS { return NAME CALL; }

#define PORTER_ATOMIC_RMW(NAME, T, EXPR)                                  \
    static inline T NAME(T* p, T v) { T old = *p; *p = (EXPR); return old; } \
    PORTER_ATOMIC_SCOPES(T, NAME, (T * p, T v), (p, v))

#define PORTER_ATOMIC_ARITH(T)                      \
    PORTER_ATOMIC_RMW(atomicAdd, T, old + v)        \
    PORTER_ATOMIC_RMW(atomicSub, T, old - v)        \
    PORTER_ATOMIC_RMW(atomicExch, T, v)             \
    PORTER_ATOMIC_RMW(atomicMin, T, v < old ? v : old) \
    PORTER_ATOMIC_RMW(atomicMax, T, v > old ? v : old) \
    static inline T atomicCAS(T* p, T cmp, T v) { T old = *p; if (old == cmp) *p = v; return old; } \
    PORTER_ATOMIC_SCOPES(T, atomicCAS, (T * p, T cmp, T v), (p, cmp, v))
#define PORTER_ATOMIC_BITS(T)                   \
    PORTER_ATOMIC_RMW(atomicAnd, T, old & v)    \
    PORTER_ATOMIC_RMW(atomicOr, T, old | v)     \
    PORTER_ATOMIC_RMW(atomicXor, T, old ^ v)

PORTER_ATOMIC_ARITH(int)
PORTER_ATOMIC_ARITH(unsigned int)
PORTER_ATOMIC_ARITH(long long)
PORTER_ATOMIC_ARITH(unsigned long long)
PORTER_ATOMIC_BITS(int)
PORTER_ATOMIC_BITS(unsigned int)
PORTER_ATOMIC_BITS(long long)
PORTER_ATOMIC_BITS(unsigned long long)
PORTER_ATOMIC_RMW(atomicAdd, float, old + v)
PORTER_ATOMIC_RMW(atomicAdd, double, old + v)
PORTER_ATOMIC_RMW(atomicSub, float, old - v)
PORTER_ATOMIC_RMW(atomicExch, float, v)
PORTER_ATOMIC_RMW(atomicExch, double, v)
PORTER_ATOMIC_RMW(atomicMin, float, fminf(old, v))
PORTER_ATOMIC_RMW(atomicMax, float, fmaxf(old, v))
PORTER_ATOMIC_RMW(atomicMin, double, fmin(old, v))
PORTER_ATOMIC_RMW(atomicMax, double, fmax(old, v))
PORTER_ATOMIC_RMW(atomicInc, unsigned int, old >= v ? 0u : old + 1u)
PORTER_ATOMIC_RMW(atomicDec, unsigned int, (old == 0u || old > v) ? v : old - 1u)
static inline unsigned short atomicCAS(unsigned short* p, unsigned short cmp, unsigned short v) {
    unsigned short old = *p;
    if (old == cmp) *p = v;
    return old;
}
// HIP's floating-point spellings.
static inline float unsafeAtomicAdd(float* p, float v) { return atomicAdd(p, v); }
static inline double unsafeAtomicAdd(double* p, double v) { return atomicAdd(p, v); }
static inline float safeAtomicAdd(float* p, float v) { return atomicAdd(p, v); }
static inline double safeAtomicAdd(double* p, double v) { return atomicAdd(p, v); }

// --------------------------------------------------------------------------- math

// min and max of every type: porter_cuda_types.h (host code calls them too)
static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
// The fast-math intrinsics are the precise functions here.  Macros, not functions: glibc's math.h
// declares (but does not export for linking) functions of these names.
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(x, y) powf(x, y)
#define __sincosf(x, s, c) sincosf(x, s, c)
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
// Explicitly rounded arithmetic (_rn nearest even, _rz toward zero, _rd down, _ru up): the operation runs
// under that rounding mode of the host FPU.  Operands and result pass through volatile locals, so the
// compiler neither folds the operation at compile time nor moves it across the mode switch.
namespace porter_emu __attribute__((visibility("hidden"))) {
template <class R, class F>
inline R rounded(int mode, F op) {
    int old = fegetround();
    fesetround(mode);
    volatile R r = op();
    fesetround(old);
    return r;
}
}  // namespace porter_emu
#define PORTER_RND_MODES(X) X(rz, FE_TOWARDZERO) X(rd, FE_DOWNWARD) X(ru, FE_UPWARD)
#define PORTER_RND_ARITH(SUF, MODE)                                                                       \
    static inline float __fadd_##SUF(float a, float b) {                                                  \
        volatile float x = a, y = b; return porter_emu::rounded<float>(MODE, [&] { return x + y; }); }     \
    static inline float __fsub_##SUF(float a, float b) {                                                  \
        volatile float x = a, y = b; return porter_emu::rounded<float>(MODE, [&] { return x - y; }); }     \
    static inline float __fmul_##SUF(float a, float b) {                                                  \
        volatile float x = a, y = b; return porter_emu::rounded<float>(MODE, [&] { return x * y; }); }     \
    static inline float __fdiv_##SUF(float a, float b) {                                                  \
        volatile float x = a, y = b; return porter_emu::rounded<float>(MODE, [&] { return x / y; }); }     \
    static inline float __frcp_##SUF(float a) {                                                           \
        volatile float x = a; return porter_emu::rounded<float>(MODE, [&] { return 1.0f / x; }); }         \
    static inline float __fsqrt_##SUF(float a) {                                                          \
        volatile float x = a; return porter_emu::rounded<float>(MODE, [&] { return sqrtf(x); }); }         \
    static inline float __fmaf_##SUF(float a, float b, float c) {                                         \
        volatile float x = a, y = b, z = c;                                                               \
        return porter_emu::rounded<float>(MODE, [&] { return fmaf(x, y, z); }); }                          \
    static inline float __fmaf_ieee_##SUF(float a, float b, float c) { return __fmaf_##SUF(a, b, c); }   \
    static inline double __dadd_##SUF(double a, double b) {                                               \
        volatile double x = a, y = b; return porter_emu::rounded<double>(MODE, [&] { return x + y; }); }   \
    static inline double __dsub_##SUF(double a, double b) {                                               \
        volatile double x = a, y = b; return porter_emu::rounded<double>(MODE, [&] { return x - y; }); }   \
    static inline double __dmul_##SUF(double a, double b) {                                               \
        volatile double x = a, y = b; return porter_emu::rounded<double>(MODE, [&] { return x * y; }); }   \
    static inline double __ddiv_##SUF(double a, double b) {                                               \
        volatile double x = a, y = b; return porter_emu::rounded<double>(MODE, [&] { return x / y; }); }   \
    static inline double __drcp_##SUF(double a) {                                                         \
        volatile double x = a; return porter_emu::rounded<double>(MODE, [&] { return 1.0 / x; }); }        \
    static inline double __dsqrt_##SUF(double a) {                                                        \
        volatile double x = a; return porter_emu::rounded<double>(MODE, [&] { return sqrt(x); }); }        \
    static inline double __fma_##SUF(double a, double b, double c) {                                      \
        volatile double x = a, y = b, z = c;                                                              \
        return porter_emu::rounded<double>(MODE, [&] { return fma(x, y, z); }); }                          \
    static inline float __int2float_##SUF(int a) {                                                        \
        volatile int x = a; return porter_emu::rounded<float>(MODE, [&] { return (float)x; }); }           \
    static inline float __uint2float_##SUF(unsigned a) {                                                  \
        volatile unsigned x = a; return porter_emu::rounded<float>(MODE, [&] { return (float)x; }); }      \
    static inline float __ll2float_##SUF(long long a) {                                                   \
        volatile long long x = a; return porter_emu::rounded<float>(MODE, [&] { return (float)x; }); }     \
    static inline float __ull2float_##SUF(unsigned long long a) {                                         \
        volatile unsigned long long x = a; return porter_emu::rounded<float>(MODE, [&] { return (float)x; }); } \
    static inline double __ll2double_##SUF(long long a) {                                                 \
        volatile long long x = a; return porter_emu::rounded<double>(MODE, [&] { return (double)x; }); }   \
    static inline double __ull2double_##SUF(unsigned long long a) {                                       \
        volatile unsigned long long x = a;                                                                \
        return porter_emu::rounded<double>(MODE, [&] { return (double)x; }); }                             \
    static inline float __double2float_##SUF(double a) {                                                  \
        volatile double x = a; return porter_emu::rounded<float>(MODE, [&] { return (float)x; }); }
PORTER_RND_MODES(PORTER_RND_ARITH)
// To nearest even: the FPU's own mode, no switch.
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fmaf_ieee_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline float __int2float_rn(int a) { return (float)a; }
static inline float __uint2float_rn(unsigned a) { return (float)a; }
static inline float __ll2float_rn(long long a) { return (float)a; }
static inline float __ull2float_rn(unsigned long long a) { return (float)a; }
static inline double __ll2double_rn(long long a) { return (double)a; }
static inline double __ull2double_rn(unsigned long long a) { return (double)a; }
static inline float __double2float_rn(double a) { return (float)a; }
static inline float __frsqrt_rn(float a) { return __frcp_rn(__fsqrt_rn(a)); }
// Norms: summed in double (float) or scaled by the largest magnitude (double), so no square overflows.
namespace porter_emu __attribute__((visibility("hidden"))) {
inline double scaled_norm(int n, const double* a) {
    double big = 0;
    for (int i = 0; i < n; ++i) big = fmax(big, fabs(a[i]));
    if (big == 0 || isinf(big)) return big;
    double s = 0;
    for (int i = 0; i < n; ++i) s += (a[i] / big) * (a[i] / big);
    return big * sqrt(s);
}
// sin(pi x) and cos(pi x) with x reduced exactly (fmod by 2), so whole and half multiples are exact.
inline double sinpi_d(double x) {
    if (!isfinite(x)) return x - x;
    double r = fmod(x, 2.0), ar = fabs(r), v;
    if (r == 0) return copysign(0.0, x);
    if (ar <= 0.25) v = sin(M_PI * ar);
    else if (ar <= 0.75) v = cos(M_PI * (ar - 0.5));
    else if (ar <= 1.25) v = sin(M_PI * (1.0 - ar));
    else if (ar <= 1.75) v = -cos(M_PI * (ar - 1.5));
    else v = -sin(M_PI * (2.0 - ar));
    return r < 0 ? -v : v;
}
inline double cospi_d(double x) {
    if (!isfinite(x)) return x - x;
    double ar = fmod(fabs(x), 2.0), v;
    if (ar <= 0.25) v = cos(M_PI * ar);
    else if (ar <= 0.75) v = -sin(M_PI * (ar - 0.5));
    else if (ar <= 1.25) v = -cos(M_PI * (1.0 - ar));
    else if (ar <= 1.75) v = sin(M_PI * (ar - 1.5));
    else v = cos(M_PI * (2.0 - ar));
    return v + 0.0;  // cospi(n + 1/2) is +0
}
// erfc(t) = y solved by Newton's method on log erfc (convex, so it converges from sqrt(-log y)).
inline double erfcinv_d(double y) {
    if (y != y || y < 0 || y > 2) return NAN;
    if (y == 0) return INFINITY;
    if (y == 2) return -INFINITY;
    if (y > 1) return -erfcinv_d(2.0 - y);
    double t = y > 0.3 ? (1.0 - y) * 0.886226925452758 : sqrt(-log(y)) * 0.9;
    for (int i = 0; i < 100; ++i) {
        double e = erfc(t);
        if (e == 0) break;
        double step = (log(e) - log(y)) / (-1.1283791670955126 * exp(-t * t) / e);
        t -= step;
        if (fabs(step) <= 1e-16 * fabs(t) + 1e-300) break;
    }
    return t;
}
inline double erfinv_d(double x) {
    if (x != x || x < -1 || x > 1) return NAN;
    if (fabs(x) >= 0.5) return copysign(erfcinv_d(1.0 - fabs(x)), x);  // 1 - |x| is exact here
    double t = x * 0.886226925452758;  // erf'(0) = 2/sqrt(pi)
    for (int i = 0; i < 100; ++i) {
        double step = (erf(t) - x) / (1.1283791670955126 * exp(-t * t));
        t -= step;
        if (fabs(step) <= 1e-17 * fabs(t) + 1e-300) break;
    }
    return t;
}
inline double erfcx_d(double x) {
    if (x < 26.0) {  // exp(x^2) with x^2 split exactly into hi + lo
        double hi = x * x, lo = fma(x, x, -hi);
        return exp(hi) * (1.0 + lo) * erfc(x);
    }
    double r = 1.0 / (x * x);  // the asymptotic series 1/(x sqrt(pi)) (1 - 1/2x^2 + 3/4x^4 - ...)
    return 0.5641895835477563 / x * (1 - r * (0.5 - r * (0.75 - r * (1.875 - r * (6.5625 - r * 29.53125)))));
}
inline double bessel_i(int order, double x) {  // I0, I1: the power series (positive terms, no cancellation)
    if (order && x < 0) return -bessel_i(order, -x);
    double q = x * x * 0.25, term = order ? x * 0.5 : 1.0, sum = term;
    for (int k = 1; k < 2000 && isfinite(sum); ++k) {
        term *= q / ((double)k * (double)(k + order));
        sum += term;
        if (term <= sum * 1e-17) break;
    }
    return sum;
}
}  // namespace porter_emu
static inline float normf(int n, const float* a) { double s = 0; for (int i = 0; i < n; ++i) s += (double)a[i] * a[i]; return (float)sqrt(s); }
static inline float rnormf(int n, const float* a) { double s = 0; for (int i = 0; i < n; ++i) s += (double)a[i] * a[i]; return (float)(1.0 / sqrt(s)); }
static inline float norm3df(float a, float b, float c) { return (float)sqrt((double)a * a + (double)b * b + (double)c * c); }
static inline float rnorm3df(float a, float b, float c) { return (float)(1.0 / sqrt((double)a * a + (double)b * b + (double)c * c)); }
static inline float norm4df(float a, float b, float c, float d) {
    return (float)sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d);
}
static inline float rnorm4df(float a, float b, float c, float d) {
    return (float)(1.0 / sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d));
}
static inline float rhypotf(float a, float b) { return (float)(1.0 / sqrt((double)a * a + (double)b * b)); }
static inline double norm(int n, const double* a) { return porter_emu::scaled_norm(n, a); }
static inline double rnorm(int n, const double* a) { return 1.0 / porter_emu::scaled_norm(n, a); }
static inline double norm3d(double a, double b, double c) { double v[3] = {a, b, c}; return porter_emu::scaled_norm(3, v); }
static inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
static inline double norm4d(double a, double b, double c, double d) {
    double v[4] = {a, b, c, d};
    return porter_emu::scaled_norm(4, v);
}
static inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
static inline double rhypot(double a, double b) { return 1.0 / hypot(a, b); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline float sinpif(float x) { return (float)porter_emu::sinpi_d(x); }
static inline float cospif(float x) { return (float)porter_emu::cospi_d(x); }
static inline double sinpi(double x) { return porter_emu::sinpi_d(x); }
static inline double cospi(double x) { return porter_emu::cospi_d(x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
static inline float erfinvf(float x) { return (float)porter_emu::erfinv_d(x); }
static inline double erfinv(double x) { return porter_emu::erfinv_d(x); }
static inline float erfcinvf(float x) { return (float)porter_emu::erfcinv_d(x); }
static inline double erfcinv(double x) { return porter_emu::erfcinv_d(x); }
static inline float normcdff(float x) { return (float)(0.5 * erfc(-(double)x * 0.7071067811865476)); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.7071067811865476); }
static inline float normcdfinvf(float p) { return (float)(-1.4142135623730951 * porter_emu::erfcinv_d(2.0 * p)); }
static inline double normcdfinv(double p) { return -1.4142135623730951 * porter_emu::erfcinv_d(2.0 * p); }
static inline float erfcxf(float x) { return (float)porter_emu::erfcx_d(x); }
static inline double erfcx(double x) { return porter_emu::erfcx_d(x); }
static inline float cyl_bessel_i0f(float x) { return (float)porter_emu::bessel_i(0, fabs((double)x)); }
static inline float cyl_bessel_i1f(float x) { return (float)porter_emu::bessel_i(1, x); }
static inline double cyl_bessel_i0(double x) { return porter_emu::bessel_i(0, fabs(x)); }
static inline double cyl_bessel_i1(double x) { return porter_emu::bessel_i(1, x); }

// Float to integer: rounded as named, then clamped to the integer's range (NaN gives 0), as cvt does.
namespace porter_emu __attribute__((visibility("hidden"))) {
template <class I>
inline I saturate(double v) {  // v already integral (or NaN / infinite)
    if (v != v) return 0;
    if (v <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (v >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)v;
}
template <class I>
inline I saturate_ll(long double v) {  // 64-bit targets: long double holds every value exactly
    if (v != v) return 0;
    if (v <= (long double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    if (v >= (long double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    return (I)v;
}
}  // namespace porter_emu
#define PORTER_F2I(FROM, F, ROUND_RN, ROUND_RZ, ROUND_RD, ROUND_RU)                                          \
    static inline int __##FROM##2int_rn(F x) { return porter_emu::saturate<int>(ROUND_RN(x)); }              \
    static inline int __##FROM##2int_rz(F x) { return porter_emu::saturate<int>(ROUND_RZ(x)); }              \
    static inline int __##FROM##2int_rd(F x) { return porter_emu::saturate<int>(ROUND_RD(x)); }              \
    static inline int __##FROM##2int_ru(F x) { return porter_emu::saturate<int>(ROUND_RU(x)); }              \
    static inline unsigned __##FROM##2uint_rn(F x) { return porter_emu::saturate<unsigned>(ROUND_RN(x)); }   \
    static inline unsigned __##FROM##2uint_rz(F x) { return porter_emu::saturate<unsigned>(ROUND_RZ(x)); }   \
    static inline unsigned __##FROM##2uint_rd(F x) { return porter_emu::saturate<unsigned>(ROUND_RD(x)); }   \
    static inline unsigned __##FROM##2uint_ru(F x) { return porter_emu::saturate<unsigned>(ROUND_RU(x)); }   \
    static inline long long __##FROM##2ll_rn(F x) { return porter_emu::saturate_ll<long long>(ROUND_RN(x)); } \
    static inline long long __##FROM##2ll_rz(F x) { return porter_emu::saturate_ll<long long>(ROUND_RZ(x)); } \
    static inline long long __##FROM##2ll_rd(F x) { return porter_emu::saturate_ll<long long>(ROUND_RD(x)); } \
    static inline long long __##FROM##2ll_ru(F x) { return porter_emu::saturate_ll<long long>(ROUND_RU(x)); } \
    static inline unsigned long long __##FROM##2ull_rn(F x) {                                                 \
        return porter_emu::saturate_ll<unsigned long long>(ROUND_RN(x)); }                                    \
    static inline unsigned long long __##FROM##2ull_rz(F x) {                                                 \
        return porter_emu::saturate_ll<unsigned long long>(ROUND_RZ(x)); }                                    \
    static inline unsigned long long __##FROM##2ull_rd(F x) {                                                 \
        return porter_emu::saturate_ll<unsigned long long>(ROUND_RD(x)); }                                    \
    static inline unsigned long long __##FROM##2ull_ru(F x) {                                                 \
        return porter_emu::saturate_ll<unsigned long long>(ROUND_RU(x)); }
PORTER_F2I(float, float, rintf, truncf, floorf, ceilf)  // rintf: the default mode, to nearest even
PORTER_F2I(double, double, rint, trunc, floor, ceil)
static inline double __int2double_rn(int x) { return (double)x; }
static inline double __uint2double_rn(unsigned x) { return (double)x; }
static inline int __float_as_int(float x) { int r; memcpy(&r, &x, 4); return r; }
static inline unsigned __float_as_uint(float x) { unsigned r; memcpy(&r, &x, 4); return r; }
static inline float __int_as_float(int x) { float r; memcpy(&r, &x, 4); return r; }
static inline float __uint_as_float(unsigned x) { float r; memcpy(&r, &x, 4); return r; }
static inline long long __double_as_longlong(double x) { long long r; memcpy(&r, &x, 8); return r; }
static inline double __longlong_as_double(long long x) { double r; memcpy(&r, &x, 8); return r; }
static inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
static inline int __double2loint(double x) { return (int)__double_as_longlong(x); }
static inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

// Counted here, not with __builtin_popcount: without -mpopcnt that is a call into libgcc, which an untrusted
// kernel's library may not import.
static inline int __popcll(unsigned long long x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}
static inline int __popc(unsigned x) { return __popcll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
static inline unsigned long long __brevll(unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i) r |= ((x >> i) & 1ull) << (63 - i);
    return r;
}
static inline int __mul24(int a, int b) { return (int)(((long long)(a << 8 >> 8)) * (long long)(b << 8 >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xFFFFFFu) * (b & 0xFFFFFFu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * (long long)b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned __uhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
static inline unsigned __urhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
static inline unsigned __sad(int a, int b, unsigned c) {
    return (a > b ? (unsigned)a - (unsigned)b : (unsigned)b - (unsigned)a) + c;  // no signed overflow
}
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return (a > b ? a - b : b - a) + c; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
}
// Dot products of packed 8- and 16-bit lanes, accumulated in 32 bits (wrapping, as the hardware does).
static inline int __dp4a(int a, int b, int c) {
    unsigned acc = (unsigned)c;
    for (int i = 0; i < 4; ++i) acc += (unsigned)((int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i)));
    return (int)acc;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
    for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xFFu) * ((b >> (8 * i)) & 0xFFu);
    return c;
}
static inline int __dp2a_lo(int a, int b, int c) {  // a: two 16-bit lanes, b: the low two bytes
    unsigned acc = (unsigned)c;
    for (int i = 0; i < 2; ++i) acc += (unsigned)((int)(short)(a >> (16 * i)) * (int)(signed char)(b >> (8 * i)));
    return (int)acc;
}
static inline int __dp2a_hi(int a, int b, int c) {  // a: two 16-bit lanes, b: the high two bytes
    unsigned acc = (unsigned)c;
    for (int i = 0; i < 2; ++i)
        acc += (unsigned)((int)(short)(a >> (16 * i)) * (int)(signed char)(b >> (8 * (i + 2))));
    return (int)acc;
}
static inline unsigned __dp2a_lo(unsigned a, unsigned b, unsigned c) {
    for (int i = 0; i < 2; ++i) c += ((a >> (16 * i)) & 0xFFFFu) * ((b >> (8 * i)) & 0xFFu);
    return c;
}
static inline unsigned __dp2a_hi(unsigned a, unsigned b, unsigned c) {
    for (int i = 0; i < 2; ++i) c += ((a >> (16 * i)) & 0xFFFFu) * ((b >> (8 * (i + 2))) & 0xFFu);
    return c;
}
// The position of the n-th set bit of mask counting from base (up for n > 0, down for n < 0), or
// 0xFFFFFFFF when there is none.
static inline unsigned __fns(unsigned mask, unsigned base, int offset) {
    if (base > 31) return 0xFFFFFFFFu;
    if (offset == 0) return ((mask >> base) & 1u) ? base : 0xFFFFFFFFu;
    int step = offset > 0 ? 1 : -1, left = offset > 0 ? offset : -offset;
    for (int pos = (int)base; pos >= 0 && pos < 32; pos += step)
        if (((mask >> pos) & 1u) && --left == 0) return (unsigned)pos;
    return 0xFFFFFFFFu;
}
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)((v << (sh & 31)) >> 32);
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (sh & 31));
}

static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned sh) {  // shift clamped to 32
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)((v << (sh > 32 ? 32 : sh)) >> 32);
}
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (sh > 32 ? 32 : sh));
}

// SIMD video intrinsics: two 16-bit (…2) or four 8-bit (…4) lanes of a 32-bit word, each lane computed
// on its own (s: signed lanes, u: unsigned; ss / us: saturated to the lane's signed / unsigned range).
namespace porter_emu __attribute__((visibility("hidden"))) {
template <int Bits, class F>
inline unsigned lanes(unsigned a, unsigned b, F f) {
    unsigned r = 0, mask = (1u << Bits) - 1u;
    for (int i = 0; i < 32; i += Bits) {
        long long ua = (a >> i) & mask, ub = (b >> i) & mask;
        long long sa = ua >= (1ll << (Bits - 1)) ? ua - (1ll << Bits) : ua;
        long long sb = ub >= (1ll << (Bits - 1)) ? ub - (1ll << Bits) : ub;
        r |= ((unsigned)f(ua, ub, sa, sb) & mask) << i;
    }
    return r;
}
template <int Bits, class F>
inline unsigned lanes_sum(unsigned a, unsigned b, F f) {
    unsigned r = 0, mask = (1u << Bits) - 1u;
    for (int i = 0; i < 32; i += Bits) {
        long long ua = (a >> i) & mask, ub = (b >> i) & mask;
        long long sa = ua >= (1ll << (Bits - 1)) ? ua - (1ll << Bits) : ua;
        long long sb = ub >= (1ll << (Bits - 1)) ? ub - (1ll << Bits) : ub;
        r += (unsigned)f(ua, ub, sa, sb);
    }
    return r;
}
template <int Bits>
inline long long sat_s(long long v) {
    long long hi = (1ll << (Bits - 1)) - 1, lo = -(1ll << (Bits - 1));
    return v > hi ? hi : (v < lo ? lo : v);
}
template <int Bits>
inline long long sat_u(long long v) {
    long long hi = (1ll << Bits) - 1;
    return v > hi ? hi : (v < 0 ? 0 : v);
}
inline long long avg_s(long long s) { return s < 0 ? s >> 1 : (s + 1) >> 1; }  // rounded away from zero
}  // namespace porter_emu
#define PORTER_SIMD(N, BITS)                                                                                  \
    static inline unsigned __vadd##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return ua + ub; }); } \
    static inline unsigned __vsub##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return ua - ub; }); } \
    static inline unsigned __vaddss##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto, auto, auto sa, auto sb) { return porter_emu::sat_s<BITS>(sa + sb); }); } \
    static inline unsigned __vsubss##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto, auto, auto sa, auto sb) { return porter_emu::sat_s<BITS>(sa - sb); }); } \
    static inline unsigned __vaddus##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return porter_emu::sat_u<BITS>(ua + ub); }); } \
    static inline unsigned __vsubus##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return porter_emu::sat_u<BITS>(ua - ub); }); } \
    static inline unsigned __vabsdiffs##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto, auto, auto sa, auto sb) { return sa > sb ? sa - sb : sb - sa; }); } \
    static inline unsigned __vabsdiffu##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return ua > ub ? ua - ub : ub - ua; }); } \
    static inline unsigned __vavgs##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto, auto, auto sa, auto sb) { return porter_emu::avg_s(sa + sb); }); } \
    static inline unsigned __vavgu##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return (ua + ub + 1) >> 1; }); } \
    static inline unsigned __vhaddu##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return (ua + ub) >> 1; }); } \
    static inline unsigned __vmaxs##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto, auto, auto sa, auto sb) { return sa > sb ? sa : sb; }); } \
    static inline unsigned __vmins##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto, auto, auto sa, auto sb) { return sa < sb ? sa : sb; }); } \
    static inline unsigned __vmaxu##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return ua > ub ? ua : ub; }); } \
    static inline unsigned __vminu##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return ua < ub ? ua : ub; }); } \
    static inline unsigned __vsads##N(unsigned a, unsigned b) { return porter_emu::lanes_sum<BITS>(a, b, [](auto, auto, auto sa, auto sb) { return sa > sb ? sa - sb : sb - sa; }); } \
    static inline unsigned __vsadu##N(unsigned a, unsigned b) { return porter_emu::lanes_sum<BITS>(a, b, [](auto ua, auto ub, auto, auto) { return ua > ub ? ua - ub : ub - ua; }); } \
    static inline unsigned __vabs##N(unsigned a) { return porter_emu::lanes<BITS>(a, 0u, [](auto, auto, auto sa, auto) { return sa < 0 ? -sa : sa; }); } \
    static inline unsigned __vabsss##N(unsigned a) { return porter_emu::lanes<BITS>(a, 0u, [](auto, auto, auto sa, auto) { return porter_emu::sat_s<BITS>(sa < 0 ? -sa : sa); }); } \
    static inline unsigned __vneg##N(unsigned a) { return porter_emu::lanes<BITS>(a, 0u, [](auto, auto, auto sa, auto) { return -sa; }); } \
    static inline unsigned __vnegss##N(unsigned a) { return porter_emu::lanes<BITS>(a, 0u, [](auto, auto, auto sa, auto) { return porter_emu::sat_s<BITS>(-sa); }); }
#define PORTER_SIMD_CMP(N, BITS, NAME, A, B, OP)                                                              \
    static inline unsigned __vcmp##NAME##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto sa, auto sb) { (void)ua; (void)ub; (void)sa; (void)sb; return (A OP B) ? -1ll : 0ll; }); } \
    static inline unsigned __vset##NAME##N(unsigned a, unsigned b) { return porter_emu::lanes<BITS>(a, b, [](auto ua, auto ub, auto sa, auto sb) { (void)ua; (void)ub; (void)sa; (void)sb; return (A OP B) ? 1ll : 0ll; }); }
#define PORTER_SIMD_CMPS(N, BITS)                                                                             \
    PORTER_SIMD_CMP(N, BITS, eq, ua, ub, ==) PORTER_SIMD_CMP(N, BITS, ne, ua, ub, !=)                         \
    PORTER_SIMD_CMP(N, BITS, ges, sa, sb, >=) PORTER_SIMD_CMP(N, BITS, geu, ua, ub, >=)                       \
    PORTER_SIMD_CMP(N, BITS, gts, sa, sb, >) PORTER_SIMD_CMP(N, BITS, gtu, ua, ub, >)                         \
    PORTER_SIMD_CMP(N, BITS, les, sa, sb, <=) PORTER_SIMD_CMP(N, BITS, leu, ua, ub, <=)                       \
    PORTER_SIMD_CMP(N, BITS, lts, sa, sb, <) PORTER_SIMD_CMP(N, BITS, ltu, ua, ub, <)
PORTER_SIMD(2, 16)
PORTER_SIMD(4, 8)
PORTER_SIMD_CMPS(2, 16)
PORTER_SIMD_CMPS(4, 8)

// Cache-hinted loads and stores: plain memory accesses here.
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline T __ldcv(const T* p) { return *p; }
template <class T> static inline void __stwb(T* p, T v) { *p = v; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }
#define __builtin_nontemporal_load(p) (*(p))
#define __builtin_nontemporal_store(v, p) (*(p) = (v))

// --------------------------------------------------------------------------- host-side names
// A kernel's build compiles the headers its file includes as they are, host code too (a timer calling
// hipEventCreate): the host runtime API is declared for it, and fails the launch when device code calls
// it (porter_host_decls.h).  A whole program gets the full runtime instead: porter_runtime.h.
#if !defined(PORTER_PROGRAM)
#include "porter_host_decls.h"
#endif

// --------------------------------------------------------------------------- launch

namespace porter_emu __attribute__((visibility("hidden"))) {

template <class... A, size_t... I>
inline void invoke(void (*k)(A...), void** a, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(a[I])...);
}

template <class... A>
struct Call {
    void (*kernel)(A...);
    void** args;
    static void run(void* self) {
        Call* c = static_cast<Call*>(self);
        invoke(c->kernel, c->args, std::index_sequence_for<A...>{});
    }
};

template <class T>
inline void describe(char* out) {
    // p: pointer, f: floating point, i: signed integer, u: unsigned integer, s: anything else.
    char kind = std::is_pointer<T>::value ? 'p'
                : std::is_floating_point<T>::value ? 'f'
                : (std::is_integral<T>::value || std::is_enum<T>::value) ? (std::is_signed<T>::value ? 'i' : 'u')
                : 's';
    snprintf(out, 32, "%c%zu", kind, sizeof(T));
}

template <class... A>
inline const char* signature(void (*)(A...)) {
    static char buf[32 * (sizeof...(A) + 1)];
    buf[0] = 0;
    char item[32];
    size_t pos = 0;
    (void)pos;
    ((describe<std::remove_cv_t<A>>(item), pos += (size_t)snprintf(buf + pos, sizeof buf - pos, "%s%s", pos ? "," : "", item)), ...);
    return buf;
}

inline void run_block(unsigned bx, unsigned by, unsigned bz) {
    int n = (int)(blockDim.x * blockDim.y * blockDim.z);
    blockIdx = uint3{bx, by, bz};
    g_block.index = blockIdx;
    g_block_epoch += 1;
    for (SharedReg* r = g_shared_globals; r; r = r->next) memset(r->addr, 0xFF, r->bytes);
    memset(g_dyn_smem, 0xFF, g_launch.shared_bytes);
    g_block.nthreads = n;
    g_block.live = n;
    g_block.bar_arrived = 0;
    g_block.bar_acc = 0;
    g_block.ngroups = 0;
    int nwarps = (n + PORTER_WARP_SIZE - 1) / PORTER_WARP_SIZE;
    for (int w = 0; w < nwarps; ++w) {
        int lanes = n - w * PORTER_WARP_SIZE;
        if (lanes > PORTER_WARP_SIZE) lanes = PORTER_WARP_SIZE;
        g_warps[w].live = lanes == 64 ? ~0ull : ((1ull << lanes) - 1ull);
        g_warps[w].exists = g_warps[w].live;
        g_warps[w].arrived = 0;
    }
    for (int i = 0; i < n; ++i) {
        Thread& t = g_threads[i];
        t.tid = uint3{(unsigned)i % blockDim.x, ((unsigned)i / blockDim.x) % blockDim.y,
                      (unsigned)i / (blockDim.x * blockDim.y)};
        t.state = READY;
        t.lane = i % PORTER_WARP_SIZE;
        t.warp = i / PORTER_WARP_SIZE;
        t.stack = g_stacks + (size_t)i * PORTER_STACK_BYTES;
        ctx_init(t.ctx, (char*)t.stack + 4096, PORTER_STACK_BYTES - 4096, trampoline);
    }
    static int order[PORTER_MAX_BLOCK];
    for (;;) {
        int count = 0;
        for (int i = 0; i < n; ++i)
            if (g_threads[i].state == READY) order[count++] = i;
        if (count == 0) break;
        shuffle(order, count);
        for (int k = 0; k < count; ++k) {
            Thread& t = g_threads[order[k]];
            if (t.state != READY) continue;
            g_cur = &t;
            threadIdx = t.tid;
#if defined(PORTER_ASAN)
            void* fake = nullptr;
            __sanitizer_start_switch_fiber(&fake, t.stack, PORTER_STACK_BYTES);
#endif
            ctx_switch(g_sched, t.ctx);
#if defined(PORTER_ASAN)
            __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
            g_cur = nullptr;
            if (g_launch.failed) return;
        }
    }
    if (g_block.live > 0) {
        int at_bar = 0, at_warp = 0, at_group = 0;
        for (int i = 0; i < n; ++i) {
            at_bar += g_threads[i].state == WAIT_BAR;
            at_warp += g_threads[i].state == WAIT_WARP;
            at_group += g_threads[i].state == WAIT_GROUP;
        }
        char groups[64] = "";
        if (at_group) snprintf(groups, sizeof groups, "%d at a cooperative-groups tile barrier, ", at_group);
        char msg[320];
        snprintf(msg, sizeof msg,
                 "deadlock in block (%u,%u,%u): %d threads wait at __syncthreads, %d at a warp collective, "
                 "%s%d exited (a barrier or warp operation is not reached by every thread it waits for)",
                 bx, by, bz, at_bar, at_warp, groups, n - g_block.live);
        fail(msg);
    }
}

inline unsigned long long gcd(unsigned long long a, unsigned long long b) {
    while (b) {
        unsigned long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// Run `body(ctx)` as every thread of a grid; 0, or 1 with g_launch.error set.
inline int launch_body(void (*body)(void*), void* ctx, const unsigned* grid, const unsigned* block,
                       unsigned long long shared_bytes, unsigned long long seed) {
    g_launch.failed = 0;
    g_launch.error[0] = 0;
    g_undefined.count = 0;
    g_undefined.first[0] = 0;
    if (shared_bytes > PORTER_MAX_DYN_SMEM) {
        fail("dynamic shared memory exceeds the emulator's limit");
        return 1;
    }
    unsigned long long n = (unsigned long long)block[0] * block[1] * block[2];
    if (n == 0 || n > PORTER_MAX_BLOCK) {
        fail("block size must be between 1 and 1024 threads");
        return 1;
    }
    if (!ensure_stacks((size_t)n)) {
        fail("could not allocate coroutine stacks");
        return 1;
    }
    g_launch.body = body;
    g_launch.body_ctx = ctx;
    g_launch.shared_bytes = shared_bytes;
    memset(g_dyn_smem, 0xFF, sizeof g_dyn_smem);
    g_launch.rng = seed * 0x2545F4914F6CDD1Dull + 0x9E3779B97F4A7C15ull;
    blockDim = dim3(block[0], block[1], block[2]);
    gridDim = dim3(grid[0], grid[1], grid[2]);
    unsigned long long nblocks = (unsigned long long)grid[0] * grid[1] * grid[2];
    // Blocks run one after another, in a seeded random order.
    unsigned long long stride = 1, start = 0;
    if (nblocks > 1) {
        start = next_random() % nblocks;
        do {
            stride = next_random() % nblocks;
        } while (stride == 0 || gcd(stride, nblocks) != 1);
    }
    for (unsigned long long k = 0; k < nblocks; ++k) {
        unsigned long long b = (start + k * stride) % nblocks;
        run_block((unsigned)(b % grid[0]), (unsigned)((b / grid[0]) % grid[1]),
                  (unsigned)(b / ((unsigned long long)grid[0] * grid[1])));
        if (g_launch.failed) return 1;
    }
    return 0;
}

template <class... A>
inline int launch(void (*kernel)(A...), void** args, int nargs, const unsigned* grid, const unsigned* block,
                  unsigned long long shared_bytes, unsigned long long seed) {
    g_launch.failed = 0;
    g_launch.error[0] = 0;
    if (nargs != (int)sizeof...(A)) {
        char msg[128];
        snprintf(msg, sizeof msg, "kernel takes %d arguments, %d given", (int)sizeof...(A), nargs);
        fail(msg);
        return 1;
    }
    Call<A...> call{kernel, args};
    return launch_body(&Call<A...>::run, &call, grid, block, shared_bytes, seed);
}

}  // namespace porter_emu

#endif  // PORTER_EMU_H
