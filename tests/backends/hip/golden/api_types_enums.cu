// CUDA runtime and driver types and enumerators (names as the CUDA reference spells them), written for
// porter's tests.
#include <cuda_runtime.h>
#include <cuda.h>

int run_types() {
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaFuncCache cfg;
    cudaDeviceGetCacheConfig(&cfg);
    cudaDeviceSetCacheConfig(cudaFuncCachePreferL1);
    cudaMemcpyKind kind = cudaMemcpyHostToDevice;
    cudaError_t err = cudaErrorInvalidValue;
    cudaComputeMode mode = cudaComputeModeDefault;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaChannelFormatDesc desc = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    cudaExtent ext = make_cudaExtent(4, 4, 4);
    cudaPitchedPtr pitched;
    cudaMalloc3D(&pitched, ext);
    cudaArray_t array = nullptr;
    CUdeviceptr dptr = 0;
    CUfunc_cache fcache;
    CUfunction_attribute fattr;
    CUresult res = CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY_DESCRIPTOR adesc;
    adesc.Format = CU_AD_FORMAT_FLOAT;
    (void)fcache;
    (void)fattr;
    (void)array;
    (void)dptr;
    return (int)kind + (int)err + (int)mode + (int)capture + desc.x + (int)res + (int)cfg + sms;
}
