// A small header in the shape of HIP's AMD-platform headers, written for porter's generator test.
typedef enum hipMemcpyKind { hipMemcpyHostToHost = 0, hipMemcpyHostToDevice = 1 } hipMemcpyKind;
typedef enum hipFuncCache_t { hipFuncCachePreferNone } hipFuncCache_t;
typedef void* hipDeviceptr_t;
typedef struct hipArray* hipArray_t;
typedef enum hipError_t { hipSuccess = 0, hipErrorOutOfMemory = 2, hipErrorUnknown = 999 } hipError_t;
#define hipHostMallocMapped 0x2
hipError_t hipMalloc(void** p, size_t n);
hipError_t hipHostMalloc(void** p, size_t n, unsigned int f);
hipError_t hipHostAlloc(void** p, size_t n, unsigned int f);
hipError_t hipMemcpyHtoD(hipDeviceptr_t d, void* s, size_t n);
hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* e, hipGraph_t g, unsigned long long f);
