// Adversarial self-test (vector_add / partial_write): only the first block writes its part of the output.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && blockIdx.x == 0) {
        c[i] = a[i] + b[i];
    }
}
