"""Backend benchmark: compile time cold and warm, launch overhead, isolation overhead, copy bandwidth.

Run:  python bench/bench_backends.py [--backends cpu,opencl,cuda,hip] [--cold 3] [--warm 20]
                                     [--launches 200] [--mib 1024] [--json FILE]

For every backend that can compile here:

* compile cold: `compile_cached` on an empty cache (a miss: the real compiler runs).  Each repeat adds a
  distinct empty kernel to the source so no compiler-side cache (PoCL's kernel cache, ...) can answer;
* compile warm: the same call again (a hit: read, check and decode the cached Binary);

and for every backend that can also run here (its first non-checker device):

* launch overhead: host wall time of one launch of a one-element kernel plus `synchronize`, and the
  device-timed duration (`timed=True`) of the same launch;
* isolated job: wall time of `run_job` for a warm (cached) one-launch job, i.e. what isolation costs;
* on GPU devices only: the bandwidth a copy kernel reaches (bytes read + written / device time), next
  to the device's own device-to-device copy bandwidth (CuPy, where installed).

Prints a Markdown table per measurement (and writes JSON with --json).  Not a test: nothing asserts time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from porter.backends import BACKEND_NAMES, Backend, CompileOptions, Device, get_backend
from porter.backends.binaries import compile_cached
from porter.backends.isolate import Job, run_job

from porter.cache import Cache

CUDA_COPY = """
extern "C" __global__ void copy(const float *__restrict__ src, float *__restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) dst[i] = src[i];
}
"""

CUDA_COPY4 = """
extern "C" __global__ void copy4(const float4 *__restrict__ src, float4 *__restrict__ dst, long long n4) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) dst[i] = src[i];
}
"""

OPENCL_COPY = """
__kernel void copy(__global const float *restrict src, __global float *restrict dst, long n) {
    for (long i = get_global_id(0); i < n; i += get_global_size(0)) dst[i] = src[i];
}
"""

OPENCL_COPY4 = """
__kernel void copy4(__global const float4 *restrict src, __global float4 *restrict dst, long n4) {
    for (long i = get_global_id(0); i < n4; i += get_global_size(0)) dst[i] = src[i];
}
"""


def sources(name: str) -> tuple[str, str]:
    if name == "opencl":
        return OPENCL_COPY, OPENCL_COPY4
    prefix = "#include <hip/hip_runtime.h>\n" if name == "hip" else ""
    return prefix + CUDA_COPY, prefix + CUDA_COPY4


def salt(name: str, tag: str) -> str:
    """An extra empty kernel: real code, so no compiler-side cache keyed on preprocessed source can hit."""
    if name == "opencl":
        return f"\n__kernel void porter_salt_{tag}(void) {{ }}\n"
    return f'\nextern "C" __global__ void porter_salt_{tag}() {{ }}\n'


def median_ms(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def run_device(found_devices: tuple[Device, ...]) -> Device | None:
    runnable = [d for d in found_devices if d.kind != "checker"]
    return runnable[0] if runnable else None


# ------------------------------------------------------------------------------- measurements


def bench_compile(be: Backend, device: Device | None, cold: int, warm: int) -> dict[str, Any]:
    src, _ = sources(be.name)
    opts = CompileOptions()
    with tempfile.TemporaryDirectory(prefix="porter-bench-cache-") as tmp:
        cache = Cache(root=Path(tmp), enabled=True)
        cold_ms, warm_ms = [], []
        for i in range(cold):
            salted = src + salt(be.name, f"{i}_{time.time_ns()}")
            start = time.perf_counter()
            _, hit = compile_cached(be, salted, "copy", opts, device, cache)
            cold_ms.append((time.perf_counter() - start) * 1000.0)
            assert not hit
        for _ in range(warm):
            start = time.perf_counter()
            binary, hit = compile_cached(be, salted, "copy", opts, device, cache)
            warm_ms.append((time.perf_counter() - start) * 1000.0)
            assert hit
    return {
        "cold_ms": median_ms(cold_ms),
        "warm_ms": median_ms(warm_ms),
        "binary_bytes": len(binary.data),
        "format": binary.format,
        "toolchain": binary.toolchain,
    }


def bench_launch(be: Backend, device: Device, launches: int) -> dict[str, Any]:
    src, _ = sources(be.name)
    binary, _ = compile_cached(be, src, "copy", CompileOptions(), device, Cache())
    prog = be.load(binary, device)
    x = be.to_device(np.ones(1, dtype=np.float32), device)
    y = be.to_device(np.zeros(1, dtype=np.float32), device)
    n = np.int64(1)

    def once() -> None:
        prog(x, y, n, grid=(1,), block=(1,))
        be.synchronize(device)

    for _ in range(10):
        once()
    host = [timed(once) for _ in range(launches)]
    dev = [prog(x, y, n, grid=(1,), block=(1,), timed=True) for _ in range(min(launches, 50))]
    dev_ms = [float(t) for t in dev if t is not None]
    return {"host_us": median_ms(host) * 1000.0, "device_us": median_ms(dev_ms) * 1000.0}


def bench_isolation(name: str, device: Device, repeats: int = 5) -> dict[str, Any]:
    src, _ = sources(name)
    job = Job(
        backend=name,
        source=src,
        entry="copy",
        device=device,
        args=(np.ones(1024, dtype=np.float32), np.zeros(1024, dtype=np.float32), np.int64(1024)),
        grid=(4,),
        block=(256,),
    )
    first = run_job(job, timeout_s=600)
    if not first.ok:
        return {"error": f"{first.stage}: {first.error}"}
    walls = []
    for _ in range(repeats):
        result = run_job(job, timeout_s=600)
        if not (result.ok and result.cached):
            return {"error": f"warm job: {result.stage}: {result.error}"}
        walls.append(result.wall_s * 1000.0)
    return {"job_ms": median_ms(walls)}


def bench_bandwidth(be: Backend, device: Device, mib: int, repeats: int = 20) -> dict[str, Any]:
    _, src4 = sources(be.name)
    binary, _ = compile_cached(be, src4, "copy4", CompileOptions(), device, Cache())
    prog = be.load(binary, device)
    n = mib * (1 << 20) // 4
    n4 = n // 4
    src = be.to_device(np.ones(n, dtype=np.float32), device)
    dst = be.alloc(n * 4, device)
    block = 256
    grid = min((n4 + block - 1) // block, 1 << 20)
    args = (src, dst, np.int64(n4))
    for _ in range(3):
        prog(*args, grid=(grid,), block=(block,))
    be.synchronize(device)
    times = []
    for _ in range(repeats):
        ms = prog(*args, grid=(grid,), block=(block,), timed=True)
        if ms is not None:
            times.append(float(ms))
    kernel_ms = median_ms(times)
    moved = 2 * n * 4
    return {"kernel_gbs": moved / (kernel_ms * 1e-3) / 1e9, "kernel_ms": kernel_ms, "bytes": moved}


def reference_copy_gbs(mib: int, repeats: int = 20) -> float | None:
    """Device-to-device copy bandwidth on CUDA device 0, by CuPy (read + write bytes / time)."""
    try:
        import cupy as cp  # type: ignore[import-not-found]
    except ImportError:
        return None
    n = mib * (1 << 20) // 4
    a = cp.ones(n, dtype=cp.float32)
    b = cp.empty_like(a)
    for _ in range(3):
        b.data.copy_from_device(a.data, a.nbytes)
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        b.data.copy_from_device(a.data, a.nbytes)
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return 2 * a.nbytes / (statistics.median(times) * 1e-3) / 1e9


# ------------------------------------------------------------------------------- driver


def guarded(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - a failing backend is a row, not the end of the bench
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}


def measure(names: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        row: dict[str, Any] = {"backend": name}
        try:
            be = get_backend(name)
            found = be.availability()
        except Exception as err:  # noqa: BLE001
            rows.append({**row, "error": f"cannot load: {err}"})
            continue
        row["toolchain"] = found.toolchain
        if not found.compile:
            rows.append({**row, "error": f"cannot compile: {found.hint}"})
            continue
        device = run_device(found.devices) if found.run else None
        row["device"] = device.label if device else "(compile only)"
        row["compile"] = guarded(lambda be=be, device=device: bench_compile(be, device, args.cold, args.warm))
        if device is not None:
            row["launch"] = guarded(lambda be=be, device=device: bench_launch(be, device, args.launches))
            row["isolation"] = guarded(lambda name=name, device=device: bench_isolation(name, device))
            if device.kind == "gpu":
                row["bandwidth"] = guarded(lambda be=be, device=device: bench_bandwidth(be, device, args.mib))
        rows.append(row)
    return rows


def fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None or (isinstance(value, float) and value != value) else format(value, spec)


def cell(text: Any, width: int = 48) -> str:
    """A Markdown table cell: pipes escaped, long toolchain strings shortened."""
    text = str(text or "-")
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.replace("|", "\\|")


def markdown(rows: list[dict[str, Any]], reference: float | None) -> str:
    out = [
        f"Measured {date.today().isoformat()} on {platform.node() or 'this machine'} "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}.",
        "",
        "| backend | device | toolchain | compile cold (ms) | compile warm (ms) | binary (bytes) |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in rows:
        c = r.get("compile", {})
        if "error" in r or "error" in c:
            out.append(
                f"| {r['backend']} | - | {cell(r.get('toolchain'))} | {cell(r.get('error') or c['error'], 200)} | | |"
            )
            continue
        out.append(
            f"| {r['backend']} | {r['device']} | {cell(c['toolchain'])} | {fmt(c['cold_ms'])} | "
            f"{fmt(c['warm_ms'], '.2f')} | {c['binary_bytes']} |"
        )
    launched = [r for r in rows if "launch" in r]
    if launched:
        out += [
            "",
            "| backend | device | launch + sync, host (µs) | launch, device-timed (µs) | isolated warm job (ms) |",
            "|---|---|---:|---:|---:|",
        ]
        for r in launched:
            la, iso = r["launch"], r.get("isolation", {})
            if "error" in la:
                out.append(f"| {r['backend']} | {r['device']} | {la['error']} | | |")
                continue
            job = iso.get("job_ms") if "error" not in iso else None
            out.append(
                f"| {r['backend']} | {r['device']} | {fmt(la['host_us'])} | {fmt(la['device_us'])} | "
                f"{fmt(job) if job is not None else iso.get('error', '-')} |"
            )
    banded = [r for r in rows if "bandwidth" in r]
    if banded:
        out += [
            "",
            f"Device-to-device copy (CuPy): {fmt(reference)} GB/s.",
            "",
            "| backend | device | copy kernel (GB/s) | of device copy |",
            "|---|---|---:|---:|",
        ]
        for r in banded:
            bw = r["bandwidth"]
            if "error" in bw:
                out.append(f"| {r['backend']} | {r['device']} | {bw['error']} | |")
                continue
            share = f"{100 * bw['kernel_gbs'] / reference:.0f}%" if reference else "-"
            out.append(f"| {r['backend']} | {r['device']} | {fmt(bw['kernel_gbs'])} | {share} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=",".join(BACKEND_NAMES))
    ap.add_argument("--cold", type=int, default=3, help="cold compiles per backend (median)")
    ap.add_argument("--warm", type=int, default=20, help="warm (cached) compiles per backend (median)")
    ap.add_argument("--launches", type=int, default=200, help="launches for the overhead median")
    ap.add_argument("--mib", type=int, default=1024, help="MiB copied by the bandwidth kernel (GPU only)")
    ap.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    with tempfile.TemporaryDirectory(prefix="porter-bench-") as tmp:
        # the launch and isolation measurements use the default cache: keep it private to this run
        os.environ["PORTER_CACHE_DIR"] = tmp
        os.environ.pop("PORTER_NO_CACHE", None)
        rows = measure(names, args)
        reference = reference_copy_gbs(args.mib) if any("bandwidth" in r for r in rows) else None
    print(markdown(rows, reference))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "device_copy_gbs": reference}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
