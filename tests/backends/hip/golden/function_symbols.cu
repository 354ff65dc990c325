// function_symbols.cu -- runtime calls that name a kernel or a __constant__/__device__ symbol, which
// HIP 5.2 takes as `const void*` (kernels) or through HIP_SYMBOL (symbols).
#include <cuda_runtime.h>

__constant__ float coeffs[8];
__device__ int counter;

__global__ void blur(const float* in, float* out, int n)
{
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = tile[threadIdx.x] * coeffs[i % 8];
    if (i == 0) atomicAdd(&counter, 1);
}

template <typename T>
__global__ void zero(T* p)
{
    p[threadIdx.x] = T(0);
}

#define SET_SMEM(k, bytes) cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)

int main()
{
    float h[8] = {1, 2, 3, 4, 4, 3, 2, 1};
    cudaMemcpyToSymbol(coeffs, h, sizeof(h));
    cudaMemcpyToSymbolAsync(coeffs, h, sizeof(h), 0, cudaMemcpyHostToDevice, 0);
    int zero_count = 0;
    cudaMemcpyToSymbol(counter, &zero_count, sizeof(int));

    cudaFuncSetAttribute(blur, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
    cudaFuncSetAttribute((const void*)blur, cudaFuncAttributePreferredSharedMemoryCarveout, 50);
    cudaFuncSetAttribute(zero<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);
    SET_SMEM(blur, 32 * 1024);
    cudaFuncSetCacheConfig(blur, cudaFuncCachePreferShared);
    cudaFuncSetSharedMemConfig(blur, cudaSharedMemBankSizeFourByte);
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, blur);

    float* d_coeffs = nullptr;
    size_t bytes = 0;
    cudaGetSymbolAddress((void**)&d_coeffs, coeffs);
    cudaGetSymbolSize(&bytes, coeffs);
    int count = 0;
    cudaMemcpyFromSymbol(&count, counter, sizeof(int));
    cudaMemcpyFromSymbolAsync(&count, counter, sizeof(int), 0, cudaMemcpyDeviceToHost, 0);
    return count;
}
