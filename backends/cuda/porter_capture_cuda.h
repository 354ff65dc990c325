// porter_capture_cuda.h -- launch capture for a CUDA program built by nvcc, on an NVIDIA GPU.
//
// porter's capturing build force-includes this header (nvcc -include) into every unit of a rewritten
// copy of the program (backends/launches.py): each launch k<<<g, b, s, st>>>(args) there calls
// porter_emu::launch_kernel / launch_deduced below, which make the same launch and, with
// PORTER_CAPTURE_DIR set, record it (backends/porter_capture.h, docs/CAPTURE_FORMAT.md).  Without the
// variable a launch costs one extra function call.
//
// What the GPU needs for that, as porter_capture.h's hooks:
// * a pointer argument's allocation from the driver's address-range query (cuMemGetAddressRange, found
//   through the runtime's driver entry point: nothing extra is linked); a pointer the driver does not
//   know (host memory, a stray value) is "not a device allocation";
// * the bytes before and after a captured launch copied to the host after cudaDeviceSynchronize(), so
//   the copies happen outside the launch, and only around the launches kept;
// * registered __constant__ / __device__ variables read with cudaMemcpyFromSymbol;
// * no capture while the launch's stream is being captured into a CUDA graph (a synchronisation there
//   would end the program's graph capture);
// * the runtime's error state left as the program's own: an error the program has pending is never
//   consumed (cudaPeekAtLastError), and what the wrapper's own calls set is cleared (keep_errors);
// * needs CUDA 12.5 or later (cudaGetDriverEntryPointByVersion, cudaFuncGetName): with an older
//   toolkit the instrumented build does not compile and the program is built as written, uncaptured.
//
// It also restores what CUDA 13 removed from the runtime API that older programs use (porter_cuda_legacy.h:
// cudaThreadSynchronize and friends, cudaDeviceProp's clockRate, deviceOverlap...), so they build as they did.
#ifndef PORTER_CAPTURE_CUDA_H
#define PORTER_CAPTURE_CUDA_H

#if defined(__cplusplus) && defined(__CUDACC__)

#include <cuda_runtime.h>  // (not <cuda.h>: a program may ship a header of that name, as Rodinia's b+tree does)

#include "porter_capture.h"

namespace porter_emu __attribute__((visibility("hidden"))) {

inline std::recursive_mutex& runtime_lock() {
    static std::recursive_mutex m;
    return m;
}

// cuMemGetAddressRange_v2: CUresult (CUdeviceptr* base, size_t* bytes, CUdeviceptr p); CUdeviceptr is
// a 64-bit integer, CUresult an enum whose CUDA_SUCCESS is 0
typedef int (*AddressRange)(unsigned long long* base, size_t* bytes, unsigned long long p);

inline AddressRange address_range() {
    static AddressRange fn = []() -> AddressRange {
        void* f = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            return nullptr;
        return (AddressRange)f;
    }();
    return fn;
}

inline std::pair<uintptr_t, size_t> allocation_of(const void* p) {
    AddressRange range = address_range();
    unsigned long long base = 0;
    size_t bytes = 0;
    if (range == nullptr || p == nullptr || range(&base, &bytes, (unsigned long long)(uintptr_t)p) != 0)
        return {0, 0};
    return {(uintptr_t)base, bytes};
}

inline int capture_sync() { return (int)cudaDeviceSynchronize(); }

inline bool capture_allowed(const void* stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &status) != cudaSuccess) return false;
    return status == cudaStreamCaptureStatusNone;
}

inline const void* capture_bytes(uintptr_t addr, size_t n, bool symbol, std::vector<unsigned char>& scratch) {
    scratch.resize(n);
    if (n == 0) return scratch.data();
    cudaError_t e = symbol ? cudaMemcpyFromSymbol(scratch.data(), (const void*)addr, n, 0, cudaMemcpyDeviceToHost)
                           : cudaMemcpy(scratch.data(), (const void*)addr, n, cudaMemcpyDefault);
    return e == cudaSuccess ? (const void*)scratch.data() : nullptr;
}

inline const char* kernel_mangled_name(const void* fn) {
    const char* name = nullptr;
    if (cudaFuncGetName(&name, fn) == cudaSuccess && name != nullptr) return name;
    return exported_symbol(fn);
}

// ---- the launch wrappers the rewritten program calls



template <class... P, class... S, size_t... I>
inline void launch_tuple(void (*k)(P...), const Config& c, std::tuple<S...>& t, std::index_sequence<I...>) {
    k<<<c.grid, c.block, c.shared, c.stream>>>(std::get<I>(t)...);
}

// What the wrapper's own runtime calls leave in the thread's last error (a failed copy, a stream-capture
// query) is not the program's: cleared, unless the program had an error of its own pending.
inline void keep_errors(cudaError_t before) {
    if (before == cudaSuccess) (void)cudaGetLastError();
}

template <class... P>
inline void launch_kernel(void (*kernel)(P...), const Config& c, std::tuple<typename ParamOf<P>::type...> args,
                          const char* what = "a kernel") {
    cudaError_t before = cudaPeekAtLastError();
    Capture* cap = capture_begin(what, c.grid, c.block, c.shared, (const void*)c.stream, args, (const void*)kernel);
    keep_errors(before);
    launch_tuple(kernel, c, args, std::index_sequence_for<P...>{});
    if (cap != nullptr) {
        cudaError_t launched = cudaPeekAtLastError();
        capture_end(cap, (int)launched);
        keep_errors(launched);
    }
}

// A template kernel whose arguments deduce its parameters: the rewrite's generic lambda launches it as
// PORTER_DEDUCED_LAUNCH(k)(args...), with the configuration this thread set last.
inline Config& deduced_config() {
    static thread_local Config c(dim3(1), dim3(1));
    return c;
}
template <class F, class... A>
inline void launch_deduced(const Config& c, F f, const char* what, A&&... a) {
    std::tuple<std::decay_t<A>...> args(std::forward<A>(a)...);
    cudaError_t before = cudaPeekAtLastError();
    Capture* cap = capture_begin(what, c.grid, c.block, c.shared, (const void*)c.stream, args);
    keep_errors(before);
    deduced_config() = c;
    std::apply(f, args);
    if (cap != nullptr) {
        cudaError_t launched = cudaPeekAtLastError();
        capture_end(cap, (int)launched);
        keep_errors(launched);
    }
}


// Launches through the runtime's API (porter's rewrite calls launch_args / launch_args_cooperative for
// each cudaLaunchKernel / hipLaunchKernel and its cooperative twin): made by the runtime as written, and
// captured when the kernel's parameter types are known -- the kernel passed itself, or a void* porter
// registered (each kernel a file defines at global scope, porter_capture.h); another void* (a template
// instance cast to void*) is launched uncaptured.
inline cudaError_t launch_api(bool cooperative, const void* fn, dim3 g, dim3 b, void** args, size_t shared, cudaStream_t stream,
                          Capture* (*begin)(const void*, const char*, const Config&, void**)) {
    cudaError_t before = cudaPeekAtLastError();
    Capture* cap = begin != nullptr ? begin(fn, cooperative ? "cudaLaunchCooperativeKernel" : "cudaLaunchKernel",
                                            Config(g, b, shared, stream), args)
                                    : nullptr;
    keep_errors(before);
    cudaError_t e = cooperative ? ::cudaLaunchCooperativeKernel(fn, g, b, args, (size_t)shared, stream)
                          : ::cudaLaunchKernel(fn, g, b, args, shared, stream);
    if (cap != nullptr) {
        cudaError_t launched = e != cudaSuccess ? e : cudaPeekAtLastError();
        capture_end(cap, (int)launched);
        keep_errors(launched);
    }
    return e;
}
template <class... P>
inline cudaError_t launch_args(void (*kernel)(P...), dim3 g, dim3 b, void** args, size_t shared = 0, cudaStream_t stream = 0) {
    return launch_api(false, (const void*)kernel, g, b, args, shared, stream, &args_begin<P...>);
}
inline cudaError_t launch_args(const void* fn, dim3 g, dim3 b, void** args, size_t shared = 0, cudaStream_t stream = 0) {
    const KernelEntry* e = registered_kernel(fn);
    return launch_api(false, fn, g, b, args, shared, stream, e != nullptr ? e->begin : nullptr);
}
template <class... P>
inline cudaError_t launch_args_cooperative(void (*kernel)(P...), dim3 g, dim3 b, void** args, size_t shared = 0,
                                     cudaStream_t stream = 0) {
    return launch_api(true, (const void*)kernel, g, b, args, shared, stream, &args_begin<P...>);
}
inline cudaError_t launch_args_cooperative(const void* fn, dim3 g, dim3 b, void** args, size_t shared = 0,
                                     cudaStream_t stream = 0) {
    const KernelEntry* e = registered_kernel(fn);
    return launch_api(true, fn, g, b, args, shared, stream, e != nullptr ? e->begin : nullptr);
}
}  // namespace porter_emu

#include "porter_cuda_legacy.h"  // what CUDA 13 removed that older programs use

#define PORTER_DEDUCED_LAUNCH(...)                                                            \
    __VA_ARGS__<<<porter_emu::deduced_config().grid, porter_emu::deduced_config().block,      \
                  porter_emu::deduced_config().shared, porter_emu::deduced_config().stream>>>

#else  // a C unit, or C++ without CUDA: nothing launches here, and a registration is a no-op
#define PORTER_REGISTER_SYMBOL(sym, constant)
#define PORTER_REGISTER_KERNEL(k)
#endif

#endif  // PORTER_CAPTURE_CUDA_H
