"""A lifted function judged against the Python function itself.

For each size (the visible ones, then the held-back ones), seeded arguments are drawn; the Python
function runs on them in a sandboxed child (:func:`porter.backends.isolate.run_python`); the kernels run
on every device of every target, the whole sequence of launches in one child (``Job.launches``), twice
from fresh copies.  The parent then checks, in order (the first failure names the verdict's reason):

* ``guard`` -- every buffer is followed on the device by a poisoned guard region: nothing written past
  the end of any array;
* ``inputs-unchanged`` -- arrays the function only reads are bit-identical afterwards;
* ``deterministic`` -- the two runs are bit-identical (within the order-aware tolerance where floats
  accumulate in a different order: reductions, scans, float atomics);
* ``matches-reference`` -- every array the function writes and what it returns are within the
  per-dtype tolerance of what the Python function left.

Arrays a function allocates empty are poisoned on the device (NaN), so an element a kernel forgets to
write is a mismatch, not a coincidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device, get_dialect
from porter.backends.isolate import Job, Launches, LocalBuffer, PythonResult, run_job, run_python
from porter.harness.checks import Tolerance, bits_equal, compare, tolerance_for, tolerances
from porter.harness.inputs import guard_value
from porter.lift import hostexpr, inputs
from porter.lift.ir import Lifted
from porter.lift.kernels import unit
from porter.model import Status, Verdict

GUARD = 256


@dataclass(frozen=True)
class Source:
    """A function's kernels in one target dialect: the file's text and, per CUDA kernel, its entry, its
    argument mapping (None: the CUDA order) and added arguments; or why it has none."""

    target: str
    text: str
    entries: dict[str, tuple[str, tuple[int | None, ...] | None, tuple[dict[str, Any], ...]]]
    problem: str = ""


def sources(lifted: Lifted, targets: Sequence[str]) -> dict[str, Source]:
    """The CUDA file of the function's kernels, and its translation into each other target by porter's
    own translators (what a ported kernel goes through)."""
    cuda = unit(lifted.kernels)
    out: dict[str, Source] = {}
    for target in targets:
        if target == "cuda":
            out[target] = Source(target, cuda, {k.name: (k.name, None, ()) for k in lifted.kernels})
            continue
        try:
            tr = get_dialect(target).translate(cuda, f"{lifted.function}.cu")
        except Exception as err:  # noqa: BLE001 - a translator failure is this target's record
            out[target] = Source(target, "", {}, f"the {target} translator failed: {err}")
            continue
        entries: dict[str, tuple[str, tuple[int | None, ...] | None, tuple[dict[str, Any], ...]]] = {}
        refused = []
        for tk in tr.kernels:
            if tk.untranslatable:
                refused.append(f"{tk.name}: {'; '.join(tk.untranslatable)}")
            identity = tuple(range(len(tk.arg_map)))
            entries[tk.name] = (tk.entry, None if tk.arg_map == identity else tk.arg_map, tk.extra_args)
        missing = [k.name for k in lifted.kernels if k.name not in entries]
        problem = "; ".join(refused) or (f"no translation of {', '.join(missing)}" if missing else "")
        out[target] = Source(target, tr.text, entries, problem)
    return out


def _flat(a: np.ndarray, k: int) -> np.ndarray:
    """An array as the device holds it: flat, then a guard of poison."""
    body = np.ascontiguousarray(a).reshape(-1)
    return np.concatenate([body, np.full(GUARD, guard_value(body.dtype.name, k), dtype=body.dtype)])


def launches_for(src: Source, plan: hostexpr.Plan) -> Launches:
    """One argument set's launches in `src`'s dialect: its buffers flat with guards, each launch's
    arguments in the dialect's order (an OpenCL kernel may take added ``__local`` buffers)."""
    keys = list(plan.buffers)
    buffers = {name: _flat(a, keys.index(name)) for name, a in plan.buffers.items()}
    kernels: list[tuple[str, str]] = []
    steps = []
    for launch in plan.launches:
        cuda_name = plan.kernels[launch.kernel]
        entry, arg_map, extras = src.entries[cuda_name]
        pair = (src.text, entry)
        if pair not in kernels:
            kernels.append(pair)
        args: list[Any] = list(launch.args)
        if arg_map is not None:
            extra = iter(extras)
            mapped: list[Any] = []
            for m in arg_map:
                if m is None:
                    e = next(extra)
                    mapped.append(LocalBuffer(int(launch.shared)) if e.get("kind", "local") == "local" else 0)
                else:
                    mapped.append(args[m])
            args = mapped
        steps.append((kernels.index(pair), launch.grid, launch.block, launch.shared, tuple(args)))
    return Launches(tuple(kernels), buffers, tuple(steps), tuple(keys))


def job_for(
    src: Source, plans: Sequence[hostexpr.Plan], device: Device, runs: int = 2, untrusted: bool = False
) -> Job:
    """Every argument set's launches on `device`, in one child (`untrusted`: a model wrote the code)."""
    return Job(
        backend=device.backend, source="", entry="", options=CompileOptions(untrusted=untrusted),
        device=device, runs=runs, launches=tuple(launches_for(src, p) for p in plans),
    )  # fmt: skip


def smallest(
    sets: Sequence[tuple[str, Mapping[str, Any], PythonResult]],
) -> tuple[str, Mapping[str, Any], PythonResult]:
    """The set of arguments with the fewest elements (a simulator's one run): the first of equals."""
    return min(sets, key=lambda s: sum(int(getattr(v, "size", 1)) for v in s[1].values()))


def judge(
    lifted: Lifted,
    src: Source,
    device: Device,
    sets: Sequence[tuple[str, Mapping[str, Any], PythonResult]],
    timeout_s: float = 120.0,
    untrusted: bool = False,
) -> Verdict:
    """One verdict for `lifted` in `src`'s dialect on `device`, over every (label, arguments,
    reference) of `sets`."""
    base: dict[str, Any] = dict(
        kernel=lifted.function, target=src.target, device=device.label, backend=device.backend
    )
    if src.problem:
        return Verdict(**base, toolchain="", compiled=False, executed=False, correct=False, status=Status.FAILED,
                       reason=f"translate: {src.problem}")  # fmt: skip
    stats = {"max_abs": 0.0, "max_rel": 0.0}
    checker = device.kind == "checker"
    if checker:  # a simulator: the smallest size only (held back or not), under its wrapper
        sets = [smallest(sets)]
    plans = [hostexpr.plan(lifted, args, poison=True) for _, args, _ in sets]
    job = job_for(src, plans, device, runs=1 if checker else 2, untrusted=untrusted)
    if checker:
        from dataclasses import replace

        from porter.backends import get_backend
        from porter.harness.checkers import CHECKER_LOG, checker_findings

        wrapper = get_backend(device.backend).checker_wrapper(device, "{scratch}/" + CHECKER_LOG)
        job = replace(job, wrapper=wrapper, collect=(CHECKER_LOG,))
    res = run_job(job, timeout_s * (10 if checker else 1) * len(sets))
    toolchain = res.toolchain
    if not res.ok:
        compiled = res.stage not in ("compile", "unavailable")
        return Verdict(**base, toolchain=toolchain, compiled=compiled, executed=False, correct=False,
                       status=Status.FAILED, reason=f"{res.stage}: {res.error}", logs=(res.log[-4000:],))  # fmt: skip
    if checker:
        findings = checker_findings(device, res)
        if findings:
            f = findings[0]
            return Verdict(**base, toolchain=toolchain, compiled=True, executed=True, correct=False,
                           status=Status.FAILED, reason=f"checker: {f.kind}: {f.message} ({sets[0][0]})")  # fmt: skip
    done = 0
    offset = 0
    for (label, args, ref), plan in zip(sets, plans, strict=True):
        n = len(plan.buffers)
        outputs = [run[offset : offset + n] for run in res.outputs]
        offset += n
        why = _check(lifted, plan, args, ref, outputs, stats, label)
        if why:
            check, reason = why
            return Verdict(**base, toolchain=toolchain, compiled=True, executed=True, correct=False,
                           status=Status.FAILED, reason=f"{check}: {reason}", trials=done,
                           max_abs_err=stats["max_abs"], max_rel_err=stats["max_rel"])  # fmt: skip
        done += 1
    shown = sum(1 for label, _, _ in sets if not label.startswith("hidden"))
    held = len(sets) - shown
    return Verdict(
        **base, toolchain=toolchain, compiled=True, executed=True, correct=True, status=Status.VALIDATED,
        reason=f"matches the Python function at {shown} size(s) + {held} held back",
        trials=done, max_abs_err=stats["max_abs"], max_rel_err=stats["max_rel"],
        checks=("compile", "run", "guard", "inputs-unchanged", "deterministic", "matches-reference", f"hidden-sizes({held})"),
    )  # fmt: skip


def _tolerance(lifted: Lifted, name: str, dtype: str) -> Tolerance:
    tol = tolerance_for(dtype)
    if lifted.precision and np.dtype(dtype).kind == "f":  # reduced precision the user allowed
        low = tolerances()[lifted.precision]  # by name: NumPy has no bfloat16
        tol = Tolerance(max(tol.rtol, float(low["rtol"])), max(tol.atol, float(low["atol"])),
                        max(tol.ulps, int(low["ulps"])))  # fmt: skip
        return tol  # its rounding dwarfs any summation-order effect: no atomics widening on top
    if (
        name in lifted.reorders
        or any(name == f"__s_{r}" for r in lifted.reorders)
        or (lifted.reorders and name.startswith("__s_"))
    ):
        factor = float(tolerances().get("atomics_factor", 1.0))
        return Tolerance(tol.rtol * factor, tol.atol * factor, tol.ulps)
    return tol


def _check(
    lifted: Lifted,
    plan: hostexpr.Plan,
    args: Mapping[str, Any],
    ref: PythonResult,
    outputs: list[list[np.ndarray]],
    stats: dict[str, float],
    label: str,
) -> tuple[str, str] | None:
    keys = list(plan.buffers)
    runs = [dict(zip(keys, out, strict=True)) for out in outputs]
    bodies: list[dict[str, np.ndarray]] = []
    for r, run in enumerate(runs):
        body = {}
        for k, name in enumerate(keys):
            n = plan.buffers[name].size
            flat = run[name]
            guard = flat[n:]
            expected_guard = np.full(guard.size, guard_value(guard.dtype.name, k), dtype=guard.dtype)
            if not np.all(bits_equal(guard, expected_guard)):
                j = int(np.flatnonzero(~bits_equal(guard, expected_guard))[0])
                return (
                    "guard",
                    f"out-of-bounds write: {name}[{n + j}] written past its {n} elements (run {r + 1}, {label})",
                )
            body[name] = flat[:n].reshape(plan.buffers[name].shape)
        bodies.append(body)
    params = {p.name for p in lifted.params if p.kind == "array"}
    for name in params - set(plan.results):
        same = bits_equal(bodies[0][name], np.asarray(args[name]))
        if not np.all(same):
            j = int(np.flatnonzero(~same)[0])
            return (
                "inputs-unchanged",
                f"{name} was modified at element {j} though the function only reads it ({label})",
            )
    for name in plan.results:
        a, b = bodies[0][name], bodies[-1][name]
        if not np.all(bits_equal(a, b)):
            tol = _tolerance(lifted, name, a.dtype.name)
            if not (name in lifted.reorders or name.startswith("__s_")) or not compare(b, a, tol).ok:
                return (
                    "deterministic",
                    f"two runs left different values in {name} ({label}): a race or an uninitialised read",
                )
    expected: list[tuple[str, np.ndarray, np.ndarray]] = []
    for name in plan.results:
        if name in params:
            expected.append((name, bodies[0][name], ref.arrays[name]))
    if plan.returns:
        if ref.returned is None:
            return "matches-reference", f"the Python function returned None, the kernels a value ({label})"
        buffer = plan.returns[7:] if plan.returns.startswith("scalar:") else plan.returns
        got = bodies[0][buffer]
        if plan.returns.startswith("scalar:"):
            got = got.reshape(-1)[:1]
        want = np.asarray(ref.returned).reshape(-1)
        if want.size != got.size:
            return (
                "matches-reference",
                f"the function returns {want.size} value(s), the kernels {got.size} ({label})",
            )
        expected.append(
            ("the returned value", got, want.astype(got.dtype) if want.dtype != got.dtype else want)
        )
    for name, got, want in expected:
        if want.dtype != got.dtype:
            want = want.astype(got.dtype)
        tol = _tolerance(lifted, name if name != "the returned value" else plan.returns[7:], got.dtype.name)
        c = compare(got, want, tol)
        stats["max_abs"] = max(stats["max_abs"], c.max_abs)
        stats["max_rel"] = max(stats["max_rel"], c.max_rel)
        if not c.ok:
            where = np.unravel_index(c.index, got.shape) if got.ndim > 1 else (c.index,)
            return "matches-reference", (
                f"{name}[{', '.join(str(int(w)) for w in where)}] = {c.got!r}, the Python function gives {c.expected!r} "
                f"({c.bad} element(s) out of tolerance, {label})"
            )
    return None


def references(
    path: str, lifted: Lifted, size_sets: Sequence[tuple[str, Mapping[str, int]]], seed: int, timeout_s: float
) -> list[tuple[str, dict[str, Any], PythonResult]]:
    """(label, arguments, what the Python function did) for each size set."""
    out = []
    for k, (label, sizes) in enumerate(size_sets):
        args = inputs.draw(lifted, sizes, seed + k)
        out.append((label, args, run_python(path, lifted.function, args, timeout_s)))
    return out
