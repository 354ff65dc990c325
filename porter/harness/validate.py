"""Differential validation: one typed Verdict per (variant, device), never an exception.

For every device, over every problem size (the spec's sizes plus its hidden sizes) and several
seeded trials:

1. fresh random inputs (never all zeros, negatives included; the spec's ``__constant__`` symbols
   too, set in the variant's and the reference's module, or passed as the ``__constant`` argument
   an OpenCL translation added); outputs *poisoned* (a NaN with a distinctive payload, or an
   integer sentinel) and every array followed by a poisoned *guard* region, so a write past the
   end is seen;
2. the **variant runs first**, twice on fresh copies of the same inputs (one child process, separate
   allocations); then the **reference**: the original kernel on a device that can run it (its own
   job, its own allocations) and/or a Python function;
3. checks, in this order (the first that fails names the verdict's reason):
   ``guard`` (nothing written past the end of any array), ``inputs-unchanged`` (inputs with role
   ``in`` bit-identical afterwards), ``all-written`` (no output element still holds poison where
   the reference wrote one), ``deterministic`` (the two runs bit-identical -- within tolerance for
   float atomics; catches races and uninitialised reads), ``matches-reference`` (every element
   within the per-dtype tolerance of ``tolerances.toml``, max abs/rel error reported);
4. when the reference output is near-constant for the inputs drawn, other inputs are drawn
   (``near-constant`` guard) instead of passing;
5. a memory-checker pass where one exists: Oclgrind for OpenCL (the checker device, which also runs
   the comparisons), compute-sanitizer memcheck and racecheck for CUDA on an NVIDIA GPU.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device
from porter.backends.isolate import Job, JobResult, LocalBuffer, run_job
from porter.harness import cexpr
from porter.harness.inputs import guard_value, is_poison, make_args, make_constants, near_constant
from porter.harness.spec import geometry
from porter.model import KernelSpec, Role, Status, Variant, Verdict

GUARD_ELEMENTS = 1024
LOG_LIMIT = 4000

# --------------------------------------------------------------------------- inputs of validate


@dataclass(frozen=True)
class Reference:
    """What a variant is compared with: the original kernel and/or a Python function.

    ``python(**arrays)`` receives one NumPy value per spec argument by name (copies; outputs arrive
    poisoned) and either fills the ``out``/``inout`` arrays in place or returns ``{name: array}``.
    The spec's ``__constant__`` symbols arrive too, by symbol name, with the trial's contents.
    """

    original: Variant | None = None
    devices: tuple[Device, ...] = ()  # where the original can run; the variant's device is preferred
    python: Callable[..., Any] | None = None
    options: CompileOptions = CompileOptions()


@dataclass(frozen=True)
class ValidateOptions:
    trials: int = 3
    seed: int = 20240917
    runs: int = 2  # launches of the variant per input set (bit-identical unless float atomics)
    redraws: int = 3  # new inputs drawn when the reference output is near-constant
    timeout_s: float = 120.0  # per child job
    memcheck: bool = True  # compute-sanitizer on NVIDIA GPUs
    checker_trials: int = 1  # trials under a checker device (Oclgrind is a slow simulator)
    compile: CompileOptions = CompileOptions()
    sizes: tuple[dict[str, int], ...] | None = None  # override the spec's sizes (tests)


# --------------------------------------------------------------------------- tolerances


@cache
def tolerances() -> dict[str, Any]:
    return tomllib.loads(
        resources.files("porter.harness").joinpath("tolerances.toml").read_text(encoding="utf-8")
    )


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    ulps: int


def tolerance_for(dtype: str, spec: KernelSpec | None = None) -> Tolerance:
    data = tolerances()
    dt = np.dtype(dtype)
    row = data.get(dt.name) if dt.kind == "f" else data["int"]
    row = row or data["float32"]
    rtol, atol, ulps = float(row["rtol"]), float(row["atol"]), int(row["ulps"])
    if spec is not None:
        if spec.float_atomics and dt.kind == "f":
            factor = float(data.get("atomics_factor", 1.0))
            rtol, atol = rtol * factor, atol * factor
        rtol = spec.rtol if spec.rtol is not None else rtol
        atol = spec.atol if spec.atol is not None else atol
    return Tolerance(rtol, atol, ulps)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs: float
    max_rel: float
    bad: int = 0  # elements out of tolerance
    index: int = -1  # the first of them
    got: Any = None
    expected: Any = None


def _ordered(a: np.ndarray) -> np.ndarray:
    """Floats mapped to integers whose order and spacing follow the floats' (for ULP distances)."""
    bits = a.dtype.itemsize * 8
    i = a.view(f"int{bits}").astype(np.int64 if bits < 64 else np.float64)
    low = float(-(2 ** (bits - 1))) if bits == 64 else -(2 ** (bits - 1))
    return np.where(i < 0, low - i, i).astype(np.float64)


def compare(got: np.ndarray, expected: np.ndarray, tol: Tolerance) -> Comparison:
    """Every element of `got` against `expected` (same dtype and size)."""
    got, expected = got.ravel(), expected.ravel()
    if got.dtype.kind != "f":
        bad = np.flatnonzero(got != expected)
        diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        max_abs = float(diff.max()) if diff.size else 0.0
        nz = np.abs(expected.astype(np.float64))
        max_rel = float((diff[nz > 0] / nz[nz > 0]).max()) if np.any(nz > 0) else 0.0
        if bad.size:
            i = int(bad[0])
            return Comparison(False, max_abs, max_rel, int(bad.size), i, got[i].item(), expected[i].item())
        return Comparison(True, max_abs, max_rel)
    g64, e64 = got.astype(np.float64), expected.astype(np.float64)
    gp, ep = is_poison(got), is_poison(expected)
    gnan, enan = np.isnan(g64), np.isnan(e64)
    finite = np.isfinite(g64) & np.isfinite(e64)
    scale = float(np.max(np.abs(e64[np.isfinite(e64)]))) if np.any(np.isfinite(e64)) else 0.0
    diff = np.where(finite, np.abs(g64 - e64), 0.0)
    allowed = tol.atol * scale + tol.rtol * np.abs(np.where(finite, e64, 0.0))
    ok = np.where(finite, diff <= allowed, False)
    if tol.ulps and np.any(finite & ~ok):
        ulp = np.abs(_ordered(got) - _ordered(expected))
        ok |= finite & (ulp <= tol.ulps)
    # Non-finite: poison only matches poison, NaN only NaN, inf only the same inf.
    same_special = (gp == ep) & np.where(gp | ep, True, (gnan & enan) | (~gnan & ~enan & (g64 == e64)))
    ok = np.where(finite, ok & ~gp & ~ep, same_special)
    max_abs = float(diff.max()) if diff.size else 0.0
    nz = finite & (e64 != 0)
    max_rel = float((diff[nz] / np.abs(e64[nz])).max()) if np.any(nz) else 0.0
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        return Comparison(False, max_abs, max_rel, int(bad.size), i, got[i].item(), expected[i].item())
    return Comparison(True, max_abs, max_rel)


def _guard_touched(guard: np.ndarray, k: int) -> int:
    """Index of the first guard element that changed, -1 when the guard is intact."""
    if guard.size == 0:
        return -1
    expected = np.full(guard.size, guard_value(guard.dtype.name, k), dtype=guard.dtype)
    changed = ~_bits_equal(guard, expected)
    return int(np.flatnonzero(changed)[0]) if np.any(changed) else -1


def _bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    view = f"uint{a.dtype.itemsize * 8}"
    return a.ravel().view(view) == b.ravel().view(view)


# --------------------------------------------------------------------------- one problem instance


class _Reject(Exception):
    """A check failed: the verdict's reason."""

    def __init__(
        self, check: str, reason: str, log: str = "", *, executed: bool = True, status: Status | None = None
    ):
        self.check, self.reason, self.log, self.executed = check, reason, log, executed
        self.status = status or Status.FAILED
        super().__init__(reason)


@dataclass
class _Instance:
    """Inputs for one (size, trial): the spec-order values, with guards, and the size label."""

    spec: KernelSpec
    size: dict[str, int]
    label: str
    seed: int
    values: list[np.ndarray | np.generic] = field(default_factory=list)  # spec order, no guard
    guarded: list[np.ndarray | np.generic] = field(default_factory=list)  # arrays with guard appended
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # __constant__ symbol -> contents

    @classmethod
    def draw(
        cls, spec: KernelSpec, size: dict[str, int], label: str, seed: int, guard: int = GUARD_ELEMENTS
    ) -> _Instance:
        inst = cls(spec, size, label, seed)
        inst.values = make_args(spec, size, seed)
        inst.constants = make_constants(spec, size, seed)
        for k, v in enumerate(inst.values):
            if isinstance(v, np.ndarray):
                guard_arr = np.full(guard, guard_value(v.dtype.name, k), dtype=v.dtype)
                inst.guarded.append(np.concatenate([v, guard_arr]))
            else:
                inst.guarded.append(v)
        return inst


def _extra_value(extra: Mapping[str, Any], inst: _Instance, shared: int) -> Any:
    kind = str(extra.get("kind", "local"))
    if kind == "local":
        text = str(extra.get("bytes", "shared_bytes"))
        if text.startswith("<") or text in ("shared_bytes", "dynamic"):
            return LocalBuffer(shared)
        env = {**inst.size, "shared_bytes": shared}
        from porter.harness.inputs import _sizeof

        return LocalBuffer(int(cexpr.eval_text(text, env, _sizeof)))
    if kind == "scalar":
        from porter.harness.inputs import _sizeof

        dtype = np.dtype(str(extra.get("dtype", "int32")))
        return dtype.type(cexpr.eval_text(str(extra["value"]), inst.size, _sizeof))
    if kind == "constant":  # a __constant__ symbol passed as an argument (OpenCL): the same per-trial data
        symbol = str(extra.get("symbol", ""))
        data = inst.constants.get(symbol)
        if data is None:
            raise _Reject(
                "arguments",
                f"the variant takes the __constant__ symbol {symbol!r} as an argument, but the spec has no "
                f"constant {symbol!r} (add [[kernels.{inst.spec.kernel}.constants]], docs/SPEC_FORMAT.md)",
                executed=False,
            )
        want = extra.get("dtype")
        if want is not None and np.dtype(str(want)) != data.dtype:
            raise _Reject(
                "arguments",
                f"the variant's __constant__ argument {symbol!r} is {want}, the spec's constant is {data.dtype}",
                executed=False,
            )
        return data.copy()
    raise _Reject("arguments", f"cannot supply the variant's extra argument {dict(extra)}", executed=False)


def _job_args(variant: Variant, inst: _Instance, shared: int) -> tuple[list[Any], list[int], list[int]]:
    """The variant's argument list; per spec array argument in order, its spec index and its position
    in the list (added array arguments, such as OpenCL __constant buffers, are not read back)."""
    mapping: Sequence[int | None] = (
        variant.arg_map if variant.arg_map is not None else range(len(inst.spec.args))
    )
    extras = iter(variant.extra_args)
    args: list[Any] = []
    array_spec_index: list[int] = []
    positions: list[int] = []
    for m in mapping:
        if m is None:
            try:
                extra = next(extras)
            except StopIteration:
                raise _Reject(
                    "arguments", "the variant's arg_map names more added arguments than extra_args"
                ) from None
            args.append(_extra_value(extra, inst, shared))
            continue
        value = inst.guarded[m]
        if isinstance(value, np.ndarray):
            array_spec_index.append(m)
            positions.append(len(args))
            args.append(value.copy())
        else:
            args.append(value)
    if variant.arg_map is not None:  # extras not referenced by a None slot trail the mapped arguments
        for extra in extras:
            args.append(_extra_value(extra, inst, shared))
    return args, array_spec_index, positions


def _entry(variant: Variant, spec: KernelSpec) -> str:
    if spec.template_args and "<" not in variant.entry and variant.target != "opencl":
        return f"{variant.entry}<{', '.join(spec.template_args)}>"
    return variant.entry


UNTRUSTED_PROVENANCE = "llm:"  # model-written variants


def _job(
    variant: Variant,
    spec: KernelSpec,
    device: Device | None,
    inst: _Instance | None,
    runs: int,
    opts: CompileOptions,
    seed: int,
    wrapper: tuple[str, ...] = (),
) -> tuple[Job, list[int]]:
    options = CompileOptions(
        arch=opts.arch,
        defines=opts.defines,
        include_dirs=opts.include_dirs,
        flags=tuple(opts.flags) + tuple(variant.options),
        output=opts.output,
        debug=opts.debug,
        untrusted=opts.untrusted or variant.provenance.startswith(UNTRUSTED_PROVENANCE),
    )
    if inst is None:
        return Job(
            backend=device.backend if device else variant.target,
            source=variant.source,
            entry=_entry(variant, spec),
            options=options,
            device=device,
        ), []
    grid, block, shared = geometry(spec, inst.size)
    args, arrays, positions = _job_args(variant, inst, shared)
    every_array = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    backend = device.backend if device else variant.target
    job = Job(
        backend=backend,
        source=variant.source,
        entry=_entry(variant, spec),
        options=options,
        device=device,
        args=tuple(args),
        grid=grid,
        block=block,
        shared_bytes=shared,
        runs=runs,
        read_back=None if positions == every_array else tuple(positions),
        seed=seed,
        wrapper=wrapper,
        # OpenCL receives __constant__ data as added arguments (extra_args); the others as module globals.
        symbols={} if backend == "opencl" else dict(inst.constants),
    )
    return job, arrays


def _tail(text: str, limit: int = LOG_LIMIT) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _job_failure(who: str, res: JobResult, label: str) -> _Reject:
    stage = res.stage
    if stage == "compile":
        return _Reject("compile", f"{who} does not compile: {res.error}", res.log, executed=False)
    if stage == "unavailable":
        return _Reject(
            "run", f"{who}: device unavailable: {res.error}", res.log, executed=False, status=Status.COMPILED
        )
    if stage == "emulate":
        return _Reject(
            "run", f"{who} cannot be emulated: {res.error}", res.log, executed=False, status=Status.COMPILED
        )
    what = {
        "timeout": "timed out",
        "crash": "crashed",
        "launch": "failed to launch",
        "load": "failed to load",
    }.get(stage, stage)
    return _Reject("run", f"{who} {what} at {label}: {res.error}", res.log, executed=stage != "load")


# --------------------------------------------------------------------------- reference


_REF_CACHE: dict[tuple[Any, ...], list[np.ndarray]] = {}


def _python_reference(fn: Callable[..., Any], spec: KernelSpec, inst: _Instance) -> list[np.ndarray]:
    kwargs: dict[str, Any] = {}
    for arg, value in zip(spec.args, inst.values, strict=True):
        kwargs[arg.name] = value.copy() if isinstance(value, np.ndarray) else value
    for name, data in inst.constants.items():  # __constant__ symbols, by name, after the arguments
        kwargs.setdefault(name, data.copy())
    try:
        returned = fn(**kwargs)
    except Exception as err:  # noqa: BLE001 - a broken reference is a verdict, not a crash
        raise _Reject(
            "reference", f"the Python reference raised {type(err).__name__}: {err}", executed=True
        ) from None
    out: list[np.ndarray] = []
    for arg in spec.args:
        if arg.role is Role.SCALAR:
            continue
        value = kwargs[arg.name]
        if isinstance(returned, dict) and arg.name in returned:
            value = np.asarray(returned[arg.name], dtype=arg.dtype).ravel()
        out.append(np.asarray(value))
    return out


def _reference_outputs(
    ref: Reference, spec: KernelSpec, inst: _Instance, device: Device, opts: ValidateOptions, logs: list[str]
) -> tuple[list[np.ndarray], str]:
    """Per spec array argument (spec order): the reference's content after the run, without guard."""
    if ref.original is not None:
        rdev = _reference_device(ref, device)
        if rdev is not None:
            key = (
                hashlib.sha256(ref.original.source.encode()).hexdigest(),
                ref.original.entry,
                rdev.label,
                tuple(sorted(inst.size.items())),
                inst.seed,
                repr(spec),
            )
            cached = _REF_CACHE.get(key)
            if cached is not None:
                return cached, f"original on {rdev.label}"
            job, arrays = _job(ref.original, spec, rdev, inst, 1, ref.options, inst.seed)
            res = run_job(job, opts.timeout_s)
            if not res.ok:
                fail = _job_failure("the reference (original)", res, inst.label)
                raise _Reject("reference", fail.reason, fail.log, executed=True)
            outs = _by_spec(spec, arrays, res.outputs[0])
            for i, arr in outs.items():
                body, guard = arr[: inst.values[i].size], arr[inst.values[i].size :]  # type: ignore[union-attr]
                touched = _guard_touched(guard, i)
                if touched >= 0:
                    j = touched
                    raise _Reject(
                        "reference",
                        f"the reference (original) writes past the end of {spec.args[i].name} (element "
                        f"{inst.values[i].size + j}) at {inst.label}: the spec's sizes or shapes do not fit the original; "  # type: ignore[union-attr]
                        "write a spec file (docs/SPEC_FORMAT.md)",
                    )
                outs[i] = body
            result = [outs[i] for i in sorted(outs)]
            if len(_REF_CACHE) > 512:
                _REF_CACHE.clear()
            _REF_CACHE[key] = result
            return result, f"original on {rdev.label}"
    if ref.python is not None:
        return _python_reference(ref.python, spec, inst), "python reference"
    raise _Reject(
        "reference",
        "no reference can run: the original runs on no available device and no Python reference was given",
        executed=False,
        status=Status.COMPILED,
    )


def _reference_device(ref: Reference, device: Device) -> Device | None:
    for d in ref.devices:
        if d.label == device.label and d.kind != "checker":
            return d
    usable = [d for d in ref.devices if d.kind != "checker"]
    return usable[0] if usable else None


def _by_spec(spec: KernelSpec, arrays: list[int], outputs: list[np.ndarray]) -> dict[int, np.ndarray]:
    return {spec_i: out for spec_i, out in zip(arrays, outputs, strict=False)}


# --------------------------------------------------------------------------- checks


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.9g}"
    return str(v)


def _check_instance(
    spec: KernelSpec,
    inst: _Instance,
    runs: list[dict[int, np.ndarray]],
    expected: list[np.ndarray],
    stats: dict[str, float],
) -> None:
    """Raise _Reject for the first check the variant's outputs fail."""
    at = inst.label
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    exp = dict(zip(array_idx, expected, strict=True))
    for run in runs:
        missing = [spec.args[i].name for i in array_idx if i not in run]
        if missing:
            raise _Reject("run", f"the variant's arguments do not cover {', '.join(missing)}")
    bodies: list[dict[int, np.ndarray]] = []
    for r, run in enumerate(runs):
        body: dict[int, np.ndarray] = {}
        for i in array_idx:
            n = inst.values[i].size  # type: ignore[union-attr]
            arr = run[i]
            guard = arr[n:]
            j = _guard_touched(guard, i)
            if j >= 0:
                raise _Reject(
                    "guard",
                    f"out-of-bounds write: {spec.args[i].name}[{n + j}] written past its {n} elements "
                    f"(run {r + 1}, {at})",
                )
            body[i] = arr[:n]
        bodies.append(body)
    for i in array_idx:
        if spec.args[i].role is not Role.IN:
            continue
        for r, body in enumerate(bodies):
            same = _bits_equal(body[i], inst.values[i])  # type: ignore[arg-type]
            if not np.all(same):
                j = int(np.flatnonzero(~same)[0])
                raise _Reject(
                    "inputs-unchanged",
                    f"input {spec.args[i].name} was modified: element {j} was {_fmt(inst.values[i][j].item())}, "  # type: ignore[index]
                    f"now {_fmt(body[i][j].item())} (run {r + 1}, {at})",
                )
    for i in array_idx:
        if spec.args[i].role is not Role.OUT:
            continue
        unwritten = is_poison(bodies[0][i]) & ~is_poison(exp[i])
        if np.any(unwritten):
            idx = np.flatnonzero(unwritten)
            raise _Reject(
                "all-written",
                f"output {spec.args[i].name}: {idx.size} of {unwritten.size} elements never written "
                f"(first: element {int(idx[0])}, still poison; expected {_fmt(exp[i][int(idx[0])].item())}) at {at}",
            )
    if len(bodies) > 1:
        for i in array_idx:
            if spec.args[i].role is Role.IN:
                continue
            a, b = bodies[0][i], bodies[1][i]
            if spec.float_atomics and a.dtype.kind == "f":
                cmp = compare(b, a, tolerance_for(a.dtype.name, spec))
                if not cmp.ok:
                    raise _Reject(
                        "deterministic",
                        f"{spec.args[i].name}[{cmp.index}] differs between two runs on the same input beyond "
                        f"the float-atomics tolerance ({_fmt(cmp.expected)} vs {_fmt(cmp.got)}) at {at}: a race "
                        "or a read of uninitialised memory",
                    )
                continue
            same = _bits_equal(a, b)
            if not np.all(same):
                j = int(np.flatnonzero(~same)[0])
                raise _Reject(
                    "deterministic",
                    f"{spec.args[i].name}[{j}] differs between two runs on the same input "
                    f"({_fmt(a[j].item())} vs {_fmt(b[j].item())}; {int((~same).sum())} elements differ) at {at}: "
                    "a race or a read of uninitialised memory",
                )
    for i in array_idx:
        if spec.args[i].role is Role.IN:
            continue
        got = bodies[0][i]
        cmp = compare(got, exp[i], tolerance_for(got.dtype.name, spec))
        stats["max_abs"] = max(stats.get("max_abs", 0.0), cmp.max_abs)
        stats["max_rel"] = max(stats.get("max_rel", 0.0), cmp.max_rel)
        if not cmp.ok:
            raise _Reject(
                "matches-reference",
                f"{spec.args[i].name}[{cmp.index}] = {_fmt(cmp.got)}, expected {_fmt(cmp.expected)} "
                f"({cmp.bad} of {got.size} elements out of tolerance; max abs error {cmp.max_abs:.3g}, "
                f"max rel error {cmp.max_rel:.3g}) at {at}",
            )


def _discriminating(spec: KernelSpec, inst: _Instance, expected: list[np.ndarray]) -> bool:
    """False when every output of the reference is near-constant (or an inout left as it was)."""
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    outputs = 0
    for i, exp in zip(array_idx, expected, strict=True):
        arg = spec.args[i]
        if arg.role is Role.IN:
            continue
        outputs += 1
        tol = tolerance_for(arg.dtype, spec)
        if arg.role is Role.INOUT and np.all(_bits_equal(exp, inst.values[i])):  # type: ignore[arg-type]
            continue
        if not near_constant(exp, tol.atol):
            return True
    return outputs == 0


# --------------------------------------------------------------------------- memory checkers


_SANITIZER_ERRORS = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error")
_RACECHECK = re.compile(r"RACECHECK SUMMARY:.*?\((\d+)\s+errors?")


def _sanitizer_pass(
    variant: Variant,
    spec: KernelSpec,
    device: Device,
    inst: _Instance,
    opts: ValidateOptions,
    logs: list[str],
) -> list[str]:
    """compute-sanitizer memcheck and racecheck on an NVIDIA GPU; the names of the passes run."""
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        logs.append("memcheck skipped: compute-sanitizer not found")
        return []
    done: list[str] = []
    for check in ("memcheck", "racecheck"):
        wrapper = (
            tool,
            "--tool",
            check,
            "--target-processes",
            "all",
            "--print-limit",
            "20",
            "--log-file",
            "{scratch}/" + SANITIZER_LOG,
        )
        job, _ = _job(variant, spec, device, inst, 1, opts.compile, inst.seed, wrapper)
        res = run_job(replace(job, collect=(SANITIZER_LOG,)), opts.timeout_s * 10)
        text = res.files.get(SANITIZER_LOG, "")
        if not res.ok and res.stage in ("timeout", "unavailable"):
            logs.append(f"{check} did not complete ({res.stage}): {res.error}")
            continue
        m = _SANITIZER_ERRORS.search(text)
        errors = int(m.group(1)) if m else None
        if check == "racecheck":
            rm = _RACECHECK.search(text)
            if rm:
                errors = max(errors or 0, int(rm.group(1)))
        if errors is None:
            logs.append(f"{check}: no summary in the compute-sanitizer log\n{_tail(text + res.log)}")
            continue
        if errors:
            first = next(
                (
                    ln.strip("= ").strip()
                    for ln in text.splitlines()
                    if "=========" in ln and ("Invalid" in ln or "hazard" in ln.lower() or "Error" in ln)
                ),
                "",
            )
            raise _Reject(
                check, f"compute-sanitizer {check}: {errors} error(s) at {inst.label}: {first}", _tail(text)
            )
        done.append(check)
    return done


# Checker logs are written in the job's scratch folder, the only place a sandboxed child may write.
CHECKER_LOG = "checker.log"
SANITIZER_LOG = "sanitizer.log"


def _checker_findings(res: JobResult) -> list[Any]:
    from porter.backends.opencl.oclgrind import parse_oclgrind_log

    text = res.files.get(CHECKER_LOG, "")
    return [
        f
        for f in parse_oclgrind_log(text + "\n" + res.log)
        if f.kind in ("out-of-bounds", "uninitialized", "data-race")
    ]


# --------------------------------------------------------------------------- validate


def _all_sizes(spec: KernelSpec, opts: ValidateOptions) -> list[tuple[dict[str, int], str]]:
    visible = list(opts.sizes if opts.sizes is not None else spec.sizes) or [{}]
    out = [(s, "size " + ", ".join(f"{k}={v}" for k, v in s.items())) for s in visible]
    out += [(s, f"hidden size {i + 1}") for i, s in enumerate(spec.hidden_sizes)]
    return out


def _seed(base: int, *parts: Any) -> int:
    digest = hashlib.sha256(repr((base, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def validate(
    variant: Variant,
    spec: KernelSpec,
    reference: Reference,
    devices: Sequence[Device],
    options: ValidateOptions = ValidateOptions(),
) -> list[Verdict]:
    """One Verdict per device; a variant that cannot run anywhere gets a compile-only verdict."""
    if not devices:
        verdict = compile_only(variant, spec, options)
        return [verdict] if verdict else []
    return [_validate_on(variant, spec, reference, d, options) for d in devices]


def compile_only(
    variant: Variant,
    spec: KernelSpec,
    options: ValidateOptions = ValidateOptions(),
    backend: str | None = None,
) -> Verdict | None:
    """Build the variant where no device can run it: status compiled, or failed with the compiler log.
    None when the backend cannot compile here at all (toolchain missing)."""
    job, _ = _job(variant, spec, None, None, 1, options.compile, 0)
    if backend:
        job = Job(backend=backend, source=job.source, entry=job.entry, options=job.options)
    res = run_job(job, options.timeout_s)
    if res.stage == "unavailable":
        return None
    base = dict(
        kernel=spec.kernel, target=variant.target, device="", backend=job.backend, toolchain=res.toolchain
    )
    if res.ok:
        return Verdict(
            **base,
            compiled=True,
            executed=False,
            correct=False,
            status=Status.COMPILED,
            reason="compiled; no device here can run it",
            logs=(_tail(res.log),) if res.log.strip() else (),
            checks=("compile",),
        )
    what = f"does not compile: {res.error}" if res.stage == "compile" else f"{res.stage}: {res.error}"
    return Verdict(
        **base,
        compiled=False,
        executed=False,
        correct=False,
        status=Status.FAILED,
        reason=what,
        logs=(_tail(res.log),),
    )


def _validate_on(
    variant: Variant, spec: KernelSpec, ref: Reference, device: Device, opts: ValidateOptions
) -> Verdict:
    logs: list[str] = []
    checks: list[str] = []
    stats: dict[str, float] = {}
    toolchain = ""
    compiled = executed = False
    tested: list[dict[str, int]] = []
    trials_done = 0
    checker = device.kind == "checker"
    sizes = _all_sizes(spec, opts)
    trials = opts.checker_trials if checker else opts.trials
    if checker:  # the simulator is slow: its smallest size only, plus a hidden one

        def volume(s: dict[str, int]) -> int:
            return int(np.prod(list(s.values()) or [1]))

        visible = [s for s in sizes if not s[1].startswith("hidden")]
        sizes = [min(visible, key=lambda s: volume(s[0]))] if visible else sizes[:1]
    base = dict(kernel=spec.kernel, target=variant.target, device=device.label, backend=device.backend)
    last_inst: _Instance | None = None
    try:
        if len(sizes) < 2 and not checker:
            logs.append("warning: fewer than two problem sizes in the spec")
        for s_i, (size, label) in enumerate(sizes):
            for trial in range(trials):
                seed = _seed(opts.seed, s_i, trial)
                for redraw in range(opts.redraws + 1):
                    inst = _Instance.draw(spec, size, label, seed, 0 if checker else GUARD_ELEMENTS)
                    last_inst = inst
                    wrapper: tuple[str, ...] = ()
                    if checker:
                        from porter.backends.opencl.oclgrind import oclgrind_wrapper

                        wrapper = oclgrind_wrapper("{scratch}/" + CHECKER_LOG)
                    job, arrays = _job(
                        variant,
                        spec,
                        device,
                        inst,
                        1 if checker else opts.runs,
                        opts.compile,
                        seed,
                        wrapper,
                    )
                    if checker:
                        job = replace(job, collect=(CHECKER_LOG,))
                    res = run_job(job, opts.timeout_s * (10 if checker else 1))
                    findings = _checker_findings(res) if checker else []
                    toolchain = toolchain or res.toolchain
                    compiled = compiled or res.stage not in ("compile", "unavailable")
                    if not res.ok:
                        raise _job_failure("the variant", res, label)
                    executed = True
                    if findings:
                        f = findings[0]
                        where = f" at line {f.line}" + (f" ({f.code})" if f.code else "") if f.line else ""
                        more = f" (+{len(findings) - 1} more findings)" if len(findings) > 1 else ""
                        raise _Reject("oclgrind", f"oclgrind: {f.kind}: {f.message}{where}{more} at {label}")
                    runs = [_by_spec(spec, arrays, out) for out in res.outputs]
                    expected, ref_name = _reference_outputs(ref, spec, inst, device, opts, logs)
                    if not _discriminating(spec, inst, expected):
                        logs.append(
                            f"{label} trial {trial + 1}: reference output near-constant; drew other inputs"
                        )
                        seed = _seed(opts.seed, s_i, trial, "redraw", redraw)
                        if redraw == opts.redraws:
                            raise _Reject(
                                "near-constant",
                                f"inconclusive: the reference output is near-constant at {label} for every input drawn "
                                f"({opts.redraws + 1} draws); give the spec other input ranges (low/high)",
                            )
                        continue
                    _check_instance(spec, inst, runs, expected, stats)
                    break
                trials_done += 1
            if not label.startswith("hidden"):
                tested.append(size)
        if checker:
            checks.append("oclgrind")
        if device.backend == "cuda" and device.kind == "gpu" and opts.memcheck and last_inst is not None:
            odd = next((s for s in _all_sizes(spec, opts)[1:2]), None)
            inst = _Instance.draw(spec, odd[0], odd[1], _seed(opts.seed, "memcheck")) if odd else last_inst
            checks.extend(_sanitizer_pass(variant, spec, device, inst, opts, logs))
    except _Reject as rej:
        if rej.log:
            logs.append(_tail(rej.log))
        compiled = compiled or rej.check not in ("compile",)
        if rej.check in ("compile",):
            compiled = False
        return Verdict(
            **base,
            toolchain=toolchain,
            compiled=compiled,
            executed=executed and rej.executed,
            correct=False,
            status=rej.status,
            reason=f"{rej.check}: {rej.reason}",
            trials=trials_done,
            sizes=tuple(tested),
            max_abs_err=stats.get("max_abs"),
            max_rel_err=stats.get("max_rel"),
            logs=tuple(logs),
            checks=tuple(checks),
        )
    except (cexpr.ExprError, ValueError) as err:
        return Verdict(
            **base,
            toolchain=toolchain,
            compiled=compiled,
            executed=executed,
            correct=False,
            status=Status.FAILED,
            reason=f"spec: {err}",
            logs=tuple(logs),
        )
    hidden = 0 if checker else len(spec.hidden_sizes)
    passed = ["compile", "run"] + ([] if checker else ["guard"]) + ["inputs-unchanged", "all-written"]
    if opts.runs > 1 and not checker:
        passed.append("deterministic")
    passed += ["matches-reference", "near-constant"]
    if hidden:
        passed.append(f"hidden-sizes({hidden})")
    return Verdict(
        **base,
        toolchain=toolchain,
        compiled=True,
        executed=True,
        correct=True,
        status=Status.VALIDATED,
        reason=f"matches the {ref_name_of(ref)} on {len(tested)} size(s) + {hidden} hidden, {trials} trial(s) each",
        trials=trials_done,
        sizes=tuple(tested),
        max_abs_err=stats.get("max_abs", 0.0),
        max_rel_err=stats.get("max_rel", 0.0),
        logs=tuple(logs),
        checks=tuple(passed + checks),
    )


def ref_name_of(ref: Reference) -> str:
    if ref.original is not None and ref.python is not None:
        return "original kernel (Python reference as fallback)"
    return "original kernel" if ref.original is not None else "Python reference"
