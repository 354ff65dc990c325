// Kernels and helpers declared through qualifier macros, and a static kernel.
#ifdef __CUDACC__
#define HOST_DEVICE __host__ __device__
#else
#define HOST_DEVICE
#endif
#define KERNEL __global__
#define DEVICE_INLINE __device__ __forceinline__
#define ATTRS __attribute__((always_inline))
#define HELPER DEVICE_INLINE ATTRS

HOST_DEVICE inline float clamp01(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

HELPER float half_of(float x) { return 0.5f * x; }

KERNEL void normalise(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = clamp01(half_of(in[i]));
}

static __global__ void reset(int* flags, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) flags[i] = 0;
}

static KERNEL void bump(int* flags, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) flags[i] += 1;
}
