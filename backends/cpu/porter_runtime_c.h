/* porter_runtime_c.h -- the C view of porter's CPU runtime (porter's own header).
 *
 * A program's C files see this instead of porter_runtime.h (which is C++): the error codes, the device
 * properties, the copy kinds and the plain runtime functions, which porter_runtime_c.cpp defines with
 * C linkage.  The list below is the one both use. */
#ifndef PORTER_RUNTIME_C_H
#define PORTER_RUNTIME_C_H
#include <stddef.h>
#include <string.h>
#include "porter_runtime_data.h"

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

#define PORTER_C_API(X)                                                                        \
    X(cudaError_t, cudaSetDevice, (int d), (d))                                                \
    X(cudaError_t, cudaGetDevice, (int* d), (d))                                               \
    X(cudaError_t, cudaGetDeviceCount, (int* n), (n))                                          \
    X(cudaError_t, cudaGetDeviceProperties, (cudaDeviceProp * p, int d), (p, d))               \
    X(cudaError_t, cudaDeviceSynchronize, (void), ())                                          \
    X(cudaError_t, cudaThreadSynchronize, (void), ())                                          \
    X(cudaError_t, cudaDeviceReset, (void), ())                                                \
    X(cudaError_t, cudaThreadExit, (void), ())                                                 \
    X(cudaError_t, cudaGetLastError, (void), ())                                               \
    X(cudaError_t, cudaPeekAtLastError, (void), ())                                            \
    X(const char*, cudaGetErrorString, (cudaError_t e), (e))                                   \
    X(const char*, cudaGetErrorName, (cudaError_t e), (e))                                     \
    X(cudaError_t, cudaMalloc, (void** p, size_t n), (p, n))                                   \
    X(cudaError_t, cudaMallocHost, (void** p, size_t n), (p, n))                               \
    X(cudaError_t, cudaFree, (void* p), (p))                                                   \
    X(cudaError_t, cudaFreeHost, (void* p), (p))                                               \
    X(cudaError_t, cudaMemcpy, (void* d, const void* s, size_t n, cudaMemcpyKind k), (d, s, n, k)) \
    X(cudaError_t, cudaMemset, (void* p, int v, size_t n), (p, v, n))

#ifndef __cplusplus
#define PORTER_C_DECLARE(ret, name, params, args) ret name params;
PORTER_C_API(PORTER_C_DECLARE)
#undef PORTER_C_DECLARE
#define __CUDA_RUNTIME_H__ 1
#define __DRIVER_TYPES_H__ 1
#define HIP_INCLUDE_HIP_HIP_RUNTIME_H 1
#define HIP_INCLUDE_HIP_DRIVER_TYPES_H 1
#ifndef PORTER_HIP  // as porter_runtime_types.h: HIP defines no CUDA version
#define CUDART_VERSION PORTER_RUNTIME_VERSION
#endif
#include "porter_hip_names.h"
#endif
#endif
