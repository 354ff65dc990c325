// CUDA driver API: device, context, memory, module and launch calls (names as the CUDA Driver API
// reference spells them), written for porter's tests.
#include <cuda.h>
#include <stdio.h>

int run_driver(const char* image) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr d;
    CUresult r;
    cuInit(0);
    cuDeviceGet(&dev, 0);
    int major = 0, count = 0;
    cuDeviceGetCount(&count);
    cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cuCtxCreate(&ctx, 0, dev);
    r = cuMemAlloc(&d, 256 * sizeof(float));
    if (r != CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY) return 1;
    float h[256] = {0};
    cuMemcpyHtoD(d, h, sizeof h);
    cuModuleLoadData(&mod, image);
    cuModuleGetFunction(&fn, mod, "scale");
    void* args[] = {&d};
    cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, 0, args, 0);
    cuCtxSynchronize();
    cuMemcpyDtoH(h, d, sizeof h);
    size_t free_b = 0, total_b = 0;
    cuMemGetInfo(&free_b, &total_b);
    cuMemFree(d);
    cuModuleUnload(mod);
    cuCtxDestroy(ctx);
    printf("%d %d %f\n", count, major, h[0]);
    return 0;
}
