// util.cpp -- host-only code of the smooth sample program: file input and the CPU reference.
#include "util.h"

#include <algorithm>
#include <cstdio>

bool read_values(const char* path, std::vector<float>& values)
{
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) return false;
    float v;
    while (std::fscanf(f, "%f", &v) == 1) values.push_back(v);
    std::fclose(f);
    return !values.empty();
}

void smooth_reference(const std::vector<float>& in, std::vector<float>& out, int radius,
                      float scale, float offset)
{
    int n = static_cast<int>(in.size());
    out.assign(in.size(), 0.0f);
    for (int i = 0; i < n; ++i) {
        float sum = 0.0f;
        for (int d = -radius; d <= radius; ++d) {
            int j = std::min(std::max(i + d, 0), n - 1);
            sum += in[j];
        }
        out[i] = scale * (sum / (2 * radius + 1)) + offset;
    }
}
