// Adversarial self-test (vector_add / noop): computes nothing and leaves the output untouched.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = a[i] + b[i];
        (void)sum;
    }
}
