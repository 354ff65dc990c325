// Adversarial self-test (vector_add / oob_write, OpenCL): `<=` writes one element past the end. Must be rejected.
__kernel void vector_add(__global const float* a, __global const float* b, __global float* c, int n)
{
    int i = get_global_id(0);
    if (i <= n) {
        c[i] = a[i] + b[i];
    }
}
