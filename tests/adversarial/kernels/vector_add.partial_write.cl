// Adversarial self-test (vector_add / partial_write, OpenCL): only the first work-group writes. Must be rejected.
__kernel void vector_add(__global const float* a, __global const float* b, __global float* c, int n)
{
    int i = get_global_id(0);
    if (i < n && get_group_id(0) == 0) {
        c[i] = a[i] + b[i];
    }
}
