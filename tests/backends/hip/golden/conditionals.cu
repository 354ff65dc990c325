// conditionals.cu -- CUDA in every branch of #if / #ifdef / #elif / #else: a build of any
// configuration gets HIP names, whichever branch the scan sees as active.
#ifdef USE_HALF
#include <cuda_fp16.h>
typedef __half real;
#elif defined(USE_BF16)
#include <cuda_bf16.h>
typedef __nv_bfloat16 real;
#else
#include <cuda_runtime.h>
typedef float real;
#endif

#if defined(__CUDACC__)
#define DEVICE_INLINE __device__ __forceinline__
#else
#define DEVICE_INLINE inline
#endif

DEVICE_INLINE float twice(float v) { return 2.0f * v; }

__global__ void square(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = twice(x[i]) * x[i];
}

#ifndef NO_ASYNC
static int copy_in(float* d, const float* h, int n, cudaStream_t s)
{
    return cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s) != cudaSuccess;
}
#else
static int copy_in(float* d, const float* h, int n, cudaStream_t)
{
    return cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess;
}
#endif

int main()
{
    const int n = 256;
    float h[n] = {0};
    float* d = nullptr;
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaMalloc(&d, n * sizeof(float));
    if (copy_in(d, h, n, s)) return 1;
#if USE_EVENTS
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, s);
    square<<<n / 64, 64, 0, s>>>(d, n);
    cudaEventRecord(stop, s);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
#elif USE_GRAPH
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    square<<<n / 64, 64, 0, s>>>(d, n);
    cudaStreamEndCapture(s, &graph);
    cudaGraphInstantiateWithFlags(&exec, graph, 0);
    cudaGraphLaunch(exec, s);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
#else
    square<<<n / 64, 64, 0, s>>>(d, n);
#endif
#if 0
    cudaDeviceReset();
#endif
    cudaStreamSynchronize(s);
    cudaFree(d);
    cudaStreamDestroy(s);
    return 0;
}
