// Adversarial self-test (vector_add / noop, OpenCL): leaves the output untouched. Must be rejected.
__kernel void vector_add(__global const float* a, __global const float* b, __global float* c, int n)
{
    int i = get_global_id(0);
    if (i < n) {
        float sum = a[i] + b[i];
        (void)sum;
    }
}
