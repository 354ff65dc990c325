// Warp shuffles and votes become sub-group functions (guarded by their extensions).
__device__ float warp_sum(float v)
{
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

__global__ void votes(const float* in, unsigned int* ballots, int* flags, float* sums)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    unsigned int b = __ballot_sync(0xffffffff, v > 0.0f);
    int all = __all_sync(0xffffffff, v > 0.0f);
    int any = __any_sync(0xffffffff, v < 0.0f);
    float first = __shfl_sync(0xffffffff, v, 0);
    float x = __shfl_xor_sync(0xffffffff, v, 1);
    __syncwarp();
    ballots[i] = b;
    flags[i] = all * 2 + any;
    sums[i] = warp_sum(v) + first + x;
}

// Generic in the warp size: needs sub-groups of any width, no required size.
__global__ void generic_sum(const float* in, float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = warp_sum(in[i]);
}

// A literal width of 32 is the whole warp only with 32-wide sub-groups.
__global__ void width32(float* p)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    p[i] = __shfl_xor_sync(0xffffffff, p[i], 1, 32);
}
