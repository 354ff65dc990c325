"""`porter optimize` without a model (the autotuner) on every memory-bound sample kernel, on the GPU.

Run on the machine with the H200 (tree-sitter wheels installed, CuPy present), from the repository root:

    python bench/h200_tune.py --out /tmp/tune            # the memory-bound kernels of samples/cuda
    python bench/h200_tune.py --only vector_add --all-devices

Each kernel goes through :func:`porter.workflows.tune.tune_file` exactly as ``porter optimize FILE
--kernel K`` runs it: every launch geometry (and the backend's semantics-keeping compile options on the
fastest) validated against the original, the validated ones timed at the benchmark size (device
events, warm-up, L2 flush, rotated inputs, rounds until the IQR settles, outputs re-validated).  By
default validation runs on the GPU only (``--all-devices`` adds the CPU emulator and OpenCL devices:
slower, same verdicts).  The device's copy bandwidth is measured in the same run (CuPy device-to-device
copy of 2^28 float32, CUDA events, median of 20, counting read + write) so that "% of copy" is this
run's, not the table's; and, per kernel, a copy moving the bytes its best configuration moves, with L2
flushed before each as porter's timing does ("% of an equal-bytes copy": what a copy reaches at that
size, launch and tail included).  It prints one Markdown row per kernel and writes each report as it goes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (file, kernel): the sample kernels whose floor is set by memory traffic (bench/h200_samples.py's table)
MEMORY_BOUND = [
    ("vector_add.cu", "vector_add"),
    ("legacy_texture.cu", "saxpy_plain"),
    ("templated.cu", "axpby"),
    ("stencil2d.cu", "jacobi_step"),
    ("conv1d_constant.cu", "conv1d"),
    ("reduce_shfl.cu", "reduce_sum"),
    ("templated.cu", "block_sum"),
]


def copy_bandwidth(n: int = 1 << 28, flush: bool = False) -> float:
    """Bytes/s of a device-to-device copy of `n` float32 (read + write), median of 20 after warm-up.
    `flush`: a 256 MiB write before each timed copy evicts L2 (50 MiB on the H200), as porter's timing
    does before each launch, so a copy smaller than L2 is not served from it."""
    import cupy as cp

    a, b = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
    scratch = cp.empty(1 << 26, dtype=cp.float32) if flush else None
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(3):
        b[...] = a
    times = []
    for _ in range(20):
        if scratch is not None:
            scratch.fill(0)
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    times.sort()
    return 2 * a.nbytes / times[len(times) // 2]


def main(argv: list[str]) -> int:
    from porter.report import tune_view
    from porter.workflows.optimize import run_devices
    from porter.workflows.options import OutputOptions, RunOptions
    from porter.workflows.tune import tune_file

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/porter-tune", help="folder for each kernel's report")
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    ap.add_argument(
        "--elements", type=int, default=0, help="elements in the largest array (default porter's)"
    )
    ap.add_argument("--all-devices", action="store_true", help="validate on every device, not the GPU only")
    args = ap.parse_args(argv)
    only = {k for k in args.only.split(",") if k}
    devices = run_devices()
    gpus = [d for d in devices if d.kind == "gpu"]
    if not gpus:
        print("no GPU here", file=sys.stderr)
        return 1
    on = devices if args.all_devices else gpus[:1]
    copy = copy_bandwidth()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"Machine: {gpus[0].name}; {platform.node()}; {datetime.date.today()}")
    print(f"Measured device copy: {copy / 1e12:.3f} TB/s; validated on {', '.join(d.label for d in on)}\n")
    print("| kernel | size | original ms | best ms | best configuration | speedup | floor ms | best % of copy | best % of an equal-bytes copy | configurations (validated / tried) | s |")  # fmt: skip
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for file, kernel in MEMORY_BOUND:
        if only and kernel not in only:
            continue
        t0 = time.perf_counter()
        try:
            report = tune_file(str(ROOT / "samples" / "cuda" / file), kernel=kernel,
                               run=RunOptions(devices=tuple(on), gpu_elements=args.elements or None),
                               output=OutputOptions(str(out / kernel), markdown=tune_view.markdown))  # fmt: skip
        except Exception as err:  # noqa: BLE001 - one kernel's failure is its row, the others still run
            print(f"| {kernel} | failed: {str(err).splitlines()[0][:200]} |||||||||", flush=True)
            continue
        took = time.perf_counter() - t0
        by = {c.label: c for c in report.configs}
        base = next((c for c in report.configs if c.original), None)
        best = by.get(report.best)
        rate = best.achieved_bandwidth if best else None
        share = f"{100 * rate / copy:.1f}%" if rate else "-"
        # the same bytes moved by a copy (half read, half written), L2 flushed as porter's timing does
        equal = None
        if rate and best is not None and best.time_ms:
            equal = copy_bandwidth(max(1, int(rate * best.time_ms / 1e3 / 8)), flush=True)
        fair = f"{100 * rate / equal:.1f}%" if rate and equal else "-"
        size = ", ".join(f"{k}={v}" for k, v in report.size.items())
        validated = sum(c.validated for c in report.configs)

        def ms(c: object) -> str:
            t = getattr(c, "time_ms", None)
            return f"{t:.4g}" if t else "-"

        floor = f"{report.floor_ms:.4g}" if report.floor_ms else "-"
        speed = f"{report.speedup:.3f}x" if report.speedup else "-"
        print(f"| {kernel} | {size} | {ms(base)} | {ms(best)} | {report.best or '-'} | {speed} | {floor} | {share} | {fair} "
              f"| {validated} / {len(report.configs)} | {took:.0f} |", flush=True)  # fmt: skip
        rows.append({"kernel": kernel, "copy_bandwidth": copy, "equal_bytes_copy_bandwidth": equal, "seconds": took,
                     "report": report.document()})  # fmt: skip
        (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
