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
* Arguments that point into one allocation (passed twice, two halves of one cudaMalloc, a stencil
  on ``a + 1`` and ``a``) are replayed as ONE array -- the allocation from the lowest of those pointers
  to its end, held by that argument -- and the others as pointers into its buffer at their captured
  byte offsets (:class:`porter.backends.isolate.Alias`); that array is compared whole, so a port that
  writes the wrong half fails.
* A pointer argument the program passed as a null pointer (an optional array the kernel instance does
  not use: kmeans's ``block_clusters_d``, huffman's ``g_blockSums``) is passed as a null pointer again,
  to the original and to every port, on every backend: neither an input nor an output, nothing to
  compare.  A kernel that dereferences it crashes there, and its verdict names the argument.  Launches
  of one kernel with different arguments null (``k(in, out, NULL)`` and ``k(in, out, counts)``) are
  judged apart (:attr:`Replay.others`: one spec per set of null arguments) and every one must pass.
* A launch that cannot be replayed says why (a pointer that is not a device allocation, a struct
  holding a device pointer, one allocation seen as floats and as another type, arrays over the
  capture limit, a launch that failed).
* A launch that changed nothing as captured (a zero-fill into zeroed memory, a second identical
  launch, an idempotent update) is run again by the original with the arrays the kernel writes
  poisoned (:func:`poisoned`): what it computes there is what every port must compute; a kernel that
  writes nothing even then is reported as such.
* When the original's own runs do not repeat the capture (a compaction or a work queue filled through
  atomics), :func:`settle` finds what they keep -- a multiset, a count and a set, a float sum within
  the order-aware tolerance -- and every verdict names the comparison it was judged by.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from porter.backends import CompileOptions, Device, get_backend
from porter.backends.isolate import Alias
from porter.capture import Arg, Launch
from porter.harness.checks import Raced, Unordered, by_kind
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
    # outputs whose order the original's own runs do not fix, compared by what they keep (settle())
    unordered: tuple[Unordered | Raced, ...] = ()
    compared: tuple[str, ...] = ()  # each such comparison in words ("arg1 compared as a multiset")
    # arrays of structs compared as their fields' scalar type ("arg3 (FOUR_VECTOR) compared field by field
    # as float64"), not byte for byte
    typed: tuple[str, ...] = ()
    unsettled: str = ""  # why settle() found no comparison the original's runs keep
    # a capture made on another device: by physical device (same_device), the original's own spread
    # there, every variant's floor on it (cross_device_floors); by device label, a port's device whose
    # compiler the original was never built with (floor_on() reads both)
    floors: dict[str, Floor] = field(default_factory=dict)
    spread: tuple[str, ...] = ()  # devices where the original's spread is too large to be a floor, why
    # by physical device or label as `floors`: a device where the original, built as a port there is (to
    # contract a*b+c, or by another compiler), is farther from the capture than a rounding -- why, in words
    # (a port there cannot be judged by this capture; unstable_on() reads it)
    unstable: dict[str, str] = field(default_factory=dict)
    # the kernel's launches with another set of null pointer arguments, each judged by its own spec (its
    # own left_out empty: every launch left out is said in this one's)
    others: tuple[Replay, ...] = ()
    # an original whose result depends on the warp-shuffle lanes CUDA leaves undefined: what it left with
    # them reading the poison pattern, by instance label as `recorded` (with_undefined_lanes)
    poisoned_lanes: dict[str, list[np.ndarray]] = field(default_factory=dict)
    lanes_said: str = ""  # the original's own `undefined` failure, naming the read: its defect, kept in words
    # every launch changed nothing even with its arrays poisoned, though it stores (Original.first_writes):
    # what a port is held to, in words ("" for a replay with outputs)
    unchanged: str = ""
    # what timed() measured at these launches: (device, launch, source, entry, compile options) -> its result, so
    # the original timed once on a device is the baseline of every port timed there after it
    timings: dict[tuple[str, str, str, str, str], BenchResult] = field(
        default_factory=dict, repr=False, compare=False
    )

    def said(self) -> str:
        """The comparisons other than element by element, as a verdict names them ("" when none)."""
        return "; ".join(self.compared)

    def floor_on(self, label: str) -> Floor | None:
        """The tolerance floor of every variant on the device `label`: its own, else its physical device's."""
        return self.floors.get(label) or self.floors.get(physical(label))

    def unstable_on(self, label: str) -> str:
        """Why no port on the device `label` can be judged by this capture ("" when one can)."""
        return self.unstable.get(label) or self.unstable.get(physical(label), "")


@dataclass(frozen=True)
class Floor:
    """The differences the original itself shows on one device against a capture made on another:
    per output, its name, element type and the largest absolute difference, which every variant's
    output on that device may have from the capture too (and no more)."""

    measured_on: str  # the device label the original was replayed on
    captured_on: str  # the device label of the capture
    spread: tuple[tuple[int, str, str, float], ...]  # (spec index, name, dtype, largest difference)
    why: str = ""  # why it applies on a device the original was not replayed on, in words

    def by_index(self) -> dict[int, float]:
        return {i: d for i, _, _, d in self.spread}

    def said(self) -> str:
        from porter.harness.checks import fmt_floor

        each = ", ".join(f"{name} ±{fmt_floor(d)} ({dtype})" for _, name, dtype, d in self.spread)
        return (
            f"tolerance floor from the original's own spread on {self.measured_on} vs the capture on "
            f"{self.captured_on}: {each}" + (f" ({self.why})" if self.why else "")
        )


def same_device(a: str, b: str) -> bool:
    """Whether two device labels name one physical device: ``cuda:NVIDIA H200`` and ``hip:NVIDIA H200``
    (one GPU through two runtimes), ``cpu:cpu-emulator`` and its other wavefront width
    ``cpu:cpu-emulator-wave64`` (one emulator)."""
    return physical(a) == physical(b)


def physical(label: str) -> str:
    """The physical device a label names (its backend and emulated width left out)."""
    return re.sub(r"-wave\d+(?=$|#)", "", label.partition(":")[2])


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


def shares(la: Launch) -> dict[int, tuple[int, int]]:
    """Pointer arguments into an allocation another argument points into too (an in-place launch
    ``k(d, d, n)``, two halves of one cudaMalloc ``k(d, d + n, n)``, a stencil on ``a + 1`` and ``a``):
    argument index -> (the argument whose array holds that allocation, bytes from its pointer to this
    one).  The argument that holds it is the one pointing lowest into the allocation (the first such, at
    equal offsets); it is replayed as the allocation from there to its end, the others as pointers into
    that one buffer."""
    by_alloc: dict[int, list[Arg]] = {}
    for a in la.args:
        if a.kind == "pointer" and a.allocation is not None:
            by_alloc.setdefault(a.allocation, []).append(a)
    found: dict[int, tuple[int, int]] = {}
    for group in by_alloc.values():
        if len(group) < 2:
            continue
        base = min(group, key=lambda a: (a.offset, a.index))
        for a in group:
            if a is not base:
                found[a.index] = (base.index, a.offset - base.offset)
    return found


def _layout(la: Launch) -> dict[int, int]:
    """Which argument holds each shared argument's allocation (what launches must agree on to be
    instances of one spec; the offsets may differ from launch to launch)."""
    return {i: base for i, (base, _) in shares(la).items()}


def _holder_dtypes(la: Launch) -> dict[int, str]:
    """The element type each array that other arguments point into is replayed as: theirs when they
    agree, else bytes (integers of several widths in one pool, compared exactly)."""
    kinds: dict[int, set[str]] = {}
    for i, (base, _) in shares(la).items():
        kinds.setdefault(base, {_dtype_of(la.args[base])}).add(_dtype_of(la.args[i]))
    return {base: next(iter(k)) if len(k) == 1 else "uint8" for base, k in kinds.items()}


def _dtype_of(a: Arg) -> str:
    return element_dtype(a.dtype, a.element)


NULL_POINTER = "null pointer"  # the capture's `why` of a pointer argument the program passed as null


def is_null(a: Arg) -> bool:
    """Whether `a` is a pointer argument the program passed as a null pointer (replayed as one)."""
    return a.kind == "pointer" and a.allocation is None and a.why == NULL_POINTER


def null_arguments(la: Launch) -> tuple[int, ...]:
    """The indices of `la`'s pointer arguments passed as null pointers."""
    return tuple(a.index for a in la.args if is_null(a))


def _unreplayable(la: Launch) -> str:
    """Why `la` cannot be replayed ("" when it can)."""
    if la.status != 0:
        return f"the launch itself failed (error {la.status})"
    if la.skipped:
        return la.skipped
    for a in la.args:
        if a.kind == "pointer":
            if is_null(a):  # passed as a null pointer again
                continue
            if a.allocation is None:
                return f"argument {a.index} ({a.ctype}) is {a.why or 'not resolved'}"
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
    for i, (base, _) in shares(la).items():  # one allocation seen as floats and as something else
        mine, theirs = _dtype_of(la.args[i]), _dtype_of(la.args[base])
        if mine != theirs and "f" in (np.dtype(mine).kind, np.dtype(theirs).kind):
            return (
                f"arguments {base} and {i} point into one allocation as {theirs} and {mine}: one array of "
                "two element types is not replayed yet"
            )
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


@dataclass(frozen=True)
class Original:
    """The original kernel where it runs here: what a replay asks when the capture alone is not enough
    -- which elements a launch that changed nothing writes (:func:`build`, run on poisoned arrays) and
    what its outputs keep from run to run (:func:`settle`).  Each run is a sandboxed child job; the
    parent reads the raw arrays back."""

    variant: Variant
    compile: CompileOptions
    devices: tuple[Device, ...]
    timeout_s: float = 120.0

    def outputs(
        self, spec: KernelSpec, inst: Instance, runs: int = 1, every_device: bool = False
    ) -> list[dict[int, np.ndarray]] | str:
        """Per run (on the first device, or on every device): each array argument's contents after
        the original ran from `inst` (spec index -> array, without guard); a failure as its sentence."""
        found = self.outputs_of(spec, (inst,), runs, every_device)
        return found if isinstance(found, str) else found[0]

    def outputs_of(
        self,
        spec: KernelSpec | Sequence[KernelSpec],
        insts: Sequence[Instance],
        runs: int = 1,
        every_device: bool = False,
        poison_lanes: bool = False,
    ) -> list[list[dict[int, np.ndarray]]] | str:
        """:meth:`outputs` of each of `insts` (each with its own spec where `spec` is a list of them), the
        launches of one device run in one child where they fit (:func:`porter.harness.trial.run_together`);
        the first failure as its sentence.  `poison_lanes`: on the devices that can, with the warp-shuffle
        lanes CUDA leaves undefined reading the poison pattern instead of 0."""
        from porter.harness.checks import guard_touched
        from porter.harness.trial import by_spec, job_failure, make_job, run_together, seed_for

        devices = [d for d in self.devices if not d.checks]
        if poison_lanes:
            devices = [d for d in devices if get_backend(d.backend).poisons_undefined_lanes]
        specs = [spec] * len(insts) if isinstance(spec, KernelSpec) else list(spec)
        # only the program variables the original's own program has (its unit's, not the whole run's)
        groups: dict[int, list[int]] = {}  # the instances of each spec, its symbols looked up once
        for k, one in enumerate(specs):
            groups.setdefault(id(one), []).append(k)
        insts = list(insts)
        for ks in groups.values():
            own, mine = own_symbols(
                specs[ks[0]], [insts[k] for k in ks], self.variant, self.compile.include_dirs
            )
            for k, inst in zip(ks, mine, strict=True):
                specs[k], insts[k] = own, inst
        found: list[list[dict[int, np.ndarray]]] = [[] for _ in insts]
        for device in devices if every_device else devices[:1]:
            made = [
                make_job(
                    self.variant, one, device, inst, runs, self.compile,
                    seed_for(ORIGINAL_SEED, inst.label, device.label),
                )
                for one, inst in zip(specs, insts, strict=True)
            ]  # fmt: skip
            jobs = [replace(job, poison_undefined_lanes=True) if poison_lanes else job for job, _ in made]
            results = run_together(jobs, self.timeout_s)
            for k, (one, inst, (_job, arrays), res) in enumerate(
                zip(specs, insts, made, results, strict=True)
            ):
                if not res.ok:
                    return job_failure("the original", res, inst.label).reason
                for out in res.outputs:
                    bodies: dict[int, np.ndarray] = {}
                    for i, arr in by_spec(one, arrays, out).items():
                        n = inst.length(i)
                        j = guard_touched(arr[n:], i)
                        if j >= 0:
                            return f"the original writes past the end of {one.args[i].name} (element {n + j}) at {inst.label}"
                        bodies[i] = arr[:n]
                    found[k].append(bodies)
        if not all(found):
            return "no device here runs the original"
        return found

    def first_writes(self, specs: Sequence[KernelSpec], insts: Sequence[Instance]) -> list[str] | None:
        """Per instance (each with its spec), the first store the original's launch made into an array argument,
        as ``arg0 (element 3)`` ("" when it stored into none), on the first device whose backend can watch its
        buffers' pages (:attr:`porter.backends.isolate.Job.watch_writes`, the backend's ``watches_writes``: the
        CPU emulator); None when no device here can tell or a launch failed."""
        from porter.backends.isolate import CANNOT_WATCH
        from porter.harness.trial import make_job, run_together, seed_for

        for device in (d for d in self.devices if not d.checks and get_backend(d.backend).watches_writes):
            made = [
                make_job(self.variant, one, device, inst, 1, self.compile, seed_for(ORIGINAL_SEED, inst.label, device.label))
                for one, inst in zip(specs, insts, strict=True)
            ]  # fmt: skip
            results = run_together([replace(job, watch_writes=True) for job, _ in made], self.timeout_s)
            if not all(r.ok for r in results) or any(r.first_write == CANNOT_WATCH for r in results):
                continue
            said = []
            for one, res in zip(specs, results, strict=True):
                found = re.fullmatch(r"argument (\d+), byte (-?\d+)", res.first_write)
                if found is None:
                    said.append("")
                    continue
                i, byte = int(found.group(1)), int(found.group(2))
                if not 0 <= i < len(one.args):
                    return None
                size = np.dtype(one.args[i].dtype).itemsize if one.args[i].dtype else 1
                said.append(f"{one.args[i].name} (element {byte // size})")
            return said
        return None


UNCHANGED = "and changed no element of any array even when "  # a poisoned launch that still changed nothing
KEPT = "judged by what the original's own runs keep"  # a validated reason's words after settle()
# a validated reason's words after with_undefined_lanes()
LANES = "with the shuffle lanes CUDA leaves undefined reading 0 and a poison pattern, as the original did"
ORIGINAL_SEED = 0x0816  # the original's own runs (poisoned, or to learn what stays the same)
POISON_SEED = 0x9015


def poisoned(before: np.ndarray, index: int, launch: int) -> np.ndarray:
    """What an array a launch may write holds when the launch, which changed nothing as captured, is
    run again to learn what it writes: floats drawn afresh (finite, both signs: a clamp, a zero-fill or an
    update ``w += ...`` changes them, where NaN poison would pass through ``w += ...`` unchanged);
    integers, bytes and bools as captured at even elements and with their lowest bit flipped at odd
    ones (a count or an index at element 0 stays a valid index)."""
    if before.dtype.kind == "f":
        rng = np.random.default_rng([POISON_SEED, index, launch])
        return rng.uniform(-4.0, 4.0, before.size).astype(before.dtype)
    out = before.copy()
    bits = out.view(f"u{out.dtype.itemsize}")
    bits[1::2] ^= 1
    return out


@dataclass
class _Row:
    """One launch as replayed: per array argument its contents before and after (as captured, or on
    poisoned arrays as the original computed), the arguments poisoned, and how many elements the
    original wrote in each there."""

    la: Launch
    data: dict[int, tuple[np.ndarray, np.ndarray]]
    poisoned: tuple[int, ...] = ()
    wrote: dict[int, int] = field(default_factory=dict)


def build(
    kernel: str,
    launches: Sequence[Launch],
    atomics: Sequence[str] = (),
    *,
    written: Collection[int] | None = None,
    original: Original | None = None,
) -> Replay:
    """The replay of `kernel` from its captured `launches` (every run's, in run order).  ``atomics``:
    the atomic functions the kernel calls (its scan's); float atomics make the comparison order-aware
    (outputs may round differently between runs, as the spec's ``float_atomics``).

    A launch that left every array as it was (a zero-fill into zeroed memory, a second identical
    launch, an idempotent update) is run again by `original` with the arrays it may write -- the
    argument indices in `written` (the kernel's scan), pointers to arithmetic elements not declared
    const -- poisoned (:func:`poisoned`); the elements it then changes are its outputs and the launch
    an instance like any other (given the poisoned arrays, expected to leave what the original
    computed from them).  Without `original` and `written` such a launch is left out.

    A pointer argument passed as a null pointer is one again in the replay; launches whose null
    arguments differ are judged apart, the first launch's set in the replay itself and each other set in
    one of its ``others``."""
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
    groups: dict[tuple[int, ...], list[Launch]] = {}  # by the arguments passed as null pointers
    for la in same:
        groups.setdefault(null_arguments(la), []).append(la)
    made: list[Replay] = []
    problems: list[str] = []
    for nulls, group in groups.items():
        part = _build_group(kernel, group, atomics, left, written, original)
        if part.spec is not None:
            made.append(part)
        elif len(groups) > 1:
            problems.append(f"{part.problem} (the launches with {_nulls_said(nulls)})")
        else:
            problems.append(part.problem)
    if not made:
        return Replay(kernel, None, left_out=tuple(left), problem=problems[0])
    return replace(made[0], left_out=tuple(left), others=tuple(made[1:]))


def _nulls_said(nulls: Sequence[int]) -> str:
    if not nulls:
        return "no null pointer argument"
    names = ", ".join(f"arg{i}" for i in nulls)
    return f"{names} {'a null pointer' if len(nulls) == 1 else 'null pointers'}"


def _build_group(
    kernel: str,
    usable: Sequence[Launch],
    atomics: Sequence[str],
    left: list[str],
    written: Collection[int] | None,
    original: Original | None,
) -> Replay:
    """The replay of `usable` (replayable launches of one signature, with the same arguments passed as
    null pointers), its launches left out appended to `left`."""
    first = usable[0]
    # arguments into one allocation (passed twice, or at offsets): one array, pointers into its buffer
    repeated = _layout(first)
    left += [f"launch {la.launch} (run {la.run}): its arguments share allocations differently"
             for la in usable if _layout(la) != repeated or _holder_dtypes(la) != _holder_dtypes(first)]  # fmt: skip
    usable = [la for la in usable if _layout(la) == repeated and _holder_dtypes(la) == _holder_dtypes(first)]
    holders = _holder_dtypes(first)
    rows: list[_Row] = []
    idle: list[_Row] = []
    for la in usable:
        row = _Row(
            la,
            {
                a.index: _arrays(la, a, holders.get(a.index) or _dtype_of(a))
                for a in la.args
                if a.kind == "pointer" and a.index not in repeated and not is_null(a)
            },
        )
        (rows if any(not np.array_equal(b, a) for b, a in row.data.values()) else idle).append(row)
    silent: list[str] = []  # launches that changed nothing even when poisoned: the arguments poisoned
    poisoned = (
        _poison(kernel, first, repeated, idle, written, original, atomics)
        if original is not None and written is not None
        else [(None, "") for _ in idle]
    )
    quiet: list[_Row] = []  # launches that store only what each element holds, their arrays poisoned
    unjudged: list[str] = []  # the idle launches left out, each with why
    for row, (made, why) in zip(idle, poisoned, strict=True):
        where = f"launch {row.la.launch} (run {row.la.run})"
        if original is None or written is None:
            unjudged.append(f"{where}: changed no array (proves nothing)")
            continue
        if made is None or why:
            unjudged.append(f"{where}: changed no array, {why}")
            if why.startswith(UNCHANGED):
                silent.append(why[len(UNCHANGED) :])
            if made is not None:
                quiet.append(made)
        else:
            rows.append(made)
    if not rows and quiet and len(quiet) == len(idle):
        # every launch stores, and only what each element already holds: a port is held to the same -- every
        # array bit-identical after it, on the poisoned arrays -- and no launch is left out
        quiet.sort(key=lambda r: (r.la.run, r.la.sequence))
        spec, instances, recorded = _assemble(kernel, first, repeated, quiet, atomics)
        said = f"the original changed no element of any array even when {silent[0]}: a port must change none"
        return Replay(kernel, spec, instances, recorded, unchanged=said)
    left += unjudged
    if not rows:
        problem = "no captured launch changed any array"
        held = sorted({y.name for la in usable for y in la.symbols if y.holds_device_pointer})
        if held:  # what it changed, if anything, it reached through pointers the capture does not follow
            problem = (
                "no captured launch changed any array it was passed; the program's variable(s) "
                f"{', '.join(held)} hold device pointers, through which it may read and write memory porter "
                "does not follow (not replayed yet)"
            )
        if silent and len(silent) == len(idle):
            # a kernel that writes nothing, or only what each element already holds
            problem += (
                f": it changed no element of any array even when poisoned ({len(silent)} launch(es): "
                f"{silent[0]})"
            )
        return Replay(kernel, None, problem=problem)
    rows.sort(key=lambda r: (r.la.run, r.la.sequence))
    spec, instances, recorded = _assemble(kernel, first, repeated, rows, atomics)
    return Replay(kernel, spec, instances, recorded)


def _targets(la: Launch, repeated: Mapping[int, int], written: Collection[int]) -> list[int]:
    """The arguments of `la` poisoned to learn what it writes: pointers the kernel stores through (its
    scan's `written`), not const, to elements of an arithmetic type (an array of structs may hold
    pointers or indices; it is kept as captured, as is every array the kernel only reads).  A pointer
    into another argument's allocation poisons that argument's array (the whole allocation)."""
    return sorted(
        {
            repeated.get(a.index, a.index)
            for a in la.args
            if a.kind == "pointer" and a.index in written and not a.const and not is_null(a)
            and (a.dtype or ctype_info(a.element.replace("const ", "").replace("volatile ", "").strip()) is not None)
        }
    )  # fmt: skip


def _poison(
    kernel: str,
    first: Launch,
    repeated: Mapping[int, int],
    rows: Sequence[_Row],
    written: Collection[int],
    original: Original,
    atomics: Sequence[str],
) -> list[tuple[_Row | None, str]]:
    """Each of `rows` (launches that changed nothing) run by the original with the arrays it may write
    poisoned -- the launches in one child where they fit (:meth:`Original.outputs_of`): per row, a row of
    its own and "" when that changed something; its poisoned row and why when it still changed nothing though
    it stored into an argument (:meth:`Original.first_writes`: it writes what each element holds); else None
    and why (a clause)."""
    out: list[tuple[_Row | None, str]] = [(None, "") for _ in rows]
    todo: list[tuple[int, list[int], dict[int, tuple[np.ndarray, np.ndarray]], KernelSpec, Instance]] = []
    for k, row in enumerate(rows):
        targets = _targets(row.la, repeated, written)
        if not targets:
            out[k] = (None, "and the kernel stores through none of its array arguments (by its scan)")
            continue
        data = {
            i: ((poisoned(b, i, row.la.launch) if i in targets else b), b) for i, (b, _) in row.data.items()
        }
        spec, (inst,), _ = _assemble(kernel, first, repeated, [_Row(row.la, data, tuple(targets))], atomics)
        todo.append((k, targets, data, spec, inst))
    if not todo:
        return out
    every = original.outputs_of([t[3] for t in todo], [t[4] for t in todo])
    unchanged: list[tuple[int, str]] = []  # (index in todo, why) of the launches that changed nothing even so
    for n, (k, targets, data, spec, inst) in enumerate(todo):
        names = ", ".join(f"arg{i}" for i in targets)
        # a failure says which launch only when that launch ran alone
        got = original.outputs(spec, inst) if isinstance(every, str) else every[n]
        if isinstance(got, str):
            out[k] = (None, f"and the original's run on it with {names} poisoned failed: {got}")
            continue
        after = got[0]
        made = {i: (b, after[i]) for i, (b, _) in data.items()}
        wrote = {i: int(np.count_nonzero(~_bits_equal(b, a))) for i, (b, a) in made.items()}
        if not any(wrote.values()):
            out[k] = (_Row(rows[k].la, made, tuple(targets)), "")  # kept only if it stores (below)
            unchanged.append((n, f"{UNCHANGED}{names} {'was' if len(targets) == 1 else 'were'} poisoned"))
            continue
        out[k] = (_Row(rows[k].la, made, tuple(targets), {i: w for i, w in wrote.items() if w}), "")
    if unchanged:  # did they store at all? (one more run of those launches, their buffers' pages watched)
        writes = original.first_writes([todo[n][3] for n, _ in unchanged], [todo[n][4] for n, _ in unchanged])
        for (n, why), stored in zip(unchanged, writes or [""] * len(unchanged), strict=True):
            k = todo[n][0]
            # it stores, only what each element holds (a sum of one block's partial sums into the first): its
            # poisoned row kept, a port held to the same; a kernel that stores nothing stays unjudged
            out[k] = (out[k][0], f"{why}, though it stores into {stored}") if stored else (None, why)
    return out


def _bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from porter.harness.checks import bits_equal

    return bits_equal(a, b)


def _assemble(
    kernel: str, first: Launch, repeated: Mapping[int, int], rows: Sequence[_Row], atomics: Sequence[str]
) -> tuple[KernelSpec, tuple[Instance, ...], dict[str, list[np.ndarray]]]:
    """The spec, the given instances and the recorded outputs of `rows` (launches of one signature)."""
    from porter.harness.spec.infer import FLOAT_ATOMICS

    # an array the original never changed is an input: the variant must leave it bit-identical too
    changed = {i for r in rows for i, (b, a) in r.data.items() if not np.array_equal(b, a)}
    args: list[ArgSpec] = []
    holders = _holder_dtypes(first)
    for a in first.args:
        if a.kind == "pointer" and (a.index in repeated or is_null(a)):
            # a pointer into another argument's buffer, or a null pointer: no array of its own
            args.append(ArgSpec(f"arg{a.index}", element_dtype(a.dtype, a.element), Role.SCALAR))
        elif a.kind == "pointer":
            dtype = holders.get(a.index) or _dtype_of(a)
            role = Role.INOUT if a.index in changed else Role.IN
            args.append(ArgSpec(f"arg{a.index}", dtype, role, shape=(f"n{a.index}",)))
        elif a.kind == "value":  # a struct by value: its bytes, as words of its alignment
            args.append(ArgSpec(f"arg{a.index}", str(struct_dtype(a.bytes, a.align)), Role.SCALAR))
        else:
            args.append(ArgSpec(f"arg{a.index}", _numeric(a.dtype), Role.SCALAR, value="0"))
    # held back: the later runs' launches, or with one run the launches of other sizes than the first
    runs = {r.la.run for r in rows}
    base_run, base_size = rows[0].la.run, _size_key(rows[0].la)
    if len(runs) > 1:
        hidden = [r.la.run != base_run for r in rows]
    else:
        hidden = [_size_key(r.la) != base_size for r in rows]
    sizes: list[dict[str, int]] = []
    hidden_sizes: list[dict[str, int]] = []
    given: list[
        tuple[dict[str, int], str, list[np.ndarray | np.generic | Alias | None], dict[str, np.ndarray]]
    ] = []
    recorded: dict[str, list[np.ndarray]] = {}
    # the program's __constant__ / __device__ variables: inputs of every launch, set in each module
    constants = tuple(
        ArgSpec(y.name, element_dtype(y.dtype, y.element), Role.IN, shape=(f"c_{y.name}",))
        for y in first.symbols
    )
    notes: list[str] = []
    for row, held in zip(rows, hidden, strict=True):
        la = row.la
        size = dict(zip(GEOMETRY, (*la.grid, *la.block, la.shared_bytes), strict=True))
        values: list[np.ndarray | np.generic | Alias | None] = []
        outs: list[np.ndarray] = []
        shared = shares(la)
        for a in la.args:
            if is_null(a):  # passed as a null pointer again: neither an input nor an output
                values.append(None)
            elif a.kind == "pointer" and a.index in repeated:
                values.append(Alias(*shared[a.index]))
            elif a.kind == "pointer":
                before, after = row.data[a.index]
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
        if row.poisoned:
            label += " (poisoned)"
            wrote = ", ".join(
                f"{n} of {row.data[i][0].size} elements of arg{i}" for i, n in row.wrote.items()
            )
            poisoned_args = ", ".join(f"arg{i}" for i in row.poisoned)
            notes.append(
                f"{label}: changed no array as captured; run again with {poisoned_args} poisoned, the original "
                f"wrote {wrote or 'nothing'}"
            )
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
            f"from {len(rows)} captured launch(es)",
            *(_shared_note(i, j, off) for i, (j, off) in sorted(shares(first).items())),
            *(_null_note(a) for a in first.args if is_null(a)),
            *notes,
        ),
        constants=constants,
        textures=tuple(y.name for y in first.symbols if y.texture),
    )
    instances = [Instance.given(spec, *g) for g in given]
    # visible launches first, then the held-back ones (the validator's order for hidden sizes)
    instances.sort(key=lambda inst: inst.label.startswith("hidden"))
    return spec, tuple(instances), recorded


def _null_note(a: Arg) -> str:
    return (
        f"arg{a.index} ({a.ctype}) is a null pointer in these launches, as the program passed it: passed as one, "
        "neither an input nor an output"
    )


def _shared_note(i: int, base: int, offset: int) -> str:
    if offset == 0:
        return f"arg{i} is arg{base} again (one buffer passed twice)"
    return (
        f"arg{i} points {offset} bytes into arg{base} (one allocation: one buffer and a pointer into it, "
        f"compared as arg{base} whole)"
    )


def with_undefined_lanes(rep: Replay, original: Original, said: str = "") -> Replay | str:
    """`rep` with what the original leaves at each instance when the warp-shuffle lanes CUDA leaves undefined
    read the poison pattern (:attr:`Replay.poisoned_lanes`), for an original whose result depends on them: a
    variant is then judged as a function of what those lanes return -- reading 0 it must leave what the
    capture recorded, reading the poison what the original left (checks.check_same_undefined).  Each of its
    ``others`` the same; `said`, the original's own failure naming the read, kept in every verdict's words.
    Why not, as a sentence, where the original cannot be run so."""
    spec = rep.spec
    if spec is None:
        return rep.problem
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    got = original.outputs_of(spec, rep.instances, poison_lanes=True)
    if isinstance(got, str):
        return f"the original's run with the undefined lanes poisoned failed: {got}"
    lanes = {  # an array the run did not return (a null pointer argument): as recorded
        inst.label: [runs[0].get(i, rep.recorded[inst.label][k]) for k, i in enumerate(array_idx)]
        for inst, runs in zip(rep.instances, got, strict=True)
    }
    others = []
    for other in rep.others:
        made = with_undefined_lanes(other, original, said)
        if isinstance(made, str):
            return made
        others.append(made)
    return replace(rep, poisoned_lanes=lanes, lanes_said=said, others=tuple(others))


def settle(rep: Replay, original: Original) -> Replay:
    """`rep` with what its outputs keep when the original's own runs do not reproduce the capture, and
    each of its ``others`` (launches with other arguments null) with what theirs keep
    (:func:`_settled_one`)."""
    return replace(_settled_one(rep, original), others=tuple(_settled_one(o, original) for o in rep.others))


def _settled_one(rep: Replay, original: Original) -> Replay:
    """`rep` with what its outputs keep when the original's own runs do not reproduce the capture
    (a compaction or a work queue filled through atomics, a float sum in another order).

    The original runs twice from every instance on every device; with what the capture recorded, each
    output that varies is compared by the strictest relation that holds for every one of those runs:
    a count and a set (a one-element integer counter that does not vary, its value before and after
    bounding the elements that do, which hold the same multiset bit for bit; every other element as
    captured), a multiset of the whole array, or -- floats only, when neither holds -- within the
    order-aware float tolerance (a sum through atomics); outputs of one length that vary together are
    compared as one multiset of rows, when that holds too.  None holds, or the runs agree with the
    capture: `rep` unchanged, with ``unsettled`` saying why."""
    from porter.harness.checks import bits_equal, compare, tolerance_for, unordered_difference

    spec = rep.spec
    if spec is None:
        return rep
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    outs = [i for i in array_idx if spec.args[i].role is Role.INOUT]
    samples: list[tuple[Instance, list[dict[int, np.ndarray]]]] = []
    every = original.outputs_of(spec, rep.instances, runs=2, every_device=True)
    if isinstance(every, str):
        return replace(rep, unsettled=f"the original's own runs could not be compared: {every}")
    for inst, got in zip(rep.instances, every, strict=True):
        samples.append((inst, [dict(zip(array_idx, rep.recorded[inst.label], strict=True)), *got]))

    def others(i: int) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(s[i], runs[0][i]) for _, runs in samples for s in runs[1:]]

    varying = [i for i in outs if any(not np.all(bits_equal(g, w)) for g, w in others(i))]
    if not varying:
        return replace(rep, unsettled="the original's own runs leave what the capture recorded")
    relaxed = replace(spec, float_atomics=True)

    def close(i: int) -> bool:  # floats summed in another order: within the order-aware tolerance
        tol = tolerance_for(spec.args[i].dtype, relaxed)
        return np.dtype(spec.args[i].dtype).kind == "f" and all(compare(g, w, tol).ok for g, w in others(i))

    counters = [
        c
        for c in outs
        if c not in varying
        and np.dtype(spec.args[c].dtype).kind in "iu"
        and all(inst.length(c) == 1 for inst, _ in samples)
    ]

    def holds(order: Unordered) -> bool:
        return all(
            not unordered_difference(spec, order, inst.values, s, runs[0])
            for inst, runs in samples
            for s in runs[1:]
        )

    orders: list[Unordered | Raced] = []
    floats: list[int] = []
    todo = list(varying)
    while todo:  # the same elements bit for bit first (a compaction of floats too), then a tolerance
        i = todo.pop(0)
        found = next(
            (o for o in (*(Unordered((i,), c) for c in counters), Unordered((i,))) if holds(o)), None
        )
        if found is None and close(i):
            floats.append(i)
            continue
        if found is None:
            race = _raced(spec, i, samples)
            if isinstance(race, str) and "only one" in race:  # the set may be a draw short: more runs
                more = original.outputs_of(spec, rep.instances, runs=RACE_RUNS, every_device=True)
                if not isinstance(more, str):
                    samples = [
                        (inst, [*runs, *extra]) for (inst, runs), extra in zip(samples, more, strict=True)
                    ]
                    race = _raced(spec, i, samples)
            if isinstance(race, str):
                return replace(
                    rep,
                    unsettled=(
                        f"{spec.args[i].name} differs between the original's own runs, and not as a permutation "
                        "of a multiset, a count and a set, a float sum within the order-aware tolerance, or "
                        f"stores that race ({race})"
                    ),
                )
            orders.append(race)
            continue
        for j in list(todo):  # outputs that vary together: one multiset of rows, where that holds
            if all(inst.length(j) == inst.length(i) for inst, _ in samples):
                joint = Unordered((*found.members, j), found.counter)
                if holds(joint):
                    found = joint
                    todo.remove(j)
        orders.append(found)
    compared = (
        *(o.describe(spec) for o in orders),
        *(f"{spec.args[i].name} compared within the order-aware float tolerance" for i in floats),
    )
    settled = replace(relaxed) if floats else spec
    return replace(rep, spec=settled, unordered=tuple(orders), compared=compared, unsettled="")


# the original's runs per device taken again when an output's racing elements hold a value seen in only one run
RACE_RUNS = 6


def _raced(
    spec: KernelSpec, i: int, samples: Sequence[tuple[Instance, list[dict[int, np.ndarray]]]]
) -> Raced | str:
    """Output `i` as a :class:`Raced` comparison: at each launch, the elements the original's runs (and
    the capture) leave differently, with every value they left there -- when each such value was left
    by at least two of the runs (one seen once says the set may lack others), and at most a tenth of the
    output's elements race; else why not, in words."""
    from porter.harness.checks import fmt

    name = spec.args[i].name
    choices: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    seen = ""
    for inst, runs in samples:
        rows = np.stack([np.ascontiguousarray(r[i]).ravel() for r in runs])
        if rows.dtype.kind not in "iufb":
            return f"{name} is not an array of numbers"
        bits = rows.view(f"uint{rows.dtype.itemsize * 8}")
        idx = np.flatnonzero(np.any(bits != bits[:1], axis=0))
        if not idx.size:
            continue
        if idx.size > max(1, rows.shape[1] // 10):
            return f"{idx.size} of its {rows.shape[1]} elements differ at {inst.label}, more than a tenth"
        for k, j in enumerate(idx):
            values, counts = np.unique(bits[:, j], return_counts=True)
            if np.any(counts < 2):
                once = rows[int(np.flatnonzero(bits[:, j] == values[np.argmin(counts)])[0]), j]
                return (
                    f"{name}[{int(j)}] held {fmt(once.item())} in only one of the original's {len(runs)} runs "
                    f"at {inst.label}"
                )
            if not seen and k == 0:
                firsts = [rows[int(np.flatnonzero(bits[:, j] == v)[0]), j].item() for v in values]
                seen = f"{name}[{int(j)}] left {' or '.join(fmt(v) for v in firsts)} at {inst.label}"
        choices[inst.label] = (idx, rows[:, idx])
    return Raced(i, choices, seen) if choices else f"{name} does not differ between them"


def cross_device_floors(
    rep: Replay, original: Original, captured_on: str, ports: Sequence[Device] = ()
) -> Replay:
    """`rep` and each of its ``others`` with their tolerance floors (:func:`_floors_one`)."""
    return replace(
        _floors_one(rep, original, captured_on, ports),
        others=tuple(_floors_one(o, original, captured_on, ports) for o in rep.others),
    )


def _floors_one(rep: Replay, original: Original, captured_on: str, ports: Sequence[Device] = ()) -> Replay:
    """`rep` with a tolerance floor for every device the original runs on that is not the one the
    capture was made on (a GPU's capture on the CPU emulator, or the reverse), and for the ports' devices
    (`ports`) built otherwise than any the original was replayed by.

    The original is replayed there first, from every instance; each output is compared with what the
    capture recorded (:func:`porter.harness.checks.cross_device_spread`): within the tolerance, no
    floor; slightly off (floats within a fraction of their magnitude, integers and bytes computed from
    floats by a unit or two), its largest difference is that output's floor on that device -- and on
    the same device reached otherwise (HIP on that GPU, the emulator's other wavefront width) -- named
    in every verdict there.  More than that on any output: no floor on that device (``spread`` says
    why), so the original's replay fails there as it would.  Same-device replays keep the strict
    rules: `rep` unchanged when the capture names no device or only the device it was made on runs
    the original.

    Contraction: OpenCL C, nvcc and hipcc fuse a*b+c into one rounding by default (:attr:`Device.contracts`);
    a capture from porter's CPU runtime (ISO C++) does not.  A port on such a device (OpenCL on PoCL, where
    the original never runs) is then judged with the original's own spread when built to contract on the
    capture's device (the backend's :meth:`contracting_flags`): what contraction alone moves in the
    original, and nothing more.

    Another compiler: a port's device whose compiler (:attr:`Device.compiler`) built none of the original's
    replays -- NVIDIA's OpenCL on the very GPU of a CUDA capture, Intel's CPU runtime -- rounds as neither
    of them does.  Its floor is the largest spread the original itself shows between the compilers it was
    built with (per output, named with where it was measured); where the original is farther than a
    rounding from its capture on one of them, no port there can be judged by the capture (``unstable``)."""
    spec = rep.spec
    if spec is None or not captured_on:
        return rep
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    members = {m for order in by_kind(rep.unordered)[0] for m in order.members}
    outs = [i for i in array_idx if spec.args[i].role is Role.INOUT and i not in members]
    floors: dict[str, Floor] = {}
    notes: list[str] = []
    unstable: dict[str, str] = {}
    # the original's devices farther than a rounding from the capture, and why
    far: list[tuple[str, str]] = []

    def measure(mine: Original, label: str) -> tuple[Floor | None, str]:
        """The original's spread from the capture, run as `mine` (named `label`): its floor (None: within the
        tolerance everywhere) or why there is none, noted."""
        spread, why = _spread(rep, spec, outs, array_idx, mine)
        if why:
            notes.append(f"{label} vs the capture on {captured_on}: no tolerance floor ({why})")
            return None, why
        kept = tuple(
            (i, spec.args[i].name, spec.args[i].dtype, d) for i, d in sorted(spread.items()) if d > 0
        )
        return (Floor(label, captured_on, kept) if kept else None), ""

    for device in original.devices:
        if device.checks or same_device(device.label, captured_on):
            continue
        f, why = measure(replace(original, devices=(device,)), device.label)
        if f is not None:
            floors[physical(device.label)] = f
        elif TOO_FAR in why:
            far.append((device.label, why))
    ran = {physical(d.label) for d in original.devices}
    fusing = [d for d in ports if d.contracts and physical(d.label) not in ran]
    source = next((d for d in original.devices if same_device(d.label, captured_on)), None)
    if fusing and source is not None and not source.contracts:
        from porter.backends import get_backend

        flags = get_backend(source.backend).contracting_flags(source)
        if flags:
            fused = replace(
                original,
                devices=(source,),
                compile=replace(original.compile, flags=(*original.compile.flags, *flags)),
            )
            label = f"{source.label} built to contract a*b+c ({' '.join(flags)})"
            f, why = measure(fused, label)
            for device in fusing:
                if f is not None:
                    floors.setdefault(physical(device.label), f)
                elif TOO_FAR in why:  # contraction alone moves the original off its capture
                    unstable[physical(device.label)] = (
                        f"the capture was made without contracting a*b+c, and the original itself, on {label}, "
                        f"is off it: {why}"
                    )
    compilers = {d.compiler for d in original.devices}
    measured = [f for d in original.devices if (f := floors.get(physical(d.label))) is not None]
    for device in ports:
        key = physical(device.label)
        if device.checks or device.compiler in compilers or key in floors or key in unstable:
            continue
        if far:
            unstable[device.label] = (
                f"the original itself is off the capture on {far[0][0]}, built by another compiler than the "
                f"capture's ({far[0][1]}); {device.label} is built by a compiler the original was not, whose "
                "rounding may move it as far"
            )
        elif measured:
            floors[device.label] = _widest(
                measured, f"{device.label} is built by a compiler the original was not"
            )
    return replace(rep, floors=floors, spread=tuple(notes), unstable=unstable)


def _widest(floors: Sequence[Floor], why: str) -> Floor:
    """One floor holding, per output, the largest of `floors`' differences, named with where each was measured."""
    largest: dict[int, tuple[int, str, str, float]] = {}
    for f in floors:
        for entry in f.spread:
            if entry[0] not in largest or entry[3] > largest[entry[0]][3]:
                largest[entry[0]] = entry
    where = ", ".join(dict.fromkeys(f.measured_on for f in floors))
    return Floor(where, floors[0].captured_on, tuple(largest[i] for i in sorted(largest)), why)


TOO_FAR = "differs by more than a device's rounding"  # an output of the original far from the capture


def _spread(
    rep: Replay, spec: KernelSpec, outs: Sequence[int], array_idx: Sequence[int], mine: Original
) -> tuple[dict[int, float], str]:
    """Per output, the largest difference of the original run as `mine` from the capture
    (:func:`porter.harness.checks.cross_device_spread`); or why there is none to take."""
    from porter.harness.checks import cross_device_spread, tolerance_for

    every = mine.outputs_of(spec, rep.instances)
    if isinstance(every, str):
        return {}, f"the original's replay there failed: {every}"
    spread: dict[int, float] = {}
    raced = by_kind(rep.unordered)[1]
    for inst, got in zip(rep.instances, every, strict=True):
        want = dict(zip(array_idx, rep.recorded[inst.label], strict=True))
        for i in outs:
            held = raced[i].nearest(inst.label, got[0][i], want[i]) if i in raced else want[i]
            d = cross_device_spread(got[0][i], held, tolerance_for(spec.args[i].dtype, spec))
            if d is None:
                return spread, f"{spec.args[i].name} {TOO_FAR} at {inst.label}"
            spread[i] = max(spread.get(i, 0.0), d)
    return spread, ""


def replay(
    variant: Variant,
    rep: Replay,
    devices: Sequence[Device],
    options: ValidateOptions = ValidateOptions(),
) -> list[Verdict]:
    """One verdict per device: `variant` run from each captured launch of `rep`, compared with what
    the original left.  A kernel that cannot be replayed gets one failed verdict saying why.  Launches
    with other arguments null (``rep.others``) are judged by their own specs: a device's verdict is
    validated only when every one of them is, else it is the first that is not."""
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
    verdicts = _judged(variant, rep, devices, options)
    for other in rep.others:
        verdicts = _merged(verdicts, _judged(variant, other, devices, options))
    if rep.left_out or rep.spread:
        verdicts = [
            replace(v, logs=(*v.logs, *(f"not replayed: {w}" for w in rep.left_out), *rep.spread))
            for v in verdicts
        ]
    return verdicts


def _lanes_said(rep: Replay, v: Verdict) -> str:
    """How a validated verdict of a replay judged as a function of the undefined shuffle lanes read them: as 0
    and as the poison pattern, like the original; or, where the variant read none undefined (AMD's 64-lane
    wavefronts read an inactive lane as 0, a defined value), as 0 only.  "" for any other replay."""
    if not rep.poisoned_lanes:
        return ""
    defect = f"(the original's defect: {rep.lanes_said or 'its result depends on them'})"
    if "undefined-lanes" in v.checks:
        return f"; {LANES} {defect}"
    return (
        f"; it reads no shuffle lane left undefined here, and matches the original reading them as 0 {defect}"
    )


def _merged(mine: Sequence[Verdict], theirs: Sequence[Verdict]) -> list[Verdict]:
    """Per device, the verdicts of one variant on two sets of launches as one: validated when both are
    (both reasons said, the checks of both), else the first that is not."""
    by_device = {v.device: v for v in theirs}
    out = []
    for v in mine:
        w = by_device.pop(v.device, None)
        if w is None or v.status is not Status.VALIDATED:
            out.append(v)
        elif w.status is not Status.VALIDATED:
            out.append(w)
        else:
            out.append(
                replace(
                    v,
                    reason=f"{v.reason}; {w.reason}",
                    checks=tuple(dict.fromkeys((*v.checks, *w.checks))),
                    trials=v.trials + w.trials,
                    sizes=(*v.sizes, *w.sizes),
                    logs=(*v.logs, *w.logs),
                )
            )
    return [*out, *by_device.values()]


def _reads_past_said(v: Verdict) -> str:
    """What a validated verdict adds when its kernel read out of bounds without its outputs depending on it
    (porter.harness.validate._read_past): the read, from its log line; "" otherwise."""
    from porter.harness.validate import OUT_OF_BOUNDS_READS, read_past

    if OUT_OF_BOUNDS_READS not in v.checks:
        return ""
    read = next((found for line in v.logs if (found := read_past(line))), "an array")
    return f"; it reads out of bounds ({read}), and its outputs do not depend on what it reads there"


def _judged(
    variant: Variant, rep: Replay, devices: Sequence[Device], options: ValidateOptions
) -> list[Verdict]:
    """`variant` judged on the launches of `rep` itself (not its ``others``)."""
    from porter.harness.reference import Reference
    from porter.harness.validate import validate

    assert rep.spec is not None
    spec, instances = _for_variant(rep, variant, options.compile.include_dirs)
    opts = replace(options, given=instances, trials=1)
    floor_of = {d.label: f for d in devices if (f := rep.floor_on(d.label)) is not None}
    verdicts = validate(
        variant, spec, Reference(recorded=rep.recorded, poisoned_lanes=rep.poisoned_lanes or None), list(devices),
        opts, unordered=rep.unordered,
        floors={label: f.by_index() for label, f in floor_of.items()},
    )  # fmt: skip
    shown, held = len(spec.sizes), len(spec.hidden_sizes)
    said = f"matches what the original's run left at {shown} captured launch(es)" + (
        f" and {held} held back" if held else ""
    )
    # the arguments passed as null pointers (the launches of one replay have the same ones)
    nulls = [
        i for i in range(len(spec.args)) if instances and all(inst.values[i] is None for inst in instances)
    ]
    if nulls:
        said += f" with {_nulls_said(nulls)}"
    poisoned = sum(1 for inst in instances if inst.label.endswith("(poisoned)"))
    if rep.unchanged:
        said += f" ({rep.unchanged})"
    elif poisoned:
        said += f" ({poisoned} of them run on poisoned outputs: as captured they changed nothing)"
    if rep.compared:
        said += f"; {KEPT}: {rep.said()}"
    if rep.typed:
        said += "; " + "; ".join(rep.typed)
    named = tuple(f"compared:{c}" for c in (*rep.compared, *rep.typed)) + (
        ("compared:undefined-lanes",) if rep.poisoned_lanes else ()
    )
    verdicts = [
        replace(v, reason=said + _lanes_said(rep, v) + _reads_past_said(v), checks=(*v.checks, *named))
        if v.status is Status.VALIDATED
        else v
        for v in verdicts
    ]
    if rep.compared:  # a failure says which comparison it was judged by, whatever check failed
        verdicts = [
            v
            if v.status is Status.VALIDATED or rep.said() in v.reason
            else replace(v, reason=f"{v.reason} (compared: {rep.said()})")
            for v in verdicts
        ]
    if floor_of:  # a capture made on another device: every verdict there names the floor it was judged by
        verdicts = [
            replace(
                v,
                reason=f"{v.reason}; {f.said()}"
                if v.status is Status.VALIDATED
                else f"{v.reason} (with the {f.said()})",
                checks=(*v.checks, "cross-device-floor") if v.status is Status.VALIDATED else v.checks,
            )
            if (f := floor_of.get(v.device)) is not None
            else v
            for v in verdicts
        ]
    if nulls:  # a run that died or a checker's finding: the null pointers passed are the first suspects
        verdicts = [_null_named(v, [spec.args[i].name for i in nulls], devices) for v in verdicts]
    return verdicts


def _null_named(v: Verdict, names: Sequence[str], devices: Sequence[Device]) -> Verdict:
    """`v`, when it failed as a kernel dereferencing a null pointer would (the child crashed, a guard or
    a memory checker's finding), naming the arguments passed as null pointers."""
    from porter.backends import get_backend

    checkers = tuple(f"{c}:" for d in devices if d.checks for c in get_backend(d.backend).checkers(d))
    died = v.reason.startswith("run:") and (" crashed at " in v.reason or " failed to launch at " in v.reason)
    if v.status is not Status.FAILED or not (died or v.reason.startswith(("guard:", *checkers))):
        return v
    said = f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} passed as a null pointer, as the program's launch did"
    return replace(v, reason=f"{v.reason} ({said}: a kernel that dereferences it fails)")


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
    spec, instances = _for_variant(rep, variant, plan.compile.include_dirs)
    chosen = {inst.label for inst in timing_instances(rep, most)}
    reference = Reference(recorded=rep.recorded)
    ref_device = next((d for d in reference_devices if d.name == device.name and d.kind == device.kind), None)
    o_spec, o_by_label = spec, {}  # the original's launches, timed beside the variant's on its device
    if original is not None and ref_device is not None:
        o_spec, o_instances = _for_variant(rep, original, (original_options or plan.compile).include_dirs)
        o_by_label = {i.label: i for i in o_instances}
    o_plan = replace(plan, compile=original_options or plan.compile, revalidate=False)
    results = []
    for inst in (i for i in instances if i.label in chosen):
        cost = cost_at(spec, inst.size) if cost_at is not None else None
        o_inst = o_by_label.get(inst.label)
        baseline = None
        if o_inst is not None and original is not None and ref_device is not None:
            key = _timing_key(ref_device, inst.label, original, o_plan.compile)
            baseline = rep.timings.get(key) or benchmark(
                original, o_spec, ref_device, inst.size, o_plan, cost=cost, instance=o_inst
            )
            _keep_timing(rep, key, baseline)
        res = benchmark(
            variant,
            spec,
            device,
            inst.size,
            plan,
            reference=reference,
            cost=cost,
            instance=inst,
            baseline=baseline,
        )
        _keep_timing(rep, _timing_key(device, inst.label, variant, plan.compile), res)
        results.append(res)
    return results


def _timing_key(
    device: Device, label: str, variant: Variant, options: CompileOptions
) -> tuple[str, str, str, str, str]:
    return (device.label, label, variant.source, variant.entry, repr(options))


def _keep_timing(rep: Replay, key: tuple[str, str, str, str, str], res: BenchResult) -> None:
    """Keep a timing as the baseline of the ports timed after it on its device (a failed one is not kept).  A
    contended one is kept too: every port's time beside it says so (bench: "the original's time beside it is
    contended"), as one timed again would, in a separate child at another moment all the same."""
    if res.ok and res.timing is not None:
        rep.timings.setdefault(key, res)


def _for_variant(
    rep: Replay, variant: Variant, include_dirs: Sequence[str] = ()
) -> tuple[KernelSpec, tuple[Instance, ...]]:
    """The spec and instances with only the program variables `variant` has: those its source or a
    header it reaches in `include_dirs` names (a ``__constant__`` declared in the program's header),
    or takes as an added argument (OpenCL's __constant buffers)."""
    assert rep.spec is not None
    return own_symbols(rep.spec, rep.instances, variant, include_dirs)


def own_symbols(
    spec: KernelSpec, instances: Sequence[Instance], variant: Variant, include_dirs: Sequence[str] = ()
) -> tuple[KernelSpec, tuple[Instance, ...]]:
    """:func:`_for_variant` of a spec and its instances: a capture records every program variable of
    the run (hybridsort's mergesort.cu ``constStartAddr`` beside bucketsort.cu's ``texPivot``), and a
    kernel's program defines only its own unit's."""
    from porter.records import strip_comments

    wanted = {str(e.get("symbol")) for e in variant.extra_args if e.get("kind") in ("constant", "texture")}
    headers: list[str] = []  # the texts of the headers the source reaches, read on first need
    code: list[str] = []  # the source without its comments ("does not define bias.cu's table" names none)

    def named(name: str) -> bool:
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        if pattern.search(variant.source):  # the raw text first: most names are not there at all
            if not code:
                code.append(strip_comments(variant.source))
            if pattern.search(code[0]):
                return True
        return in_headers(pattern)

    def in_headers(pattern: re.Pattern[str]) -> bool:
        if not headers and include_dirs:
            from porter.includes import reachable

            found = reachable([("", variant.source.encode("utf-8", "surrogateescape"))], include_dirs)
            headers.extend(
                strip_comments(data.decode("utf-8", "surrogateescape")) for _, data in list(found)[1:]
            )
            headers.append("")  # read, even when it reaches none
        return any(pattern.search(t) for t in headers)

    keep = tuple(c for c in spec.constants if c.name in wanted or named(c.name))
    if len(keep) == len(spec.constants):
        return spec, tuple(instances)
    own = replace(spec, constants=keep)
    names = {c.name for c in keep}
    return own, tuple(
        Instance.given(
            own, inst.size, inst.label, inst.values, {k: v for k, v in inst.constants.items() if k in names}
        )
        for inst in instances
    )


__all__ = [
    "Floor",
    "Original",
    "Replay",
    "poisoned",
    "shares",
    "build",
    "cross_device_floors",
    "physical",
    "same_device",
    "struct_dtype",
    "element_dtype",
    "instance_name",
    "is_null",
    "null_arguments",
    "replay",
    "settle",
    "timed",
    "timing_instances",
]
