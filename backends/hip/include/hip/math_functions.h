/* porter: HIP-on-CUDA; the device math functions are CUDA's built-ins. */
#include <hip/hip_runtime.h>
