// porter_cuda_legacy.h -- what CUDA 13 removed from the runtime API that older programs still use, restored
// with the meaning it had, so an original written for an older toolkit builds with today's nvcc as it did.
// Force-included (nvcc -include, through porter_capture_cuda.h) into the original's capturing build and
// into a kernel replay's nvcc build of a unit with host code.  Nothing here changes what a kernel computes.
// * the thread-named functions (cudaThreadSynchronize and friends), deprecated since CUDA 4: each was an
//   alias of the device-wide function it calls;
// * the cudaDeviceProp fields CUDA 13 removed (clockRate, memoryClockRate, deviceOverlap, computeMode...):
//   cudaDeviceProp and cudaGetDeviceProperties name porter's struct and function, which derive from and
//   call CUDA's own and fill those fields from cudaDeviceGetAttribute, as the removed fields read them.
#ifndef PORTER_CUDA_LEGACY_H
#define PORTER_CUDA_LEGACY_H
#if defined(__cplusplus) && defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#include <cuda_runtime.h>
#include <string.h>
#if CUDART_VERSION >= 13000
static inline cudaError_t cudaThreadSynchronize(void) { return cudaDeviceSynchronize(); }
static inline cudaError_t cudaThreadExit(void) { return cudaDeviceReset(); }
static inline cudaError_t cudaThreadSetLimit(cudaLimit l, size_t v) { return cudaDeviceSetLimit(l, v); }
static inline cudaError_t cudaThreadGetLimit(size_t* v, cudaLimit l) { return cudaDeviceGetLimit(v, l); }
static inline cudaError_t cudaThreadSetCacheConfig(cudaFuncCache c) { return cudaDeviceSetCacheConfig(c); }
static inline cudaError_t cudaThreadGetCacheConfig(cudaFuncCache* c) { return cudaDeviceGetCacheConfig(c); }

extern "C++" {
struct porter_cuda_device_prop : cudaDeviceProp {
    int clockRate, memoryClockRate, deviceOverlap, kernelExecTimeoutEnabled, computeMode, maxTexture1DLinear;
    int singleToDoublePrecisionPerfRatio;
};
static inline cudaError_t porter_cuda_get_device_properties(porter_cuda_device_prop* p, int device) {
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
    return cudaSuccess;
}
}
#undef cudaGetDeviceProperties
#define cudaDeviceProp porter_cuda_device_prop
#define cudaGetDeviceProperties porter_cuda_get_device_properties
#endif
#endif
#endif
