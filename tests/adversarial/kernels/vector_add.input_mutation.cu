// Adversarial self-test (vector_add / input_mutation): produces the right output but overwrites an input.
// Must be REJECTED by porter's validator (tests/adversarial/test_adversarial.py).

__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
        ((float*)a)[i] = 0.0f;  // scratch reuse of an input buffer
    }
}
