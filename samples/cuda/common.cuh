// common.cuh -- shared helpers for the Porter CUDA samples.
//
// The kind of header every legacy CUDA project grows: an error-checking
// macro wrapped around every runtime call, a default block size, and a
// couple of tiny host utilities.  Exercises: function-like macro
// (CUDA_CHECK), object-like macro (BLOCK_SIZE), header include resolution.
#ifndef PORTER_SAMPLES_COMMON_CUH
#define PORTER_SAMPLES_COMMON_CUH

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256

#define CUDA_CHECK(call)                                                    \
    do {                                                                    \
        cudaError_t err_ = (call);                                          \
        if (err_ != cudaSuccess) {                                          \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, \
                    __LINE__, cudaGetErrorString(err_));                    \
            exit(EXIT_FAILURE);                                             \
        }                                                                   \
    } while (0)

// Check for launch errors right after a <<<>>> launch.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// Fill a host buffer with deterministic pseudo-random floats in [-1, 1).
static inline void fill_random(float* p, int n, unsigned int seed)
{
    unsigned int s = seed;
    for (int i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
}

#endif  // PORTER_SAMPLES_COMMON_CUH
