/* porter: HIP-on-CUDA bfloat16: __hip_bfloat16 is CUDA's __nv_bfloat16. */
#ifndef PORTER_HIP_ON_CUDA_BF16_H
#define PORTER_HIP_ON_CUDA_BF16_H
#include <hip/hip_runtime.h>
#include <hip/porter_warp_macros_off.h>
#include <cuda_bf16.h>
#include <hip/porter_warp_macros.h>
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
#endif
