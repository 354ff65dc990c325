// Adversarial self-test (vector_add / tail_off_by_one): handles only whole blocks; the tail of a size that is not a multiple of the block size is dropped.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int whole = n - n % blockDim.x;
    if (i < whole) {
        c[i] = a[i] + b[i];
    }
}
