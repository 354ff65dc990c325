/* porter: HIP-on-CUDA half precision: HIP's __half/__half2 API has CUDA's names. */
#ifndef PORTER_HIP_ON_CUDA_FP16_H
#define PORTER_HIP_ON_CUDA_FP16_H
#include <hip/hip_runtime.h>
#include <hip/porter_warp_macros_off.h>
#include <cuda_fp16.h>
#include <hip/porter_warp_macros.h>
#endif
