// qualified_launches.cu -- launches of kernels named through namespaces and template arguments.
#include <cuda_runtime.h>

__global__ void test_0() {}

namespace physics {
__global__ void step(float* x, float dt) { x[threadIdx.x] += dt; }
namespace detail {
template <typename T, int Unroll>
__global__ void clear(T* p)
{
    for (int u = 0; u < Unroll; ++u) p[threadIdx.x * Unroll + u] = T(0);
}
}  // namespace detail
}  // namespace physics

template <typename T, int N>
__global__ void kern(T* p)
{
    p[threadIdx.x] = T(N);
}

template <typename T>
void launch_all(T* p, cudaStream_t s)
{
    kern<T, 4><<<1, 32, 0, s>>>(p);
    physics::detail::clear<T, 2><<<dim3(1), dim3(16), 0, s>>>(p);
}

int main()
{
    float* p;
    cudaMalloc(&p, 64 * sizeof(float));
    ::test_0<<<1, 1>>>();
    physics::step<<<1, 64>>>(p, 0.1f);
    ::physics::step<<<dim3(1, 1, 1), dim3(64)>>>(p, 0.2f);
    kern<float, 4><<<1, 64>>>(p);
    launch_all<float>(p, 0);
    cudaDeviceSynchronize();
    cudaFree(p);
    return 0;
}
