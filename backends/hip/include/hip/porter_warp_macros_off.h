/* porter: read before a CUDA header that a HIP header wraps (cooperative_groups.h, cuda_fp16.h, cuda_bf16.h).
 * HIP's legacy warp functions are macros here (porter_warp_macros.h); CUDA 13's headers declare members of
 * those names (CCCL's `__any(...)` constructor), which the macros would rewrite.  NVRTC reads these headers
 * only where the source includes them, after hip_runtime.h: the macros are undefined here and defined again
 * by porter_warp_macros.h after the header (NVRTC has no push_macro).  No include guard. */
#undef __shfl
#undef __shfl_up
#undef __shfl_down
#undef __shfl_xor
#undef __ballot
#undef __any
#undef __all
#undef __lane_id
