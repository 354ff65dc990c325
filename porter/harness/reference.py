"""What a variant is compared with: the original kernel, run in its own job on a device that can run
it (outputs cached per instance), and/or a Python function."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device
from porter.backends.isolate import run_job
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


_REF_CACHE: dict[tuple[Any, ...], list[np.ndarray]] = {}


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
) -> tuple[list[np.ndarray], str]:
    """Per spec array argument (spec order): the reference's content after the run, without guard."""
    if ref.recorded is not None and inst.label in ref.recorded:
        return list(ref.recorded[inst.label]), "original's run (captured)"
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
            result = [outs[i] for i in sorted(outs)]
            if len(_REF_CACHE) > 512:
                _REF_CACHE.clear()
            _REF_CACHE[key] = result
            return result, f"original on {rdev.label}"
    if ref.python is not None:
        return python_reference(ref.python, spec, inst), "python reference"
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
    if ref.recorded is not None:
        return "original's captured run"
    if ref.original is not None and ref.python is not None:
        return "original kernel (Python reference as fallback)"
    return "original kernel" if ref.original is not None else "Python reference"
