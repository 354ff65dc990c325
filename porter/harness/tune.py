"""A deterministic autotuner: the same kernel at other launch geometries, each validated, then timed.

The search is over what changes speed without changing the kernel's code: the block shape (1-D: 64 to
1024 threads; 2-D: the shapes of ``tune.toml``), and, for a kernel that strides over its grid
(``i += blockDim.x * gridDim.x``), fewer blocks each doing more items.  The grid is derived so that
at least as many threads run as in the original launch (a kernel that is not grid-stride needs them
all).  Every configuration is validated against the original kernel at the original geometry -- on the
launches a capture holds, or on drawn inputs -- with the validator's every check (poisoned outputs,
guards, two runs, tolerance); a kernel that hard-codes its block size, or sizes shared memory by it,
fails there and is never timed.  The validated configurations are timed (device events, warm-up, L2
flush; :func:`porter.harness.bench.benchmark`, or the ``timer`` a test injects) and the fastest kept;
the original's own geometry is always among them, so the result is never slower than the original by
the measurement.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from porter.backends import Device
from porter.harness.trial import Instance, ValidateOptions
from porter.model import Kernel, KernelSpec, Status, Variant, Verdict


@cache
def settings() -> dict[str, Any]:
    return tomllib.loads((Path(__file__).parent / "tune.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Config:
    """One launch geometry: block extents, grid expressions (in the spec's size symbols), and a label."""

    block: tuple[str, ...]
    grid: tuple[str, ...]
    label: str
    original: bool = False


@dataclass
class Trial:
    config: Config
    verdicts: list[Verdict] = field(default_factory=list)
    time_ms: float | None = None  # on the timing device
    reason: str = ""

    @property
    def validated(self) -> bool:
        return bool(self.verdicts) and all(v.status is Status.VALIDATED for v in self.verdicts)


@dataclass
class TuneResult:
    kernel: str
    device: str  # where the times were taken
    trials: list[Trial]
    best: Trial | None

    @property
    def speedup(self) -> float | None:
        base = next((t for t in self.trials if t.config.original and t.time_ms), None)
        if self.best is None or base is None or not self.best.time_ms or base.time_ms is None:
            return None
        return base.time_ms / self.best.time_ms


def grid_stride(kernel: Kernel | None, source: str) -> bool:
    """Whether the kernel strides over its grid (each thread may do several items)."""
    if kernel is None:
        return False
    body = source.splitlines()[max(0, kernel.line - 1) : kernel.end_line or None]
    text = " ".join(body).replace(" ", "")
    return "gridDim.x*blockDim.x" in text or "blockDim.x*gridDim.x" in text


def used_dims(spec: KernelSpec, sizes: Sequence[dict[str, int]]) -> int:
    """How many dimensions the launches use: the last whose grid or block extent is above 1 at some
    size (a capture's launches always spell three)."""
    from porter.scan import cexpr

    used = 1
    for size in sizes:
        for k in range(1, len(spec.block)):
            try:
                g = cexpr.eval_text(spec.grid[k], size) if k < len(spec.grid) else 1
                b = cexpr.eval_text(spec.block[k], size)
            except (cexpr.ExprError, ValueError, ZeroDivisionError):
                return len(spec.block)
            if g != 1 or b != 1:
                used = max(used, k + 1)
    return used


def configurations(
    spec: KernelSpec, stride: bool, max_threads: int, multiprocessors: int | None, dims: int | None = None
) -> list[Config]:
    """The original geometry first, then the alternatives (deduplicated).  `dims`: the dimensions the
    launches use (:func:`used_dims`; default all the spec spells); the others stay as they are."""
    cfg = settings()
    dims = dims or len(spec.block)
    out = [Config(tuple(spec.block), tuple(spec.grid), "the original's", original=True)]
    if dims == 1:
        total = f"({spec.grid[0]}) * ({spec.block[0]})"
        rest_b, rest_g = tuple(spec.block[1:]), tuple(spec.grid[1:])
        for b in cfg["blocks_1d"]:
            if b > max_threads:
                continue
            out.append(Config((str(b), *rest_b), (f"({total} + {b - 1}) / {b}", *rest_g), f"block {b}"))
            if stride and multiprocessors:
                for per_sm in cfg["blocks_per_sm"]:
                    g = multiprocessors * per_sm
                    grid = (f"min(({total} + {b - 1}) / {b}, {g})", *rest_g)
                    out.append(Config((str(b), *rest_b), grid, f"block {b}, at most {g} blocks"))
    elif dims in (2, 3):
        for shape in cfg["blocks_2d"]:
            bx, by = shape
            if bx * by > max_threads:
                continue
            blocks = (str(bx), str(by), *spec.block[2:])
            grids = (
                f"(({spec.grid[0]}) * ({spec.block[0]}) + {bx - 1}) / {bx}",
                f"(({spec.grid[1]}) * ({spec.block[1]}) + {by - 1}) / {by}",
                *spec.grid[2:],
            )
            out.append(Config(blocks, grids, f"block {bx}x{by}"))
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    unique = []
    for c in out:
        key = (c.block, c.grid)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


Timer = Callable[[Config, KernelSpec, Device], tuple[float | None, str]]
Validator = Callable[[KernelSpec], list[Verdict]]


def tune(
    kernel: str,
    spec: KernelSpec,
    configs: Sequence[Config],
    validate_at: Validator,
    timer: Timer,
    device: Device,
) -> TuneResult:
    """Validate every configuration, time the validated ones on `device`, keep the fastest."""
    trials: list[Trial] = []
    for c in configs:
        shaped = replace(spec, block=c.block, grid=c.grid)
        t = Trial(c)
        try:
            t.verdicts = validate_at(shaped)
        except Exception as err:  # noqa: BLE001 - a configuration porter cannot even set up is a record
            t.reason = f"not validated: {err}"
            trials.append(t)
            continue
        if not t.validated:
            bad = next((v for v in t.verdicts if v.status is not Status.VALIDATED), None)
            t.reason = f"rejected: {bad.reason if bad else 'no device ran it'}"
            trials.append(t)
            continue
        t.time_ms, why = timer(c, shaped, device)
        t.reason = why or "validated"
        trials.append(t)
    timed = [t for t in trials if t.validated and t.time_ms]
    best = min(timed, key=lambda t: (t.time_ms or 0.0, not t.config.original)) if timed else None
    return TuneResult(kernel, device.label, trials, best)


def replay_validator(
    variant: Variant, instances: Sequence[Instance], recorded: dict[str, list[Any]], devices: Sequence[Device],
    options: ValidateOptions,
) -> Validator:  # fmt: skip
    """Validation of a configuration on given inputs against what the original left (a capture's, or
    the original's own run at its own geometry)."""
    from porter.harness.reference import Reference
    from porter.harness.validate import validate

    def run(spec: KernelSpec) -> list[Verdict]:
        given = tuple(Instance.given(spec, i.size, i.label, i.values, i.constants) for i in instances)
        opts = replace(options, given=given, trials=1)
        return validate(variant, spec, Reference(recorded=recorded), list(devices), opts)

    return run
