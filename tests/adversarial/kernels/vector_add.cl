// Adversarial self-test: the CORRECT OpenCL version of vector_add.
__kernel void vector_add(__global const float* a, __global const float* b, __global float* c, int n)
{
    int i = get_global_id(0);
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
