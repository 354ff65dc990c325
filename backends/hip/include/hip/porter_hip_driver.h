/* porter: HIP-on-CUDA's driver-style API (hipModule*, hipCtx*, hipMemcpyHtoD, hipDrv*, the virtual memory
 * calls...), written for porter and included by its hip/hip_runtime.h after cuda.h and cuda_runtime.h.
 *
 * On AMD these calls return hipError_t and take HIP's own types; on NVIDIA porter's hipError_t is the runtime's
 * cudaError_t while the calls are the driver's (cuda.h), which return CUresult and take CUdeviceptr, an integer,
 * where HIP takes a pointer.  Each HIP name here is a constant function object that calls the driver function
 * and returns its CUresult as a cudaError_t: CUDA numbers the runtime's errors as the driver's (cudaErrorNotReady
 * and CUDA_ERROR_NOT_READY are both 600; the static_asserts below check some, porter's tests all the pairs its
 * tables map).  A CUdeviceptr parameter takes HIP's pointer or the driver's integer (hipDeviceptr_t is CUdeviceptr,
 * as in HIP's own NVIDIA headers); a CUdeviceptr* takes a CUdeviceptr* or any T** (HIP's void**).  Enumerations
 * whose HIP type porter maps to the runtime's (hipFuncCache_t is cudaFuncCache) are taken in either spelling.
 * hipMalloc and hipFree also take a hipDeviceptr_t, through the runtime (one context with the runtime's calls).
 * porter_hip_names.h leaves these names to this header (backends/hip/names.py).
 */
#ifndef PORTER_HIP_ON_CUDA_DRIVER_H
#define PORTER_HIP_ON_CUDA_DRIVER_H

#if defined(__cplusplus) && defined(CUDA_VERSION) && defined(__CUDA_RUNTIME_H__) && !defined(__CUDACC_RTC__)
#include <cstddef>
#include <cstdint>
#include <type_traits>

extern "C++" {
namespace porter_hip {
static_assert(sizeof(CUdeviceptr) == sizeof(void*), "a CUdeviceptr holds a pointer");
static_assert(static_cast<int>(CUDA_ERROR_INVALID_VALUE) == static_cast<int>(cudaErrorInvalidValue) &&
                  static_cast<int>(CUDA_ERROR_OUT_OF_MEMORY) == static_cast<int>(cudaErrorMemoryAllocation) &&
                  static_cast<int>(CUDA_ERROR_NOT_INITIALIZED) == static_cast<int>(cudaErrorInitializationError) &&
                  static_cast<int>(CUDA_ERROR_INVALID_HANDLE) == static_cast<int>(cudaErrorInvalidResourceHandle) &&
                  static_cast<int>(CUDA_ERROR_NOT_FOUND) == static_cast<int>(cudaErrorSymbolNotFound) &&
                  static_cast<int>(CUDA_ERROR_NOT_READY) == static_cast<int>(cudaErrorNotReady) &&
                  static_cast<int>(CUDA_ERROR_ILLEGAL_ADDRESS) == static_cast<int>(cudaErrorIllegalAddress) &&
                  static_cast<int>(CUDA_ERROR_UNKNOWN) == static_cast<int>(cudaErrorUnknown),
              "CUresult and cudaError_t number their errors alike");

static inline cudaError_t status(CUresult r) { return static_cast<cudaError_t>(r); }

/* a CUdeviceptr argument: the driver's integer or HIP's pointer */
struct dptr {
    CUdeviceptr v;
    template <class I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
    dptr(I i) : v(static_cast<CUdeviceptr>(i)) {}
    dptr(const volatile void* p) : v(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p))) {}
    operator CUdeviceptr() const { return v; }
};
/* a CUdeviceptr* argument: the driver's or HIP's void** (any T**), written through as the pointer it holds */
struct dptr_out {
    CUdeviceptr* p;
    dptr_out(CUdeviceptr* q) : p(q) {}
    template <class T>
    dptr_out(T** q) : p(reinterpret_cast<CUdeviceptr*>(q)) {}
    dptr_out(std::nullptr_t) : p(nullptr) {}
    operator CUdeviceptr*() const { return p; }
};
/* a driver enumeration (or pointer to one) whose HIP type is the runtime's */
template <class D, class R>
struct either {
    D v;
    either(D d) : v(d) {}
    either(R r) : v(static_cast<D>(r)) {}
    operator D() const { return v; }
};
template <class D, class R>
struct either_out {
    D* p;
    either_out(D* d) : p(d) {}
    either_out(R* r) : p(reinterpret_cast<D*>(r)) {}
    operator D*() const { return p; }
};

/* a driver handle whose HIP type is the runtime's (hipArray_t is cudaArray_t; the runtime's array handle is the
 * driver's CUarray, as HIP's own NVIDIA headers cast it) */
template <class D, class R>
struct handle {
    D v;
    handle(D d) : v(d) {}
    handle(R r) : v(reinterpret_cast<D>(r)) {}
    handle(std::nullptr_t) : v(nullptr) {}
    operator D() const { return v; }
};
static_assert(sizeof(CUmemAccessDesc) == sizeof(cudaMemAccessDesc), "the driver's and the runtime's access descriptors agree");

template <class P>
struct arg_of {
    using type = P;
};
template <>
struct arg_of<CUdeviceptr> {
    using type = dptr;
};
template <>
struct arg_of<CUdeviceptr*> {
    using type = dptr_out;
};
template <>
struct arg_of<unsigned int*> { /* hipCtxGetApiVersion's int* */
    using type = either_out<unsigned int, int>;
};
template <>
struct arg_of<CUfunc_cache> {
    using type = either<CUfunc_cache, cudaFuncCache>;
};
template <>
struct arg_of<CUfunc_cache*> {
    using type = either_out<CUfunc_cache, cudaFuncCache>;
};
template <>
struct arg_of<CUarray> {
    using type = handle<CUarray, cudaArray_t>;
};
template <>
struct arg_of<CUarray*> {
    using type = either_out<CUarray, cudaArray_t>;
};
template <>
struct arg_of<const CUmemAccessDesc*> {
    using type = either_out<const CUmemAccessDesc, const cudaMemAccessDesc>;
};
template <>
struct arg_of<CUmemAllocationHandleType> {
    using type = either<CUmemAllocationHandleType, cudaMemAllocationHandleType>;
};

/* the HIP name of a driver function: its call, its CUresult a cudaError_t */
template <class Sig, Sig* F>
struct drv;
template <class... P, CUresult (*F)(P...)>
struct drv<CUresult(P...), F> {
    cudaError_t operator()(typename arg_of<P>::type... a) const { return status(F(a...)); }
};

/* hipMalloc and hipFree: the runtime's, also for a hipDeviceptr_t */
static inline cudaError_t mem_alloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
template <class T>
static inline cudaError_t mem_alloc(T** p, size_t bytes) {
    return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
static inline cudaError_t mem_alloc(CUdeviceptr* p, size_t bytes) {
    void* q = nullptr;
    cudaError_t e = cudaMalloc(&q, bytes);
    *p = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(q));
    return e;
}
static inline cudaError_t mem_free(void* p) { return cudaFree(p); }
template <class I, typename std::enable_if<std::is_same<I, CUdeviceptr>::value, int>::type = 0>
static inline cudaError_t mem_free(I p) {
    return cudaFree(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)));
}

/* hipCtxCreate(ctx, flags, device): CUDA 13's cuCtxCreate takes creation parameters first */
static inline cudaError_t ctx_create(CUcontext* ctx, unsigned int flags, CUdevice device) {
#if CUDA_VERSION >= 13000
    return status(cuCtxCreate(ctx, nullptr, flags, device));
#else
    return status(cuCtxCreate(ctx, flags, device));
#endif
}
/* hipModuleOccupancyMaxPotentialBlockSize*: HIP takes the dynamic shared memory as a size, CUDA a callback too */
static inline cudaError_t occupancy_max_potential_block_size(int* grid, int* block, CUfunction f, size_t shared,
                                                             int limit) {
    return status(cuOccupancyMaxPotentialBlockSize(grid, block, f, nullptr, shared, limit));
}
static inline cudaError_t occupancy_max_potential_block_size_with_flags(int* grid, int* block, CUfunction f,
                                                                        size_t shared, int limit,
                                                                        unsigned int flags) {
    return status(cuOccupancyMaxPotentialBlockSizeWithFlags(grid, block, f, nullptr, shared, limit, flags));
}
/* hipFreeMipmappedArray: hipMipmappedArray_t is the driver's CUmipmappedArray (as HIP's NVIDIA headers have it) */
static inline cudaError_t free_mipmapped_array(CUmipmappedArray array) { return status(cuMipmappedArrayDestroy(array)); }
/* hipDeviceComputeCapability: cuDeviceComputeCapability is deprecated; the same two attributes */
static inline cudaError_t compute_capability(int* major, int* minor, CUdevice device) {
    CUresult r = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    return status(r != CUDA_SUCCESS ? r : cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
}
}  // namespace porter_hip
}

#define hipMalloc porter_hip::mem_alloc
#define hipFree porter_hip::mem_free
#define hipCtxCreate porter_hip::ctx_create
#define hipDeviceComputeCapability porter_hip::compute_capability
#define hipFreeMipmappedArray porter_hip::free_mipmapped_array
#define hipModuleOccupancyMaxPotentialBlockSize porter_hip::occupancy_max_potential_block_size
#define hipModuleOccupancyMaxPotentialBlockSizeWithFlags porter_hip::occupancy_max_potential_block_size_with_flags

#define PORTER_HIP_DRIVER(hip, cu) static constexpr porter_hip::drv<decltype(cu), &cu> hip{};
/* initialization, devices, contexts */
PORTER_HIP_DRIVER(hipInit, cuInit)
PORTER_HIP_DRIVER(hipDeviceGet, cuDeviceGet)
PORTER_HIP_DRIVER(hipDeviceGetName, cuDeviceGetName)
PORTER_HIP_DRIVER(hipDeviceGetUuid, cuDeviceGetUuid)
PORTER_HIP_DRIVER(hipDeviceTotalMem, cuDeviceTotalMem)
PORTER_HIP_DRIVER(hipDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState)
PORTER_HIP_DRIVER(hipDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease)
PORTER_HIP_DRIVER(hipDevicePrimaryCtxReset, cuDevicePrimaryCtxReset)
PORTER_HIP_DRIVER(hipDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)
PORTER_HIP_DRIVER(hipDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags)
PORTER_HIP_DRIVER(hipCtxDestroy, cuCtxDestroy)
PORTER_HIP_DRIVER(hipCtxDisablePeerAccess, cuCtxDisablePeerAccess)
PORTER_HIP_DRIVER(hipCtxEnablePeerAccess, cuCtxEnablePeerAccess)
PORTER_HIP_DRIVER(hipCtxGetApiVersion, cuCtxGetApiVersion)
PORTER_HIP_DRIVER(hipCtxGetCacheConfig, cuCtxGetCacheConfig)
PORTER_HIP_DRIVER(hipCtxGetCurrent, cuCtxGetCurrent)
PORTER_HIP_DRIVER(hipCtxGetDevice, cuCtxGetDevice)
PORTER_HIP_DRIVER(hipCtxGetFlags, cuCtxGetFlags)
PORTER_HIP_DRIVER(hipCtxPopCurrent, cuCtxPopCurrent)
PORTER_HIP_DRIVER(hipCtxPushCurrent, cuCtxPushCurrent)
PORTER_HIP_DRIVER(hipCtxSetCacheConfig, cuCtxSetCacheConfig)
PORTER_HIP_DRIVER(hipCtxSetCurrent, cuCtxSetCurrent)
PORTER_HIP_DRIVER(hipCtxSynchronize, cuCtxSynchronize)
/* modules and launches */
PORTER_HIP_DRIVER(hipModuleLoad, cuModuleLoad)
PORTER_HIP_DRIVER(hipModuleLoadData, cuModuleLoadData)
PORTER_HIP_DRIVER(hipModuleLoadDataEx, cuModuleLoadDataEx)
PORTER_HIP_DRIVER(hipModuleUnload, cuModuleUnload)
PORTER_HIP_DRIVER(hipModuleGetFunction, cuModuleGetFunction)
PORTER_HIP_DRIVER(hipModuleGetGlobal, cuModuleGetGlobal)
PORTER_HIP_DRIVER(hipModuleLaunchKernel, cuLaunchKernel)
PORTER_HIP_DRIVER(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor)
PORTER_HIP_DRIVER(hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                  cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
PORTER_HIP_DRIVER(hipFuncGetAttribute, cuFuncGetAttribute)
/* memory */
PORTER_HIP_DRIVER(hipMemAllocPitch, cuMemAllocPitch)
PORTER_HIP_DRIVER(hipMemGetAddressRange, cuMemGetAddressRange)
PORTER_HIP_DRIVER(hipMemcpyHtoD, cuMemcpyHtoD)
PORTER_HIP_DRIVER(hipMemcpyHtoDAsync, cuMemcpyHtoDAsync)
PORTER_HIP_DRIVER(hipMemcpyDtoH, cuMemcpyDtoH)
PORTER_HIP_DRIVER(hipMemcpyDtoHAsync, cuMemcpyDtoHAsync)
PORTER_HIP_DRIVER(hipMemcpyDtoD, cuMemcpyDtoD)
PORTER_HIP_DRIVER(hipMemcpyDtoDAsync, cuMemcpyDtoDAsync)
PORTER_HIP_DRIVER(hipMemcpyParam2D, cuMemcpy2D)
PORTER_HIP_DRIVER(hipMemcpyParam2DAsync, cuMemcpy2DAsync)
PORTER_HIP_DRIVER(hipDrvMemcpy2DUnaligned, cuMemcpy2DUnaligned)
PORTER_HIP_DRIVER(hipDrvMemcpy3D, cuMemcpy3D)
PORTER_HIP_DRIVER(hipDrvMemcpy3DAsync, cuMemcpy3DAsync)
PORTER_HIP_DRIVER(hipMemsetD8, cuMemsetD8)
PORTER_HIP_DRIVER(hipMemsetD8Async, cuMemsetD8Async)
PORTER_HIP_DRIVER(hipMemsetD16, cuMemsetD16)
PORTER_HIP_DRIVER(hipMemsetD16Async, cuMemsetD16Async)
PORTER_HIP_DRIVER(hipMemsetD32, cuMemsetD32)
PORTER_HIP_DRIVER(hipMemsetD32Async, cuMemsetD32Async)
PORTER_HIP_DRIVER(hipPointerGetAttribute, cuPointerGetAttribute)
PORTER_HIP_DRIVER(hipDrvPointerGetAttributes, cuPointerGetAttributes)
PORTER_HIP_DRIVER(hipStreamWaitValue32, cuStreamWaitValue32)
PORTER_HIP_DRIVER(hipStreamWaitValue64, cuStreamWaitValue64)
PORTER_HIP_DRIVER(hipStreamWriteValue32, cuStreamWriteValue32)
PORTER_HIP_DRIVER(hipStreamWriteValue64, cuStreamWriteValue64)
/* virtual memory management */
PORTER_HIP_DRIVER(hipMemAddressFree, cuMemAddressFree)
PORTER_HIP_DRIVER(hipMemAddressReserve, cuMemAddressReserve)
PORTER_HIP_DRIVER(hipMemCreate, cuMemCreate)
PORTER_HIP_DRIVER(hipMemExportToShareableHandle, cuMemExportToShareableHandle)
PORTER_HIP_DRIVER(hipMemGetAccess, cuMemGetAccess)
PORTER_HIP_DRIVER(hipMemGetAllocationGranularity, cuMemGetAllocationGranularity)
PORTER_HIP_DRIVER(hipMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle)
PORTER_HIP_DRIVER(hipMemImportFromShareableHandle, cuMemImportFromShareableHandle)
PORTER_HIP_DRIVER(hipMemMap, cuMemMap)
PORTER_HIP_DRIVER(hipMemMapArrayAsync, cuMemMapArrayAsync)
PORTER_HIP_DRIVER(hipMemRelease, cuMemRelease)
PORTER_HIP_DRIVER(hipMemRetainAllocationHandle, cuMemRetainAllocationHandle)
PORTER_HIP_DRIVER(hipMemSetAccess, cuMemSetAccess)
PORTER_HIP_DRIVER(hipMemUnmap, cuMemUnmap)
/* arrays */
PORTER_HIP_DRIVER(hipArrayCreate, cuArrayCreate)
PORTER_HIP_DRIVER(hipArray3DCreate, cuArray3DCreate)
PORTER_HIP_DRIVER(hipArrayDestroy, cuArrayDestroy)
PORTER_HIP_DRIVER(hipMemcpyAtoH, cuMemcpyAtoH)
PORTER_HIP_DRIVER(hipMemcpyHtoA, cuMemcpyHtoA)
PORTER_HIP_DRIVER(hipMipmappedArrayCreate, cuMipmappedArrayCreate)
PORTER_HIP_DRIVER(hipMipmappedArrayDestroy, cuMipmappedArrayDestroy)
PORTER_HIP_DRIVER(hipMipmappedArrayGetLevel, cuMipmappedArrayGetLevel)
/* texture objects through the driver */
PORTER_HIP_DRIVER(hipTexObjectCreate, cuTexObjectCreate)
PORTER_HIP_DRIVER(hipTexObjectDestroy, cuTexObjectDestroy)
PORTER_HIP_DRIVER(hipTexObjectGetResourceDesc, cuTexObjectGetResourceDesc)
PORTER_HIP_DRIVER(hipTexObjectGetResourceViewDesc, cuTexObjectGetResourceViewDesc)
PORTER_HIP_DRIVER(hipTexObjectGetTextureDesc, cuTexObjectGetTextureDesc)
#undef PORTER_HIP_DRIVER
#endif
#endif /* PORTER_HIP_ON_CUDA_DRIVER_H */
