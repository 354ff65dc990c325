"""Every sample kernel on the NVIDIA H200: measured time beside the performance model's floor.

Run on the machine with the H200 (tree-sitter wheels installed, CuPy present), from the repository root:

    python bench/h200_samples.py                     # every samples/cuda/*.cu, largest arrays 2^26 elements
    python bench/h200_samples.py --elements 16777216 --backend cuda samples/cuda/vector_add.cu

For each kernel and each GPU backend present (cuda; hip-on-cuda and OpenCL-on-NVIDIA when their
translators and runtimes are there) it prints one Markdown row: kernel, backend, size, measured
median in ms (IQR), achieved GB/s or TFLOP/s, % of the H200's datasheet peak (bandwidth, or
compute for compute-bound kernels), the model's predicted floor in ms, and whether the time is
suspect (below the floor).  Timing: device events after warm-up, an L2 flush before every timed
launch, 3 rotated input sets, rounds until the IQR settles; the timed outputs are re-validated.
Paste the output into the "Sample kernels on the H200" section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
from pathlib import Path

from porter.harness import perfmodel
from porter.report.bench_view import markdown
from porter.workflows.bench import bench_file, present_devices

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="CUDA files (default: samples/cuda/*.cu)")
    ap.add_argument("--elements", type=int, default=1 << 26, help="elements in each kernel's largest array")
    ap.add_argument("--backend", action="append", choices=("cuda", "hip", "opencl"), help="repeatable")
    args = ap.parse_args(argv)
    files = [Path(f) for f in args.files] or sorted((ROOT / "samples" / "cuda").glob("*.cu"))
    backends = tuple(args.backend or ("cuda", "hip", "opencl"))
    devices = [d for d in present_devices(backends) if d.kind == "gpu"]
    h200 = perfmodel.device_table()["H200"]
    print(
        f"Machine: {', '.join(sorted({d.name for d in devices})) or 'no GPU found'}; host {platform.node()}; "
        f"{datetime.date.today().isoformat()}"
    )
    print(f"Command: `python bench/h200_samples.py {' '.join(argv)}`")
    print(
        f"H200 peaks used for %: {h200.memory_bandwidth / 1e12:.2f} TB/s (datasheet; measured device copy "
        f"{(h200.measured_bandwidth or 0) / 1e12:.2f} TB/s), FP32 {h200.flops_vector['fp32'] / 1e12:.0f} TFLOP/s, "
        f"FP64 {h200.flops_vector['fp64'] / 1e12:.0f} TFLOP/s (vector).\n"
    )
    if not devices:
        print("no GPU device found: nothing measured", file=sys.stderr)
        return 1
    header_done = False
    for path in files:
        try:
            report = bench_file(str(path), devices=devices, gpu_elements=args.elements)
        except Exception as err:  # noqa: BLE001 - one bad file must not lose the others' rows
            print(f"| {path.name} | - | - | not run: {err} | | | | |")
            continue
        table = markdown(report).splitlines()
        rows = table if not header_done else table[2:]
        header_done = True
        print("\n".join(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
