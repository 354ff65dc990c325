// Adversarial self-test (vector_add / hardcoded_size): ignores n and hard-codes the two sizes it was shown (4096 and 3001, told apart by the grid); only a hidden size exposes it.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    const int size = (gridDim.x == 16) ? 4096 : 3001;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < size) {
        c[i] = a[i] + b[i];
    }
}
