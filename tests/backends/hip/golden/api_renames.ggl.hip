// api_renames.cu -- runtime and driver API, types, error codes and constants.
#include <hip/hip_runtime.h>
#include <hip/hip_runtime.h>
#include <cstdio>

__global__ void fill(float* p, float v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

int runtime_api(int n)
{
    hipDeviceProp_t prop;
    hipError_t err = hipGetDeviceProperties(&prop, 0);
    if (err != hipSuccess) {
        printf("cudaGetDeviceProperties failed: %s\n", hipGetErrorString(err));
        return 1;
    }
    int sms = 0;
    hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, 0);
    float *d = nullptr, *h = nullptr;
    hipMalloc((void**)&d, n * sizeof(float));
    hipHostMalloc((void**)&h, n * sizeof(float));
    hipStream_t stream;
    hipStreamCreateWithFlags(&stream, hipStreamNonBlocking);
    hipEvent_t start, stop;
    hipEventCreate(&start);
    hipEventCreate(&stop);
    hipEventRecord(start, stream);
    hipLaunchKernelGGL(fill, (n + 255) / 256, 256, 0, stream, d, 1.0f, n);
    hipEventRecord(stop, stream);
    hipMemcpyAsync(h, d, n * sizeof(float), hipMemcpyDeviceToHost, stream);
    hipStreamSynchronize(stream);
    float ms = 0.0f;
    hipEventElapsedTime(&ms, start, stop);
    if (hipGetLastError() == hipErrorOutOfMemory) return 2;
    hipDeviceSynchronize();  // removed in CUDA 13
    hipFuncSetAttribute(reinterpret_cast<const void*>(fill), hipFuncAttributeMaxDynamicSharedMemorySize, 65536);
    int blocks = 0;
    hipOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fill, 256, 0);
    hipEventDestroy(start);
    hipEventDestroy(stop);
    hipStreamDestroy(stream);
    hipHostFree(h);
    hipFree(d);
    return prop.major;
}

int driver_api(const char* path)
{
    hipDevice_t dev;
    hipCtx_t ctx;
    hipModule_t mod;
    hipFunction_t fn;
    hipDeviceptr_t buf;
    hipError_t r = hipInit(0);
    if (r != hipSuccess) return 1;
    hipDeviceGet(&dev, 0);
    hipCtxCreate(&ctx, 0, dev);
    hipModuleLoad(&mod, path);
    hipModuleGetFunction(&fn, mod, "fill");
    hipMalloc(&buf, 1024);
    void* args[] = {&buf};
    hipModuleLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr);
    hipFree(buf);
    hipCtxDestroy(ctx);
    return 0;
}
