#include <hip/hip_runtime.h>
#line 1
// conditionals.cu -- CUDA in every branch of #if / #ifdef / #elif / #else: a build of any
// configuration gets HIP names, whichever branch the scan sees as active.
#ifdef USE_HALF
#include <hip/hip_fp16.h>
typedef __half real;
#elif defined(USE_BF16)
#include <hip/hip_bf16.h>
typedef __hip_bfloat16 real;
#else
#include <hip/hip_runtime.h>
typedef float real;
#endif

#if defined(__HIPCC__)
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
static int copy_in(float* d, const float* h, int n, hipStream_t s)
{
    return hipMemcpyAsync(d, h, n * sizeof(float), hipMemcpyHostToDevice, s) != hipSuccess;
}
#else
static int copy_in(float* d, const float* h, int n, hipStream_t)
{
    return hipMemcpy(d, h, n * sizeof(float), hipMemcpyHostToDevice) != hipSuccess;
}
#endif

int main()
{
    const int n = 256;
    float h[n] = {0};
    float* d = nullptr;
    hipStream_t s;
    hipStreamCreate(&s);
    hipMalloc(&d, n * sizeof(float));
    if (copy_in(d, h, n, s)) return 1;
#if USE_EVENTS
    hipEvent_t start, stop;
    hipEventCreate(&start);
    hipEventCreate(&stop);
    hipEventRecord(start, s);
    square<<<n / 64, 64, 0, s>>>(d, n);
    hipEventRecord(stop, s);
    hipEventSynchronize(stop);
    float ms = 0.0f;
    hipEventElapsedTime(&ms, start, stop);
    hipEventDestroy(start);
    hipEventDestroy(stop);
#elif USE_GRAPH
    hipGraph_t graph;
    hipGraphExec_t exec;
    hipStreamBeginCapture(s, hipStreamCaptureModeGlobal);
    square<<<n / 64, 64, 0, s>>>(d, n);
    hipStreamEndCapture(s, &graph);
    hipGraphInstantiateWithFlags(&exec, graph, 0);
    hipGraphLaunch(exec, s);
    hipGraphExecDestroy(exec);
    hipGraphDestroy(graph);
#else
    square<<<n / 64, 64, 0, s>>>(d, n);
#endif
#if 0
    hipDeviceReset();
#endif
    hipStreamSynchronize(s);
    hipFree(d);
    hipStreamDestroy(s);
    return 0;
}
