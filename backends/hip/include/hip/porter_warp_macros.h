/* porter: HIP's legacy, mask-less warp functions as macros over porter_hip's (hip_runtime.h): defined here, and
 * again after each CUDA header a HIP header wraps (porter_warp_macros_off.h set them aside).  No include
 * guard: each wrapped include reads it again. */
#define __shfl(...) porter_hip::shfl(__VA_ARGS__)
#define __shfl_up(...) porter_hip::shfl_up(__VA_ARGS__)
#define __shfl_down(...) porter_hip::shfl_down(__VA_ARGS__)
#define __shfl_xor(...) porter_hip::shfl_xor(__VA_ARGS__)
#define __ballot(p) porter_hip::ballot(p)
#define __any(p) porter_hip::any(p)
#define __all(p) porter_hip::all(p)
#define __lane_id() porter_hip::lane_id()
