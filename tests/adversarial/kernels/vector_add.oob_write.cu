// Adversarial self-test (vector_add / oob_write): the bounds check is off by one (<=) and writes one element past the end.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        c[i] = a[i] + b[i];
    }
}
