// porter_capture_hip.h -- launch capture for a HIP program built by hipcc, on an AMD GPU.
//
// The HIP counterpart of backends/cuda/porter_capture_cuda.h: porter's capturing hipcc build force-includes
// it (hipcc -include) into every unit of a rewritten copy of the program (backends/launches.py), so each
// launch k<<<g, b, s, st>>>(args) calls porter_emu::launch_kernel / launch_deduced below, which make the
// same launch and, with PORTER_CAPTURE_DIR set, record it (backends/porter_capture.h,
// docs/CAPTURE_FORMAT.md).  Without the variable a launch costs one extra function call.
//
// The hooks porter_capture.h asks of a runtime, through HIP's runtime API:
// * a pointer argument's allocation from hipMemGetAddressRange; a pointer HIP does not know (host
//   memory, a stray value) is "not a device allocation";
// * the bytes before and after a kept launch copied to the host after hipDeviceSynchronize(), so the
//   copies happen outside the launch, and only around the launches kept;
// * registered __constant__ / __device__ variables read with hipMemcpyFromSymbol;
// * no capture while the launch's stream is being captured into a graph (hipStreamIsCapturing);
// * the runtime's error state left as the program's own (hipPeekAtLastError / hipGetLastError);
// * the kernel named by its host symbol (dladdr on the executable, linked with -rdynamic).
// Launches written as hipLaunchKernelGGL(...) are not rewritten, so not captured (porter's own HIP
// output writes <<<...>>> unless asked for --hip-launch ggl).
#ifndef PORTER_CAPTURE_HIP_H
#define PORTER_CAPTURE_HIP_H

#if defined(__cplusplus) && (defined(__HIPCC__) || defined(__HIP__))

#include <hip/hip_runtime.h>

#define PORTER_STREAM_T hipStream_t
#include "porter_capture.h"

namespace porter_emu __attribute__((visibility("hidden"))) {

inline std::recursive_mutex& runtime_lock() {
    static std::recursive_mutex m;
    return m;
}

inline std::pair<uintptr_t, size_t> allocation_of(const void* p) {
    hipDeviceptr_t base = nullptr;
    size_t bytes = 0;
    if (p == nullptr || hipMemGetAddressRange(&base, &bytes, (hipDeviceptr_t)p) != hipSuccess || base == nullptr) {
        (void)hipGetLastError();  // a failed query is not the program's error
        return {0, 0};
    }
    return {(uintptr_t)base, bytes};
}

inline int capture_sync() { return (int)hipDeviceSynchronize(); }

inline bool capture_allowed(const void* stream) {
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    if (hipStreamIsCapturing((hipStream_t)stream, &status) != hipSuccess) return false;
    return status == hipStreamCaptureStatusNone;
}

inline const void* capture_bytes(uintptr_t addr, size_t n, bool symbol, std::vector<unsigned char>& scratch) {
    scratch.resize(n);
    if (n == 0) return scratch.data();
    hipError_t e = symbol ? hipMemcpyFromSymbol(scratch.data(), (const void*)addr, n, 0, hipMemcpyDeviceToHost)
                          : hipMemcpy(scratch.data(), (const void*)addr, n, hipMemcpyDefault);
    return e == hipSuccess ? (const void*)scratch.data() : nullptr;
}

inline const char* kernel_mangled_name(const void* fn) { return exported_symbol(fn); }

// ---- the launch wrappers the rewritten program calls

template <class... P, class... S, size_t... I>
inline void launch_tuple(void (*k)(P...), const Config& c, std::tuple<S...>& t, std::index_sequence<I...>) {
    k<<<c.grid, c.block, c.shared, c.stream>>>(std::get<I>(t)...);
}

// What the wrapper's own runtime calls leave in the thread's last error is not the program's: cleared,
// unless the program had an error of its own pending.
inline void keep_errors(hipError_t before) {
    if (before == hipSuccess) (void)hipGetLastError();
}

template <class... P>
inline void launch_kernel(void (*kernel)(P...), const Config& c, std::tuple<typename ParamOf<P>::type...> args,
                          const char* what = "a kernel") {
    hipError_t before = hipPeekAtLastError();
    Capture* cap = capture_begin(what, c.grid, c.block, c.shared, (const void*)c.stream, args, (const void*)kernel);
    keep_errors(before);
    launch_tuple(kernel, c, args, std::index_sequence_for<P...>{});
    if (cap != nullptr) {
        hipError_t launched = hipPeekAtLastError();
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
    hipError_t before = hipPeekAtLastError();
    Capture* cap = capture_begin(what, c.grid, c.block, c.shared, (const void*)c.stream, args);
    keep_errors(before);
    deduced_config() = c;
    std::apply(f, args);
    if (cap != nullptr) {
        hipError_t launched = hipPeekAtLastError();
        capture_end(cap, (int)launched);
        keep_errors(launched);
    }
}


// Launches through the runtime's API (porter's rewrite calls launch_args / launch_args_cooperative for
// each cudaLaunchKernel / hipLaunchKernel and its cooperative twin): made by the runtime as written, and
// captured when the kernel's parameter types are known -- the kernel passed itself, or a void* porter
// registered (each kernel a file defines at global scope, porter_capture.h); another void* (a template
// instance cast to void*) is launched uncaptured.
inline hipError_t launch_api(bool cooperative, const void* fn, dim3 g, dim3 b, void** args, size_t shared, hipStream_t stream,
                          Capture* (*begin)(const void*, const char*, const Config&, void**)) {
    hipError_t before = hipPeekAtLastError();
    Capture* cap = begin != nullptr ? begin(fn, cooperative ? "hipLaunchCooperativeKernel" : "hipLaunchKernel",
                                            Config(g, b, shared, stream), args)
                                    : nullptr;
    keep_errors(before);
    hipError_t e = cooperative ? ::hipLaunchCooperativeKernel(fn, g, b, args, (unsigned int)shared, stream)
                          : ::hipLaunchKernel(fn, g, b, args, shared, stream);
    if (cap != nullptr) {
        hipError_t launched = e != hipSuccess ? e : hipPeekAtLastError();
        capture_end(cap, (int)launched);
        keep_errors(launched);
    }
    return e;
}
template <class... P>
inline hipError_t launch_args(void (*kernel)(P...), dim3 g, dim3 b, void** args, size_t shared = 0, hipStream_t stream = 0) {
    return launch_api(false, (const void*)kernel, g, b, args, shared, stream, &args_begin<P...>);
}
inline hipError_t launch_args(const void* fn, dim3 g, dim3 b, void** args, size_t shared = 0, hipStream_t stream = 0) {
    const KernelEntry* e = registered_kernel(fn);
    return launch_api(false, fn, g, b, args, shared, stream, e != nullptr ? e->begin : nullptr);
}
template <class... P>
inline hipError_t launch_args_cooperative(void (*kernel)(P...), dim3 g, dim3 b, void** args, size_t shared = 0,
                                     hipStream_t stream = 0) {
    return launch_api(true, (const void*)kernel, g, b, args, shared, stream, &args_begin<P...>);
}
inline hipError_t launch_args_cooperative(const void* fn, dim3 g, dim3 b, void** args, size_t shared = 0,
                                     hipStream_t stream = 0) {
    const KernelEntry* e = registered_kernel(fn);
    return launch_api(true, fn, g, b, args, shared, stream, e != nullptr ? e->begin : nullptr);
}
}  // namespace porter_emu

#define PORTER_DEDUCED_LAUNCH(...)                                                            \
    __VA_ARGS__<<<porter_emu::deduced_config().grid, porter_emu::deduced_config().block,      \
                  porter_emu::deduced_config().shared, porter_emu::deduced_config().stream>>>

#else  // a C unit, or C++ without HIP: nothing launches here, and a registration is a no-op
#define PORTER_REGISTER_SYMBOL(sym, constant)
#define PORTER_REGISTER_KERNEL(k)
#endif

#endif  // PORTER_CAPTURE_HIP_H
