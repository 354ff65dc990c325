// templates.cu -- templated kernels, template launches, CUDA types as template arguments.
#include <hip/hip_runtime.h>

template <typename T, int TILE>
__global__ void scale(T* out, const T* in, T a, int n)
{
    __shared__ T tile[TILE];
    int i = blockIdx.x * TILE + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : T(0);
    __syncthreads();
    if (i < n) out[i] = a * tile[threadIdx.x];
}

template <typename T>
struct Buffer {
    T* ptr;
    hipStream_t stream;
    explicit Buffer(size_t n) { hipMalloc(&ptr, n * sizeof(T)); hipStreamCreate(&stream); }
    ~Buffer() { hipFree(ptr); hipStreamDestroy(stream); }
};

template <typename T>
void run(int n)
{
    Buffer<T> in(n), out(n);
    scale<T, 128><<<(n + 127) / 128, 128, 0, in.stream>>>(out.ptr, in.ptr, T(2), n);
    scale<float, 64><<<dim3((n + 63) / 64), dim3(64)>>>((float*)out.ptr, (const float*)in.ptr, 2.0f, n);
    hipStreamSynchronize(in.stream);
}

template void run<float>(int);
template void run<double>(int);
