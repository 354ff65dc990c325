// macro_launches.cu -- kernel launches and runtime calls written inside #define bodies, the way
// error-checking and launch helpers are commonly written, and launches completed where a macro is used.
#include <cstdio>
#include <hip/hip_runtime.h>

#define THREADS 128

// an error check whose body declares a CUDA type and compares with a CUDA constant
#define CHECK(x) hipError_t err_ = x; if (err_ != hipSuccess) { printf("%s\n", hipGetErrorString(err_)); return 1; }
// a whole launch from the macro's parameters, the kernel's arguments passed through
#define CUDA_LAUNCH(k, g, b, ...) hipLaunchKernelGGL(k, g, b, 0, 0, __VA_ARGS__)
// a whole launch with nothing left to the use
#define COMPLETE_LAUNCH hipLaunchKernelGGL(axpy, 1, n, 0, 0, a, x, y)
// a launch on a stream with dynamic shared memory, then its error check, over continued lines
#define LAUNCH_ON(stream, k, n, ...)                                      \
    do {                                                                  \
        hipLaunchKernelGGL(k, ((n) + THREADS - 1) / THREADS, THREADS,                       \
            THREADS * sizeof(float), stream, __VA_ARGS__);              \
        if (hipGetLastError() != hipSuccess) return 1;                  \
    } while (0)
// a template kernel's launch inside a macro
#define LAUNCH_FILL(T, p, n) hipLaunchKernelGGL(HIP_KERNEL_NAME(fill<T, 2>), 1, THREADS, 0, 0, p, n)
// the grid and block only: the kernel's arguments follow the use
#define GRID_FOR(k, n) k<<<((n) + THREADS - 1) / THREADS, THREADS>>>
// the chevrons only: the kernel is named before the use, its arguments after
#define KERNEL_ARGS3(grid, block, shmem) <<<grid, block, shmem>>>
// an API call as an object-like macro
#define SYNC_ALL hipDeviceSynchronize()

__global__ void axpy(float a, const float* x, float* y)
{
    y[threadIdx.x] += a * x[threadIdx.x];
}

__global__ void scale(float* x, float s, int n)
{
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    if (i < n) x[i] = tile[threadIdx.x] * s;
}

template <typename T, int Step>
__global__ void fill(T* p, int n)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = T(i * Step);
}

int run(int n)
{
    float a = 2.0f;
    float *x, *y;
    hipStream_t stream;
    hipStreamCreate(&stream);
    hipMalloc(&x, n * sizeof(float));
    hipMalloc(&y, n * sizeof(float));
    CUDA_LAUNCH(axpy, 1, n, a, x, y);
    COMPLETE_LAUNCH;
    LAUNCH_ON(stream, scale, n, x, 0.5f, n);
    LAUNCH_FILL(float, y, n);
    hipLaunchKernelGGL(scale, ((n) + THREADS - 1) / THREADS, THREADS, 0, 0, y, a, n);
    hipLaunchKernelGGL(scale, 1, THREADS, THREADS * sizeof(float), 0, x, a, n);
    SYNC_ALL;
    CHECK(hipFree(x));
    hipFree(y);
    hipStreamDestroy(stream);
    return 0;
}

int main()
{
    return run(THREADS);
}
