// porter_runtime_c.cpp -- C-linkage entry points of porter's CPU runtime (porter's own file).
//
// A program's C files (compiled by gcc, seeing no porter header) may call the runtime's plain
// functions, as they would call libcudart's.  Each symbol below is the C name (asm label) of a wrapper
// around the C++ runtime of porter_runtime.h; linked into a program only when it has C units.
#include "porter_runtime.h"

#define PORTER_C(ret, name, params, args) \
    extern "C" ret porter_c_##name params __asm__(#name); \
    extern "C" ret porter_c_##name params { return ::name args; }

PORTER_C(cudaError_t, cudaSetDevice, (int d), (d))
PORTER_C(cudaError_t, cudaGetDevice, (int* d), (d))
PORTER_C(cudaError_t, cudaGetDeviceCount, (int* n), (n))
PORTER_C(cudaError_t, cudaGetDeviceProperties, (cudaDeviceProp* p, int d), (p, d))
PORTER_C(cudaError_t, cudaDeviceSynchronize, (void), ())
PORTER_C(cudaError_t, cudaThreadSynchronize, (void), ())
PORTER_C(cudaError_t, cudaDeviceReset, (void), ())
PORTER_C(cudaError_t, cudaThreadExit, (void), ())
PORTER_C(cudaError_t, cudaGetLastError, (void), ())
PORTER_C(cudaError_t, cudaPeekAtLastError, (void), ())
PORTER_C(const char*, cudaGetErrorString, (cudaError_t e), (e))
PORTER_C(cudaError_t, cudaMalloc, (void** p, size_t n), (p, n))
PORTER_C(cudaError_t, cudaMallocHost, (void** p, size_t n), (p, n))
PORTER_C(cudaError_t, cudaFree, (void* p), (p))
PORTER_C(cudaError_t, cudaFreeHost, (void* p), (p))
PORTER_C(cudaError_t, cudaMemcpy, (void* d, const void* s, size_t n, cudaMemcpyKind k), (d, s, n, k))
PORTER_C(cudaError_t, cudaMemset, (void* p, int v, size_t n), (p, v, n))
