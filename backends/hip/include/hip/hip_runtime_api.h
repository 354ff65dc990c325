/* porter: HIP-on-CUDA; the runtime API names live in hip_runtime.h. */
#include <hip/hip_runtime.h>
