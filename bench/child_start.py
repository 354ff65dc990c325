"""Where one isolated job's time goes: interpreter start, imports, and a whole cached job per backend.

    python bench/child_start.py [--backend cuda] [--repeat 5]

Prints the median seconds of: ``python -c pass``; importing numpy; importing the child module; the
backend's runtime brought up (CuPy and a CUDA context for cuda); then one trivial, already-compiled
kernel job through :func:`porter.backends.isolate.run_job` on the backend's first device, plain and
under each of its checkers' wrappers.  The start-up steps also print their CPU seconds (a job's child,
started inside the sandbox, is not reaped by this process, so its CPU is not counted here).  What a
replay costs beyond its kernel is these numbers.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = 'extern "C" __global__ void twice(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }\n'
SETUP = {
    "cuda": "import cupy; cupy.cuda.runtime.getDeviceCount(); cupy.zeros(1).sum()",
    "cpu": "pass",
    "opencl": "import pyopencl; pyopencl.get_platforms()",
}


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _median(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `cmd`."""
    times, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.monotonic(), _children_cpu()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.monotonic() - start)
        cpus.append(_children_cpu() - cpu)
    return statistics.median(times), statistics.median(cpus)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from porter.backends import get_backend, isolate

    py = sys.executable
    for label, code in (
        ("python -c pass", "pass"),
        ("import numpy", "import numpy"),
        (
            "import numpy, one BLAS thread (a kernel child's)",
            "import os; os.environ['OPENBLAS_NUM_THREADS'] = '1'; import numpy",
        ),
        ("import the child module", "import porter.backends._child"),
        (f"{args.backend} runtime up", SETUP.get(args.backend, "pass")),
    ):
        wall, cpu = _median([py, "-c", code], args.repeat)
        print(f"{label}: {wall:.3f} s, {cpu:.3f} CPU-s")
    backend = get_backend(args.backend)
    devices = backend.devices()
    if not devices:
        print(f"no {args.backend} device here")
        return 1
    device = devices[0]
    job = isolate.Job(
        args.backend, KERNEL, "twice", device=device, args=(np.ones(32, np.float32), np.int32(32)), grid=(1,),
        block=(32,), runs=2,
    )  # fmt: skip
    isolate.run_job(job, 120)  # compiles into the cache
    kinds: list[tuple[str, tuple[str, ...]]] = [("plain job", ())]
    if args.backend == "cuda":
        from porter.backends.cuda import sanitizer

        tool = sanitizer.tool()
        if tool is not None:
            kinds += [
                (f"job under {c}", sanitizer.wrapper(tool, c, "{scratch}/s.log")) for c in sanitizer.PASSES
            ]
    for label, wrapper in kinds:
        times = []
        for _ in range(args.repeat):
            res = isolate.run_job(isolate.Job(**{**job.__dict__, "wrapper": wrapper}), 120)
            if not res.ok:
                print(f"{label}: failed: {res.error}")
                break
            times.append(res.wall_s)
        if times:
            print(f"{label} on {device.label}: {statistics.median(times):.3f} s (median of {len(times)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
