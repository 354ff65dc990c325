/* OpenCL C translation of qualifier_macros.cu by porter (CUDA -> OpenCL C 1.2). */

// Kernels and helpers declared through qualifier macros, and a static kernel.
#ifdef __CUDACC__
#define HOST_DEVICE  
#else
#define HOST_DEVICE
#endif
#define KERNEL __kernel
#define DEVICE_INLINE  inline
#define ATTRS __attribute__((always_inline))
#define HELPER DEVICE_INLINE ATTRS

static inline float clamp01(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

static inline float half_of(float x) { return 0.5f * x; }

__kernel void normalise(__global const float* in, __global float* out, int n) {
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (i < n) out[i] = clamp01(half_of(in[i]));
}

__kernel void reset(__global int* flags, int n) {
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (i < n) flags[i] = 0;
}

__kernel void bump(__global int* flags, int n) {
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (i < n) flags[i] += 1;
}
