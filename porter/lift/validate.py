"""A lifted function judged against the Python function itself, by the harness.

For each size (the visible ones, then the held-back ones), seeded arguments are drawn; the Python
function runs on them in a sandboxed child (:func:`porter.harness.reference.run_python`: the
Python-function reference).  The function's kernels are a variant like any other to the harness
(:class:`porter.harness.trial.SequenceVariant`): its spec has one array argument per device buffer
(the function's arrays, the arrays it allocates, the kernels' scratch), each instance the plan's
buffers at one size, and :func:`porter.harness.validate.validate` runs the whole sequence of launches
on each device twice from fresh copies and applies the same checks as to every kernel -- ``guard``,
``inputs-unchanged``, ``all-written``, ``deterministic``, ``matches-reference`` with the per-dtype
tolerances -- every verdict computed in the parent; :func:`bench` times it through
:func:`porter.harness.bench.benchmark`.

Arrays a function allocates empty are poisoned on the device, so an element a kernel forgets to write
is seen.  A function whose float accumulations change order (reductions, scans, float atomics) is
judged as a float-atomics kernel is; one a model wrote in reduced precision the user allowed, at that
precision's tolerance.

The Python function's module is imported once per function, each call limited on its own: a module that
hangs at import, or a call that hangs, is stopped once with its line (:class:`References`).  Then the
deliverable itself: :func:`check_dropin` imports the written drop-in module from disk and calls each
function through it, on every stack it offers that runs here and its Python fallback, and compares what
it did with the Python function's results through the same checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device, get_dialect
from porter.backends.isolate import Launches, LocalBuffer, PythonResult
from porter.backends.pycall import NOT_RUN, Call, Hang, run_calls
from porter.harness.bench import benchmark, plan_for
from porter.harness.checks import check_instance, tolerances
from porter.harness.reference import (
    RETURNED,
    PythonCall,
    PythonFunction,
    PythonRun,
    Reference,
    python_run_outputs,
    run_python,
)
from porter.harness.trial import Instance, Reject, SequenceVariant, ValidateOptions
from porter.harness.validate import validate
from porter.lift import hostexpr, inputs
from porter.lift.ir import Lifted
from porter.lift.kernels import unit
from porter.model import ArgSpec, KernelSpec, Role, Status, Verdict
from porter.results import BenchResult, KernelCost

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


def launches_for(src: Source, plan: hostexpr.Plan) -> Launches:
    """One argument set's launches in `src`'s dialect, over the plan's buffers by name, each launch's
    arguments in the dialect's order (an OpenCL kernel may take added ``__local`` buffers); the buffers
    themselves come from the harness's instance (:class:`porter.harness.trial.SequenceVariant`)."""
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
    return Launches(tuple(kernels), {}, tuple(steps), ())


def _tolerance(lifted: Lifted) -> dict[str, Any]:
    """The spec's tolerance fields for `lifted`: a float-atomics kernel's where its float accumulations
    change order; the reduced precision's where a model computes in one the user allowed (its rounding
    dwarfs any order effect: no atomics widening on top)."""
    fields: dict[str, Any] = {"float_atomics": bool(lifted.reorders)}
    if lifted.precision:
        low = tolerances()[lifted.precision]  # by name: NumPy has no bfloat16
        fields.update(rtol=float(low["rtol"]), atol=float(low["atol"]))
    return fields


def spec_for(
    lifted: Lifted,
    plan: hostexpr.Plan,
    sizes: Sequence[Mapping[str, int]] = (),
    hidden: Sequence[Mapping[str, int]] = (),
) -> KernelSpec:
    """The function as the harness sees a kernel: one array argument per device buffer, in the plan's
    order -- the function's arrays (``in`` when it only reads them, else ``inout``), the arrays it
    allocates (``out`` when allocated empty: poisoned, so an element left unwritten shows; ``in`` when
    never written), the kernels' scratch (``inout``) -- at `sizes`, `hidden` held back."""
    params = {p.name for p in lifted.params if p.kind == "array"}
    empty = {local.name for local in lifted.locals if local.fill == "empty"}
    written = set(plan.results) | {t.name for t in lifted.temporaries}
    args = []
    for name, buf in plan.buffers.items():
        if name not in written:
            role = Role.IN
        elif name in empty and name not in params:
            role = Role.OUT
        else:
            role = Role.INOUT
        args.append(ArgSpec(name, buf.dtype.name, role))
    block = str(plan.launches[0].block[0]) if plan.launches else "1"
    return KernelSpec(
        kernel=lifted.function, args=tuple(args), grid=("1",), block=(block,),
        sizes=tuple(dict(s) for s in sizes), hidden_sizes=tuple(dict(h) for h in hidden), source="lift",
        **_tolerance(lifted),
    )  # fmt: skip


def compared_with(lifted: Lifted, plan: hostexpr.Plan) -> tuple[str | None, ...]:
    """Per buffer of `plan` (the spec's arrays): what of the Python function's it is compared with -- a
    parameter's array after the call (its name), the returned value (the buffer that holds it), or
    nothing (scratch)."""
    params = {p.name for p in lifted.params if p.kind == "array"}
    returned = plan.returns.removeprefix("scalar:")
    return tuple(
        name if name in params else RETURNED if returned and name == returned else None
        for name in plan.buffers
    )


@dataclass(frozen=True)
class Prepared:
    """A lifted function at some argument sets, as the harness takes it: the variant (its kernels in one
    dialect, each set's launches), the spec, one given instance per set (labels kept: a label that
    starts with "hidden" is held back) and, by label, what each spec array is compared with."""

    variant: SequenceVariant
    spec: KernelSpec
    instances: tuple[Instance, ...]
    outputs: dict[str, tuple[str | None, ...]]


def prepare(lifted: Lifted, src: Source, sets: Sequence[tuple[str, Mapping[str, Any]]]) -> Prepared:
    """`lifted` in `src`'s dialect at each (label, arguments) of `sets`."""
    plans = [(label, hostexpr.plan(lifted, args, poison=True), inputs.sizes_of_args(lifted, args))
             for label, args in sets]  # fmt: skip
    visible = [size for label, _, size in plans if not label.startswith("hidden")]
    hidden = [size for label, _, size in plans if label.startswith("hidden")]
    spec = spec_for(lifted, plans[0][1], visible, hidden)
    instances: list[Instance] = []
    sequences: dict[str, Launches] = {}
    outputs: dict[str, tuple[str | None, ...]] = {}
    for label, plan, size in plans:
        values = [np.ascontiguousarray(b).reshape(-1) for b in plan.buffers.values()]
        instances.append(Instance.given(spec, size, label, values))
        sequences[label] = launches_for(src, plan)
        outputs[label] = compared_with(lifted, plan)
    provenance = next((k.pattern for k in lifted.kernels if k.pattern.startswith("llm:")), "lift")
    entry = lifted.kernels[0].name if lifted.kernels else lifted.function
    variant = SequenceVariant(lifted.function, src.target, src.text, entry, provenance, sequences=sequences)
    return Prepared(variant, spec, tuple(instances), outputs)


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
    """One verdict for `lifted` in `src`'s dialect on `device`, over every (label, arguments, what the
    Python function did) of `sets`: :func:`porter.harness.validate.validate` with the Python function
    as the reference (a checker device, a simulator: the smallest set only)."""
    if src.problem:
        return Verdict(kernel=lifted.function, target=src.target, device=device.label, backend=device.backend,
                       toolchain="", compiled=False, executed=False, correct=False, status=Status.FAILED,
                       reason=f"translate: {src.problem}")  # fmt: skip
    if device.checks:
        sets = [smallest(sets)]
    trial = prepare(lifted, src, [(label, args) for label, args, _ in sets])
    run = PythonRun(
        tuple(PythonCall(label, args, trial.outputs[label]) for label, args, _ in sets),
        tuple(result for _, _, result in sets),
    )
    opts = ValidateOptions(
        timeout_s=timeout_s, compile=CompileOptions(untrusted=untrusted), given=trial.instances
    )
    (verdict,) = validate(trial.variant, trial.spec, Reference(function=run), [device], opts)
    return verdict


def bench(
    lifted: Lifted,
    src: Source,
    device: Device,
    args: Mapping[str, Any],
    label: str,
    cost: KernelCost | None = None,
) -> BenchResult:
    """`lifted` in `src`'s dialect timed on `device` at `args` (`label`: their size) through
    :func:`porter.harness.bench.benchmark` -- the device's bench plan: warm-up, rounds until the
    interquartile range settles, median and IQR, `cost`'s roofline floor (a time under it is suspect)."""
    trial = prepare(lifted, src, [(label, args)])
    (inst,) = trial.instances
    return benchmark(trial.variant, trial.spec, device, inst.size, plan_for(device), cost=cost, instance=inst)


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
    given ones first: the harness's Python-function reference (:func:`porter.harness.reference.run_python`:
    one sandboxed child, the module imported once, each call limited to `timeout_s`; a hang is stopped
    once and reported with its line)."""
    labelled = [
        *given,
        *((label, inputs.draw(lifted, sizes, seed + k)) for k, (label, sizes) in enumerate(size_sets)),
    ]

    def waiting(what: str, seconds: float) -> None:
        if say is not None:
            say(f"running the Python reference of {lifted.function} ({what})... {seconds:.0f} s")

    fn = PythonFunction(path, lifted.function, timeout_s)
    ran = run_python(fn, [PythonCall(label, args) for label, args in labelled], waiting)
    sets = [(label, args, r) for (label, args), r in zip(labelled, ran.results, strict=True)]
    return References(sets, ran.hang)


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
            why = f"{r.error}" if not r.ok else _differs(t.lifted, label, args, ref, r)
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


def _differs(
    lifted: Lifted, label: str, args: Mapping[str, Any], ref: PythonResult, got: PythonResult
) -> str:
    """Why the drop-in call's arrays and value are not the Python function's, by the harness's checks
    (``inputs-unchanged``: the arrays it only reads bit for bit; ``matches-reference``: the others and
    what it returns, at the function's tolerance); '' when they match."""
    arrays = [p.name for p in lifted.params if p.kind == "array" and p.name in ref.arrays]
    for name in arrays:
        have = got.arrays.get(name)
        if have is None or have.shape != ref.arrays[name].shape:
            return f"{name} came back in another shape"
    values = [np.ascontiguousarray(args[n]).reshape(-1) for n in arrays]
    run = {k: np.ascontiguousarray(got.arrays[n]).reshape(-1) for k, n in enumerate(arrays)}
    specs = [
        ArgSpec(n, v.dtype.name, Role.INOUT if n in lifted.writes else Role.IN)
        for n, v in zip(arrays, values, strict=True)
    ]
    outputs: list[str | None] = list(arrays)
    if ref.returned is None and got.returned is not None:
        return "it returns a value, the Python function None"
    if ref.returned is not None:
        if got.returned is None:
            return "it returns None, the Python function a value"
        have = np.asarray(got.returned).reshape(-1)
        want = np.asarray(ref.returned).reshape(-1)
        if have.size != want.size:
            return f"it returns {have.size} value(s), the Python function {want.size}"
        run[len(values)] = have
        values.append(np.zeros_like(have))
        specs.append(ArgSpec("the returned value", have.dtype.name, Role.INOUT))
        outputs.append(RETURNED)
    spec = KernelSpec(lifted.function, tuple(specs), ("1",), ("1",), **_tolerance(lifted))
    inst = Instance(spec, inputs.sizes_of_args(lifted, args), label, 0, list(values), list(values))
    python = PythonRun((PythonCall(label, args, tuple(outputs)),), (ref,))
    try:
        check_instance(spec, inst, [run], python_run_outputs(python, spec, inst), {})
    except Reject as rej:
        return f"{rej.check}: {rej.reason}"
    return ""
