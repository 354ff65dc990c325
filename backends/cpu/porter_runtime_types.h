// porter_runtime_types.h -- the CUDA runtime's types, enums and flags (porter's own header), shared by
// porter's runtimes that serve a program's host code: the CPU runtime (porter_runtime.h) and the OpenCL
// program runtime (backends/opencl/porter_opencl.h).  Each runtime defines struct porter_stream and
// struct porter_event its own way.  Needs porter_runtime_data.h (cudaError_t, cudaDeviceProp).
#ifndef PORTER_RUNTIME_TYPES_H
#define PORTER_RUNTIME_TYPES_H

#define __CUDA_RUNTIME_H__ 1
#define __DRIVER_TYPES_H__ 1
#define __CUDA_RUNTIME_API_H__ 1
#ifndef PORTER_HIP  // HIP defines no CUDA version (HIP_VERSION numbers ROCm): a HIP port built here sees none either
#define CUDART_VERSION PORTER_RUNTIME_VERSION
#define __CUDART_API_VERSION PORTER_RUNTIME_VERSION
#define CUDA_VERSION PORTER_RUNTIME_VERSION
#endif
#define PORTER_CPU_RUNTIME 1
#define HIP_INCLUDE_HIP_HIP_RUNTIME_H 1  // the guards ported HIP code tests (from __CUDA_RUNTIME_H__)
#define HIP_INCLUDE_HIP_DRIVER_TYPES_H 1

typedef struct porter_stream* cudaStream_t;
typedef struct porter_event* cudaEvent_t;
typedef cudaError_t hipError_t;
#define cudaStreamLegacy ((cudaStream_t)0)
#define cudaStreamPerThread ((cudaStream_t)0)

enum cudaFuncCache {
    cudaFuncCachePreferNone = 0,
    cudaFuncCachePreferShared = 1,
    cudaFuncCachePreferL1 = 2,
    cudaFuncCachePreferEqual = 3
};
enum cudaSharedMemConfig {
    cudaSharedMemBankSizeDefault = 0,
    cudaSharedMemBankSizeFourByte = 1,
    cudaSharedMemBankSizeEightByte = 2
};
enum cudaComputeMode {
    cudaComputeModeDefault = 0,
    cudaComputeModeExclusive = 1,
    cudaComputeModeProhibited = 2,
    cudaComputeModeExclusiveProcess = 3
};
enum cudaLimit {
    cudaLimitStackSize = 0,
    cudaLimitPrintfFifoSize = 1,
    cudaLimitMallocHeapSize = 2,
    cudaLimitDevRuntimeSyncDepth = 3,
    cudaLimitDevRuntimePendingLaunchCount = 4,
    cudaLimitMaxL2FetchGranularity = 5
};
enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
};
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2, cudaMemoryTypeManaged = 3 };
enum cudaMemoryAdvise { cudaMemAdviseSetReadMostly = 1, cudaMemAdviseUnsetReadMostly = 2, cudaMemAdviseSetPreferredLocation = 3,
                        cudaMemAdviseUnsetPreferredLocation = 4, cudaMemAdviseSetAccessedBy = 5, cudaMemAdviseUnsetAccessedBy = 6 };
#define cudaCpuDeviceId (-1)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaHostRegisterDefault 0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02
#define cudaMemAttachSingle 0x04
#define cudaDeviceScheduleAuto 0x00
#define cudaDeviceScheduleSpin 0x01
#define cudaDeviceScheduleYield 0x02
#define cudaDeviceScheduleBlockingSync 0x04
#define cudaDeviceBlockingSync 0x04
#define cudaDeviceMapHost 0x08
#define cudaDeviceLmemResizeToMax 0x10

struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void* devicePointer;
    void* hostPointer;
};
struct cudaFuncAttributes {
    size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
    int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes,
        preferredShmemCarveout;
};
struct cudaPitchedPtr {
    void* ptr;
    size_t pitch, xsize, ysize;
};
struct cudaExtent {
    size_t width, height, depth;
};
static inline cudaPitchedPtr make_cudaPitchedPtr(void* d, size_t p, size_t xsz, size_t ysz) { return {d, p, xsz, ysz}; }
static inline cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) { return {w, h, d}; }

#endif  // PORTER_RUNTIME_TYPES_H
