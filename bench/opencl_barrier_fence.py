"""What CUDA's ``__syncthreads()`` costs when ported as OpenCL's ``barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)``
against ``barrier(CLK_LOCAL_MEM_FENCE)`` on an OpenCL GPU (NVIDIA's OpenCL on the device machine): the PTX each
compiles to (does the global fence add a ``membar``/``fence`` instruction?) and the kernel time of each, for a
tiled kernel of the shape Rodinia's lud_internal and most shared-memory kernels have (tiles loaded from global
memory, a barrier, products from the tiles, one global store after the last barrier).

    OCL_ICD_VENDORS=/tmp/icd-nv python bench/opencl_barrier_fence.py [--n 4096] [--repeat 50]

Porter's OpenCL translation keeps the global fence (CUDA's barrier orders global memory among a block's threads
too); this measures what dropping it where no thread can see another's global store would be worth.  Markdown
on stdout.  Not a test: nothing here asserts time.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys

KERNEL = """
#define TILE 16
__kernel void tiled(__global float* out, __global const float* a, __global const float* b, int n) {
    __local float ta[TILE][TILE];
    __local float tb[TILE][TILE];
    int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
    int col = (int)get_group_id(0) * TILE + tx, row = (int)get_group_id(1) * TILE + ty;
    float sum = 0.0f;
    for (int k = 0; k < n; k += TILE) {
        ta[ty][tx] = a[row * n + k + tx];
        tb[ty][tx] = b[(k + ty) * n + col];
        barrier(FENCE);
        for (int i = 0; i < TILE; ++i) sum += ta[ty][i] * tb[i][tx];
        barrier(FENCE);
    }
    out[row * n + col] = sum;
}
"""
FENCES = {"local+global": "CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE", "local": "CLK_LOCAL_MEM_FENCE"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096, help="matrix order (a multiple of 16)")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--cpu", action="store_true", help="an OpenCL CPU device (a dry run of this script)")
    args = ap.parse_args()
    import numpy as np
    import pyopencl as cl

    kind = cl.device_type.CPU if args.cpu else cl.device_type.GPU
    gpus = [d for p in cl.get_platforms() for d in p.get_devices() if d.type & kind]
    if not gpus:
        print("no OpenCL GPU here", file=sys.stderr)
        return 2
    dev = gpus[0]
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    n = args.n
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    mf = cl.mem_flags
    da = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    db = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    dout = cl.Buffer(ctx, mf.WRITE_ONLY, a.nbytes)
    print(f"device: {dev.name} ({dev.platform.name}, {dev.version}); n={n}; median of {args.repeat}\n")
    print("| barrier flags | fence instructions in the PTX | bar.sync | median ms | result ok |")
    print("|---|---|---:|---:|---|")
    reference = None
    for label, fence in FENCES.items():
        prog = cl.Program(ctx, f"#define FENCE ({fence})\n" + KERNEL).build(options=["-cl-mad-enable"])
        ptx = prog.get_info(cl.program_info.BINARIES)[0].decode("utf-8", "replace")
        fences = sorted(set(re.findall(r"\b(membar\.\w+|fence\.[\w.]+)", ptx)))
        bars = len(re.findall(r"\bbar(?:rier)?\.sync\b|\bbar\.sync\b", ptx))
        kernel = prog.tiled
        times = []
        for _ in range(args.repeat + 3):
            ev = kernel(queue, (n, n), (16, 16), dout, da, db, np.int32(n))
            ev.wait()
            times.append((ev.profile.end - ev.profile.start) * 1e-6)
        out = np.empty_like(a)
        cl.enqueue_copy(queue, out, dout).wait()
        if reference is None:
            reference = out
        ok = bool(np.allclose(out, reference, rtol=1e-5))
        print(
            f"| {label} | {', '.join(fences) or 'none'} | {bars} | {statistics.median(times[3:]):.4f} | {ok} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
