"""Which sandbox layers CUDA initialisation survives (run on a GPU machine): each combination of
disabled layers, data limit and early/late CuPy init, one line each.  Measured on the H200 (2026-12-01):
Landlock and seccomp each break cuInit with cudaErrorOperatingSystem; the data limit does not."""

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
import os, sys, json
from porter import sandbox
off = sys.argv[1].split(",") if sys.argv[1] else []
data = sys.argv[2] == "data"
lim = sandbox.limits_for("gpu", 60, None)
if not data:
    lim = sandbox.Limits(None, None, lim.cpu_seconds)
os.makedirs("/tmp/diag-scratch", exist_ok=True)
plan = sandbox.Plan(scratch="/tmp/diag-scratch", limits=lim, disabled=tuple(off))
sandbox.enter(plan)
if sys.argv[3] == "early":
    import cupy
    cupy.cuda.runtime.getDeviceCount(); cupy.zeros(1)
sandbox.lock_down(plan)
try:
    import cupy
    n = cupy.cuda.runtime.getDeviceCount()
    x = cupy.arange(10, dtype=cupy.float32); s = float(x.sum())
    print(json.dumps({"ok": True, "n": n, "sum": s, "layers": sorted(sandbox.state().active)}))
except Exception as e:
    print(json.dumps({"ok": False, "err": repr(e)[:200]}))
""")
for off in ["", "seccomp", "filesystem", "seccomp,filesystem"]:
    for data in ["data", "nodata"]:
        for when in ["late", "early"]:
            p = subprocess.run(
                [sys.executable, "-c", CHILD, off, data, when], capture_output=True, text=True, timeout=120
            )
            print(off or "-", data, when, p.stdout.strip()[:300], p.stderr.strip()[-300:])
