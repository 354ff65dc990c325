// Kernels and helpers in namespaces, plain ones and ones opened through macros (as CUB and
// Thrust do).  OpenCL C has no namespaces: their contents are translated at file scope, `ns::f`
// becomes `f`, and a C++ template type, which no OpenCL C compiler takes, is left out.
#define LIB_BEGIN namespace lib { inline namespace v1 {
#define LIB_END } }
#define NS_BEGIN(name) namespace name {
#define NS_END(name) }
#define LIB_HIDDEN __attribute__((visibility("hidden")))

LIB_BEGIN
NS_BEGIN(detail)

template <typename T>
struct Pair {
    T first;
    T second;
};

__device__ float squared(float x) { return x * x; }

NS_END(detail)

namespace ops {
__device__ float twice(float x) { return 2.0f * x; }
}  // namespace ops

LIB_HIDDEN __global__ void sum_of_squares(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = detail::squared(a[i]) + ::lib::detail::squared(b[i]);
}

__global__ void doubled(float* data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = ops::twice(data[i]);
}

LIB_END
