/* OpenCL C translation of namespaces.cu by porter (CUDA -> OpenCL C 1.2). */

// Kernels and helpers in namespaces, plain ones and ones opened through macros (as CUB and
// Thrust do).  OpenCL C has no namespaces: their contents are translated at file scope, `ns::f`
// becomes `f`, and a C++ template type, which no OpenCL C compiler takes, is left out.
#define LIB_BEGIN namespace lib { inline namespace v1 {
#define LIB_END } }
#define NS_BEGIN(name) namespace name {
#define NS_END(name) }
#define LIB_HIDDEN __attribute__((visibility("hidden")))

/* porter: namespace lib { */
/* porter: namespace detail { */

/* porter: template <typename T> struct Pair omitted: OpenCL C has no templates */

float squared(float x) { return x * x; }

/* porter: end of namespace */

/* porter: namespace ops { */
float twice(float x) { return 2.0f * x; }
/* porter: end of namespace */  // namespace ops

 __kernel void sum_of_squares(__global const float* a, __global const float* b, __global float* out, int n) {
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (i < n) out[i] = squared(a[i]) + squared(b[i]);
}

__kernel void doubled(__global float* data, int n) {
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (i < n) data[i] = twice(data[i]);
}

/* porter: end of namespace */
