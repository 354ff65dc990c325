"""One trial of a variant: the inputs of one (size, seed) instance, with guards, and the isolated
job that runs the variant (or the reference) on them.  A failed step is a :class:`Reject`, which
the validate loop turns into the verdict's reason."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device, get_backend, get_dialect, guards
from porter.backends.isolate import Alias, GuardHit, Job, JobResult, Launches, LocalBuffer
from porter.harness.inputs import guard_value, make_args, make_constants
from porter.harness.spec import geometry
from porter.model import KernelSpec, Status, Variant
from porter.scan import cexpr

GUARD_ELEMENTS = 1024  # at least; rounded up so the array with its guard ends on a page boundary


def guard_length(elements: int, itemsize: int, guard: int = GUARD_ELEMENTS) -> int:
    """The poisoned elements after an array of `elements`: `guard` or a few more, so the array with its
    guard fills whole pages -- in a child's guard zones (porter.backends.guards) its first element then
    starts a page and the first element past its guard is the next page, which faults."""
    if guard <= 0 or itemsize <= 0:
        return max(guard, 0)
    step = guards.PAGE // math.gcd(itemsize, guards.PAGE)
    return guard + (-(elements + guard)) % step


LOG_LIMIT = 4000


@dataclass(frozen=True)
class ValidateOptions:
    trials: int = 3
    seed: int = 20240917
    runs: int = 2  # launches of the variant per input set (bit-identical unless float atomics)
    redraws: int = 3  # new inputs drawn when the reference output is near-constant
    timeout_s: float = 120.0  # per child job
    memcheck: bool = True  # compute-sanitizer on NVIDIA GPUs
    checker_trials: int = 1  # trials under a checker device (Oclgrind is a slow simulator)
    # the largest launch (work-items) a checker device simulates: a program's own launch at its real size
    # (a 3072 x 3072 image) would take the simulator hours; over it the variant is only compiled there
    checker_max_work_items: int = 1 << 18
    compile: CompileOptions = CompileOptions()
    sizes: tuple[dict[str, int], ...] | None = None  # override the spec's sizes (tests)
    # Inputs given instead of drawn (a program's captured launches, porter.harness.replay): each is
    # one instance, run once; its label starts with "hidden" when it is held back from any author.
    given: tuple[Instance, ...] = ()


class Reject(Exception):
    """A check failed: the verdict's reason."""

    def __init__(
        self, check: str, reason: str, log: str = "", *, executed: bool = True, status: Status | None = None
    ):
        self.check, self.reason, self.log, self.executed = check, reason, log, executed
        self.status = status or Status.FAILED
        super().__init__(reason)


@dataclass
class Instance:
    """Inputs for one (size, trial): the spec-order values, with guards, and the size label."""

    spec: KernelSpec
    size: dict[str, int]
    label: str
    seed: int
    # spec order, no guard; an Alias where a captured launch passed an earlier argument's buffer again,
    # None where it passed a null pointer (passed as one: the backends' null pointer, OpenCL's NULL cl_mem)
    values: list[np.ndarray | np.generic | Alias | None] = field(default_factory=list)
    # the same, arrays with their guard appended
    guarded: list[np.ndarray | np.generic | Alias | None] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # __constant__ symbol -> contents

    @classmethod
    def given(
        cls,
        spec: KernelSpec,
        size: dict[str, int],
        label: str,
        values: Sequence[np.ndarray | np.generic | Alias | None],
        constants: Mapping[str, np.ndarray] | None = None,
        guard: int = GUARD_ELEMENTS,
    ) -> Instance:
        """An instance of inputs someone else chose (a captured launch's), guarded as drawn ones are."""
        inst = cls(spec, size, label, 0, list(values), constants=dict(constants or {}))
        inst._guard(guard)
        return inst

    def _guard(self, guard: int) -> None:
        for k, v in enumerate(self.values):
            if isinstance(v, np.ndarray):
                length = guard_length(int(v.size), v.dtype.itemsize, guard)
                guard_arr = np.full(length, guard_value(v.dtype.name, k), dtype=v.dtype)
                self.guarded.append(np.concatenate([v, guard_arr]))
            else:
                self.guarded.append(v)

    def length(self, i: int) -> int:
        """Elements of array argument `i` (without its guard); 0 for anything else."""
        value = self.values[i]
        return int(value.size) if isinstance(value, np.ndarray) else 0

    @classmethod
    def draw(
        cls, spec: KernelSpec, size: dict[str, int], label: str, seed: int, guard: int = GUARD_ELEMENTS
    ) -> Instance:
        inst = cls(spec, size, label, seed)
        inst.values = list(make_args(spec, size, seed))
        inst.constants = make_constants(spec, size, seed)
        inst._guard(guard)
        return inst


def _numpy_dtype(text: Any) -> np.dtype | None:
    """The NumPy dtype a variant names for an added argument, or None where NumPy has none (a vector type
    such as ``float3`` in Rodinia cfd's ``__constant__ float3 ff_flux_contribution_momentum_x[1]``)."""
    if text is None:
        return None
    try:
        return np.dtype(str(text))
    except TypeError:
        return None


def extra_value(extra: Mapping[str, Any], inst: Instance, shared: int) -> Any:
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
        data = _spec_constant(
            inst, symbol, "__constant__ symbol",
            f"add [[kernels.{inst.spec.kernel}.constants]], docs/SPEC_FORMAT.md",
        )  # fmt: skip
        # None: a type NumPy does not name (float3, a struct): the symbol's bytes go as captured
        want = _numpy_dtype(extra.get("dtype"))
        if want is not None and want != data.dtype:
            raise Reject(
                "arguments",
                f"the variant's __constant__ argument {symbol!r} is {want}, the spec's constant is {data.dtype}",
                executed=False,
            )
        return data.copy()
    # a texture reference's bound memory and its element count (OpenCL)
    if kind in ("texture", "texture_size"):
        symbol = str(extra.get("symbol", ""))
        data = _spec_constant(
            inst, symbol, "texture reference", "a capture records the memory bound to it at each launch"
        )
        if kind == "texture":  # unbound at the launch: no bytes, and OpenCL has no empty buffer
            return data.copy() if data.nbytes else np.zeros(1, dtype=np.uint8)
        element = int(extra.get("element_bytes") or data.itemsize or 1)
        return np.uint32(min(data.nbytes // element, 0xFFFFFFFF))
    raise Reject("arguments", f"cannot supply the variant's extra argument {dict(extra)}", executed=False)


def _spec_constant(inst: Instance, symbol: str, what: str, hint: str) -> np.ndarray:
    """The spec's per-trial data for `symbol`, which the variant takes as an argument (`what`: a __constant__
    symbol, a texture reference); a Reject naming it, with `hint`, when the spec has none."""
    data = inst.constants.get(symbol)
    if data is None:
        raise Reject(
            "arguments",
            f"the variant takes the {what} {symbol!r} as an argument, but the spec has no constant {symbol!r} "
            f"({hint})",
            executed=False,
        )
    return data


def job_args(variant: Variant, inst: Instance, shared: int) -> tuple[list[Any], list[int], list[int]]:
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
                raise Reject(
                    "arguments", "the variant's arg_map names more added arguments than extra_args"
                ) from None
            args.append(extra_value(extra, inst, shared))
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
            args.append(extra_value(extra, inst, shared))
    # an argument passed twice or into another's allocation (a captured in-place launch, two halves of
    # one cudaMalloc): named by the spec's index, given to the child by the position that array holds
    # in this variant's argument list, at the same byte offset
    where = dict(zip(array_spec_index, positions, strict=True))
    for k, value in enumerate(args):
        if isinstance(value, Alias):
            if value.index not in where:
                raise Reject("arguments", f"argument {k} repeats an array the variant does not take")
            args[k] = Alias(where[value.index], value.offset)
    return args, array_spec_index, positions


def _templates(dialect: str) -> bool:
    """Whether kernels of `dialect` are launched as C++ templates (``name<args>``)."""
    try:
        return bool(get_dialect(dialect).templates)
    except KeyError:  # not a registered dialect: C++ spelling
        return True


def _sets_symbols(backend: str) -> bool:
    try:
        return bool(get_backend(backend).sets_symbols)
    except KeyError:  # not a registered backend: the child says so
        return True


def entry_name(variant: Variant, spec: KernelSpec) -> str:
    if spec.template_args and "<" not in variant.entry and _templates(variant.target):
        return f"{variant.entry}<{', '.join(spec.template_args)}>"
    return variant.entry


UNTRUSTED_PROVENANCE = "llm:"  # model-written variants


@dataclass(frozen=True)
class SequenceVariant(Variant):
    """A variant that is several launches over the spec's arrays rather than one kernel (a lifted
    Python function: its kernels and the launches that do what its loops did).  `sequences`: by
    instance label, the launches of that instance -- each argument a spec array argument's name, a NumPy
    scalar or a LocalBuffer; their ``buffers`` and ``read_back`` are left empty, filled from the instance
    (one device buffer per spec array argument, with its guard).  The harness validates, checks and times
    it as any variant (:func:`make_job`)."""

    sequences: Mapping[str, Launches] = field(default_factory=dict)


def _sequence_job(
    variant: SequenceVariant,
    spec: KernelSpec,
    device: Device | None,
    inst: Instance | None,
    runs: int,
    options: CompileOptions,
    wrapper: tuple[str, ...],
) -> tuple[Job, list[int]]:
    backend = device.backend if device else variant.target
    base = Job(
        backend=backend, source="", entry="", options=options, device=device, runs=runs, wrapper=wrapper
    )
    if inst is None:  # compile only: every kernel any instance launches
        kernels = tuple(dict.fromkeys(k for seq in variant.sequences.values() for k in seq.kernels))
        return replace(base, device=None, launches=(Launches(kernels, {}, (), ()),)), []
    seq = variant.sequences.get(inst.label)
    if seq is None:
        raise Reject("arguments", f"the variant has no launches for {inst.label}", executed=False)
    arrays = [i for i, v in enumerate(inst.guarded) if isinstance(v, np.ndarray)]
    names = tuple(spec.args[i].name for i in arrays)
    buffers = {n: np.asarray(inst.guarded[i]) for n, i in zip(names, arrays, strict=True)}
    named = {f"0:{n}": (n, inst.length(i)) for n, i in zip(names, arrays, strict=True)}
    return replace(base, launches=(replace(seq, buffers=buffers, read_back=names),), names=named), arrays


def make_job(
    variant: Variant,
    spec: KernelSpec,
    device: Device | None,
    inst: Instance | None,
    runs: int,
    opts: CompileOptions,
    seed: int,
    wrapper: tuple[str, ...] = (),
) -> tuple[Job, list[int]]:
    # what this process's probe of the device decides for its builds: the job's child adopts it unprobed
    probed = get_backend(device.backend).probed_options(device) if device is not None else ()
    flags = (*opts.flags, *variant.options)
    options = CompileOptions(
        arch=opts.arch,
        defines=opts.defines,
        include_dirs=opts.include_dirs,
        flags=(*flags, *(f for f in probed if f not in flags)),
        output=opts.output,
        debug=opts.debug,
        untrusted=opts.untrusted or variant.provenance.startswith(UNTRUSTED_PROVENANCE),
    )
    if isinstance(variant, SequenceVariant):
        return _sequence_job(variant, spec, device, inst, runs, options, wrapper)
    if inst is None:
        return Job(
            backend=device.backend if device else variant.target,
            source=variant.source,
            entry=entry_name(variant, spec),
            options=options,
            device=device,
        ), []
    grid, block, shared = geometry(spec, inst.size)
    args, arrays, positions = job_args(variant, inst, shared)
    every_array = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    backend = device.backend if device else variant.target
    job = Job(
        backend=backend,
        source=variant.source,
        entry=entry_name(variant, spec),
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
        # A backend without module globals (OpenCL) receives __constant__ data as added arguments
        # (extra_args); the others as module globals.
        symbols=dict(inst.constants) if _sets_symbols(backend) else {},
        textures=tuple(n for n in spec.textures if n in inst.constants),
        names={str(p): (spec.args[i].name, inst.length(i)) for i, p in zip(arrays, positions, strict=True)},
    )
    return job, arrays


BATCH_ENV = "PORTER_BATCH_BYTES"  # the most array bytes one child gets for launches run together
BATCH_BYTES = 256 << 20  # its default (0: each launch in a child of its own)
# where a child running several launches of one kernel fails before any launch: the same for each of them
SHARED_STAGES = frozenset({"compile", "load", "unavailable", "sandbox"})


def batch_bytes() -> int:
    text = os.environ.get(BATCH_ENV, "").strip()
    return int(text) if text.isdigit() else BATCH_BYTES


def run_together(jobs: Sequence[Job], timeout_s: float) -> list[JobResult]:
    """Each of `jobs` (launches of one kernel on one device: one backend, source, entry, options and device)
    run, as :func:`porter.backends.isolate.run_job` would run it alone: in one child where there are several
    and their arrays hold at most :func:`batch_bytes` (Job.sets: one compile, one load, one driver start),
    each with its part of the outputs.  A compile or a load that fails fails every launch alike: that result
    is each one's.  A child that fails later (a launch, a crash, a timeout, a warp shuffle reading an undefined
    lane) says nothing of which launch it was: then each runs again alone, so each result is what it would
    have been."""
    from porter.backends.isolate import run_job

    held = sum(int(a.nbytes) for job in jobs for a in job.args if isinstance(a, np.ndarray))
    if len(jobs) > 1 and held <= batch_bytes() and not any(j.launches or j.wrapper or j.timing for j in jobs):
        first = jobs[0]
        res = run_job(replace(first, sets=tuple(jobs[1:])), timeout_s * len(jobs))
        if not res.ok and res.stage in SHARED_STAGES:
            return [res for _ in jobs]
        if res.ok and not res.undefined:
            parts, at = [], 0
            for job in jobs:
                parts.append(replace(res, outputs=res.outputs[at : at + job.runs], timed_outputs=[]))
                at += job.runs
            return parts
    return [run_job(job, timeout_s) for job in jobs]


def tail(text: str, limit: int = LOG_LIMIT) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def guard_side(hit: GuardHit) -> str:
    """Which side of its argument a guard hit fell on: "before its first element", "past its 64 elements"."""
    return "before its first element" if hit.element < 0 else f"past its {hit.length} elements"


def job_failure(who: str, res: JobResult, label: str) -> Reject:
    stage = res.stage
    if stage == "guard" and res.guard is not None:
        hit = res.guard
        done = {"write": "written", "read": "read"}.get(hit.access, "accessed")
        side = guard_side(hit)
        return Reject(
            "guard",
            f"out-of-bounds {hit.access}: {hit.argument}[{hit.element}] {done} {side} ({who} died on the "
            f"guard page beside {hit.argument} at {label})",
            res.log,
        )
    if stage == "compile":
        return Reject("compile", f"{who} does not compile: {res.error}", res.log, executed=False)
    if stage == "unavailable":
        return Reject(
            "run", f"{who}: device unavailable: {res.error}", res.log, executed=False, status=Status.COMPILED
        )
    if stage == "emulate":
        return Reject(
            "run", f"{who} cannot be emulated: {res.error}", res.log, executed=False, status=Status.COMPILED
        )
    what = {
        "timeout": "timed out",
        "crash": "crashed",
        "launch": "failed to launch",
        "load": "failed to load",
    }.get(stage, stage)
    return Reject("run", f"{who} {what} at {label}: {res.error}", res.log, executed=stage != "load")


def by_spec(spec: KernelSpec, arrays: list[int], outputs: list[np.ndarray]) -> dict[int, np.ndarray]:
    return {spec_i: out for spec_i, out in zip(arrays, outputs, strict=False)}


def all_sizes(spec: KernelSpec, opts: ValidateOptions) -> list[tuple[dict[str, int], str]]:
    if opts.given:
        return [(inst.size, inst.label) for inst in opts.given]
    visible = list(opts.sizes if opts.sizes is not None else spec.sizes) or [{}]
    out = [(s, "size " + ", ".join(f"{k}={v}" for k, v in s.items())) for s in visible]
    out += [(s, f"hidden size {i + 1}") for i, s in enumerate(spec.hidden_sizes)]
    return out


def seed_for(base: int, *parts: Any) -> int:
    digest = hashlib.sha256(repr((base, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little")
