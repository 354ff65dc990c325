"""CUDA -> HIP and CUDA -> OpenCL translation throughput: files/s and MB/s of `translate_to_hip` and
`translate_to_opencl`.

Run:  python bench/bench_translate.py [--mb 4] [--repeat 3]

Two corpora built from the CUDA samples (samples/cuda/*.cu, common.cuh) and the HIP golden inputs
(tests/backends/hip/golden/*.cu): many small files (each sample as it is, repeated), and one
multi-MB file (the samples concatenated with their kernels renamed apart).  Each is timed end to end
(parse + edits + the scan the translator runs for kernels and hazards) and, for the big file, also
with the scan precomputed, which is the translator's own cost.  CPU time of this single-threaded
process, best of --repeat.  Not a test: nothing here asserts time.
"""

from __future__ import annotations

import argparse
import platform
import re
import time
from datetime import date
from pathlib import Path

from porter.backends.hip.translate import translate_to_hip
from porter.backends.opencl.translate import translate_to_opencl
from porter.grammars import parser

from porter.scan import scan_source

ROOT = Path(__file__).resolve().parent.parent


def _inputs() -> list[tuple[str, str]]:
    files = sorted((ROOT / "samples" / "cuda").glob("*.cu*"))
    files += sorted((ROOT / "tests" / "backends" / "hip" / "golden").glob("*.cu"))
    return [(str(p), p.read_text(encoding="utf-8")) for p in files]


def _big_file(inputs: list[tuple[str, str]], mb: float) -> str:
    """One file of about `mb` MB: the inputs repeated, every kernel/function name suffixed apart."""
    parts: list[str] = []
    size = 0
    copy = 0
    while size < mb * 1e6:
        for _, text in inputs:
            body = re.sub(r"#\s*include[^\n]*\n", "", text)
            body = re.sub(r"\bmain\b", f"main_{copy}", body)
            body = re.sub(r"(__global__\s+void\s+)(\w+)", rf"\1\2_{copy}", body)
            parts.append(body)
            size += len(body)
        copy += 1
    return "#include <cuda_runtime.h>\n" + "\n".join(parts)


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.0, help="size of the one big file (MB)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    inputs = _inputs()
    small = inputs * max(1, int(2e6 // sum(len(t) for _, t in inputs)))  # ~2 MB of small files
    small_bytes = sum(len(t.encode()) for _, t in small)

    def run_small() -> None:
        for path, text in small:
            translate_to_hip(text, path)

    big = _big_file(inputs, args.mb)
    big_bytes = len(big.encode())
    scan = scan_source(big.encode(), "big.cu", "cuda")

    t_small = _best(run_small, args.repeat)
    t_big = _best(lambda: translate_to_hip(big, "big.cu"), args.repeat)
    t_big_own = _best(lambda: translate_to_hip(big, "big.cu", scan=scan), args.repeat)
    t_parse = _best(lambda: parser("cuda").parse(big.encode()), args.repeat)

    def run_small_cl() -> None:
        for path, text in small:
            translate_to_opencl(text, path)

    t_small_cl = _best(run_small_cl, args.repeat)
    t_big_cl = _best(lambda: translate_to_opencl(big, "big.cu"), args.repeat)
    out = translate_to_hip(big, "big.cu", scan=scan)

    print(
        f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, {date.today()}"
    )
    print(f"command: python bench/bench_translate.py --mb {args.mb} --repeat {args.repeat}")
    print()
    print("| corpus | files | MB | CPU s | files/s | MB/s |")
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| small files (samples + golden inputs) | {len(small)} | {small_bytes / 1e6:.2f} | {t_small:.2f} "
        f"| {len(small) / t_small:.0f} | {small_bytes / 1e6 / t_small:.2f} |"
    )
    print(
        f"| one big file, end to end | 1 | {big_bytes / 1e6:.2f} | {t_big:.2f} | {1 / t_big:.2f} | {big_bytes / 1e6 / t_big:.2f} |"
    )
    print(
        f"| one big file, scan precomputed | 1 | {big_bytes / 1e6:.2f} | {t_big_own:.2f} | {1 / t_big_own:.2f} "
        f"| {big_bytes / 1e6 / t_big_own:.2f} |"
    )
    print(
        f"| OpenCL: small files | {len(small)} | {small_bytes / 1e6:.2f} | {t_small_cl:.2f} "
        f"| {len(small) / t_small_cl:.0f} | {small_bytes / 1e6 / t_small_cl:.2f} |"
    )
    print(
        f"| OpenCL: one big file, end to end | 1 | {big_bytes / 1e6:.2f} | {t_big_cl:.2f} | {1 / t_big_cl:.2f} "
        f"| {big_bytes / 1e6 / t_big_cl:.2f} |"
    )
    print(
        f"| tree-sitter parse only (reference) | 1 | {big_bytes / 1e6:.2f} | {t_parse:.2f} | | {big_bytes / 1e6 / t_parse:.2f} |"
    )
    print()
    print(
        f"big file: {len(scan.kernels)} kernels, {len(out.diagnostics)} diagnostics, {big.count(chr(10))} lines"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
