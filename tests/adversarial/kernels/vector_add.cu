// Adversarial self-test: the CORRECT reference kernel of the vector_add family.
// c[i] = a[i] + b[i] for i < n.  Every planted-defect variant (vector_add.<defect>.cu)
// must be rejected when validated against this one.
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
