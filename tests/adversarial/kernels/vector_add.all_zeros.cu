// Adversarial self-test (vector_add / all_zeros): writes zeros everywhere.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = 0.0f * (a[i] + b[i]);
    }
}
