// function_symbols.cu -- runtime calls that name a kernel or a __constant__/__device__ symbol, which
// HIP 5.2 takes as `const void*` (kernels) or through HIP_SYMBOL (symbols).
#include <hip/hip_runtime.h>

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

#define SET_SMEM(k, bytes) hipFuncSetAttribute(reinterpret_cast<const void*>(k), hipFuncAttributeMaxDynamicSharedMemorySize, bytes)

int main()
{
    float h[8] = {1, 2, 3, 4, 4, 3, 2, 1};
    hipMemcpyToSymbol(HIP_SYMBOL(coeffs), h, sizeof(h));
    hipMemcpyToSymbolAsync(HIP_SYMBOL(coeffs), h, sizeof(h), 0, hipMemcpyHostToDevice, 0);
    int zero_count = 0;
    hipMemcpyToSymbol(HIP_SYMBOL(counter), &zero_count, sizeof(int));

    hipFuncSetAttribute(reinterpret_cast<const void*>(blur), hipFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
    hipFuncSetAttribute((const void*)blur, hipFuncAttributePreferredSharedMemoryCarveout, 50);
    hipFuncSetAttribute(reinterpret_cast<const void*>(zero<float>), hipFuncAttributeMaxDynamicSharedMemorySize, 1024);
    SET_SMEM(blur, 32 * 1024);
    hipFuncSetCacheConfig(reinterpret_cast<const void*>(blur), hipFuncCachePreferShared);
    hipFuncSetSharedMemConfig(reinterpret_cast<const void*>(blur), hipSharedMemBankSizeFourByte);
    hipFuncAttributes attr;
    hipFuncGetAttributes(&attr, reinterpret_cast<const void*>(blur));

    float* d_coeffs = nullptr;
    size_t bytes = 0;
    hipGetSymbolAddress((void**)&d_coeffs, HIP_SYMBOL(coeffs));
    hipGetSymbolSize(&bytes, HIP_SYMBOL(coeffs));
    int count = 0;
    hipMemcpyFromSymbol(&count, HIP_SYMBOL(counter), sizeof(int));
    hipMemcpyFromSymbolAsync(&count, HIP_SYMBOL(counter), sizeof(int), 0, hipMemcpyDeviceToHost, 0);
    return count;
}
