// strings_comments.cu -- cudaMalloc, cudaMemcpy and <<<>>> in comments stay as written.
#include <cuda_runtime.h>
#include <cstdio>

/* A block comment naming cudaFree, cudaStream_t and __shfl_down_sync(0xffffffff, v, 1). */
static const char* kHelp = "call cudaMalloc then cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice)";
static const char kQuote = 'c';
static const char* kRaw = R"(cudaDeviceSynchronize() in a raw string)";

void report(float* d)
{
    printf("%s cudaFree(%p)\n", kHelp, (void*)d);  // cudaFree below is code
    cudaFree(d);
    puts("done: cudaSuccess");
    (void)kQuote;
    (void)kRaw;
}
