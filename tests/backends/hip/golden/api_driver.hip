// CUDA driver API: device, context, memory, module and launch calls (names as the CUDA Driver API
// reference spells them), written for porter's tests.
#include <hip/hip_runtime.h>
#include <stdio.h>

int run_driver(const char* image) {
    hipDevice_t dev;
    hipCtx_t ctx;
    hipModule_t mod;
    hipFunction_t fn;
    hipDeviceptr_t d;
    hipError_t r;
    hipInit(0);
    hipDeviceGet(&dev, 0);
    int major = 0, count = 0;
    hipGetDeviceCount(&count);
    hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, dev);
    hipCtxCreate(&ctx, 0, dev);
    r = hipMalloc(&d, 256 * sizeof(float));
    if (r != hipSuccess || r == hipErrorOutOfMemory) return 1;
    float h[256] = {0};
    hipMemcpyHtoD(d, h, sizeof h);
    hipModuleLoadData(&mod, image);
    hipModuleGetFunction(&fn, mod, "scale");
    void* args[] = {&d};
    hipModuleLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, 0, args, 0);
    hipCtxSynchronize();
    hipMemcpyDtoH(h, d, sizeof h);
    size_t free_b = 0, total_b = 0;
    hipMemGetInfo(&free_b, &total_b);
    hipFree(d);
    hipModuleUnload(mod);
    hipCtxDestroy(ctx);
    printf("%d %d %f\n", count, major, h[0]);
    return 0;
}
