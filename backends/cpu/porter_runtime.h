// porter_runtime.h -- the CUDA / HIP runtime of a whole program built for the CPU (porter's own header).
//
// A program's host code and kernels are compiled together by g++ with this header force-included
// (backends/cpu/program.py): its kernels run through porter_emu.h (every thread a coroutine, blocks
// one after another, seeded random thread order), and the runtime API below works on the process's
// own memory.  Device memory is host memory porter's allocator tracks (every allocation is known:
// base and size), copies of every kind are memcpy, streams are serial (every call completes before it
// returns), events read a monotonic clock.  The device it reports is the virtual device of
// runtime.toml (porter_runtime_data.h, generated from it).  Kernel launches are rewritten by porter on
// the syntax tree into porter_emu::launch_kernel / launch_deduced calls; a launch failure (a deadlock,
// a bad configuration) is printed on stderr and becomes the sticky error cudaGetLastError returns.
// HIP spellings are aliases generated from porter's CUDA->HIP table (porter_hip_names.h).
#ifndef PORTER_RUNTIME_H
#define PORTER_RUNTIME_H

#ifndef PORTER_PROGRAM
#define PORTER_PROGRAM 1
#endif
#include "porter_emu.h"

#include <time.h>

#include <map>
#include <mutex>
#include <tuple>

#include "porter_runtime_data.h"
#include "porter_runtime_c.h"  // cudaMemcpyKind and the list of C entry points

#include "porter_runtime_types.h"

#include "porter_capture.h"  // launch capture (PORTER_CAPTURE_DIR) and the rewrite's launch interface

namespace porter_emu __attribute__((visibility("hidden"))) {

inline std::map<uintptr_t, size_t>& allocations() {
    static std::map<uintptr_t, size_t> table;  // base -> bytes: every device, managed and pinned buffer
    return table;
}
inline std::recursive_mutex& runtime_lock() {
    static std::recursive_mutex m;
    return m;
}
inline cudaError_t g_last_error = cudaSuccess;
inline cudaError_t g_sticky_error = cudaSuccess;
inline unsigned long long g_launches = 0;
inline int g_device = 0;

inline cudaError_t note(cudaError_t e) {
    if (e != cudaSuccess) g_last_error = e;
    return e;
}
inline cudaError_t sticky_or(cudaError_t e) { return g_sticky_error != cudaSuccess ? g_sticky_error : e; }

inline cudaError_t allocate(void** out, size_t bytes) {
    if (out == nullptr) return note(cudaErrorInvalidValue);
    size_t rounded = (bytes + 255) & ~(size_t)255;
    void* p = aligned_alloc(256, rounded ? rounded : 256);
    if (p == nullptr) {
        *out = nullptr;
        return note(cudaErrorMemoryAllocation);
    }
    memset(p, 0, rounded ? rounded : 256);  // fresh device memory reads as zero, as a GPU driver's pages do
    std::lock_guard<std::recursive_mutex> guard(runtime_lock());
    allocations()[(uintptr_t)p] = bytes;
    *out = p;
    return cudaSuccess;
}
inline cudaError_t release(void* p) {
    if (p == nullptr) return cudaSuccess;
    std::lock_guard<std::recursive_mutex> guard(runtime_lock());
    auto it = allocations().find((uintptr_t)p);
    if (it == allocations().end()) return note(cudaErrorInvalidDevicePointer);
    allocations().erase(it);
    free(p);
    return cudaSuccess;
}
// (base, bytes) of the allocation holding p, or (0, 0).
inline std::pair<uintptr_t, size_t> allocation_of(const void* p) {
    std::lock_guard<std::recursive_mutex> guard(runtime_lock());
    auto& t = allocations();
    auto it = t.upper_bound((uintptr_t)p);
    if (it == t.begin()) return {0, 0};
    --it;
    if ((uintptr_t)p < it->first + (it->second ? it->second : 1)) return {it->first, it->second};
    return {0, 0};
}

// PORTER_SCHEDULE=N (N > 0): every launch runs its blocks and threads in another seeded order than it does without
// it (program.py CpuProgramToolchain.reorder_env: the original's second run of a program, so that what its output
// owes to the order of its blocks -- a race between blocks, a value left by whichever block stored last -- varies
// between its two runs and is not compared, as on a GPU, which fixes no order)
inline unsigned long long schedule_salt() {
    static const unsigned long long salt = [] {
        const char* v = getenv("PORTER_SCHEDULE");
        return v ? strtoull(v, nullptr, 10) : 0ull;
    }();
    return salt;
}

inline double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}


inline cudaError_t launch_checked(void (*body)(void*), void* ctx, const Config& c, const char* what) {
    unsigned grid[3] = {c.grid.x, c.grid.y, c.grid.z};
    unsigned block[3] = {c.block.x, c.block.y, c.block.z};
    unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || threads == 0 || threads > PORTER_MAX_BLOCK ||
        block[2] > 64 || grid[1] > 65535 || grid[2] > 65535)
        return note(cudaErrorInvalidConfiguration);
    if (c.shared > PORTER_MAX_DYN_SMEM) return note(cudaErrorInvalidValue);
    if (g_sticky_error != cudaSuccess) return g_sticky_error;
    unsigned long long seed = ++g_launches + schedule_salt() * 0x9E3779B97F4A7C15ull;
    if (launch_body(body, ctx, grid, block, c.shared, seed) != 0) {
        fprintf(stderr, "porter cpu runtime: launch of %s failed: %s\n", what, g_launch.error);
        g_sticky_error = cudaErrorLaunchFailure;
        return note(cudaErrorLaunchFailure);
    }
    return cudaSuccess;
}

}  // namespace porter_emu

namespace porter_emu __attribute__((visibility("hidden"))) {
// what porter_capture.h needs from a runtime: a launch here has finished when it returns, and device
// memory is host memory
inline int capture_sync() { return 0; }
inline bool capture_allowed(const void*) { return true; }
inline const void* capture_bytes(uintptr_t addr, size_t, bool, std::vector<unsigned char>&) {
    return (const void*)addr;
}
inline const char* kernel_mangled_name(const void* fn) { return exported_symbol(fn); }

// A texture reference (porter_emu.h) is captured as a read-only variable whose contents are the memory
// bound to it at the launch (porter's rewrite registers each one at the end of the file declaring it).
struct TextureReg {
    template <class T, int dim, enum cudaTextureReadMode M>
    TextureReg(texture<T, dim, M>& tex, const char* name) {
        for (const Symbol& known : symbols())
            if (known.addr == (const void*)&tex) return;  // a header's texture, registered by each unit
        Symbol y{(const void*)&tex, 0, name, type_name<T>(), dtype_name<T>(), sizeof(T), true};
        y.bound = &tex.porter_ptr;
        y.bound_bytes = &tex.porter_bytes;
        symbols().push_back(y);
    }
};
}  // namespace porter_emu
#define PORTER_REGISTER_TEXTURE(tex) \
    static porter_emu::TextureReg PORTER_SYMBOL_CAT(porter_texture_, __COUNTER__)(tex, #tex)

#define PORTER_DEDUCED_LAUNCH(...) __VA_ARGS__  // the rewrite's lambda calls a deduced kernel directly

namespace porter_emu __attribute__((visibility("hidden"))) {


template <class... P, class... S, size_t... I>
inline void invoke_tuple(void (*k)(P...), std::tuple<S...>& t, std::index_sequence<I...>) {
    k(std::get<I>(t)...);  // each thread gets its own copies of the parameters
}

template <class... P>
struct TupleCall {
    void (*kernel)(P...);
    std::tuple<typename ParamOf<P>::type...>* args;
    static void run(void* self) {
        TupleCall* c = static_cast<TupleCall*>(self);
        std::tuple<typename ParamOf<P>::type...> mine = *c->args;
        invoke_tuple(c->kernel, mine, std::index_sequence_for<P...>{});
    }
};

template <class... P>
inline cudaError_t launch_kernel(void (*kernel)(P...), const Config& c, std::tuple<typename ParamOf<P>::type...> args,
                                 const char* what = "a kernel") {
    TupleCall<P...> call{kernel, &args};
    Capture* cap = capture_begin(what, c.grid, c.block, c.shared, c.stream, args, (const void*)kernel);
    cudaError_t e = launch_checked(&TupleCall<P...>::run, &call, c, what);
    capture_end(cap, (int)e);
    return e;
}

// A launch of a template kernel whose arguments deduce its template parameters: the kernel is
// called through a generic lambda, as a direct call would be.
template <class F, class... A>
struct LambdaCall {
    F* f;
    std::tuple<A...>* args;
    static void run(void* self) {
        LambdaCall* c = static_cast<LambdaCall*>(self);
        std::tuple<A...> mine = *c->args;
        std::apply(*c->f, mine);
    }
};
template <class F, class... A>
inline cudaError_t launch_deduced(const Config& c, F f, const char* what, A&&... a) {
    std::tuple<std::decay_t<A>...> args(std::forward<A>(a)...);
    LambdaCall<F, std::decay_t<A>...> call{&f, &args};
    Capture* cap = capture_begin(what, c.grid, c.block, c.shared, c.stream, args);
    cudaError_t e = launch_checked(&LambdaCall<F, std::decay_t<A>...>::run, &call, c, what);
    capture_end(cap, (int)e);
    return e;
}

inline void fill_properties(cudaDeviceProp* p) {
    memset(p, 0, sizeof *p);
    PORTER_FILL_DEVICE_PROPERTIES(p);
    p->warpSize = PORTER_WARP_SIZE;
}

}  // namespace porter_emu

// --------------------------------------------------------------------------- errors

static inline cudaError_t cudaGetLastError() {
    cudaError_t e = porter_emu::g_last_error;
    porter_emu::g_last_error = porter_emu::g_sticky_error;
    return e;
}
static inline cudaError_t cudaPeekAtLastError() { return porter_emu::g_last_error; }

// --------------------------------------------------------------------------- devices

static inline cudaError_t cudaGetDeviceCount(int* n) {
    if (!n) return porter_emu::note(cudaErrorInvalidValue);
    *n = PORTER_DEVICE_COUNT;
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= PORTER_DEVICE_COUNT) return porter_emu::note(cudaErrorInvalidDevice);
    porter_emu::g_device = d;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDevice(int* d) {
    if (!d) return porter_emu::note(cudaErrorInvalidValue);
    *d = porter_emu::g_device;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
    if (!p) return porter_emu::note(cudaErrorInvalidValue);
    if (d < 0 || d >= PORTER_DEVICE_COUNT) return porter_emu::note(cudaErrorInvalidDevice);
    porter_emu::fill_properties(p);
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
    if (!v) return porter_emu::note(cudaErrorInvalidValue);
    if (d < 0 || d >= PORTER_DEVICE_COUNT) return porter_emu::note(cudaErrorInvalidDevice);
    cudaDeviceProp p;
    porter_emu::fill_properties(&p);
    *v = porter_emu::attribute(&p, a);
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize() { return porter_emu::sticky_or(cudaSuccess); }
static inline cudaError_t cudaThreadSynchronize() { return porter_emu::sticky_or(cudaSuccess); }
static inline cudaError_t cudaDeviceReset() {
    porter_emu::g_sticky_error = cudaSuccess;
    porter_emu::g_last_error = cudaSuccess;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetLimit(size_t* v, cudaLimit l) {
    *v = l == cudaLimitStackSize ? PORTER_STACK_BYTES : (l == cudaLimitPrintfFifoSize ? 1 << 20 : 8 << 20);
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceCanAccessPeer(int* can, int, int) { *can = 0; return cudaSuccess; }
static inline cudaError_t cudaDeviceEnablePeerAccess(int, unsigned) { return porter_emu::note(cudaErrorInvalidDevice); }
static inline cudaError_t cudaDeviceGetStreamPriorityRange(int* lo, int* hi) {
    if (lo) *lo = 0;
    if (hi) *hi = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    cudaDeviceProp p;
    porter_emu::fill_properties(&p);
    size_t used = 0;
    for (auto& kv : porter_emu::allocations()) used += kv.second;
    if (total) *total = p.totalGlobalMem;
    if (free_bytes) *free_bytes = p.totalGlobalMem > used ? p.totalGlobalMem - used : 0;
    return cudaSuccess;
}

// --------------------------------------------------------------------------- memory

template <class T>
static inline cudaError_t cudaMalloc(T** p, size_t bytes) { return porter_emu::allocate((void**)p, bytes); }
template <class T>
static inline cudaError_t cudaMallocManaged(T** p, size_t bytes, unsigned = cudaMemAttachGlobal) {
    return porter_emu::allocate((void**)p, bytes);
}
template <class T>
static inline cudaError_t cudaMallocHost(T** p, size_t bytes) { return porter_emu::allocate((void**)p, bytes); }
template <class T>  // CUDA's C++ overload with flags (and HIP's hipHostMalloc(ptr, size, flags))
static inline cudaError_t cudaMallocHost(T** p, size_t bytes, unsigned) { return porter_emu::allocate((void**)p, bytes); }
template <class T>
static inline cudaError_t cudaHostAlloc(T** p, size_t bytes, unsigned) { return porter_emu::allocate((void**)p, bytes); }
template <class T>
static inline cudaError_t cudaMallocAsync(T** p, size_t bytes, cudaStream_t) { return porter_emu::allocate((void**)p, bytes); }
template <class T>
static inline cudaError_t cudaMallocPitch(T** p, size_t* pitch, size_t width, size_t height) {
    size_t row = (width + 255) & ~(size_t)255;
    if (pitch) *pitch = row;
    return porter_emu::allocate((void**)p, row * height);
}
static inline cudaError_t cudaFree(void* p) { return porter_emu::release(p); }
static inline cudaError_t cudaFreeHost(void* p) { return porter_emu::release(p); }
static inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return porter_emu::release(p); }
template <class T>
static inline cudaError_t cudaHostGetDevicePointer(T** d, void* h, unsigned) {
    *d = (T*)h;
    return cudaSuccess;
}
static inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
    auto found = porter_emu::allocation_of(p);
    a->type = found.first ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    a->device = 0;
    a->devicePointer = (void*)p;
    a->hostPointer = (void*)p;
    return cudaSuccess;
}
template <class... A>
static inline cudaError_t cudaMemPrefetchAsync(const void*, size_t, A...) { return cudaSuccess; }
template <class... A>
static inline cudaError_t cudaMemAdvise(const void*, size_t, A...) { return cudaSuccess; }

static inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind = cudaMemcpyDefault) {
    if ((int)kind < 0 || (int)kind > 4) return porter_emu::note(cudaErrorInvalidMemcpyDirection);
    if (n && (!dst || !src)) return porter_emu::note(cudaErrorInvalidValue);
    if (porter_emu::g_sticky_error != cudaSuccess) return porter_emu::g_sticky_error;
    if (n) memmove(dst, src, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind = cudaMemcpyDefault,
                                          cudaStream_t = 0) {
    return cudaMemcpy(dst, src, n, kind);
}
static inline cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                       size_t height, cudaMemcpyKind kind = cudaMemcpyDefault) {
    if (width > dpitch || width > spitch) return porter_emu::note(cudaErrorInvalidPitchValue);
    for (size_t r = 0; r < height; ++r) {
        cudaError_t e = cudaMemcpy((char*)dst + r * dpitch, (const char*)src + r * spitch, width, kind);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpyPeer(void* dst, int, const void* src, int, size_t n) { return cudaMemcpy(dst, src, n); }
static inline cudaError_t cudaMemset(void* p, int v, size_t n) {
    if (n && !p) return porter_emu::note(cudaErrorInvalidValue);
    if (porter_emu::g_sticky_error != cudaSuccess) return porter_emu::g_sticky_error;
    if (n) memset(p, v, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = 0) { return cudaMemset(p, v, n); }
static inline cudaError_t cudaMemset2D(void* p, size_t pitch, int v, size_t width, size_t height) {
    for (size_t r = 0; r < height; ++r) memset((char*)p + r * pitch, v, width);
    return cudaSuccess;
}
// Symbols (__device__ / __constant__ variables) are the program's own globals here.
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t n, size_t offset = 0,
                                             cudaMemcpyKind = cudaMemcpyHostToDevice) {
    if (offset + n > sizeof(T)) return porter_emu::note(cudaErrorInvalidValue);
    memcpy((char*)&symbol + offset, src, n);
    return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t n, size_t offset = 0,
                                               cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    if (offset + n > sizeof(T)) return porter_emu::note(cudaErrorInvalidValue);
    memcpy(dst, (const char*)&symbol + offset, n);
    return cudaSuccess;
}
template <class P, class T>
static inline cudaError_t cudaGetSymbolAddress(P** p, const T& symbol) {
    *p = (P*)&symbol;
    return cudaSuccess;
}

// Texture references over linear memory (porter_emu.h): binding one records the device pointer and the
// bytes from it that lie in its allocation (the other forms, and unbinding, are porter_runtime_common.h's).
static inline cudaError_t cudaBindTexture(size_t* offset, const textureReference* tex, const void* p,
                                          const cudaChannelFormatDesc* = nullptr, size_t bytes = ~(size_t)0) {
    if (tex == nullptr) return porter_emu::note(cudaErrorInvalidTexture);
    if (offset != nullptr) *offset = 0;
    textureReference* t = const_cast<textureReference*>(tex);
    if (p == nullptr) {
        t->porter_ptr = nullptr;
        t->porter_bytes = 0;
        return cudaSuccess;
    }
    std::pair<uintptr_t, size_t> a = porter_emu::allocation_of(p);
    if (a.first == 0) return porter_emu::note(cudaErrorInvalidValue);  // not device memory
    size_t room = a.first + a.second - (uintptr_t)p;
    t->porter_ptr = p;
    t->porter_bytes = bytes < room ? bytes : room;
    return cudaSuccess;
}

// --------------------------------------------------------------------------- streams and events

struct porter_stream {
    int flags;
};
struct porter_event {
    double ms;
    int recorded;
};
static inline cudaError_t cudaStreamCreate(cudaStream_t* s) {
    *s = new porter_stream{0};
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned f) {
    *s = new porter_stream{(int)f};
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned f, int) {
    return cudaStreamCreateWithFlags(s, f);
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return porter_emu::sticky_or(cudaSuccess); }
static inline cudaError_t cudaStreamQuery(cudaStream_t) { return porter_emu::sticky_or(cudaSuccess); }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaSuccess; }
typedef void (*cudaStreamCallback_t)(cudaStream_t, cudaError_t, void*);
static inline cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void* data, unsigned) {
    cb(s, porter_emu::g_sticky_error, data);
    return cudaSuccess;
}
typedef void (*cudaHostFn_t)(void*);
static inline cudaError_t cudaLaunchHostFunc(cudaStream_t, cudaHostFn_t fn, void* data) {
    fn(data);
    return cudaSuccess;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = 0) {
    if (!e) return porter_emu::note(cudaErrorInvalidResourceHandle);
    e->ms = porter_emu::now_ms();
    e->recorded = 1;
    return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return porter_emu::sticky_or(cudaSuccess); }
static inline cudaError_t cudaEventQuery(cudaEvent_t) { return porter_emu::sticky_or(cudaSuccess); }
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    if (!ms || !a || !b) return porter_emu::note(cudaErrorInvalidResourceHandle);
    if (!a->recorded || !b->recorded) return porter_emu::note(cudaErrorInvalidResourceHandle);
    *ms = (float)(b->ms - a->ms);
    return cudaSuccess;
}

// --------------------------------------------------------------------------- functions and launches

template <class K>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, K*) {
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = PORTER_MAX_BLOCK;
    a->numRegs = 32;
    a->ptxVersion = a->binaryVersion = 80;
    a->maxDynamicSharedSizeBytes = PORTER_MAX_DYN_SMEM;
    return cudaSuccess;
}
template <class K>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int* min_grid, int* block, K, size_t = 0, int limit = 0) {
    int b = limit > 0 && limit < PORTER_MAX_BLOCK ? limit : PORTER_MAX_BLOCK;
    if (block) *block = b;
    if (min_grid) *min_grid = PORTER_VIRTUAL_SMS * (2048 / b);
    return cudaSuccess;
}
// Launches through the runtime's API (porter's rewrite calls porter_emu::launch_args for each
// cudaLaunchKernel / hipLaunchKernel): the kernel itself, or its address as a void* when porter
// registered the kernel (every kernel a file defines at global scope, porter_capture.h).  A
// cooperative launch runs as any other (blocks one after another; grid-wide synchronisation is refused
// before compiling), after the co-residency check a GPU makes.
namespace porter_emu __attribute__((visibility("hidden"))) {
template <class... P>
inline cudaError_t launch_args(void (*kernel)(P...), dim3 grid, dim3 block, void** args, size_t shared = 0,
                               cudaStream_t stream = 0) {
    if (kernel == nullptr) return note(cudaErrorInvalidDeviceFunction);
    if (args == nullptr && sizeof...(P) > 0) return note(cudaErrorInvalidValue);
    return launch_kernel(kernel, Config(grid, block, shared, stream),
                         args_tuple<P...>(args, std::index_sequence_for<P...>{}), "cudaLaunchKernel");
}
inline cudaError_t launch_args(const void* fn, dim3 grid, dim3 block, void** args, size_t shared = 0,
                               cudaStream_t stream = 0) {
    const KernelEntry* e = registered_kernel(fn);
    if (e == nullptr) {
        fprintf(stderr, "porter cpu runtime: cudaLaunchKernel of a void* that is no kernel porter registered (a "
                        "template instance or a kernel in a namespace, cast to void*): pass the kernel itself\n");
        return note(cudaErrorInvalidDeviceFunction);
    }
    if (args == nullptr) return note(cudaErrorInvalidValue);
    return (cudaError_t)e->launch(fn, e->name.c_str(), Config(grid, block, shared, stream), args);
}
// HIP's launch macro before hipLaunchKernelGGL (HIP 1.x; the ports in ROCm's HIP-Examples use it):
// hipLaunchKernel(kernel, grid, block, shared, stream, args...) launches kernel(hipLaunchParm lp,
// args...), the macro supplying lp (HIP's nvcc path passes 0; hipLaunchParm is int there and here).
// The rewrite makes it a call of launch_args, where it is told from the runtime function
// hipLaunchKernel(kernel, grid, block, void** args, shared, stream) by its fourth argument: a byte
// count, not a pointer, and a kernel whose first parameter is that int.
template <class T>
inline cudaStream_t launch_stream(T s) {
    if constexpr (std::is_integral<T>::value) return s == 0 ? cudaStream_t{} : (cudaStream_t)(uintptr_t)s;
    else return s;
}
template <class L, class... P, class S, class T, class... A,
          std::enable_if_t<std::is_integral<S>::value && std::is_same<L, int>::value && sizeof...(P) == sizeof...(A),
                           int> = 0>
inline cudaError_t launch_args(void (*kernel)(L, P...), dim3 grid, dim3 block, S shared, T stream, A&&... args) {
    if (kernel == nullptr) return note(cudaErrorInvalidDeviceFunction);
    return launch_kernel(kernel, Config(grid, block, (size_t)shared, launch_stream(stream)),
                         decltype(params(kernel))(0, std::forward<A>(args)...), "hipLaunchKernel");
}
template <class K>
inline cudaError_t launch_args_cooperative(K kernel, dim3 grid, dim3 block, void** args, size_t shared = 0,
                                           cudaStream_t stream = 0) {
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    unsigned long long per_sm = threads ? 2048 / threads : 0;  // as cudaOccupancyMaxActiveBlocksPerMultiprocessor
    if (threads && blocks > (unsigned long long)PORTER_VIRTUAL_SMS * (per_sm ? per_sm : 1))
        return note(cudaErrorCooperativeLaunchTooLarge);
    return launch_args(kernel, grid, block, args, shared, stream);
}
}  // namespace porter_emu

template <class K>
static inline cudaError_t cudaLaunchCooperativeKernel(K kernel, dim3 grid, dim3 block, void** args, size_t shared = 0,
                                                      cudaStream_t stream = 0) {
    return porter_emu::launch_args_cooperative(kernel, grid, block, args, shared, stream);
}

// HIP's launch macros (a translated or hand-written HIP program).
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_SYMBOL(x) x
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...)                                             \
    porter_emu::launch_kernel(kernel, porter_emu::Config(dim3(grid), dim3(block), (shared), (stream)),            \
                              decltype(porter_emu::params(kernel))(__VA_ARGS__), #kernel)

#include "porter_runtime_common.h"  // the calls both runtimes define alike

#include "porter_hip_names.h"

#if defined(__SANITIZE_ADDRESS__)
// The sanitized build (cpu-runtime-asan) checks what the program reads, but AddressSanitizer's sscanf checks
// only what it writes: glibc's sscanf reads its input up to the terminating 0 in uninstrumented code, so a
// program scanning a buffer it never terminated -- a file read into a malloc'ed buffer of the file's size,
// scanned until EOF (Rodinia's b+tree) -- reads past its allocation unseen.  Here each sscanf's input is
// read first, byte by byte up to that 0, in instrumented code: a read past the allocation is reported at the
// caller's line.  (<cstdio> is in already, through porter_emu.h, so the macro touches no declaration.)
#include <cstdio>
inline const char* porter_asan_scanned(const char* s) {
    for (const volatile char* p = s; *p; ++p) {
    }
    return s;
}
#define sscanf(s, ...) sscanf(porter_asan_scanned(s), __VA_ARGS__)
#endif

#endif  // PORTER_RUNTIME_H
