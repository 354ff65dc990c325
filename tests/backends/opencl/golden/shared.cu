// Static __shared__ (also in a nested block), extern __shared__ arrays and pointers into them.
#define TILE 32

__global__ void tile_transpose(const float* in, float* out, int n)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    if (x < n && y < n) {
        tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    }
    __syncthreads();
    if (n > 0) {
        __shared__ int flag;  /* hoisted to the kernel's top */
        flag = 1;
    }
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < n && y < n) {
        out[y * n + x] = tile[threadIdx.x][threadIdx.y];
    }
}

__global__ void two_extern(const float* in, float* out)
{
    extern __shared__ float sdata[];
    extern __shared__ int sidx[];  // aliases sdata, as in CUDA
    float* half = sdata + blockDim.x / 2;
    const float* src = in + blockIdx.x * blockDim.x;
    sdata[threadIdx.x] = src[threadIdx.x];
    __syncthreads();
    int* bits = (int*)sdata;
    out[blockIdx.x * blockDim.x + threadIdx.x] = half[0] + (float)(bits[0] & 1) + (float)sidx[1];
}
