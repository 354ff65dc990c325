"""Replay validation: a kernel variant judged on the launches a program's own run captured.

From the captured launches of one kernel (:mod:`porter.capture`) this builds what the validator
needs -- a :class:`KernelSpec` whose arguments, types and geometry are the launches' own (each launch a
"size" binding its grid, block, shared bytes and element counts), one given :class:`Instance` per
launch (the allocations' bytes before the launch) and the original's outputs (the bytes after) -- and
runs :func:`porter.harness.validate.validate` with them, so every check of a drawn trial applies
unchanged: guards past every array, inputs bit-identical afterwards, two runs bit-identical,
outputs within the per-dtype tolerance of what the original program left, the memory checkers.

* Element types are the compiler's (``float`` behind ``typedef float DATA_TYPE``); a pointer to a
  struct or an element type without a NumPy name is compared byte for byte.
* An array the original left unchanged in every launch is an *input* (the variant must not change
  it either); one it changed is compared whole after the launch.
* Launches held back: with a second run, every launch of the later runs; with one run, the launches
  whose sizes differ from the first launch's (when there are any).  They are validated like the rest
  but labelled ``hidden``, so no author is ever shown them.
* A launch that cannot be replayed says why (a pointer that is not a device allocation, a struct
  holding a device pointer, two arguments in one allocation, arrays over the capture limit, a launch
  that failed); a launch that changed nothing proves nothing and is left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from porter.backends import CompileOptions, Device
from porter.backends.isolate import Alias
from porter.capture import Arg, Launch
from porter.harness.inputs import ctype_info
from porter.harness.trial import Instance, ValidateOptions
from porter.model import ArgSpec, KernelSpec, Role, Status, Variant, Verdict

if TYPE_CHECKING:
    from porter.harness.bench import BenchPlan
    from porter.results import BenchResult, KernelCost

GEOMETRY = ("gx", "gy", "gz", "bx", "by", "bz", "smem")


@dataclass
class Replay:
    """What the validator needs to judge variants of one kernel on its captured launches."""

    kernel: str
    spec: KernelSpec | None
    instances: tuple[Instance, ...] = ()
    recorded: dict[str, list[np.ndarray]] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()  # launches not replayed, each with why
    problem: str = ""  # why nothing of this kernel can be replayed


def element_dtype(dtype: str, element: str) -> str:
    """The NumPy dtype of a pointer's (or variable's) elements: the runtime's arithmetic name (a C++
    bool is one byte), a vector type's lane type (``float4``: float32) or a known spelling
    (``__half``); anything else is bytes (uint8, compared exactly)."""
    if dtype:
        return _numeric(dtype)
    found = ctype_info(element.replace("const ", "").replace("volatile ", "").strip())
    return found[0] if found is not None else "uint8"


def _numeric(dtype: str) -> str:
    """The validator's name for a captured dtype: a C++ bool is one byte, compared exactly."""
    return "uint8" if dtype == "bool" else dtype


def instance_name(la: Launch, template_params: Sequence[str], param_types: Sequence[str]) -> str:
    """The kernel instance a launch ran, when its name was written with a host template's parameter
    (``axpby<T>`` inside ``template <class T> void run()``): the kernel's type parameters deduced from
    the captured argument types (``axpby<float>``).  The name as captured when nothing is left to
    deduce, or when a parameter cannot be (a non-type parameter)."""
    from porter.harness.spec.infer import base_type

    base, sep, rest = la.kernel.partition("<")
    if not sep or not template_params or not rest.endswith(">"):
        return la.kernel
    written = [w.strip() for w in rest[:-1].split(",")]
    names = [decl.replace("=", " ").split()[1] for decl in template_params if len(decl.split()) >= 2]

    def known(w: str) -> bool:
        return bool(re.fullmatch(r"[-+]?(0x)?[\d.]+[uUlLfF]*", w)) or ctype_info(base_type(w)) is not None

    if all(known(w) for w in written):
        return la.kernel
    bound: dict[str, str] = {}
    for ptype, arg in zip(param_types, la.args, strict=False):
        b = base_type(ptype.replace("&", " "))
        if b in names and b not in bound and arg.kind in ("pointer", "scalar"):
            bound[b] = base_type(arg.element if arg.kind == "pointer" else arg.ctype)
    out = []
    for i, w in enumerate(written):
        if known(w):
            out.append(w)
        elif i < len(names) and names[i] in bound:
            out.append(bound[names[i]])
        else:
            return la.kernel
    return f"{base.strip()}<{', '.join(out)}>"


def struct_dtype(nbytes: int, align: int) -> np.dtype | None:
    """A NumPy structured dtype with the size and alignment of a struct passed by value (its fields
    unknown: compared and passed as words), or None where NumPy cannot express the alignment."""
    if align not in (1, 2, 4, 8) or nbytes <= 0 or nbytes % align:
        return None
    return np.dtype([("words", f"u{align}", (nbytes // align,))], align=True)


def aliases(la: Launch) -> dict[int, int]:
    """Pointer arguments that repeat an earlier one (the same allocation at the same offset: an in-place
    launch ``k(d, d, n)``): argument index -> the index of the argument it repeats."""
    first: dict[tuple[int, int], int] = {}
    found: dict[int, int] = {}
    for a in la.args:
        if a.kind == "pointer" and a.allocation is not None:
            at = (a.allocation, a.offset)
            if at in first:
                found[a.index] = first[at]
            else:
                first[at] = a.index
    return found


def _unreplayable(la: Launch) -> str:
    """Why `la` cannot be replayed ("" when it can)."""
    if la.status != 0:
        return f"the launch itself failed (error {la.status})"
    if la.skipped:
        return la.skipped
    seen: dict[int, tuple[int, int]] = {}
    for a in la.args:
        if a.kind == "pointer":
            if a.allocation is None:
                return f"argument {a.index} ({a.ctype}) is {a.why or 'not resolved'}"
            if a.allocation in seen and seen[a.allocation][1] != a.offset:
                return (
                    f"arguments {seen[a.allocation][0]} and {a.index} point into one allocation at different "
                    "offsets: not replayed yet"
                )
            seen.setdefault(a.allocation, (a.index, a.offset))
            elem = element_dtype(a.dtype, a.element)
            if (la.allocations[a.allocation].bytes - a.offset) < np.dtype(elem).itemsize:
                return f"argument {a.index} points at the end of its allocation"
        elif a.kind == "value":
            if a.holds_device_pointer:
                return f"argument {a.index} ({a.ctype}) is a struct that holds a device pointer: not replayed yet"
            if struct_dtype(a.bytes, a.align) is None:
                why = f"its alignment ({a.align} bytes)" if a.align else "its alignment (not in this capture)"
                return f"argument {a.index} ({a.ctype}) is a struct by value whose layout porter cannot pass: {why}"
        elif not a.dtype:
            return f"argument {a.index} ({a.ctype}) has no scalar type porter knows"
    for i, y in enumerate(la.symbols):
        if not y.constant and la.symbol(i, "before") != la.symbol(i, "after"):
            return f"it writes the __device__ variable {y.name} (variables are not compared yet)"
    return ""


def _arrays(la: Launch, a: Arg, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    assert a.allocation is not None
    item = np.dtype(dtype).itemsize
    n = (la.allocations[a.allocation].bytes - a.offset) // item
    before, after = (
        np.frombuffer(la.array(a.allocation, when), dtype=np.uint8)[a.offset : a.offset + n * item]
        .view(dtype)
        .copy()
        for when in ("before", "after")
    )
    return before, after


def _size_key(la: Launch) -> tuple[int, ...]:
    return tuple(
        la.allocations[a.allocation].bytes - a.offset
        for a in la.args
        if a.kind == "pointer" and a.allocation is not None
    )


def build(kernel: str, launches: Sequence[Launch], atomics: Sequence[str] = ()) -> Replay:
    """The replay of `kernel` from its captured `launches` (every run's, in run order).  ``atomics``:
    the atomic functions the kernel calls (its scan's); float atomics make the comparison order-aware
    (outputs may round differently between runs, as the spec's ``float_atomics``)."""
    from porter.harness.spec.infer import FLOAT_ATOMICS

    left: list[str] = []
    usable: list[Launch] = []
    for la in launches:
        why = _unreplayable(la)
        if why:
            left.append(f"launch {la.launch} (run {la.run}): {why}")
        else:
            usable.append(la)
    if not usable:
        return Replay(kernel, None, left_out=tuple(left), problem=left[0] if left else "no launch captured")
    first = usable[0]
    same = [la for la in usable if la.signature() == first.signature()]
    left += [f"launch {la.launch} (run {la.run}): another instantiation ({', '.join(la.signature())})"
             for la in usable if la.signature() != first.signature()]  # fmt: skip
    usable = same
    repeated = aliases(first)  # arguments passed twice: one array, the same buffer in both places
    left += [f"launch {la.launch} (run {la.run}): its arguments share allocations differently"
             for la in usable if aliases(la) != repeated]  # fmt: skip
    usable = [la for la in usable if aliases(la) == repeated]
    data = [
        {
            a.index: _arrays(la, a, element_dtype(a.dtype, a.element))
            for a in la.args
            if a.kind == "pointer" and a.index not in repeated
        }
        for la in usable
    ]
    informative = [any(not np.array_equal(b, a) for b, a in d.values()) for d in data]
    for la, ok in zip(usable, informative, strict=True):
        if not ok:
            left.append(f"launch {la.launch} (run {la.run}): changed no array (proves nothing)")
    pairs = [(la, d) for la, d, ok in zip(usable, data, informative, strict=True) if ok]
    if not pairs:
        return Replay(kernel, None, left_out=tuple(left), problem="no captured launch changed any array")
    # an array the original never changed is an input: the variant must leave it bit-identical too
    changed = {i for _, d in pairs for i, (b, a) in d.items() if not np.array_equal(b, a)}
    args: list[ArgSpec] = []
    for a in first.args:
        if a.kind == "pointer" and a.index in repeated:  # the buffer of an earlier argument, again
            args.append(ArgSpec(f"arg{a.index}", element_dtype(a.dtype, a.element), Role.SCALAR))
        elif a.kind == "pointer":
            dtype = element_dtype(a.dtype, a.element)
            role = Role.INOUT if a.index in changed else Role.IN
            args.append(ArgSpec(f"arg{a.index}", dtype, role, shape=(f"n{a.index}",)))
        elif a.kind == "value":  # a struct by value: its bytes, as words of its alignment
            args.append(ArgSpec(f"arg{a.index}", str(struct_dtype(a.bytes, a.align)), Role.SCALAR))
        else:
            args.append(ArgSpec(f"arg{a.index}", _numeric(a.dtype), Role.SCALAR, value="0"))
    # held back: the later runs' launches, or with one run the launches of other sizes than the first
    runs = {la.run for la, _ in pairs}
    base_run, base_size = pairs[0][0].run, _size_key(pairs[0][0])
    if len(runs) > 1:
        hidden = [la.run != base_run for la, _ in pairs]
    else:
        hidden = [_size_key(la) != base_size for la, _ in pairs]
    sizes: list[dict[str, int]] = []
    hidden_sizes: list[dict[str, int]] = []
    given: list[tuple[dict[str, int], str, list[np.ndarray | np.generic | Alias], dict[str, np.ndarray]]] = []
    recorded: dict[str, list[np.ndarray]] = {}
    # the program's __constant__ / __device__ variables: inputs of every launch, set in each module
    constants = tuple(
        ArgSpec(y.name, element_dtype(y.dtype, y.element), Role.IN, shape=(f"c_{y.name}",))
        for y in first.symbols
    )
    for (la, d), held in zip(pairs, hidden, strict=True):
        size = dict(zip(GEOMETRY, (*la.grid, *la.block, la.shared_bytes), strict=True))
        values: list[np.ndarray | np.generic | Alias] = []
        outs: list[np.ndarray] = []
        for a in la.args:
            if a.kind == "pointer" and a.index in repeated:
                values.append(Alias(repeated[a.index]))
            elif a.kind == "pointer":
                before, after = d[a.index]
                size[f"n{a.index}"] = before.size
                values.append(before)
                outs.append(after)
            elif a.kind == "value":
                layout = struct_dtype(a.bytes, a.align)
                assert layout is not None  # _unreplayable refused the others
                values.append(np.frombuffer(bytes.fromhex(a.hex), dtype=layout)[0])
            else:
                values.append(np.dtype(_numeric(a.dtype)).type(a.value()))
        symbols: dict[str, np.ndarray] = {}
        for i, (y, c) in enumerate(zip(la.symbols, constants, strict=False)):
            raw = np.frombuffer(la.symbol(i, "before"), dtype=np.uint8)
            item = np.dtype(c.dtype).itemsize
            symbols[y.name] = raw[: raw.size // item * item].view(c.dtype).copy()
            size[f"c_{y.name}"] = symbols[y.name].size
        label = ("hidden launch" if held else "launch") + f" {la.launch} of run {la.run}"
        (hidden_sizes if held else sizes).append(size)
        given.append((size, label, values, symbols))
        recorded[label] = outs
    spec = KernelSpec(
        kernel,
        tuple(args),
        ("gx", "gy", "gz"),
        ("bx", "by", "bz"),
        "smem",
        sizes=tuple(sizes),
        hidden_sizes=tuple(hidden_sizes),
        source="capture",
        float_atomics=bool(set(atomics) & FLOAT_ATOMICS)
        and any(a.role is Role.INOUT and np.dtype(a.dtype).kind == "f" for a in args),
        notes=(
            f"from {len(pairs)} captured launch(es)",
            *(f"arg{i} is arg{j} again (one buffer passed twice)" for i, j in sorted(repeated.items())),
        ),
        constants=constants,
    )
    instances = [Instance.given(spec, *g) for g in given]
    # visible launches first, then the held-back ones (the validator's order for hidden sizes)
    instances.sort(key=lambda inst: inst.label.startswith("hidden"))
    return Replay(kernel, spec, tuple(instances), recorded, tuple(left))


def replay(
    variant: Variant,
    rep: Replay,
    devices: Sequence[Device],
    options: ValidateOptions = ValidateOptions(),
) -> list[Verdict]:
    """One verdict per device: `variant` run from each captured launch of `rep`, compared with what
    the original left.  A kernel that cannot be replayed gets one failed verdict saying why."""
    from porter.harness.reference import Reference
    from porter.harness.validate import validate

    if rep.spec is None:
        return [
            Verdict(
                kernel=rep.kernel,
                target=variant.target,
                device="",
                backend="",
                toolchain="",
                compiled=False,
                executed=False,
                correct=False,
                status=Status.FAILED,
                reason=f"not replayable: {rep.problem}",
                logs=rep.left_out,
            )  # fmt: skip
        ]
    spec, instances = _for_variant(rep, variant)
    opts = replace(options, given=instances, trials=1)
    verdicts = validate(variant, spec, Reference(recorded=rep.recorded), list(devices), opts)
    shown, held = len(spec.sizes), len(spec.hidden_sizes)
    said = f"matches what the original's run left at {shown} captured launch(es)" + (
        f" and {held} held back" if held else ""
    )
    verdicts = [replace(v, reason=said) if v.status is Status.VALIDATED else v for v in verdicts]
    if rep.left_out:
        verdicts = [
            replace(v, logs=(*v.logs, *(f"not replayed: {w}" for w in rep.left_out))) for v in verdicts
        ]
    return verdicts


def timing_instances(rep: Replay, most: int = 3) -> tuple[Instance, ...]:
    """The captured launches a kernel is timed at: one per distinct size, the largest (by the bytes its
    arrays hold) first, at most `most`.  Held-back launches count too: a time shows no author any data."""
    by_size: dict[tuple[tuple[str, int], ...], Instance] = {}
    for inst in rep.instances:
        by_size.setdefault(tuple(sorted(inst.size.items())), inst)

    def nbytes(inst: Instance) -> int:
        return sum(int(v.nbytes) for v in inst.values if isinstance(v, np.ndarray))

    return tuple(sorted(by_size.values(), key=nbytes, reverse=True)[:most])


def timed(
    variant: Variant,
    rep: Replay,
    device: Device,
    plan: BenchPlan,
    *,
    original: Variant | None = None,
    original_options: CompileOptions | None = None,
    reference_devices: Sequence[Device] = (),
    cost_at: Callable[[KernelSpec, dict[str, int]], KernelCost | None] | None = None,
    most: int = 3,
) -> list[BenchResult]:
    """`variant` timed on `device` at its captured launches (:func:`timing_instances`) with the
    harness's timing (device events, warm-up, L2 flush, median and spread), each against `original` on
    the same physical device when it is given (its speedup; built with `original_options`, its own
    include folders), and against the performance model's floor when `cost_at` gives the launch's cost.
    The timed launches' outputs are re-validated against what the original's run left where the kernel
    does not update its own inputs."""
    from porter.harness.bench import benchmark
    from porter.harness.reference import Reference

    if rep.spec is None:
        return []
    spec, instances = _for_variant(rep, variant)
    chosen = {inst.label for inst in timing_instances(rep, most)}
    reference = Reference(recorded=rep.recorded)
    ref_device = next((d for d in reference_devices if d.name == device.name and d.kind == device.kind), None)
    o_spec, o_by_label = spec, {}  # the original's launches, timed beside the variant's on its device
    if original is not None and ref_device is not None:
        o_spec, o_instances = _for_variant(rep, original)
        o_by_label = {i.label: i for i in o_instances}
    o_plan = replace(plan, compile=original_options or plan.compile, revalidate=False)
    results = []
    for inst in (i for i in instances if i.label in chosen):
        cost = cost_at(spec, inst.size) if cost_at is not None else None
        o_inst = o_by_label.get(inst.label)
        baseline = None
        if o_inst is not None and original is not None and ref_device is not None:
            baseline = benchmark(original, o_spec, ref_device, inst.size, o_plan, cost=cost, instance=o_inst)
        results.append(
            benchmark(
                variant,
                spec,
                device,
                inst.size,
                plan,
                reference=reference,
                cost=cost,
                instance=inst,
                baseline=baseline,
            )  # fmt: skip
        )
    return results


def _for_variant(rep: Replay, variant: Variant) -> tuple[KernelSpec, tuple[Instance, ...]]:
    """The spec and instances with only the program variables `variant` has: those its source names,
    or takes as an added argument (OpenCL's __constant buffers)."""
    assert rep.spec is not None
    wanted = {str(e.get("symbol")) for e in variant.extra_args if e.get("kind") == "constant"}
    keep = tuple(
        c
        for c in rep.spec.constants
        if c.name in wanted or re.search(rf"\b{re.escape(c.name)}\b", variant.source)
    )
    if len(keep) == len(rep.spec.constants):
        return rep.spec, rep.instances
    spec = replace(rep.spec, constants=keep)
    names = {c.name for c in keep}
    instances = tuple(
        Instance.given(
            spec, inst.size, inst.label, inst.values, {k: v for k, v in inst.constants.items() if k in names}
        )
        for inst in rep.instances
    )
    return spec, instances


__all__ = [
    "Replay",
    "aliases",
    "build",
    "struct_dtype",
    "element_dtype",
    "instance_name",
    "replay",
    "timed",
    "timing_instances",
]
