// porter_runtime_common.h -- the CUDA runtime calls both of porter's host runtimes define alike (porter's own
// header): no-ops, forwards to another call (the *Async copies, cudaThreadExit, cudaLaunchKernel) and errors.
// Included at the end of the CPU runtime (porter_runtime.h) and of the OpenCL runtime
// (backends/opencl/porter_opencl.h), once each has defined what these call.
#ifndef PORTER_RUNTIME_COMMON_H
#define PORTER_RUNTIME_COMMON_H

// The driver API's success code, which programs compare runtime results against (rodinia's kmeans does
// after cudaBindTexture); the driver API itself is refused by name (the CPU runtime's runtime.toml
// [program.undeclared]).
#ifndef CUDA_SUCCESS
#define CUDA_SUCCESS 0
#endif

static inline const char* cudaGetErrorString(cudaError_t e) { return porter_emu::error_string(e); }
static inline const char* cudaGetErrorName(cudaError_t e) { return porter_emu::error_name(e); }
static inline cudaError_t cudaChooseDevice(int* d, const cudaDeviceProp*) { *d = 0; return cudaSuccess; }
static inline cudaError_t cudaSetDeviceFlags(unsigned) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceFlags(unsigned* f) { *f = 0; return cudaSuccess; }
static inline cudaError_t cudaThreadExit() { return cudaDeviceReset(); }
static inline cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) { return cudaSuccess; }
static inline cudaError_t cudaThreadSetCacheConfig(cudaFuncCache) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSetLimit(cudaLimit, size_t) { return cudaSuccess; }
static inline cudaError_t cudaThreadSetLimit(cudaLimit, size_t) { return cudaSuccess; }
static inline cudaError_t cudaDriverGetVersion(int* v) { *v = PORTER_RUNTIME_VERSION; return cudaSuccess; }
static inline cudaError_t cudaRuntimeGetVersion(int* v) { *v = PORTER_RUNTIME_VERSION; return cudaSuccess; }
static inline cudaError_t cudaProfilerStart() { return cudaSuccess; }
static inline cudaError_t cudaProfilerStop() { return cudaSuccess; }
static inline cudaError_t cudaHostRegister(void*, size_t, unsigned) { return cudaSuccess; }
static inline cudaError_t cudaHostUnregister(void*) { return cudaSuccess; }
static inline cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                            size_t height, cudaMemcpyKind kind = cudaMemcpyDefault, cudaStream_t = 0) {
    return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t n, size_t offset = 0,
                                                  cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t = 0) {
    return cudaMemcpyToSymbol(symbol, src, n, offset, kind);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t n, size_t offset = 0,
                                                    cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t = 0) {
    return cudaMemcpyFromSymbol(dst, symbol, n, offset, kind);
}
template <class T>
static inline cudaError_t cudaGetSymbolSize(size_t* n, const T&) {
    *n = sizeof(T);
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
    *e = new porter_event{0.0, 0};
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
template <class K>
static inline cudaError_t cudaFuncSetCacheConfig(K*, cudaFuncCache) { return cudaSuccess; }
template <class K>
static inline cudaError_t cudaFuncSetSharedMemConfig(K*, cudaSharedMemConfig) { return cudaSuccess; }
template <class K>
static inline cudaError_t cudaFuncSetAttribute(K*, cudaFuncAttribute, int) { return cudaSuccess; }
template <class K>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, K, int block, size_t) {
    *n = block > 0 ? 2048 / block : 0;
    return cudaSuccess;
}
template <class K>
static inline cudaError_t cudaLaunchKernel(K kernel, dim3 grid, dim3 block, void** args, size_t shared = 0,
                                           cudaStream_t stream = 0) {
    return porter_emu::launch_args(kernel, grid, block, args, shared, stream);
}

// Texture references over linear memory: each runtime defines cudaBindTexture(size_t*, const textureReference*,
// const void*, const cudaChannelFormatDesc*, size_t) -- it finds the allocation the pointer lies in -- and
// these are the rest of the API around it.
static inline cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, cudaChannelFormatKind f) {
    return cudaChannelFormatDesc{x, y, z, w, f};
}
template <class T>
static inline cudaChannelFormatDesc cudaCreateChannelDesc() {
    if constexpr (std::is_floating_point<T>::value)
        return cudaChannelFormatDesc{(int)sizeof(T) * 8, 0, 0, 0, cudaChannelFormatKindFloat};
    else if constexpr (std::is_signed<T>::value)
        return cudaChannelFormatDesc{(int)sizeof(T) * 8, 0, 0, 0, cudaChannelFormatKindSigned};
    else if constexpr (std::is_integral<T>::value)
        return cudaChannelFormatDesc{(int)sizeof(T) * 8, 0, 0, 0, cudaChannelFormatKindUnsigned};
    else
        return cudaChannelFormatDesc{0, 0, 0, 0, cudaChannelFormatKindNone};
}
template <class T, int dim, enum cudaTextureReadMode M>
static inline cudaError_t cudaBindTexture(size_t* offset, const texture<T, dim, M>& tex, const void* p,
                                          const cudaChannelFormatDesc& desc, size_t bytes = ~(size_t)0) {
    return cudaBindTexture(offset, &tex, p, &desc, bytes);
}
template <class T, int dim, enum cudaTextureReadMode M>
static inline cudaError_t cudaBindTexture(size_t* offset, const texture<T, dim, M>& tex, const void* p,
                                          size_t bytes = ~(size_t)0) {
    return cudaBindTexture(offset, &tex, p, nullptr, bytes);
}
static inline cudaError_t cudaUnbindTexture(const textureReference* tex) {
    return cudaBindTexture(nullptr, tex, nullptr);  // binding nothing unbinds (a null texture is an error there)
}
template <class T, int dim, enum cudaTextureReadMode M>
static inline cudaError_t cudaUnbindTexture(const texture<T, dim, M>& tex) {
    return cudaUnbindTexture(&tex);
}

#endif  // PORTER_RUNTIME_COMMON_H
