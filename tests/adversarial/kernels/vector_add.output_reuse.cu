// Adversarial self-test (vector_add / output_reuse): computes once, then returns early on later launches, relying on the output buffer still holding the previous result.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__device__ int porter_already_computed = 0;

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    if (porter_already_computed) {
        return;  // "the result is already in c"
    }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
    if (i == n - 1) {
        porter_already_computed = 1;
    }
}
