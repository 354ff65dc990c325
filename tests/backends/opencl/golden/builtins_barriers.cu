// Built-ins in three dimensions, barriers and fences.
#include <cstdio>

__global__ void index3d(float* out, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    unsigned int groups = gridDim.x * gridDim.y * gridDim.z;
    out[(z * ny + y) * nx + x] = (float)groups;
    __threadfence();
    __syncthreads();  // the kernel writes global memory: both fences
}

__global__ void read_only(const int* in, size_t n)
{
    if (threadIdx.x == 0 && in[0] > 0) {
        printf("n = %lu\n", (unsigned long)n);
    }
    __syncthreads();  // nothing global is written: local fence only
    __threadfence_block();
}
