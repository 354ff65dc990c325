"""What a variant is compared with: the original kernel, run in its own job on a device that can run
it (outputs cached per instance), and/or a Python function -- a callable of porter's own, or the
user's function, run in a sandboxed child (:class:`PythonRun`, :func:`run_python`).

Whatever the reference, the variant goes through the same checks (:mod:`porter.harness.checks`) and
the same timing (:mod:`porter.harness.bench`); a reference only says what each array should hold."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device
from porter.backends.isolate import PythonResult, run_job
from porter.backends.pycall import Call, Hang, run_calls
from porter.harness.checks import guard_touched
from porter.harness.trial import Instance, Reject, ValidateOptions, by_spec, job_failure, make_job
from porter.model import KernelSpec, Role, Status, Variant


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
    # What the original left in each array argument (spec order), by instance label: a program's
    # captured launches (porter.harness.replay).  Served before anything is run.
    recorded: Mapping[str, Sequence[np.ndarray]] | None = None
    # An original whose result depends on the warp-shuffle lanes CUDA leaves undefined: what it left in each
    # array argument (spec order) with those lanes reading the poison pattern, by instance label -- what a
    # variant's run with its own undefined lanes poisoned is compared with (checks.check_same_undefined).
    poisoned_lanes: Mapping[str, Sequence[np.ndarray]] | None = None
    # The user's Python function, run on each instance in a sandboxed child (run_python): what it left
    # in its arrays and returned, by instance label, and what each spec array argument is compared with.
    function: PythonRun | None = None


# ------------------------------------------------------------------- the user's Python function

RETURNED = "<returned>"  # a PythonCall output: what the function returned


@dataclass(frozen=True)
class PythonFunction:
    """The user's Python function as the reference: `function` of the file `module`, imported once in a
    sandboxed child and called on each instance's arguments (:func:`porter.backends.pycall.run_calls`:
    the module is code porter did not write), each import or call limited to `timeout_s`."""

    module: str
    function: str
    timeout_s: float = 120.0


@dataclass(frozen=True)
class PythonCall:
    """One instance's call: its label, the function's arguments by parameter name (in its signature's
    order, as the user's code receives them) and, per spec array argument in spec order, what the
    function leaves that it is compared with -- a parameter's name (that array after the call),
    :data:`RETURNED` (what it returned), or None (nothing: an array only the variant has, scratch its
    kernels use; its guard and its determinism are checked, not its contents)."""

    label: str
    args: Mapping[str, Any]
    outputs: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class PythonRun:
    """What the function did at each call, from one child (raw results: every verdict is the parent's):
    one result per call, in order, and the hang that stopped the child (None: none)."""

    calls: tuple[PythonCall, ...]
    results: tuple[PythonResult, ...]
    hang: Hang | None = None

    def result(self, label: str) -> tuple[PythonCall, PythonResult] | None:
        """The call of the instance labelled `label` and what the function did there (None: not run)."""
        return next(((c, r) for c, r in zip(self.calls, self.results, strict=True) if c.label == label), None)


def run_python(
    fn: PythonFunction, calls: Sequence[PythonCall], progress: Callable[[str, float], None] | None = None
) -> PythonRun:
    """`fn` called on each of `calls` in turn, in one sandboxed child that imported its module once; a
    stage that hangs is stopped once and reported with its line, and the calls after it are not made
    (:mod:`porter.backends.pycall`).  `progress(what, seconds)`: where the child is, while it runs."""
    got = run_calls(
        fn.module, [Call(fn.function, dict(c.args)) for c in calls], fn.timeout_s, progress=progress
    )
    return PythonRun(tuple(calls), tuple(got.results), got.hang)


def python_run_outputs(run: PythonRun, spec: KernelSpec, inst: Instance) -> list[np.ndarray | None]:
    """Per spec array argument (spec order): what the function left there at `inst`, flat, in the
    argument's dtype; None where the call names nothing."""
    found = run.result(inst.label)
    if found is None:
        raise Reject(
            "reference",
            f"the Python function was not run at {inst.label}",
            executed=False,
            status=Status.COMPILED,
        )
    call, result = found
    if not result.ok:
        raise Reject("reference", f"the Python function failed at {inst.label}: {result.error}", result.log)
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    if len(call.outputs) != len(array_idx):
        raise ValueError(f"{inst.label}: {len(call.outputs)} outputs named for {len(array_idx)} arrays")
    out: list[np.ndarray | None] = []
    for i, what in zip(array_idx, call.outputs, strict=True):
        if what is None:
            out.append(None)
            continue
        if what == RETURNED:
            if result.returned is None:
                raise Reject(
                    "matches-reference",
                    f"the Python function returned None, the variant a value at {inst.label}",
                )
            value = np.asarray(result.returned).reshape(-1)
            if value.size != inst.length(i):
                raise Reject(
                    "matches-reference",
                    f"the Python function returns {value.size} value(s), the variant {inst.length(i)} at {inst.label}",
                )
        elif what in result.arrays:
            value = np.asarray(result.arrays[what]).reshape(-1)
        else:
            raise Reject("reference", f"the Python function's {what} did not come back at {inst.label}")
        dtype = np.dtype(spec.args[i].dtype)
        out.append(value if value.dtype == dtype else value.astype(dtype))
    return out


_REF_CACHE: dict[tuple[Any, ...], list[np.ndarray | None]] = {}


def python_reference(fn: Callable[..., Any], spec: KernelSpec, inst: Instance) -> list[np.ndarray]:
    kwargs: dict[str, Any] = {}
    for arg, value in zip(spec.args, inst.values, strict=True):
        kwargs[arg.name] = value.copy() if isinstance(value, np.ndarray) else value
    for name, data in inst.constants.items():  # __constant__ symbols, by name, after the arguments
        kwargs.setdefault(name, data.copy())
    try:
        returned = fn(**kwargs)
    except Exception as err:  # noqa: BLE001 - a broken reference is a verdict, not a crash
        raise Reject(
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


def reference_outputs(
    ref: Reference, spec: KernelSpec, inst: Instance, device: Device, opts: ValidateOptions, logs: list[str]
) -> tuple[list[np.ndarray | None], str]:
    """Per spec array argument (spec order): the reference's content after the run, without guard (None:
    the reference has no counterpart of that array)."""
    if ref.recorded is not None and inst.label in ref.recorded:
        return list(ref.recorded[inst.label]), "original's run (captured)"
    if ref.function is not None:
        return python_run_outputs(ref.function, spec, inst), "Python function"
    if ref.original is not None:
        rdev = reference_device(ref, device)
        if rdev is not None:
            key = (
                hashlib.sha256(ref.original.source.encode("utf-8", "surrogateescape")).hexdigest(),
                ref.original.entry,
                rdev.label,
                tuple(sorted(inst.size.items())),
                inst.seed,
                repr(spec),
            )
            cached = _REF_CACHE.get(key)
            if cached is not None:
                return cached, f"original on {rdev.label}"
            job, arrays = make_job(ref.original, spec, rdev, inst, 1, ref.options, inst.seed)
            res = run_job(job, opts.timeout_s)
            if not res.ok:
                fail = job_failure("the reference (original)", res, inst.label)
                raise Reject("reference", fail.reason, fail.log, executed=True)
            outs = by_spec(spec, arrays, res.outputs[0])
            for i, arr in outs.items():
                body, guard = arr[: inst.length(i)], arr[inst.length(i) :]
                touched = guard_touched(guard, i)
                if touched >= 0:
                    j = touched
                    raise Reject(
                        "reference",
                        f"the reference (original) writes past the end of {spec.args[i].name} (element "
                        f"{inst.length(i) + j}) at {inst.label}: the spec's sizes or shapes do not fit the original; "
                        "write a spec file (docs/SPEC_FORMAT.md)",
                    )
                outs[i] = body
            result: list[np.ndarray | None] = [outs[i] for i in sorted(outs)]
            if len(_REF_CACHE) > 512:
                _REF_CACHE.clear()
            _REF_CACHE[key] = result
            return result, f"original on {rdev.label}"
    if ref.python is not None:
        return list(python_reference(ref.python, spec, inst)), "python reference"
    raise Reject(
        "reference",
        "no reference can run: the original runs on no available device and no Python reference was given",
        executed=False,
        status=Status.COMPILED,
    )


def reference_device(ref: Reference, device: Device) -> Device | None:
    for d in ref.devices:
        if d.label == device.label and not d.checks:
            return d
    usable = [d for d in ref.devices if not d.checks]
    return usable[0] if usable else None


def ref_name_of(ref: Reference) -> str:
    if ref.function is not None:
        return "Python function"
    if ref.recorded is not None:
        return "original's captured run"
    if ref.original is not None and ref.python is not None:
        return "original kernel (Python reference as fallback)"
    return "original kernel" if ref.original is not None else "Python reference"
