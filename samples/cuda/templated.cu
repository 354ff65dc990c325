// templated.cu -- templated kernels instantiated for float and double.
//
// Exercises: a type-templated kernel `axpby<T>` (y = a*x + b*y) launched with
// explicit template arguments for float and double, and a kernel with a
// non-type template parameter `block_sum<BLOCK>` whose static shared array is
// sized by it (`__shared__ float s[BLOCK]`), launched as block_sum<256> and
// block_sum<128> (shared-memory tree reduction, one partial per block).
// Also a templated host helper that launches the kernel.
#include "common.cuh"

template <typename T>
__global__ void axpby(int n, T a, const T* x, T b, T* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + b * y[i];
    }
}

template <int BLOCK>
__global__ void block_sum(const float* in, float* partial, int n)
{
    __shared__ float s[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    s[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) {
            s[tid] += s[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x] = s[0];
    }
}

template <typename T>
static int run_axpby(int n, T a, T b, double tol)
{
    T* h_x = new T[n];
    T* h_y = new T[n];
    T* h_out = new T[n];
    for (int i = 0; i < n; ++i) {
        h_x[i] = (T)((i % 100) * 0.01);
        h_y[i] = (T)((i % 37) * 0.5);
    }
    T *d_x, *d_y;
    CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(T)));
    CUDA_CHECK(cudaMalloc(&d_y, n * sizeof(T)));
    CUDA_CHECK(cudaMemcpy(d_x, h_x, n * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_y, h_y, n * sizeof(T), cudaMemcpyHostToDevice));

    int block = BLOCK_SIZE;
    int grid = (n + block - 1) / block;
    axpby<T><<<grid, block>>>(n, a, d_x, b, d_y);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(h_out, d_y, n * sizeof(T), cudaMemcpyDeviceToHost));

    int errors = 0;
    for (int i = 0; i < n; ++i) {
        double ref = (double)a * (double)h_x[i] + (double)b * (double)h_y[i];
        if (fabs((double)h_out[i] - ref) > tol * (1.0 + fabs(ref))) ++errors;
    }
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
    delete[] h_x;
    delete[] h_y;
    delete[] h_out;
    return errors;
}

int main(void)
{
    int n = 1 << 20;
    float af = 2.0f, bf = 0.5f;
    double ad = -1.25, bd = 3.0;

    int errors = 0;
    errors += run_axpby<float>(n, af, bf, 1e-6);
    errors += run_axpby<double>(n, ad, bd, 1e-12);

    // block_sum with two different compile-time block sizes.
    int m = 1000003;
    float* h_in = (float*)malloc(m * sizeof(float));
    fill_random(h_in, m, 7u);
    double ref = 0.0, abs_sum = 0.0;
    for (int i = 0; i < m; ++i) {
        ref += h_in[i];
        abs_sum += fabs((double)h_in[i]);
    }

    float *d_in, *d_partial;
    CUDA_CHECK(cudaMalloc(&d_in, m * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_partial, ((m + 127) / 128) * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_in, h_in, m * sizeof(float), cudaMemcpyHostToDevice));
    float* h_partial = (float*)malloc(((m + 127) / 128) * sizeof(float));

    int grid256 = (m + 256 - 1) / 256;
    block_sum<256><<<grid256, 256>>>(d_in, d_partial, m);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(h_partial, d_partial, grid256 * sizeof(float), cudaMemcpyDeviceToHost));
    double sum256 = 0.0;
    for (int b = 0; b < grid256; ++b) sum256 += h_partial[b];

    int grid128 = (m + 128 - 1) / 128;
    block_sum<128><<<grid128, 128>>>(d_in, d_partial, m);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(h_partial, d_partial, grid128 * sizeof(float), cudaMemcpyDeviceToHost));
    double sum128 = 0.0;
    for (int b = 0; b < grid128; ++b) sum128 += h_partial[b];

    // Float partial sums: error bound scales with the sum of magnitudes.
    double tol = 1e-3 + 1e-6 * abs_sum;
    if (fabs(sum256 - ref) > tol || fabs(sum128 - ref) > tol) {
        printf("block_sum mismatch: %f / %f expected %f\n", sum256, sum128, ref);
        ++errors;
    }

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_partial));
    free(h_in);
    free(h_partial);

    if (errors) {
        printf("FAIL (%d errors)\n", errors);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
