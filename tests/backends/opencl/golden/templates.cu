// Templates instantiated from launch sites (also through a host template), multi-line launches.
template <typename T, int UNROLL>
__global__ void scale(T* data, T factor, int n)
{
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
    for (int u = 0; u < UNROLL; ++u) {
        if (base + u < n) data[base + u] *= factor;
    }
}

template <typename T>
__global__ void never_launched(T* p) { p[0] = T(0); }

template <typename T>
void launch_scale(T* d, T f, int n)
{
    scale<T, 2><<<(n + 255) / 512, 256>>>(d, f, n);
}

void run(float* df, double* dd, int n)
{
    launch_scale<float>(df, 2.0f, n);
    launch_scale<double>(dd, 0.5, n);
    scale<int, 4>
        <<<(n + 1023) / 1024,  // grid
           256>>>(            /* block */
            (int*)df,
            3, n);
}
