"""Problem sizes: the limits a size must respect, the launch geometry at a size, and the sizes a
validation runs at (scaled from the program's own)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from porter.model import KernelSpec, Role
from porter.scan import cexpr

DEFAULT_TARGET_ELEMENTS = 32768  # elements in the largest array at the first validation size
MIN_SCALABLE = 9  # size symbols below this stay at their program value (channels, radius...)
MAX_SIZE_VALUE = 2**63 - 1  # a size symbol's largest value (C's long long)
GPU_ELEMENTS = 1 << 24  # elements in the largest array when timing on a GPU (several times any L2)
CPU_ELEMENTS = 4096  # ... on the emulator and CPU OpenCL devices


def memory_bytes() -> int:
    """The most the buffers of one run may take: half this machine's physical memory (a validation
    holds several copies of them), 1 TiB if unknown."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE")) // 2
    except (AttributeError, ValueError, OSError):
        return 1 << 40


def check_size(spec: KernelSpec, size: Mapping[str, int]) -> None:
    """ValueError when the spec cannot run at ``size``: an expression that does not evaluate, a
    scalar its type cannot hold, an array of no elements, a launch geometry out of range, or buffers
    larger than :func:`memory_bytes`."""
    from porter.harness.inputs import element_count, scalar_value

    total = 0
    for arg in (*spec.args, *spec.constants):
        if arg.role is Role.SCALAR:
            scalar_value(arg, size)
            continue
        count = element_count(arg, size)
        if count <= 0:
            what = "constant" if arg in spec.constants else "argument"
            raise ValueError(f"{what} {arg.name} has {count} elements")
        total += count * np.dtype(arg.dtype).itemsize
    geometry(spec, size)
    limit = memory_bytes()
    if total > limit:
        raise ValueError(
            f"the buffers take {total / (1 << 30):.4g} GiB, more than half this machine's memory "
            f"({limit / (1 << 30):.4g} GiB)"
        )


MAX_LAUNCH_DIM = 2**31 - 1  # CUDA's largest grid x extent; no launch dimension may exceed it


def geometry(spec: KernelSpec, size: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(grid, block, shared_bytes) at a problem size; ValueError when out of range."""
    from porter.harness.inputs import _sizeof

    def value(text: str) -> int:
        v = cexpr.eval_text(text, size, _sizeof)
        try:
            return int(v)
        except (OverflowError, ValueError):  # a float infinity or NaN
            raise ValueError(f"{text} is {v}, not an integer") from None

    grid = tuple(value(g) for g in spec.grid)
    block = tuple(value(b) for b in spec.block)
    shared = value(spec.shared_bytes or "0")
    if any(v <= 0 for v in grid + block):
        raise ValueError(f"launch geometry grid={grid} block={block} is empty")
    if any(v > MAX_LAUNCH_DIM for v in grid + block):
        raise ValueError(f"launch geometry grid={grid} block={block} exceeds {MAX_LAUNCH_DIM} in a dimension")
    if not 0 <= shared <= MAX_LAUNCH_DIM:
        raise ValueError(f"dynamic shared memory of {shared} bytes is out of range")
    return grid, block, shared


def _largest(spec: KernelSpec, size: Mapping[str, int]) -> int:
    from porter.harness.inputs import element_count

    return max((element_count(a, size) for a in spec.args if a.role is not Role.SCALAR), default=0)


def _runnable(spec: KernelSpec, size: Mapping[str, int]) -> bool:
    from porter.harness.inputs import element_count

    try:
        geometry(spec, size)
        return all(element_count(a, size) > 0 for a in spec.args if a.role is not Role.SCALAR)
    except (cexpr.ExprError, ValueError, ZeroDivisionError):
        return False


def _scaled(program: Mapping[str, int], fixed: Iterable[str], factor: float) -> dict[str, int]:
    fixed = set(fixed)
    return {k: v if k in fixed else max(1, round(v * factor)) for k, v in program.items()}


def choose_sizes(
    spec: KernelSpec,
    program: Mapping[str, int],
    fixed: Iterable[str] = (),
    target: int = DEFAULT_TARGET_ELEMENTS,
) -> tuple[tuple[dict[str, int], ...], tuple[dict[str, int], ...]]:
    """Validation sizes derived from the program's own size, keeping the symbols' ratios.

    Returns (sizes, hidden_sizes): sizes[0] scaled so the largest array holds about `target`
    elements, rounded to multiples of 32; sizes[1] smaller with every scalable symbol odd (so not a
    multiple of any power-of-two block); one hidden size, odd, of yet another magnitude.
    """
    fixed = set(fixed)
    if not program:
        return (({},), ())
    scalable = [k for k in program if k not in fixed]
    if not scalable:
        return ((dict(program),), ())
    lo, hi = 0.0, 1.0
    if _largest(spec, program) > target:
        for _ in range(60):
            mid = (lo + hi) / 2
            if _largest(spec, _scaled(program, fixed, mid)) > target:
                hi = mid
            else:
                lo = mid
        factor = lo
    else:
        factor = 1.0

    def nice(factor: float) -> dict[str, int]:
        s = _scaled(program, fixed, factor)
        return {k: (max(32, v - v % 32) if k not in fixed and v >= 64 else v) for k, v in s.items()}

    def odd(factor: float, offset: int) -> dict[str, int]:
        s = _scaled(program, fixed, factor)
        return {k: ((v + offset) | 1) if k not in fixed and v > 2 else v for k, v in s.items()}

    candidates = [nice(factor), odd(factor * 0.77, 0)]
    hidden_candidates = [odd(factor * 0.61, 6), odd(factor * 0.45, 10), odd(factor * 0.9, 4)]
    sizes = []
    for s in candidates:
        if _runnable(spec, s) and s not in sizes:
            sizes.append(s)
    if not sizes:
        raise ValueError(f"the spec cannot run at sizes derived from {dict(program)}")
    hidden = next((s for s in hidden_candidates if _runnable(spec, s) and s not in sizes), None)
    return tuple(sizes), ((hidden,) if hidden else ())


# --------------------------------------------------------------------------- timing sizes


def scalable_symbols(spec: KernelSpec, size: Mapping[str, int]) -> set[str]:
    """Size symbols safe to scale: those passed to the kernel as scalars or used in the grid (a
    symbol only in a shape, like a #define'd bin count, is a compile-time constant of the kernel), and
    not one the kernel's body holds itself (``spec.fixed``: a #define it reads, though the grid uses it)."""
    names: set[str] = set()
    for arg in spec.args:
        if arg.role is Role.SCALAR and arg.value:
            names |= _names(arg.value)
    for g in spec.grid:
        names |= _names(g)
    return {n for n in names if n in size and size[n] >= MIN_SCALABLE and n not in spec.fixed}


def _names(text: str) -> set[str]:
    try:
        return cexpr.names(cexpr.parse(text))
    except cexpr.ExprError:
        return set()


def scale_size(spec: KernelSpec, size: Mapping[str, int], target_elements: int) -> dict[str, int]:
    """`size` with its scalable symbols scaled (ratios kept) so the largest array holds about
    `target_elements`; values of 64 and more rounded down to multiples of 32."""
    scalable = scalable_symbols(spec, size)
    if not scalable or _largest(spec, size) <= 0:
        return dict(size)

    def at(factor: float) -> dict[str, int]:
        out = {}
        for k, v in size.items():
            if k in scalable:
                s = max(1, round(v * factor))
                out[k] = s - s % 32 if s >= 64 else s
            else:
                out[k] = v
        return out

    lo, hi = 0.0, 1.0
    while _largest(spec, at(hi)) < target_elements and hi < 1e9:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if _largest(spec, at(mid)) > target_elements:
            hi = mid
        else:
            lo = mid
    return at(lo) if lo > 0 else at(hi)


def timing_size(
    spec: KernelSpec,
    device_kind: str,
    override: Mapping[str, int] | None = None,
    *,
    gpu_elements: int = GPU_ELEMENTS,
) -> dict[str, int]:
    """The size a kernel is timed at on a device of `device_kind`: ``override``, else the spec's
    benchmark size (or its first size scaled to `gpu_elements`) on a GPU, and its first size
    (scaled down to :data:`CPU_ELEMENTS` when larger) elsewhere."""
    if override:
        return dict(override)
    base = dict(spec.sizes[0]) if spec.sizes else {}
    if device_kind == "gpu":
        return dict(spec.bench_sizes[0]) if spec.bench_sizes else scale_size(spec, base, gpu_elements)
    return scale_size(spec, base, CPU_ELEMENTS) if _largest(spec, base) > CPU_ELEMENTS else base
