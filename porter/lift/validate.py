"""A lifted function judged against the Python function itself.

For each size (the visible ones, then the held-back ones), seeded arguments are drawn; the Python
function runs on them in a sandboxed child (:func:`porter.backends.pycall.run_calls`); the kernels run
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

The Python function's module is imported once per function, each call limited on its own: a module that
hangs at import, or a call that hangs, is stopped once with its line (:class:`References`).  Then the
deliverable itself: :func:`check_dropin` imports the written drop-in module from disk and calls each
function through it, on every stack it offers that runs here and its Python fallback, and compares what
it did with the Python function's results.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device, get_dialect
from porter.backends.isolate import Job, Launches, LocalBuffer, PythonResult, run_job
from porter.backends.pycall import NOT_RUN, Call, Hang, run_calls
from porter.harness.checks import Tolerance, bits_equal, compare, tolerance_for, tolerances
from porter.harness.inputs import guard_value
from porter.lift import hostexpr, inputs
from porter.lift.ir import Lifted
from porter.lift.kernels import unit
from porter.model import Status, Verdict

GUARD = 256
DROPIN = "drop-in"  # the target of the verdicts of the written module's calls (device: the stack)


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
    checker = device.checks
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


Sets = list[tuple[str, dict[str, Any], PythonResult]]
Say = Callable[[str], None]


@dataclass
class References:
    """What the Python function did at each size set (label, arguments, result), from one child that
    imported its module once; `hang`: the import or a call ran past the limit (later calls not run)."""

    sets: Sets
    hang: Hang | None = None

    def broken(self) -> tuple[str, PythonResult] | None:
        """The first set the function failed at (label, result), or None."""
        return next(((label, r) for label, _, r in self.sets if not r.ok), None)


def reference_run(
    path: str,
    lifted: Lifted,
    size_sets: Sequence[tuple[str, Mapping[str, int]]],
    seed: int,
    timeout_s: float,
    say: Say | None = None,
    given: Sequence[tuple[str, dict[str, Any]]] = (),
) -> References:
    """The Python function at each size set (seeded arguments) and at each `given` (label, arguments),
    given ones first: one sandboxed child, the module imported once, each call limited to `timeout_s`;
    a hang is stopped once and reported with its line (:mod:`porter.backends.pycall`)."""
    labelled = [
        *given,
        *((label, inputs.draw(lifted, sizes, seed + k)) for k, (label, sizes) in enumerate(size_sets)),
    ]
    calls = [Call(lifted.function, args) for _, args in labelled]

    def waiting(what: str, seconds: float) -> None:
        if say is not None:
            say(f"running the Python reference of {lifted.function} ({what})... {seconds:.0f} s")

    got = run_calls(path, calls, timeout_s, progress=waiting)
    sets = [(label, args, r) for (label, args), r in zip(labelled, got.results, strict=True)]
    return References(sets, got.hang)


def references(
    path: str, lifted: Lifted, size_sets: Sequence[tuple[str, Mapping[str, int]]], seed: int, timeout_s: float
) -> Sets:
    """(label, arguments, what the Python function did) for each size set."""
    return reference_run(path, lifted, size_sets, seed, timeout_s).sets


# ------------------------------------------------------------------------------- the drop-in module


@dataclass(frozen=True)
class DropinTarget:
    """A function of the written module as it is checked: the lifted function, its reference sets and the
    stacks its kernels are offered through (dropin.STACKS names)."""

    lifted: Lifted
    refs: Sets
    stacks: tuple[str, ...]


def check_dropin(
    module: str,
    targets: Sequence[DropinTarget],
    timeout_s: float,
    devices: Mapping[str, Sequence[Device]] | None = None,
    say: Say | None = None,
) -> dict[str, list[Verdict]]:
    """Each function of the written module `module` called through the file on disk, as a user calls it
    (``import``, then ``f(*args)``), in a sandboxed child per stack it offers
    (``PORTER_LIFT_BACKEND=<stack>``), and its Python fallback; what it leaves in its arrays and returns
    compared with the Python function's results with the validation's per-dtype tolerance (read-only
    arrays bit for bit).  GPU stacks get every size set, the fallback (the original) the first.  A stack
    this machine cannot run (its package missing, no device: the module says it fell back) is a
    ``compiled`` verdict that says so; `devices`: stack -> the devices its child opens before its sandbox,
    as a kernel job's child does.
    Returns function -> one verdict per stack (target ``drop-in``, device the stack); a function whose
    calls were not made because another function's call hung or crashed has none for that stack (the
    caller checks it again without that function)."""
    import importlib.util

    from porter.lift import dropin

    out: dict[str, list[Verdict]] = {t.lifted.function: [] for t in targets}
    name = Path(module).name
    stuck = ""  # the module hangs at import: no other stack waits again
    for stack in (*(s for s, _ in dropin.STACKS), "python"):
        mine = [t for t in targets if stack == "python" or stack in t.stacks]
        if not mine:
            continue
        base: dict[str, Any] = dict(target=DROPIN, device=stack, backend="", toolchain="")
        package = dropin.PACKAGES.get(stack)
        if package is not None and importlib.util.find_spec(package) is None:
            for t in mine:
                out[t.lifted.function].append(Verdict(kernel=t.lifted.function, **base, compiled=True, executed=False,
                    correct=False, status=Status.COMPILED, reason=f"not run here: {package} is not installed"))  # fmt: skip
            continue
        if stuck:
            for t in mine:
                out[t.lifted.function].append(Verdict(kernel=t.lifted.function, **base, compiled=False, executed=False,
                    correct=False, status=Status.FAILED, reason=f"drop-in: not run: {stuck}"))  # fmt: skip
            continue
        calls: list[Call] = []
        which: list[tuple[DropinTarget, str, dict[str, Any], PythonResult]] = []
        for t in mine:
            order = [p.name for p in t.lifted.params]
            for label, args, ref in t.refs if stack != "python" else t.refs[:1]:
                calls.append(Call(t.lifted.function, {n: args[n] for n in order}, positional=True))
                which.append((t, label, args, ref))

        def waiting(what: str, seconds: float, stack: str = stack) -> None:
            if say is not None:
                say(f"calling the drop-in module through {stack} ({what})... {seconds:.0f} s")

        if say is not None:
            say(f"calling every function of {name} through {stack}")
        got = run_calls(module, calls, timeout_s, env={"PORTER_LIFT_BACKEND": stack},
                        devices=(devices or {}).get(stack, ()), progress=waiting)  # fmt: skip
        if got.hang is not None and got.hang.stage != "call":
            stuck = got.hang.describe()
        verdicts: dict[str, Verdict] = {}
        done: dict[str, int] = {}
        waiting_on: set[str] = set()  # stopped by another function's call: judged once that one is gone
        for (t, label, args, ref), r, warned in zip(which, got.results, got.warnings, strict=True):
            f = t.lifted.function
            if f in verdicts or f in waiting_on:
                continue
            if got.imported and not r.ok and r.error.startswith(NOT_RUN):
                waiting_on.add(f)
                continue
            fallback = dropin.fell_back(warned) if stack != "python" else ""
            if fallback:
                verdicts[f] = Verdict(kernel=f, **base, compiled=True, executed=False, correct=False,
                                      status=Status.COMPILED, reason=f"not run here: {fallback}")  # fmt: skip
                continue
            why = f"{r.error}" if not r.ok else _differs(t.lifted, args, ref, r)
            if why:
                verdicts[f] = Verdict(kernel=f, **base, compiled=True, executed=r.ok, correct=False,
                                      status=Status.FAILED, reason=f"drop-in: {f}(...) through {name} ({label}): {why}",
                                      logs=(r.log[-4000:],) if not r.ok else ())  # fmt: skip
                continue
            done[f] = done.get(f, 0) + 1
        for t in mine:
            f = t.lifted.function
            if f in waiting_on and f not in verdicts:
                continue
            if f not in verdicts:
                n = done.get(f, 0)
                verdicts[f] = Verdict(kernel=f, **base, compiled=True, executed=True, correct=True,
                                      status=Status.VALIDATED, trials=n,
                                      reason=f"{name} imported and {f} called at {n} size(s): matches the Python function",
                                      checks=("import", "call", "matches-reference"))  # fmt: skip
            out[f].append(verdicts[f])
    return out


def _differs(lifted: Lifted, args: Mapping[str, Any], ref: PythonResult, got: PythonResult) -> str:
    """How the drop-in call's arrays and value differ from the Python function's ('' when they match)."""
    for p in lifted.params:
        if p.kind != "array" or p.name not in ref.arrays:
            continue
        want, have = ref.arrays[p.name], got.arrays.get(p.name)
        if have is None or have.shape != want.shape:
            return f"{p.name} came back in another shape"
        if p.name not in lifted.writes:  # only read: untouched, bit for bit
            same = bits_equal(have, np.asarray(args[p.name]))
            if not np.all(same):
                return f"{p.name} was modified at element {int(np.flatnonzero(~same)[0])} though the function only reads it"
            continue
        c = compare(have, want, _tolerance(lifted, p.name, have.dtype.name))
        if not c.ok:
            return f"{p.name}[{c.index}] = {c.got!r}, the Python function gives {c.expected!r} ({c.bad} element(s) out of tolerance)"
    if ref.returned is None:
        return "" if got.returned is None else "it returns a value, the Python function None"
    if got.returned is None:
        return "it returns None, the Python function a value"
    have = np.asarray(got.returned).reshape(-1)
    want = np.asarray(ref.returned).reshape(-1)
    if have.size != want.size:
        return f"it returns {have.size} value(s), the Python function {want.size}"
    if want.dtype != have.dtype and have.dtype.kind in "biuf":
        want = want.astype(have.dtype)
    name = lifted.returns[7:] if lifted.returns.startswith("scalar:") else lifted.returns
    c = compare(have, want, _tolerance(lifted, name, have.dtype.name))
    if not c.ok:
        return f"it returns {c.got!r}, the Python function {c.expected!r}"
    return ""
