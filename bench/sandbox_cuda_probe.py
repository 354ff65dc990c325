"""Which sandbox layers CUDA survives, and when (run on a GPU machine): one line per case.

Each case is a child that enters porter's sandbox with some layers off, initialises CUDA at one point
(``late``: only after lock_down; ``pre-lock``: after enter, before lock_down; ``pre-enter``: before any
layer), then allocates, compiles a kernel with NVRTC, launches it and reads the result back.  With
``--sanitizer`` the same children run under compute-sanitizer memcheck with a kernel that writes out
of bounds, to see whether the sanitizer still reports it.

Measured on the H200 (2026-12-01, driver 580.159, CuPy 14.2): a cuInit after Landlock (``late``,
``pre-lock``) or after the seccomp filter (``late``) fails with cudaErrorOperatingSystem; the data
limit does not matter.  ``pre-enter`` with every layer works: allocation, an NVRTC compile, a launch
and the read-back, and memcheck still reports the out-of-bounds kernel (67 errors).  Porter's GPU jobs
therefore initialise the driver first (backends/_child.warm_up).  Set OCL_ICD_VENDORS (see
bench/run_h200.sh) for the OpenCL rows.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
import json, os, sys
off = sys.argv[1].split(",") if sys.argv[1] else []
when, oob = sys.argv[2], sys.argv[3] == "oob"
scratch, api = sys.argv[4], sys.argv[5]
for var, sub in (("TMPDIR", ""), ("CUPY_CACHE_DIR", "cupy"), ("CUDA_CACHE_PATH", "nv"), ("XDG_CACHE_HOME", "xdg")):
    os.environ[var] = os.path.join(scratch, sub)
    os.makedirs(os.environ[var], exist_ok=True)
def init():
    if api == "opencl":
        import pyopencl as cl
        global ctx
        ctx = cl.Context([d for p in cl.get_platforms() for d in p.get_devices() if "NVIDIA" in p.name][:1])
        return
    import cupy
    cupy.cuda.runtime.getDeviceCount(); cupy.cuda.Device(0).synchronize()
if when == "pre-enter":
    init()
from porter import sandbox
plan = sandbox.Plan(scratch=scratch, limits=sandbox.limits_for("gpu", 60, None), disabled=tuple(off),
                    in_netns=os.environ.get("IN_NETNS") == "1")
sandbox.enter(plan)
if when == "pre-lock":
    init()
sandbox.lock_down(plan)
try:
    if api == "opencl":
        import numpy as np, pyopencl as cl
        if when == "late":
            init()
        q = cl.CommandQueue(ctx)
        h = np.arange(1024, dtype=np.float32)
        b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=h)
        prg = cl.Program(ctx, "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }").build()
        prg.twice(q, (1024,), None, b); cl.enqueue_copy(q, h, b); q.finish()
        print(json.dumps({"ok": True, "sum": float(h.sum()), "layers": sorted(sandbox.state().active)}))
        sys.exit(0)
    import cupy
    x = cupy.arange(1024, dtype=cupy.float32)
    k = cupy.RawKernel(r'''extern "C" __global__ void twice(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n + %d) x[i] *= 2.0f; }''' % (64 if oob else 0), "twice")
    k((5,), (256,), (x, cupy.int32(1024)))
    cupy.cuda.Device(0).synchronize()
    print(json.dumps({"ok": True, "sum": float(x.sum()), "layers": sorted(sandbox.state().active)}))
except Exception as e:
    print(json.dumps({"ok": False, "err": repr(e)[:300], "layers": sorted(sandbox.state().active)}))
""")


def run(cmd: list[str], timeout: float = 60, netns: bool = False) -> str:
    env = {**os.environ, "IN_NETNS": "1" if netns else "0"}
    if netns:  # as porter runs a checker: wrapper and child in one new network namespace
        cmd = ["unshare", "--net", "--", *cmd]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout"
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    tail = " | ".join(p.stderr.strip().splitlines()[-3:])[-300:]
    errors = [ln for ln in (p.stdout + p.stderr).splitlines() if "ERROR SUMMARY" in ln]
    return f"rc={p.returncode} {lines[-1] if lines else ''} {errors[-1] if errors else ''} {tail}"


CASES = [
    ("", "late"),
    ("", "pre-lock"),
    ("", "pre-enter"),
    ("seccomp", "pre-lock"),
    ("filesystem", "pre-lock"),
]


def main() -> None:
    sanitizer = "--sanitizer" in sys.argv
    tool = shutil.which("compute-sanitizer")
    rows = []
    cases = [(a, o, w) for a in ("cupy", "opencl") for o, w in CASES if a == "cupy" or o != "filesystem"]
    for api, off, when in cases:
        with tempfile.TemporaryDirectory() as scratch:
            child = [sys.executable, "-c", CHILD, off, when]
            rows.append(
                {"api": api, "off": off or "-", "when": when, "run": run([*child, "ok", scratch, api])}
            )
            if sanitizer and tool and api == "cupy":
                memcheck = [tool, "--tool", "memcheck", *child, "oob", scratch, api]
                rows[-1]["memcheck"] = run(memcheck, netns=True)
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
