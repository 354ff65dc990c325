/* porter: HIP-on-CUDA cooperative groups: same namespace and names as CUDA's. */
#ifndef PORTER_HIP_ON_CUDA_COOPERATIVE_GROUPS_H
#define PORTER_HIP_ON_CUDA_COOPERATIVE_GROUPS_H
#include <hip/hip_runtime.h>
#include <hip/porter_warp_macros_off.h>
#include <cooperative_groups.h>
#include <hip/porter_warp_macros.h>
#endif
