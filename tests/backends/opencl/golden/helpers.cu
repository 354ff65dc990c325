// Helpers called with pointers into different memories; math, vectors and literal suffixes.
__device__ float sum3(const float* p)
{
    return p[0] + p[1] + p[2];
}

static __device__ __forceinline__ float clamp01(float v) { return __saturatef(v); }

__global__ void mix(const float* in, float4* out, size_t n, bool flip)
{
    __shared__ float buf[64];
    unsigned int t = threadIdx.x;
    buf[t] = in[t];
    __syncthreads();
    float a = sum3(in + t);
    float b = sum3(&buf[t % 60]);
    float c = sqrtf(fabsf(a)) + __expf(b) + rsqrtf(2.0f) + __fdividef(a, 3.0f);
    int r = __float2int_rn(c);
    long long big = 123LL;
    unsigned long long ubig = 0xFFull;
    if (t < n) {
        out[t] = make_float4(clamp01(c), (float)r, (float)(big + ubig), flip ? 1.0f : 0.0f);
    }
}
