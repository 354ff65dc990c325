// macros.cu -- object-like and function-like macros with CUDA names in their bodies.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <cstdlib>

#define BLOCK 256
#define COPY_KIND hipMemcpyHostToDevice
#define CHECK(call)                                                          \
    do {                                                                     \
        hipError_t e_ = (call);  /* cudaError_t in a comment */            \
        if (e_ != hipSuccess) {                                             \
            fprintf(stderr, "cudaMalloc? no: %s (cudaSuccess expected)\n",  \
                    hipGetErrorString(e_));                                 \
            exit(1);                                                         \
        }                                                                    \
    } while (0)
#define SYNC() CHECK(hipDeviceSynchronize())
#define WARP_SUM(v, o) ((v) + __shfl_xor((v), (o)))
#define MAKE_API(name) cuda##name

__global__ void kern(float* x)
{
    float v = x[threadIdx.x];
    v = WARP_SUM(v, 1);
    x[threadIdx.x] = v;
}

int main()
{
    float* d;
    float h[BLOCK] = {0};
    CHECK(hipMalloc(&d, sizeof(h)));
    CHECK(hipMemcpy(d, h, sizeof(h), COPY_KIND));
    hipLaunchKernelGGL(kern, 1, BLOCK, 0, 0, d);
    SYNC();
    CHECK(hipFree(d));
    return 0;
}
