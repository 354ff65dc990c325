/* porter: <stddef.h> for NVRTC; size_t and ptrdiff_t are built into NVRTC. */
