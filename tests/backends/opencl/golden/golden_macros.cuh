// A local header: its device-side macros and helpers are inlined.
#pragma once
#define SQR(x) ((x) * (x))
#define GLOBAL_TID (blockIdx.x * blockDim.x + threadIdx.x)
#define HOST_ONLY_CHECK(call) do { if ((call) != cudaSuccess) exit(1); } while (0)

__device__ __forceinline__ float norm2(float a, float b) { return sqrtf(SQR(a) + SQR(b)); }
