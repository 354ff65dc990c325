/* porter: HIP-on-CUDA compatibility header (device side), written for porter.
 *
 * Lets HIP device code compile with NVRTC or nvcc for NVIDIA GPUs, so HIP variants are run, not
 * only compiled, wherever an NVIDIA GPU exists.  It maps HIP's device-side names onto CUDA's:
 *   - hipThreadIdx_x ... hipGridDim_z        -> threadIdx/blockIdx/blockDim/gridDim
 *   - HIP_DYNAMIC_SHARED(type, var)          -> extern __shared__ type var[]
 *   - __shfl/__shfl_up/__shfl_down/__shfl_xor without a mask (HIP's legacy forms)
 *                                            -> the CUDA *_sync forms over the full 32-lane warp
 *   - __ballot(p)  -> __ballot_sync(0xffffffff, p) widened to unsigned long long.  HIP returns a
 *                     64-bit mask (64-lane wavefronts on AMD); on NVIDIA only the low 32 bits can
 *                     be set, because warps have 32 lanes.
 *   - __any/__all  -> __any_sync/__all_sync over the full warp;  __lane_id() -> %laneid
 *   - unsafeAtomicAdd/safeAtomicAdd -> atomicAdd
 *   - hipLaunchKernelGGL, and (in a whole program's build) the host runtime: porter_hip_names.h
 * The mask-taking forms (__shfl_sync, __ballot_sync...) and atomics are CUDA's own.  Code using
 * AMD-only builtins (__builtin_amdgcn_*) or assuming 64-lane wavefronts does not become portable
 * through this header.
 */
#ifndef PORTER_HIP_ON_CUDA_RUNTIME_H
#define PORTER_HIP_ON_CUDA_RUNTIME_H

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__
#define __HIP_PLATFORM_NVCC__ 1
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif
#define PORTER_HIP_ON_CUDA 1
/* the guards of ROCm's hip_runtime.h / driver_types.h, which ported code tests (from __CUDA_RUNTIME_H__) */
#define HIP_INCLUDE_HIP_HIP_RUNTIME_H 1
#define HIP_INCLUDE_HIP_DRIVER_TYPES_H 1

#if defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#endif
#if __has_include(<cuda_profiler_api.h>) && !defined(__CUDACC_RTC__)
#include <cuda_profiler_api.h> /* hipProfilerStart/Stop */
#endif
/* the driver API (cuda.h): HIP's module, context, array and driver-memcpy names (hipModuleLaunchKernel ->
 * cuLaunchKernel, hipDeviceptr_t -> CUdeviceptr, HIP_ARRAY_DESCRIPTOR...) map onto it in a host build */
#if __has_include(<cuda.h>) && !defined(__CUDACC_RTC__)
#include <cuda.h>
#endif
/* OpenGL interop: HIP's hip_runtime.h declares hipGLGetDevices, hipGraphicsGLRegisterBuffer... with its own
 * GLuint/GLenum; CUDA's counterparts live in cuda_gl_interop.h, which reads the system's GL headers (Debian:
 * libgl-dev).  Without them those names are missing, as they would be; PORTER_HIP_NO_GL leaves GL out. */
#if __has_include(<GL/gl.h>) && __has_include(<cuda_gl_interop.h>) && !defined(__CUDACC_RTC__) && \
    !defined(PORTER_HIP_NO_GL)
#include <cuda_gl_interop.h>
#endif
/* CUDA headers that declare names the legacy-warp macros below take (__shfl, __any...), read first so
 * the macros never rewrite their declarations (nvcc builds; NVRTC's do not reach them). */
#if !defined(__CUDACC_RTC__)
#if defined(__cplusplus) /* extern "C++": ported code may include this header inside extern "C" { } */
extern "C++" {
#if __has_include(<cooperative_groups.h>)
#include <cooperative_groups.h>
#endif
#if __has_include(<cuda_fp16.h>)
#include <cuda_fp16.h>
#endif
}
#endif
#endif
#endif

/* ---- thread indexing */
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

/* ---- qualifiers and helpers */
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_SYMBOL(x) x
#ifndef __forceinline__
#define __forceinline__ __inline__ __attribute__((always_inline))
#endif
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) \
    kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)

#ifdef __cplusplus /* a ported C file (host code) includes this header too */
extern "C++" {
namespace porter_hip {
static constexpr unsigned int full_mask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T shfl(T var, int src_lane, int width = 32) {
    return __shfl_sync(full_mask, var, src_lane, width);
}
template <typename T>
__device__ __forceinline__ T shfl_up(T var, unsigned int delta, int width = 32) {
    return __shfl_up_sync(full_mask, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T shfl_down(T var, unsigned int delta, int width = 32) {
    return __shfl_down_sync(full_mask, var, delta, width);
}
template <typename T>
__device__ __forceinline__ T shfl_xor(T var, int lane_mask, int width = 32) {
    return __shfl_xor_sync(full_mask, var, lane_mask, width);
}
__device__ __forceinline__ unsigned long long ballot(int predicate) {
    return static_cast<unsigned long long>(__ballot_sync(full_mask, predicate));
}
__device__ __forceinline__ int any(int predicate) { return __any_sync(full_mask, predicate); }
__device__ __forceinline__ int all(int predicate) { return __all_sync(full_mask, predicate); }
__device__ __forceinline__ unsigned int lane_id() {
    unsigned int id;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
    return id;
}
template <typename T>
__device__ __forceinline__ T atomic_add(T* address, T value) {
    return atomicAdd(address, value);
}
}  // namespace porter_hip
}
#endif

/* HIP's legacy, mask-less warp functions (CUDA only has the *_sync forms on sm_70+). */
#include <hip/porter_warp_macros.h>
#define unsafeAtomicAdd(address, value) porter_hip::atomic_add((address), (value))
#define safeAtomicAdd(address, value) porter_hip::atomic_add((address), (value))

/* Host-side type names HIP device code sometimes mentions. */
#if defined(__CUDA_RUNTIME_H__)
typedef cudaStream_t hipStream_t;
typedef cudaError_t hipError_t;
typedef cudaEvent_t hipEvent_t;
#define hipSuccess cudaSuccess
#endif

/* hipDeviceProp_t: CUDA's properties plus the fields HIP keeps and CUDA 13 removed from cudaDeviceProp
 * (clockRate, memoryClockRate, deviceOverlap, computeMode...), read through cudaDeviceGetAttribute, and
 * HIP's own (gcnArchName names the NVIDIA arch, "sm_90"). */
#if defined(__CUDA_RUNTIME_H__) && !defined(__CUDACC_RTC__) && defined(__cplusplus)
#include <stdio.h>
#include <string.h>
#define PORTER_HIP_OWN_DEVICE_PROP 1
extern "C++" {
struct porter_hip_device_prop : cudaDeviceProp {
    int clockRate, memoryClockRate, deviceOverlap, kernelExecTimeoutEnabled, computeMode, maxTexture1DLinear;
    int singleToDoublePrecisionPerfRatio, cooperativeMultiDeviceLaunch, clockInstructionRate, isLargeBar;
    size_t maxSharedMemoryPerMultiProcessor;
    char gcnArchName[256];
};
static inline cudaError_t porter_hip_get_device_properties(porter_hip_device_prop* p, int device) {
    memset(p, 0, sizeof *p);
    cudaError_t e = cudaGetDeviceProperties(static_cast<cudaDeviceProp*>(p), device);
    if (e != cudaSuccess) return e;
    cudaDeviceGetAttribute(&p->clockRate, cudaDevAttrClockRate, device);
    cudaDeviceGetAttribute(&p->memoryClockRate, cudaDevAttrMemoryClockRate, device);
    cudaDeviceGetAttribute(&p->deviceOverlap, cudaDevAttrGpuOverlap, device);
    cudaDeviceGetAttribute(&p->kernelExecTimeoutEnabled, cudaDevAttrKernelExecTimeout, device);
    cudaDeviceGetAttribute(&p->computeMode, cudaDevAttrComputeMode, device);
    cudaDeviceGetAttribute(&p->maxTexture1DLinear, cudaDevAttrMaxTexture1DLinearWidth, device);
    cudaDeviceGetAttribute(&p->singleToDoublePrecisionPerfRatio, cudaDevAttrSingleToDoublePrecisionPerfRatio, device);
    p->clockInstructionRate = p->clockRate;
    p->maxSharedMemoryPerMultiProcessor = p->sharedMemPerMultiprocessor;
    snprintf(p->gcnArchName, sizeof p->gcnArchName, "sm_%d%d", p->major, p->minor);
    return cudaSuccess;
}
}
#define hipDeviceProp_t porter_hip_device_prop
#define hipGetDeviceProperties porter_hip_get_device_properties
#endif

/* CUDA 13 changed signatures HIP 5.2 keeps: memory advice and prefetch take a cudaMemLocation, the graph
 * dependency calls and stream-capture queries take edge data; HIP's forms are kept here (no edge data, a device
 * number, cudaCpuDeviceId for the host).  HIP-only graph node types get values CUDA never returns. */
#if defined(__CUDA_RUNTIME_H__) && !defined(__CUDACC_RTC__) && defined(__cplusplus) && defined(CUDART_VERSION) && \
    CUDART_VERSION >= 13000
extern "C++" {
namespace porter_hip {
static inline cudaMemLocation location(int device) {
    cudaMemLocation where{};
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device == cudaCpuDeviceId ? 0 : device;
    return where;
}
static inline cudaError_t mem_advise(const void* ptr, size_t count, cudaMemoryAdvise advice, int device) {
    return cudaMemAdvise(ptr, count, advice, location(device));
}
static inline cudaError_t mem_prefetch_async(const void* ptr, size_t count, int device, cudaStream_t stream = 0) {
    return cudaMemPrefetchAsync(ptr, count, location(device), 0, stream);
}
static inline cudaError_t graph_add_dependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                                 const cudaGraphNode_t* to, size_t count) {
    return cudaGraphAddDependencies(graph, from, to, nullptr, count);
}
static inline cudaError_t graph_remove_dependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                                    const cudaGraphNode_t* to, size_t count) {
    return cudaGraphRemoveDependencies(graph, from, to, nullptr, count);
}
static inline cudaError_t graph_get_edges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                                          size_t* count) {
    return cudaGraphGetEdges(graph, from, to, nullptr, count);
}
static inline cudaError_t graph_node_get_dependencies(cudaGraphNode_t node, cudaGraphNode_t* nodes, size_t* count) {
    return cudaGraphNodeGetDependencies(node, nodes, nullptr, count);
}
static inline cudaError_t graph_node_get_dependent_nodes(cudaGraphNode_t node, cudaGraphNode_t* nodes,
                                                         size_t* count) {
    return cudaGraphNodeGetDependentNodes(node, nodes, nullptr, count);
}
static inline cudaError_t stream_get_capture_info_v2(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                                     unsigned long long* id = nullptr, cudaGraph_t* graph = nullptr,
                                                     const cudaGraphNode_t** deps = nullptr,
                                                     size_t* count = nullptr) {
    return cudaStreamGetCaptureInfo(stream, status, id, graph, deps, nullptr, count);
}
}  // namespace porter_hip
}
#define hipMemAdvise porter_hip::mem_advise
#define hipMemPrefetchAsync porter_hip::mem_prefetch_async
#define hipGraphAddDependencies porter_hip::graph_add_dependencies
#define hipGraphRemoveDependencies porter_hip::graph_remove_dependencies
#define hipGraphGetEdges porter_hip::graph_get_edges
#define hipGraphNodeGetDependencies porter_hip::graph_node_get_dependencies
#define hipGraphNodeGetDependentNodes porter_hip::graph_node_get_dependent_nodes
#define hipStreamGetCaptureInfo_v2 porter_hip::stream_get_capture_info_v2
#endif
#if defined(__CUDA_RUNTIME_H__) && !defined(__CUDACC_RTC__) && defined(__cplusplus)
static constexpr cudaGraphNodeType hipGraphNodeTypeMemcpy1D = static_cast<cudaGraphNodeType>(0x1001);
static constexpr cudaGraphNodeType hipGraphNodeTypeMemcpyFromSymbol = static_cast<cudaGraphNodeType>(0x1002);
static constexpr cudaGraphNodeType hipGraphNodeTypeMemcpyToSymbol = static_cast<cudaGraphNodeType>(0x1003);
#endif

/* HIP's driver-style calls (hipModuleLaunchKernel, hipCtxCreate, hipMemcpyHtoD...): the driver's, returning
 * cudaError_t and taking HIP's device pointers (hip/porter_hip_driver.h) */
#if defined(__has_include) && !defined(__CUDACC_RTC__) && defined(__cplusplus)
#include "porter_hip_driver.h"
#endif

/* A whole program's host code: every HIP runtime name as the CUDA name it renames (hipMalloc ->
 * cudaMalloc, hipDeviceProp_t -> cudaDeviceProp...), generated from porter's CUDA->HIP table into the
 * program's build folder, and beside a kernel build (backends/hip/names.py): nvcc builds the host
 * helpers a real program's kernel file includes.  NVRTC (device code only) does not see it. */
#if defined(__has_include) && !defined(__CUDACC_RTC__)
#if __has_include("porter_hip_names.h")
#include "porter_hip_names.h"
#endif
#endif

#endif /* PORTER_HIP_ON_CUDA_RUNTIME_H */
