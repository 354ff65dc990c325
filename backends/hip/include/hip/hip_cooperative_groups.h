/* porter: HIP-on-CUDA cooperative groups: same namespace and names as CUDA's. */
#ifndef PORTER_HIP_ON_CUDA_COOPERATIVE_GROUPS_H
#define PORTER_HIP_ON_CUDA_COOPERATIVE_GROUPS_H
#include <hip/hip_runtime.h>
#include <cooperative_groups.h>
#endif
