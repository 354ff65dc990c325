// porter_host_decls.h -- the CUDA / HIP host runtime API as a replayed kernel's build sees it (porter's
// own header; porter_emu.h includes it in kernel builds only).
//
// A kernel is replayed from the device code of its file, but the headers that file includes are
// compiled as they are: a timer class whose inline methods call hipEventCreate / hipEventRecord, an
// error check calling cudaGetErrorString, a helper that allocates with cudaMalloc.  Such host code
// builds with the whole program on porter's CPU runtime (porter_runtime.h), and here it builds too:
// the runtime's types, constants and functions are declared.  None of the functions does anything.
// Reached from device code during a launch, one fails the launch with its name ("the host runtime
// call hipEventCreate is not available inside a replayed kernel"), as a GPU compiler would refuse the
// call; reached outside a launch (a static object's constructor, run when the kernel loads) it touches
// nothing and answers cudaSuccess, so an error check around it (`if (e != cudaSuccess) exit(1);`) lets
// the load go on.  No function here calls into the host process: the stubs only format their message
// (snprintf) into the launch's error, as every emulator failure does.
//
// The functions take any arguments (variadic templates, internal linkage): what the build must answer
// is that such code compiles, not how the real runtime would type-check it.  A whole program
// (PORTER_PROGRAM) gets the real runtime from porter_runtime.h instead, never this header.
#ifndef PORTER_HOST_DECLS_H
#define PORTER_HOST_DECLS_H
#if !defined(PORTER_PROGRAM)

// --------------------------------------------------------------------------- types

// Values of CUDA's driver_types.h (runtime.toml's [errors] lists the CPU runtime's, the same).
#define PORTER_HOST_ERRORS(X)                                                                   \
    X(Success, 0) X(ErrorInvalidValue, 1) X(ErrorMemoryAllocation, 2) X(ErrorInitializationError, 3) \
    X(ErrorInvalidConfiguration, 9) X(ErrorInvalidPitchValue, 12) X(ErrorInvalidSymbol, 13)         \
    X(ErrorInvalidHostPointer, 16) X(ErrorInvalidDevicePointer, 17) X(ErrorInvalidMemcpyDirection, 21) \
    X(ErrorMissingConfiguration, 52) X(ErrorPriorLaunchFailure, 53) X(ErrorInvalidDeviceFunction, 98) \
    X(ErrorNoDevice, 100) X(ErrorInvalidDevice, 101) X(ErrorInvalidKernelImage, 200)                \
    X(ErrorNoKernelImageForDevice, 209) X(ErrorInvalidResourceHandle, 400) X(ErrorNotReady, 600)    \
    X(ErrorIllegalAddress, 700) X(ErrorLaunchOutOfResources, 701) X(ErrorLaunchTimeout, 702)        \
    X(ErrorAssert, 710) X(ErrorLaunchFailure, 719) X(ErrorCooperativeLaunchTooLarge, 720)           \
    X(ErrorNotPermitted, 800) X(ErrorNotSupported, 801) X(ErrorUnknown, 999)

#define PORTER_CUDA_ERROR(N, V) cuda##N = V,
typedef enum cudaError { PORTER_HOST_ERRORS(PORTER_CUDA_ERROR) } cudaError_t;
#undef PORTER_CUDA_ERROR
typedef cudaError_t hipError_t;
#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorMemoryAllocation cudaErrorMemoryAllocation
#define hipErrorNotInitialized cudaErrorInitializationError
#define hipErrorInitializationError cudaErrorInitializationError
#define hipErrorInvalidConfiguration cudaErrorInvalidConfiguration
#define hipErrorInvalidSymbol cudaErrorInvalidSymbol
#define hipErrorInvalidDevicePointer cudaErrorInvalidDevicePointer
#define hipErrorInvalidMemcpyDirection cudaErrorInvalidMemcpyDirection
#define hipErrorInvalidDeviceFunction cudaErrorInvalidDeviceFunction
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorInvalidImage cudaErrorInvalidKernelImage
#define hipErrorNoBinaryForGpu cudaErrorNoKernelImageForDevice
#define hipErrorInvalidHandle cudaErrorInvalidResourceHandle
#define hipErrorInvalidResourceHandle cudaErrorInvalidResourceHandle
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorIllegalAddress cudaErrorIllegalAddress
#define hipErrorLaunchOutOfResources cudaErrorLaunchOutOfResources
#define hipErrorLaunchTimeOut cudaErrorLaunchTimeout
#define hipErrorAssert cudaErrorAssert
#define hipErrorLaunchFailure cudaErrorLaunchFailure
#define hipErrorNotSupported cudaErrorNotSupported
#define hipErrorUnknown cudaErrorUnknown

typedef struct porter_stream* cudaStream_t;
typedef struct porter_event* cudaEvent_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0)
#define cudaStreamPerThread ((cudaStream_t)0)
#define hipStreamPerThread ((hipStream_t)0)

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;
typedef cudaMemcpyKind hipMemcpyKind;
#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyDefault cudaMemcpyDefault

// cudaDeviceAttr: the common ones, CUDA's values (HIP's spellings name the same).
typedef enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxBlockDimX = 2,
    cudaDevAttrMaxBlockDimY = 3,
    cudaDevAttrMaxBlockDimZ = 4,
    cudaDevAttrMaxGridDimX = 5,
    cudaDevAttrMaxGridDimY = 6,
    cudaDevAttrMaxGridDimZ = 7,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrClockRate = 13,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrMemoryClockRate = 36,
    cudaDevAttrGlobalMemoryBusWidth = 37,
    cudaDevAttrL2CacheSize = 38,
    cudaDevAttrMaxThreadsPerMultiProcessor = 39,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
} cudaDeviceAttr;
typedef cudaDeviceAttr hipDeviceAttribute_t;
#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipDeviceAttributeMaxBlockDimX cudaDevAttrMaxBlockDimX
#define hipDeviceAttributeMaxBlockDimY cudaDevAttrMaxBlockDimY
#define hipDeviceAttributeMaxBlockDimZ cudaDevAttrMaxBlockDimZ
#define hipDeviceAttributeMaxGridDimX cudaDevAttrMaxGridDimX
#define hipDeviceAttributeMaxGridDimY cudaDevAttrMaxGridDimY
#define hipDeviceAttributeMaxGridDimZ cudaDevAttrMaxGridDimZ
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeClockRate cudaDevAttrClockRate
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeMemoryClockRate cudaDevAttrMemoryClockRate
#define hipDeviceAttributeMemoryBusWidth cudaDevAttrGlobalMemoryBusWidth
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipDeviceAttributeMaxThreadsPerMultiProcessor cudaDevAttrMaxThreadsPerMultiProcessor
#define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define hipDeviceAttributeComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#define hipDeviceAttributeMaxSharedMemoryPerMultiprocessor cudaDevAttrMaxSharedMemoryPerMultiprocessor
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin

// cudaDeviceProp / hipDeviceProp_t: the fields programs commonly read (no function here fills them).
typedef struct cudaDeviceProp {
    char name[256];
    char gcnArchName[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    size_t sharedMemPerMultiprocessor;
    size_t totalConstMem;
    size_t memPitch;
    size_t textureAlignment;
    int regsPerBlock;
    int regsPerMultiprocessor;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    int memoryClockRate;
    int memoryBusWidth;
    int major;
    int minor;
    int multiProcessorCount;
    int maxThreadsPerMultiProcessor;
    int maxBlocksPerMultiProcessor;
    int l2CacheSize;
    int computeMode;
    int concurrentKernels;
    int asyncEngineCount;
    int deviceOverlap;
    int integrated;
    int canMapHostMemory;
    int unifiedAddressing;
    int managedMemory;
    int cooperativeLaunch;
    int kernelExecTimeoutEnabled;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int isMultiGpuBoard;
} cudaDeviceProp;
typedef cudaDeviceProp hipDeviceProp_t;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define hipStreamDefault 0x00
#define hipStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define hipEventDefault 0x00
#define hipEventBlockingSync 0x01
#define hipEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define hipHostMallocDefault 0x00
#define hipHostMallocPortable 0x01
#define hipHostMallocMapped 0x02
#define cudaMemAttachGlobal 0x01
#define hipMemAttachGlobal 0x01
#define cudaDeviceScheduleAuto 0x00
#define hipDeviceScheduleAuto 0x00
#ifndef HIP_KERNEL_NAME
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#endif
#ifndef HIP_SYMBOL
#define HIP_SYMBOL(x) x
#endif

// --------------------------------------------------------------------------- functions

namespace porter_emu __attribute__((visibility("hidden"))) {
// Host code reached: in device code (a launch's thread) the launch fails naming it (and the thread never
// returns here); elsewhere nothing happens.  A runtime function, or a header's host function whose body a
// kernel's own build left out (source.py inert_host_code).
__attribute__((noinline, cold)) inline void host_code_reached(const char* what, const char* name,
                                                                const char* callee) noexcept {
    if (g_cur == nullptr) return;
    char msg[320];
    snprintf(msg, sizeof msg,
             "the %s %s is not available inside a replayed kernel: device code cannot call %s (thread "
             "(%u,%u,%u) of block (%u,%u,%u) called it)",
             what, name, callee, threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z);
    fail(msg);
    leave_thread();
}
inline void host_runtime_call(const char* name) noexcept {
    host_code_reached("host runtime call", name, "the CUDA/HIP host runtime");
}
inline void host_code_left_out(const char* name) noexcept { host_code_reached("host function", name, "host code"); }
}  // namespace porter_emu

// The runtime functions returning an error code: CUDA's spelling and HIP's, each its own stub (so the
// message names the one the code called).
#define PORTER_HOST_API(X)                                                                               \
    X(cudaGetLastError) X(cudaPeekAtLastError) X(cudaGetDevice) X(cudaSetDevice) X(cudaGetDeviceCount)   \
    X(cudaGetDeviceProperties) X(cudaDeviceGetAttribute) X(cudaChooseDevice) X(cudaDeviceSynchronize)    \
    X(cudaThreadSynchronize) X(cudaDeviceReset) X(cudaThreadExit) X(cudaSetDeviceFlags)                  \
    X(cudaGetDeviceFlags) X(cudaDeviceSetCacheConfig) X(cudaDeviceSetLimit) X(cudaDeviceGetLimit)         \
    X(cudaDeviceSetSharedMemConfig) X(cudaDriverGetVersion) X(cudaRuntimeGetVersion) X(cudaMemGetInfo)   \
    X(cudaMalloc) X(cudaFree) X(cudaMallocManaged) X(cudaMallocPitch) X(cudaMallocHost) X(cudaHostAlloc) \
    X(cudaFreeHost) X(cudaHostRegister) X(cudaHostUnregister) X(cudaHostGetDevicePointer)                \
    X(cudaPointerGetAttributes) X(cudaMallocAsync) X(cudaFreeAsync) X(cudaMemcpy) X(cudaMemcpyAsync)     \
    X(cudaMemcpy2D) X(cudaMemcpy2DAsync) X(cudaMemcpyPeer) X(cudaMemcpyToSymbol)                         \
    X(cudaMemcpyToSymbolAsync) X(cudaMemcpyFromSymbol) X(cudaMemcpyFromSymbolAsync)                      \
    X(cudaGetSymbolAddress) X(cudaGetSymbolSize) X(cudaMemset) X(cudaMemsetAsync) X(cudaMemset2D)        \
    X(cudaMemPrefetchAsync) X(cudaMemAdvise) X(cudaStreamCreate) X(cudaStreamCreateWithFlags)            \
    X(cudaStreamCreateWithPriority) X(cudaStreamDestroy) X(cudaStreamSynchronize) X(cudaStreamQuery)     \
    X(cudaStreamWaitEvent) X(cudaEventCreate) X(cudaEventCreateWithFlags) X(cudaEventDestroy)            \
    X(cudaEventRecord) X(cudaEventQuery) X(cudaEventSynchronize) X(cudaEventElapsedTime)                 \
    X(cudaFuncSetAttribute) X(cudaFuncGetAttributes) X(cudaFuncSetCacheConfig)                           \
    X(cudaOccupancyMaxActiveBlocksPerMultiprocessor) X(cudaOccupancyMaxPotentialBlockSize)               \
    X(cudaLaunchKernel) X(cudaLaunchCooperativeKernel) X(cudaProfilerStart) X(cudaProfilerStop)          \
    X(hipGetLastError) X(hipPeekAtLastError) X(hipGetDevice) X(hipSetDevice) X(hipGetDeviceCount)        \
    X(hipGetDeviceProperties) X(hipDeviceGetAttribute) X(hipChooseDevice) X(hipDeviceSynchronize)        \
    X(hipDeviceReset) X(hipSetDeviceFlags) X(hipGetDeviceFlags) X(hipDeviceSetCacheConfig)               \
    X(hipDeviceSetLimit) X(hipDeviceGetLimit) X(hipDeviceSetSharedMemConfig) X(hipDriverGetVersion)      \
    X(hipRuntimeGetVersion) X(hipMemGetInfo) X(hipMalloc) X(hipFree) X(hipMallocManaged)                 \
    X(hipMallocPitch) X(hipHostMalloc) X(hipMallocHost) X(hipHostAlloc) X(hipHostFree) X(hipFreeHost)    \
    X(hipHostRegister) X(hipHostUnregister) X(hipHostGetDevicePointer) X(hipPointerGetAttributes)        \
    X(hipMallocAsync) X(hipFreeAsync) X(hipMemcpy) X(hipMemcpyAsync) X(hipMemcpy2D) X(hipMemcpy2DAsync)  \
    X(hipMemcpyPeer) X(hipMemcpyHtoD) X(hipMemcpyDtoH) X(hipMemcpyDtoD) X(hipMemcpyToSymbol)             \
    X(hipMemcpyToSymbolAsync) X(hipMemcpyFromSymbol) X(hipMemcpyFromSymbolAsync)                         \
    X(hipGetSymbolAddress) X(hipGetSymbolSize) X(hipMemset) X(hipMemsetAsync) X(hipMemsetD32)            \
    X(hipMemset2D) X(hipMemPrefetchAsync) X(hipMemAdvise) X(hipStreamCreate) X(hipStreamCreateWithFlags) \
    X(hipStreamCreateWithPriority) X(hipStreamDestroy) X(hipStreamSynchronize) X(hipStreamQuery)         \
    X(hipStreamWaitEvent) X(hipEventCreate) X(hipEventCreateWithFlags) X(hipEventDestroy)                \
    X(hipEventRecord) X(hipEventQuery) X(hipEventSynchronize) X(hipEventElapsedTime)                     \
    X(hipFuncSetAttribute) X(hipFuncGetAttributes) X(hipFuncSetCacheConfig)                              \
    X(hipOccupancyMaxActiveBlocksPerMultiprocessor) X(hipOccupancyMaxPotentialBlockSize)                 \
    X(hipLaunchKernel) X(hipLaunchKernelGGL) X(hipLaunchCooperativeKernel) X(hipProfilerStart)           \
    X(hipProfilerStop) X(hipInit)
// ... and those returning the text of an error code.
#define PORTER_HOST_API_TEXT(X) X(cudaGetErrorString) X(cudaGetErrorName) X(hipGetErrorString) X(hipGetErrorName)

#define PORTER_HOST_STUB(NAME)                \
    template <class... A>                     \
    static inline cudaError_t NAME(A&&...) {  \
        porter_emu::host_runtime_call(#NAME); \
        return cudaSuccess;                   \
    }
#define PORTER_HOST_TEXT_STUB(NAME)                                      \
    template <class... A>                                                \
    static inline const char* NAME(A&&...) {                             \
        porter_emu::host_runtime_call(#NAME);                            \
        return "(the host runtime is not part of a replayed kernel)";    \
    }
PORTER_HOST_API(PORTER_HOST_STUB)
PORTER_HOST_API_TEXT(PORTER_HOST_TEXT_STUB)
#undef PORTER_HOST_STUB
#undef PORTER_HOST_TEXT_STUB

#endif  // !PORTER_PROGRAM
#endif  // PORTER_HOST_DECLS_H
