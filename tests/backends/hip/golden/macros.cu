// macros.cu -- object-like and function-like macros with CUDA names in their bodies.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define BLOCK 256
#define COPY_KIND cudaMemcpyHostToDevice
#define CHECK(call)                                                          \
    do {                                                                     \
        cudaError_t e_ = (call);  /* cudaError_t in a comment */            \
        if (e_ != cudaSuccess) {                                             \
            fprintf(stderr, "cudaMalloc? no: %s (cudaSuccess expected)\n",  \
                    cudaGetErrorString(e_));                                 \
            exit(1);                                                         \
        }                                                                    \
    } while (0)
#define SYNC() CHECK(cudaDeviceSynchronize())
#define WARP_SUM(v, o) ((v) + __shfl_xor_sync(0xffffffffu, (v), (o)))
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
    CHECK(cudaMalloc(&d, sizeof(h)));
    CHECK(cudaMemcpy(d, h, sizeof(h), COPY_KIND));
    kern<<<1, BLOCK>>>(d);
    SYNC();
    CHECK(cudaFree(d));
    return 0;
}
