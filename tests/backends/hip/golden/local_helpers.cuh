// local_helpers.cuh -- a local header: the names it defines are the user's.
#pragma once
#define CUDA_SAFE(x) (x)
static inline int cudaRoundUp(int a, int b) { return (a + b - 1) / b * b; }
