// Device probe: a device is kept only if this builds and computes c = 2*a + b correctly.
__kernel void porter_probe(__global const float *a, __global const float *b, __global float *c, const int n) {
    int i = (int)get_global_id(0);
    if (i < n) {
        c[i] = 2.0f * a[i] + b[i];
    }
}
