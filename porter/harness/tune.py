"""A deterministic autotuner: the same kernel at other launch geometries, each validated, then timed.

The search is over what changes speed without changing the kernel's code: the block shape (1-D: 64 to
1024 threads; 2-D: the shapes of ``tune.toml``), and, for a kernel that strides over its grid
(``i += blockDim.x * gridDim.x``), fewer blocks each doing more items.  The grid is derived so that
at least as many threads run as in the original launch (a kernel that is not grid-stride needs them
all).  Every configuration is validated against the original kernel at the original geometry -- on the
launches a capture holds, or on drawn inputs -- with the validator's every check (poisoned outputs,
guards, two runs, tolerance); a kernel that hard-codes its block size fails there and is never timed.
A larger block than the original's gets dynamic shared memory in proportion to its threads (a kernel
that keeps one partial per warp or one element per thread needs that; one sized by a constant gets more
than it uses); a smaller block keeps the original's amount.  The validated configurations are timed (device events, warm-up, L2
flush; :func:`porter.harness.bench.benchmark`, or the ``timer`` a test injects) and the fastest kept;
the original's own geometry is always among them, so the result is never slower than the original by
the measurement.  A time below the performance model's floor is suspect: shown, never chosen.

Then compile options that keep semantics (the timing device's backend lists them as ``tune_flags`` in
its ``facts.toml``: more vectorisation, another load-cache policy) are tried on the fastest geometry,
each validated again with those options on the devices of that backend before it is timed.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
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
    flags: tuple[str, ...] = ()  # compile options on the timing device's backend
    source: str = ""  # whose kernel: "" the original's, else the label of a rewrite joining the search
    shared: str | None = None  # dynamic shared memory bytes (an expression); None: the original's

    def shaped(self, spec: KernelSpec) -> KernelSpec:
        """`spec` launched with this configuration."""
        shared = spec.shared_bytes if self.shared is None else self.shared
        return replace(spec, block=self.block, grid=self.grid, shared_bytes=shared)

    def launches_as(self, spec: KernelSpec, sizes: Sequence[Mapping[str, int]]) -> bool:
        """Whether this configuration launches as `spec` does (grid, block, shared memory) at every one of
        `sizes` (then only compile options can differ); False where either cannot be evaluated."""
        from porter.harness.spec import geometry

        try:
            return bool(sizes) and all(geometry(spec, s) == geometry(self.shaped(spec), s) for s in sizes)
        except (ValueError, ArithmeticError):
            return False


@dataclass(frozen=True)
class Timed:
    """One configuration's measurement: the median, a note, and where it stands against the floor."""

    time_ms: float | None
    note: str = ""
    suspect: bool = False  # below the performance model's floor: shown, never chosen
    achieved_bandwidth: float | None = None  # bytes/s of compulsory traffic
    pct_bandwidth: float | None = None  # of the datasheet bandwidth
    pct_measured_bandwidth: float | None = None  # of the measured device copy


@dataclass
class Trial:
    config: Config
    verdicts: list[Verdict] = field(default_factory=list)
    timed: Timed | None = None  # on the timing device
    reason: str = ""

    @property
    def time_ms(self) -> float | None:
        return self.timed.time_ms if self.timed is not None else None

    @property
    def eligible(self) -> bool:
        return self.validated and bool(self.time_ms) and not (self.timed and self.timed.suspect)

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


def flag_sets(backend: str) -> list[tuple[str, ...]]:
    """The semantics-keeping compile options a backend offers the autotuner (its facts.toml's
    ``tune_flags``; none when it has no such file)."""
    from porter.backends import load_data

    try:
        facts = load_data(f"porter.backends.{backend}", "facts.toml")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        return []
    return [tuple(str(f) for f in fs) for fs in facts.get("tune_flags", [])]


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


def _block_shared(
    spec: KernelSpec, sizes: Sequence[Mapping[str, int]]
) -> list[tuple[tuple[int, ...], int]] | None:
    """(block extents, dynamic shared bytes) of the original launch at each size, when it asks for
    dynamic shared memory at every one of them; else None (nothing to scale)."""
    from porter.harness.spec import geometry

    if spec.shared_bytes in ("", "0") or not sizes:
        return None
    out = []
    for size in sizes:
        try:
            _, block, shared = geometry(spec, size)
        except (ValueError, ArithmeticError):
            return None
        if shared <= 0:
            return None
        out.append((block, shared))
    return out


def _shared_for(
    spec: KernelSpec, lead: tuple[int, ...], original: list[tuple[tuple[int, ...], int]] | None
) -> tuple[str | None, str]:
    """The dynamic shared memory of a configuration whose leading block extents are `lead` (the others
    stay the original's) -- None: the original's -- and a label's suffix.  A larger block than the
    original's gets the original's bytes in proportion (one partial per warp, one element per thread),
    when that is a whole number of bytes at every size."""
    counts = [(math.prod(b), math.prod(lead) * math.prod(b[len(lead) :]), s) for b, s in original or []]
    larger = [(old, new, s) for old, new, s in counts if new > old]
    if not larger or any(s * new % old for old, new, s in larger):
        return None, ""  # the original's amount: enough for a block no larger than the original's
    kept = "".join(f" * ({e})" for e in spec.block[len(lead) :])
    scaled = f"({spec.shared_bytes}) * {math.prod(lead)}{kept} / ({') * ('.join(spec.block)})"
    if len(larger) == len(counts):
        return scaled, ", shared memory in proportion"
    return f"max({spec.shared_bytes}, {scaled})", ", shared memory in proportion"


def configurations(
    spec: KernelSpec, stride: bool, max_threads: int, multiprocessors: int | None, dims: int | None = None,
    sizes: Sequence[Mapping[str, int]] = (),
) -> list[Config]:  # fmt: skip
    """The original geometry first, then the alternatives (deduplicated).  `dims`: the dimensions the
    launches use (:func:`used_dims`; default all the spec spells); the others stay as they are.  `sizes`:
    where the launches are validated, to scale dynamic shared memory with the block."""
    cfg = settings()
    dims = dims or len(spec.block)
    per_size = _block_shared(spec, sizes)
    out = [Config(tuple(spec.block), tuple(spec.grid), "the original's", original=True)]
    if dims == 1:
        total = f"({spec.grid[0]}) * ({spec.block[0]})"
        rest_b, rest_g = tuple(spec.block[1:]), tuple(spec.grid[1:])
        for b in cfg["blocks_1d"]:
            if b > max_threads:
                continue
            shared, more = _shared_for(spec, (b,), per_size)
            block = (str(b), *rest_b)
            out.append(
                Config(block, (f"({total} + {b - 1}) / {b}", *rest_g), f"block {b}{more}", shared=shared)
            )
            if stride and multiprocessors:
                for per_sm in cfg["blocks_per_sm"]:
                    g = multiprocessors * per_sm
                    grid = (f"min(({total} + {b - 1}) / {b}, {g})", *rest_g)
                    out.append(Config(block, grid, f"block {b}, at most {g} blocks{more}", shared=shared))
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
            shared, more = _shared_for(spec, (bx, by), per_size)
            out.append(Config(blocks, grids, f"block {bx}x{by}{more}", shared=shared))
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    unique = []
    for c in out:
        key = (c.block, c.grid)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


Timer = Callable[[Config, KernelSpec, Device], Timed]
Validator = Callable[[KernelSpec, Config], list[Verdict]]  # (shaped spec, the configuration)


def _fastest(trials: Sequence[Trial]) -> Trial | None:
    eligible = [t for t in trials if t.eligible]
    return min(eligible, key=lambda t: (t.time_ms or 0.0, not t.config.original)) if eligible else None


def tune(
    kernel: str,
    spec: KernelSpec,
    configs: Sequence[Config],
    validate_at: Validator,
    timer: Timer,
    device: Device,
    flags: Sequence[tuple[str, ...]] = (),
) -> TuneResult:
    """Validate every configuration, time the validated ones on `device`, keep the fastest; then each
    set of `flags` on the fastest geometry, validated and timed the same way."""

    def trial(c: Config) -> Trial:
        shaped = c.shaped(spec)
        t = Trial(c)
        try:
            t.verdicts = validate_at(shaped, c)
        except Exception as err:  # noqa: BLE001 - a configuration porter cannot even set up is a record
            t.reason = f"not validated: {err}"
            return t
        if not t.validated:
            bad = next((v for v in t.verdicts if v.status is not Status.VALIDATED), None)
            t.reason = f"rejected: {bad.reason if bad else 'no device ran it'}"
            return t
        t.timed = timer(c, shaped, device)
        t.reason = t.timed.note or "validated"
        if t.timed.suspect:
            t.reason = f"suspect, not chosen: {t.reason}"
        return t

    trials = [trial(c) for c in configs]
    geometry = _fastest(trials)
    if geometry is not None:
        for fs in flags:
            c = geometry.config
            label = f"{c.label} + {' '.join(fs)}"
            trials.append(trial(replace(c, label=label, flags=tuple(fs), original=False)))
    return TuneResult(kernel, device.label, trials, _fastest(trials))


def joined(configs: Sequence[Config], source: str) -> list[Config]:
    """`configs` for a rewrite of the kernel joining the search (labelled with it; never "the original")."""
    return [replace(c, label=f"{source}, {c.label}", source=source, original=False) for c in configs]


def replay_validator(
    variants: Mapping[str, Variant], instances: Sequence[Instance], recorded: dict[str, list[Any]],
    devices: Sequence[Device], options: ValidateOptions,
) -> Validator:  # fmt: skip
    """Validation of a configuration on given inputs against what the original left (a capture's, or
    the original's own run at its own geometry).  `variants`: the kernel of each configuration's
    ``source`` ("" the original); a rewrite (not the user's code) is built as untrusted code."""
    from porter.harness.reference import Reference
    from porter.harness.validate import validate

    def run(spec: KernelSpec, config: Config) -> list[Verdict]:
        given = tuple(Instance.given(spec, i.size, i.label, i.values, i.constants) for i in instances)
        opts = replace(options, given=given, trials=1)
        if config.source:
            opts = replace(opts, compile=replace(opts.compile, untrusted=True))
        on = list(devices)
        flags = config.flags
        if flags:  # the options are the timing device's backend's: validated where they apply
            opts = replace(opts, compile=replace(opts.compile, flags=(*opts.compile.flags, *flags)))
            on = [d for d in devices if d.backend == devices[0].backend and d.kind == devices[0].kind]
        return validate(variants[config.source], spec, Reference(recorded=recorded), on, opts)

    return run
