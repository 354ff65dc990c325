// launches.cu -- launch forms: 2, 3 and 4 configuration arguments, multi-line, comments inside.
#include <cuda_runtime.h>

__global__ void k1(float* a, int n) { if (threadIdx.x < n) a[threadIdx.x] = 0.0f; }
template <int B> __global__ void k2(float* a, int n) { if (threadIdx.x < B && threadIdx.x < n) a[threadIdx.x] = 1.0f; }

void launch_all(float* a, int n, cudaStream_t s)
{
    k1<<<1, 64>>>(a, n);
    k1<<<dim3(1, 1), dim3(64, 1), 64 * sizeof(float)>>>(a, n);
    k1<<<(n + 63) / 64,   // grid: one block per 64 elements
         64,              /* block */
         0, s>>>(a,       // the buffer
                 n);
    k2<32><<<1, 32, 0, s>>>(a, n);
    k1 <<< 1, 1 >>> (a, n);
}
