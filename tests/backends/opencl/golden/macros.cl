/* OpenCL C translation of macros.cu by porter (CUDA -> OpenCL C 1.2). */

/* Object-like and function-like macros, a local include, comments. */
/* porter: inlined "golden_macros.cuh" (device code only) */
// A local header: its device-side macros and helpers are inlined.

#define SQR(x) ((x) * (x))
#define GLOBAL_TID (((uint)get_group_id(0)) * ((uint)get_local_size(0)) + ((uint)get_local_id(0)))

static inline float norm2(float a, float b) { return sqrt(SQR(a) + SQR(b)); }

/* porter: end of "golden_macros.cuh" */

#define BLOCK 128
#define SYNC() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#define BIG 1UL << 40

// Every comment is kept.
__kernel void magnitudes(__global const float2* v, __global float* out, int n)
{
    __local float cache[BLOCK];
    int i = GLOBAL_TID;  /* macro with built-ins */
    cache[(uint)get_local_id(0)] = i < n ? norm2(v[i].x, v[i].y) : 0.0f;
    SYNC();
    if (i < n) out[i] = cache[(uint)get_local_id(0)] + (float)(BIG >> 40) - 1.0f;
}
