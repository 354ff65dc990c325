"""`porter lift` at large sizes on an NVIDIA GPU: each lifted sample against the original Python, a
vectorised NumPy version on the CPU and a CuPy expression of the same computation on the GPU.

    python bench/lift_gpu.py [--repeat 20] [--only saxpy,matvec] [--scale 1.0]

For each function of samples/python/lift_patterns.py that porter lifts: its kernels (the CUDA file porter
writes) compiled with CuPy's RawModule and launched as porter's plan says, the arrays already on the GPU;
the CuPy expression written once here; both timed with CUDA events (median after warm-up; every launch of
one call, e.g. all the steps of `diffuse`).  NumPy runs the same expression on the CPU.  The Python
function runs at a small size and its time is scaled linearly to the large one (its loops are linear in
the size; running them at 16 M elements would take minutes).  The lifted result is checked against the
CuPy one before any time is printed.  Markdown table on stdout, for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "python" / "lift_patterns.py"


def cases(cp: Any, scale: float) -> dict[str, dict[str, Any]]:
    """Per function: its large sizes, the small sizes the Python runs at, and the CuPy / NumPy expression
    (each taking the arguments by name and returning what to compare)."""
    n1 = int(2**24 * scale)
    n2 = int(4096 * scale**0.5)
    n3 = int(256 * scale ** (1 / 3))
    return {
        "saxpy": dict(sizes={"n": n1}, small={"n": 2**14},
                      lib=lambda xp, a, x, y: xp.add(a * x, y, out=y), out="y"),
        "blend_2d": dict(sizes={"rows": n2, "cols": n2}, small={"rows": 128, "cols": 128},
                         lib=lambda xp, alpha, a, b, out: xp.clip(alpha * a + (1.0 - alpha) * b, -1.0, 1.0, out=out), out="out"),
        "gaussian_3d": dict(sizes={"nz": n3, "ny": n3, "nx": n3}, small={"nz": 16, "ny": 16, "nx": 16},
                            lib=lambda xp, grid, out, sigma: xp.add(xp.exp(-(grid * grid) / (2.0 * sigma * sigma)), xp.sqrt(xp.abs(grid)), out=out), out="out"),
        "sum_of_squares": dict(sizes={"x.shape[0]": n1}, small={"x.shape[0]": 2**14},
                               lib=lambda xp, x: xp.dot(x, x), out=None),
        "peak": dict(sizes={"x.shape[0]": n1}, small={"x.shape[0]": 2**14}, lib=lambda xp, x: xp.abs(x).max(), out=None),
        "matvec": dict(sizes={"n": 8192, "m": 8192}, small={"n": 128, "m": 128},
                       lib=lambda xp, a, x, y: xp.add(y, a @ x, out=y), out="y"),
        "softmax_rows": dict(sizes={"n": 16384, "m": 1024}, small={"n": 64, "m": 256}, lib=_softmax, out="out"),
        "heat_step": dict(sizes={"ny": n2, "nx": n2}, small={"ny": 128, "nx": 128}, lib=_heat, out="out"),
        "byte_histogram": dict(sizes={"data.shape[0]": n1, "counts.shape[0]": 256},
                               small={"data.shape[0]": 2**14, "counts.shape[0]": 256},
                               lib=lambda xp, data, counts: xp.add(counts, xp.bincount(data, minlength=counts.shape[0]).astype(counts.dtype), out=counts), out="counts"),
        "diffuse": dict(sizes={"n": 2**22, "steps": 50}, small={"n": 2**12, "steps": 50}, lib=_diffuse, out="u"),
        "running_total": dict(sizes={"n": n1}, small={"n": 2**14}, lib=lambda xp, x, out: xp.cumsum(x, out=out), out="out"),
    }  # fmt: skip


def _softmax(xp: Any, x: Any, out: Any) -> Any:
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return xp.divide(e, e.sum(axis=1, keepdims=True), out=out)


def _heat(xp: Any, u: Any, out: Any, r: float) -> Any:
    c = u[1:-1, 1:-1]
    out[1:-1, 1:-1] = c + r * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c)
    return out


def _diffuse(xp: Any, u: Any, tmp: Any, steps: int) -> Any:
    for _ in range(steps):
        tmp[1:-1] = u[1:-1] + xp.float32(0.25) * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        tmp[0], tmp[-1] = u[0], u[-1]
        u, tmp = tmp, u
    return u


def gpu_times(
    cp: Any,
    fn: Callable[[], Any],
    repeat: int,
    prepare: Callable[[], Any] | None = None,
    deadline: float | None = None,
) -> list[float]:
    """The ms of each of `repeat` calls of `fn` on the GPU (CUDA events around it alone; `prepare` --
    fresh copies of the inputs -- runs before each, untimed), after two warm-up calls.  Past `deadline`
    (a ``time.perf_counter()`` value) the remaining calls are skipped, one timed call kept at least."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times: list[float] = []
    for k in range(repeat + 2):
        if prepare is not None:
            prepare()
        cp.cuda.Device().synchronize()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        ms = cp.cuda.get_elapsed_time(start, stop)
        if k >= 2:
            times.append(ms)
        if deadline is not None and time.perf_counter() > deadline:
            if not times:  # past the limit in the warm-up: this call's time is the one kept
                times.append(ms)
            break
    return times


def gpu_time(cp: Any, fn: Callable[[], Any], repeat: int, prepare: Callable[[], Any] | None = None) -> float:
    """Median ms of `fn` on the GPU (see :func:`gpu_times`)."""
    return statistics.median(gpu_times(cp, fn, repeat, prepare))


def cpu_times(
    fn: Callable[[], Any],
    repeat: int,
    prepare: Callable[[], Any] | None = None,
    deadline: float | None = None,
) -> list[float]:
    """The ms of each of `repeat` calls of `fn` after one warm-up call (`prepare` before each, untimed).
    Past `deadline` the remaining calls are skipped; a warm-up that ran past it is the one time."""
    if prepare is not None:
        prepare()
    t0 = time.perf_counter()
    fn()
    warm = (time.perf_counter() - t0) * 1000.0
    if deadline is not None and time.perf_counter() > deadline:
        return [warm]
    times = []
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
        if deadline is not None and time.perf_counter() > deadline:
            break
    return times


def cpu_time(fn: Callable[[], Any], repeat: int) -> float:
    return statistics.median(cpu_times(fn, repeat))


def lifted_plan(f: Any, host: dict[str, Any]) -> tuple[Any, str]:
    """Porter's plan of lifted function `f` for arguments `host` (launches resolved, buffers allocated,
    no poison) and the CUDA text of its kernels: everything up to the compile, no GPU needed."""
    from porter.lift.hostexpr import plan
    from porter.lift.kernels import unit

    return plan(f, host, poison=False), unit(f.kernels)


@dataclass
class LiftedRun:
    """A lifted function ready on the GPU: its plan, the device buffers by name (`work`), `refresh`
    (copies the initial contents back into `work`: in-place functions accumulate) and `run` (every
    launch of one call, in order)."""

    plan: Any
    work: dict[str, Any]
    refresh: Callable[[], None]
    run: Callable[[], None]


def lifted_run(cp: Any, f: Any, host: dict[str, Any]) -> LiftedRun:
    """`f`'s kernels compiled with CuPy's RawModule and launched as porter's plan for `host` says."""
    p, source = lifted_plan(f, host)
    module = cp.RawModule(code=source, options=("-std=c++17",))
    funcs = [module.get_function(k) for k in p.kernels]
    base = {k: cp.asarray(v) for k, v in p.buffers.items()}
    work = {k: v.copy() for k, v in base.items()}

    def refresh() -> None:
        for k, v in base.items():
            work[k][...] = v

    def run() -> None:
        for la in p.launches:
            a = [work[x] if isinstance(x, str) else x for x in la.args]
            funcs[la.kernel](la.grid, la.block, tuple(a), shared_mem=la.shared)

    return LiftedRun(p, work, refresh, run)


def python_ms(fn: Callable[..., Any], f: Any, small: dict[str, int], seed: int = 3) -> float:
    """Ms of one call of the Python function `fn` (lifted as `f`) on arguments drawn at sizes `small`."""
    from porter.lift import inputs

    args = inputs.draw(f, inputs.default_sizes(f, small), seed=seed)
    t0 = time.perf_counter()
    fn(**args)
    return (time.perf_counter() - t0) * 1000.0


def measure(cp: Any, f: Any, case: dict[str, Any], repeat: int, py: Any) -> str:
    """One function's row of the table."""
    from porter.lift import inputs

    sizes = inputs.default_sizes(f, case["sizes"])
    host = inputs.draw(f, sizes, seed=11)
    run = lifted_run(cp, f, host)
    p, work = run.plan, run.work
    run.refresh()
    run.run()
    cp.cuda.Device().synchronize()
    dev_args = {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in host.items()}
    lib_args = {k: v.copy() if isinstance(v, cp.ndarray) else v for k, v in dev_args.items()}
    got_lib = case["lib"](cp, **lib_args)
    want = lib_args[case["out"]] if case["out"] else got_lib
    if p.returns.startswith("scalar:"):
        got = work[p.returns[7:]][0]
    elif f.function == "diffuse":  # steps even or odd: the caller's u or tmp holds the result
        got = work["u"] if sizes["steps"] % 2 == 0 else work["tmp"]
        want = got_lib
    else:
        got = work[case["out"]]
    ok = bool(cp.allclose(got, want, rtol=1e-3, atol=1e-3))
    t_lift = gpu_time(cp, run.run, repeat, run.refresh)
    fresh: dict[str, Any] = {}

    def copies() -> None:
        fresh.clear()
        fresh.update({k: v.copy() if isinstance(v, cp.ndarray) else v for k, v in dev_args.items()})

    t_lib = gpu_time(cp, lambda: case["lib"](cp, **fresh), repeat, copies)
    np_args = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in host.items()}
    t_np = cpu_time(
        lambda: case["lib"](
            np, **{k: v.copy() if isinstance(v, np.ndarray) else v for k, v in np_args.items()}
        ),
        3,
    )
    small = inputs.default_sizes(f, case["small"])
    t_small = python_ms(getattr(py, f.function), f, case["small"])
    work_units = float(np.prod([sizes[k] for k in case["sizes"] if k != "counts.shape[0]"]))
    small_units = float(np.prod([small[k] for k in case["small"] if k != "counts.shape[0]"]))
    t_py = t_small * work_units / small_units
    size = ", ".join(f"{k}={v}" for k, v in case["sizes"].items())
    status = "" if ok else " (MISMATCH)"
    return (
        f"| `{f.function}`{status} | {', '.join(f.patterns)} | {size} | {t_py / 1000:.1f} s | {t_np:.2f} ms | "
        f"{t_lib:.3f} ms | {t_lift:.3f} ms | {t_lib / t_lift:.2f}x | {t_np / t_lift:.0f}x | {len(p.launches)} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import cupy as cp

    from porter.lift.analyze import analyze

    sys.path.insert(0, str(SAMPLE.parent))
    import lift_patterns as py  # type: ignore[import-not-found]

    analysis = analyze(str(SAMPLE), SAMPLE.read_text())
    table = cases(cp, args.scale)
    only = {s for s in args.only.split(",") if s}
    print(f"GPU: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; repeat {args.repeat}\n")
    print(
        "| function | pattern | size | Python (scaled) | NumPy (CPU) | CuPy (GPU) | lifted kernel (GPU) | vs CuPy | vs NumPy | launches |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for f in analysis.lifted:
        case = table.get(f.function)
        if case is None or (only and f.function not in only):
            continue
        print(measure(cp, f, case, args.repeat, py))
    return 0


if __name__ == "__main__":
    sys.exit(main())
