// A small header in the shape of HIP's NVIDIA-platform headers, written for porter's generator test.
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipHostMallocMapped cudaHostAllocMapped
#define hipHostMallocCoherent 0x0
typedef enum cudaFuncCache hipFuncCache_t;
typedef CUdeviceptr hipDeviceptr_t;
typedef struct cudaArray* hipArray_t;

inline static hipError_t hipCUDAErrorTohipError(cudaError_t e) {
    switch (e) {
        case cudaSuccess:
            return hipSuccess;
        case cudaErrorMemoryAllocation:
            return hipErrorOutOfMemory;
        case cudaErrorUnknown:
        default:
            return hipErrorUnknown;
    }
}

inline static hipError_t hipMalloc(void** p, size_t n) { return hipCUDAErrorTohipError(cudaMalloc(p, n)); }

__HIP_DEPRECATED_MSG("use hipHostMalloc instead")
inline static hipError_t hipHostAlloc(void** p, size_t n, unsigned int f) {
    return hipCUDAErrorTohipError(cudaHostAlloc(p, n, f));
}

inline static hipError_t hipHostMalloc(void** p, size_t n, unsigned int f) {
    return hipCUDAErrorTohipError(cudaHostAlloc(p, n, f));
}

inline static hipError_t hipMemcpyWithStream(void* d, const void* s, size_t n, hipMemcpyKind k, hipStream_t st) {
    cudaError_t e = cudaMemcpyAsync(d, s, n, k, st);
    return hipCUDAErrorTohipError(cudaStreamSynchronize(st));
}

inline static hipError_t hipMemcpyHtoD(hipDeviceptr_t d, void* s, size_t n) {
    return hipCUResultTohipError(cuMemcpyHtoD(d, s, n));
}

#if CUDA_VERSION >= CUDA_11040
inline static hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* e, hipGraph_t g, unsigned long long f) {
    return hipCUDAErrorTohipError(cudaGraphInstantiateWithFlags(e, g, f));
}
#endif
