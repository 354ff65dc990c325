/* OpenCL C translation of helpers.cu by porter (CUDA -> OpenCL C 1.2). */
/* CUDA's fast-math intrinsics: OpenCL's native_ functions where the build defines PORTER_NATIVE_MATH (porter's
 * builds do on GPUs whose native_ functions are the approximations CUDA's use), else full precision */
#if defined(PORTER_NATIVE_MATH)
#define porter_fast_exp(x) native_exp(x)
#define porter_fast_divide(x, y) native_divide(x, y)
#else
#define porter_fast_exp(x) exp(x)
#define porter_fast_divide(x, y) ((x) / (y))
#endif

// Helpers called with pointers into different memories; math, vectors and literal suffixes.
float sum3(__global const float* p)
{
    return p[0] + p[1] + p[2];
}

float sum3__local(__local const float* p)
{
    return p[0] + p[1] + p[2];
}

static inline float clamp01(float v) { return clamp(v, 0.0f, 1.0f); }

__kernel void mix_(__global const float* in, __global float4* out, ulong n, uchar flip)
{
    __local float buf[64];
    unsigned int t = (uint)get_local_id(0);
    buf[t] = in[t];
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    float a = sum3(in + t);
    float b = sum3__local(&buf[t % 60]);
    float c = sqrt(fabs(a)) + porter_fast_exp(b) + rsqrt(2.0f) + porter_fast_divide(a, 3.0f);
    int r = convert_int_rte(c);
    long big = 123L;
    ulong ubig = 0xFFul;
    if (t < n) {
        out[t] = (float4)(clamp01(c), (float)r, (float)(big + ubig), flip ? 1.0f : 0.0f);
    }
}
