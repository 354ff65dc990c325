/* OpenCL C translation of atomics.cu by porter (CUDA -> OpenCL C 1.2). */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#if defined(cl_khr_int64_base_atomics)
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#endif

/* CUDA atomicAdd on float: compare-and-swap on the bit pattern until no other work-item interferes. */
static float porter_atomic_add_f32_global(volatile __global float* p, float v)
{
    volatile __global uint* bits = (volatile __global uint*)p;
    uint seen;
    uint expected = atomic_add(bits, 0u);  /* an atomic read: a plain one races with the others' swaps */
    do {
        seen = expected;
        expected = atomic_cmpxchg(bits, seen, as_uint(as_float(seen) + v));
    } while (expected != seen);
    return as_float(seen);
}

/* CUDA atomicAdd on float: compare-and-swap on the bit pattern until no other work-item interferes. */
static float porter_atomic_add_f32_local(volatile __local float* p, float v)
{
    volatile __local uint* bits = (volatile __local uint*)p;
    uint seen;
    uint expected = atomic_add(bits, 0u);  /* an atomic read: a plain one races with the others' swaps */
    do {
        seen = expected;
        expected = atomic_cmpxchg(bits, seen, as_uint(as_float(seen) + v));
    } while (expected != seen);
    return as_float(seen);
}

/* CUDA atomicAdd on double: 64-bit compare-and-swap on the bit pattern. */
static double porter_atomic_add_f64_global(volatile __global double* p, double v)
{
    volatile __global ulong* bits = (volatile __global ulong*)p;
    ulong seen;
    ulong expected = atom_add(bits, (ulong)0);  /* an atomic read: a plain one races with the others' swaps */
    do {
        seen = expected;
        expected = atom_cmpxchg(bits, seen, as_ulong(as_double(seen) + v));
    } while (expected != seen);
    return as_double(seen);
}

/* CUDA atomicInc: old >= limit ? 0 : old + 1, atomically. */
static uint porter_atomic_inc_u32_global(volatile __global uint* p, uint limit)
{
    uint seen;
    uint expected = atomic_add(p, 0u);  /* an atomic read */
    do {
        seen = expected;
        expected = atomic_cmpxchg(p, seen, (seen >= limit) ? 0u : seen + 1u);
    } while (expected != seen);
    return seen;
}

// Integer atomics on global and local memory, float and double atomicAdd, 64-bit atomics.
__kernel void atomics(__global int* counters, __global unsigned int* ucounters, __global float* fsum, __global double* dsum,
                        __global ulong* big, __global const float* x, int n)
{
    __local float block_sum;
    __local unsigned int hits;
    if ((uint)get_local_id(0) == 0) {
        block_sum = 0.0f;
        hits = 0u;
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    int i = (uint)get_group_id(0) * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (i < n) {
        porter_atomic_add_f32_local(&block_sum, x[i]);
        atomic_add(&hits, 1u);
        atomic_max(&counters[0], i);
        atomic_min(&counters[1], -i);
        atomic_sub(&counters[2], 1);
        atomic_or(&ucounters[0], 1u << (i % 32));
        porter_atomic_inc_u32_global(&ucounters[1], 7u);
        atomic_cmpxchg(&counters[3], 0, i + 1);
        porter_atomic_add_f64_global(dsum, (double)x[i]);
        atom_add(big, 1UL);
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if ((uint)get_local_id(0) == 0) {
        porter_atomic_add_f32_global(fsum, block_sum);
        atomic_add(&ucounters[2], hits);
        atomic_xchg(&fsum[1], 2.5f);
    }
}
