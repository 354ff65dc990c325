// util.h -- host helpers of the smooth sample program (plain C++, no CUDA).
#ifndef SMOOTH_UTIL_H
#define SMOOTH_UTIL_H

#include <vector>

// Reads whitespace-separated floats from `path`; false when the file cannot be read.
bool read_values(const char* path, std::vector<float>& values);

// The same filter on the CPU, for the program's own check.
void smooth_reference(const std::vector<float>& in, std::vector<float>& out, int radius,
                      float scale, float offset);

#endif
