/* porter: <assert.h> for NVRTC. Device printf, assert, malloc, memcpy and size_t are built into
 * NVRTC, so nothing else is needed for device code. */
