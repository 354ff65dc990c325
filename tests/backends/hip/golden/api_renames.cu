// api_renames.cu -- runtime and driver API, types, error codes and constants.
#include <cuda_runtime.h>
#include <cuda.h>
#include <cstdio>

__global__ void fill(float* p, float v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

int runtime_api(int n)
{
    cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, 0);
    if (err != cudaSuccess) {
        printf("cudaGetDeviceProperties failed: %s\n", cudaGetErrorString(err));
        return 1;
    }
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float *d = nullptr, *h = nullptr;
    cudaMalloc((void**)&d, n * sizeof(float));
    cudaMallocHost((void**)&h, n * sizeof(float));
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, stream);
    fill<<<(n + 255) / 256, 256, 0, stream>>>(d, 1.0f, n);
    cudaEventRecord(stop, stream);
    cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    if (cudaGetLastError() == cudaErrorMemoryAllocation) return 2;
    cudaThreadSynchronize();  // removed in CUDA 13
    cudaFuncSetAttribute(fill, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);
    int blocks = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fill, 256, 0);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
    cudaFreeHost(h);
    cudaFree(d);
    return prop.major;
}

int driver_api(const char* path)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr buf;
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) return 1;
    cuDeviceGet(&dev, 0);
    cuCtxCreate(&ctx, 0, dev);
    cuModuleLoad(&mod, path);
    cuModuleGetFunction(&fn, mod, "fill");
    cuMemAlloc(&buf, 1024);
    void* args[] = {&buf};
    cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr);
    cuMemFree(buf);
    cuCtxDestroy(ctx);
    return 0;
}
