// CUDA runtime and driver types and enumerators (names as the CUDA reference spells them), written for
// porter's tests.
#include <hip/hip_runtime.h>
#include <hip/hip_runtime.h>

int run_types() {
    hipDeviceProp_t prop;
    hipGetDeviceProperties(&prop, 0);
    int sms = 0;
    hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, 0);
    hipFuncCache_t cfg;
    hipDeviceGetCacheConfig(&cfg);
    hipDeviceSetCacheConfig(hipFuncCachePreferL1);
    hipMemcpyKind kind = hipMemcpyHostToDevice;
    hipError_t err = hipErrorInvalidValue;
    hipComputeMode mode = hipComputeModeDefault;
    hipStreamCaptureStatus capture = hipStreamCaptureStatusNone;
    hipChannelFormatDesc desc = hipCreateChannelDesc(32, 0, 0, 0, hipChannelFormatKindFloat);
    hipExtent ext = make_hipExtent(4, 4, 4);
    hipPitchedPtr pitched;
    hipMalloc3D(&pitched, ext);
    hipArray_t array = nullptr;
    hipDeviceptr_t dptr = 0;
    hipFuncCache_t fcache;
    hipFunction_attribute fattr;
    hipError_t res = hipErrorInvalidValue;
    HIP_ARRAY_DESCRIPTOR adesc;
    adesc.Format = HIP_AD_FORMAT_FLOAT;
    (void)fcache;
    (void)fattr;
    (void)array;
    (void)dptr;
    return (int)kind + (int)err + (int)mode + (int)capture + desc.x + (int)res + (int)cfg + sms;
}
