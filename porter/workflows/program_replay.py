"""Each kernel of a ported program validated from the launches its original's run captured.

After ``port --run``, the original's run on the CPU runtime has recorded its launches (``runs/<key>/
capture/``, docs/CAPTURE_FORMAT.md).  For every kernel captured (:func:`porter.harness.replay.build`):

1. the **original kernel** is replayed first, on every device that runs CUDA here: the capture must
   reproduce with it (a kernel reading something the capture lacks -- a ``__constant__`` symbol, a
   texture -- does not, and then no variant is judged on it: ``not-replayable`` with the reason).
   A launch that changed nothing as captured is run again by the original with the arrays the kernel
   writes poisoned, and judged on what it computed there (:func:`porter.harness.replay.build`).  When
   the original's own runs differ from the capture (the order of a compaction filled through atomics),
   what stays the same is found (:func:`porter.harness.replay.settle`: a multiset, a count and a set,
   a float sum within the order-aware tolerance), named in every verdict, and the original judged again
   by it.  Arguments that point into one allocation are one buffer and pointers into it at the
   captured offsets, compared as the whole allocation.  A capture made on another device than the one
   replaying it (a GPU's capture on the CPU emulator, or the reverse) is first replayed there by the
   original: where it differs only slightly (a rounding), that spread is the tolerance floor of every
   variant on that device, named in each verdict (:func:`porter.harness.replay.cross_device_floors`);
2. each **port** is replayed on every device that runs its target (the HIP file that defines the
   kernel, built as device code with the mirrored tree's include folders; the OpenCL unit holding it,
   through its launch mapping), and judged by the validator's checks against what the original left.

Every verdict lands in the report's kernel (``kernels[].replays``); a failed one fails the port.  Kernels are
judged one after another, and side by side while the machine has idle cores (:func:`side_by_side`); their rows
land in the report in the same order either way.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from porter import capture
from porter.backends import SOURCE_DIALECT, Device, get_backend
from porter.errors import UsageError
from porter.harness import replay as replaying
from porter.harness.trial import ValidateOptions
from porter.harness.validate import OUT_OF_BOUNDS_READS, READ_ELSEWHERE, read_past
from porter.model import Kernel, Status, Variant, Verdict
from porter.plan import PlannedVariant, Refusal
from porter.results import NOT_LAUNCHED, KernelReplay, ProgramKernel, ProgramReport
from porter.scan.instances import spelled
from porter.workflows.program_plan import ProgramPlan
from porter.workflows.resume import Ledger, key_of, toolchain_of

Progress = Callable[[str], None]
LOG_TAIL = 4000  # characters of a failed replay's log kept in report.json
IDLE_POLL_S = 5.0  # how often side_by_side looks again for idle cores while kernels are judged


def _launches(report: ProgramReport) -> tuple[list[capture.Launch], list[str]]:
    """Every launch the original's runs captured, each labelled with its --run's number, and the keys of
    the runs that captured them (what the capture depends on)."""
    found: list[capture.Launch] = []
    keys: list[str] = []
    for n, run in enumerate(report.runs, 1):
        # one capture per --run: from the real hardware where the original ran on it
        for rec in sorted(run.originals, key=lambda r: r.capture_kind != "gpu"):
            if not rec.capture:
                continue
            try:
                cap = capture.load(rec.capture)
            except UsageError as err:
                report.notes.append(f"run {n}: the capture is unreadable: {err}")
                continue
            report.notes += [f"run {n}: {p}" for p in cap.problems]
            found += [replace(la, run=n) for la in cap.launches]
            keys.append(rec.key)
            break  # one capture per --run
    return found, keys


def resolved_launches(launches: Sequence[capture.Launch], scanned: Mapping[str, Any]) -> list[capture.Launch]:
    """The launches, each named by the kernel instance it ran (``axpby<T>`` written in a host template
    becomes ``axpby<float>``, deduced from the captured argument types)."""
    out = []
    for la in launches:
        base = la.kernel.split("<", 1)[0].strip()
        k = scanned.get(base) or scanned.get(base.rsplit("::", 1)[-1])
        if k is not None and k.template_params:
            la = replace(
                la, kernel=replaying.instance_name(la, k.template_params, [p.type for p in k.params])
            )
        out.append(la)
    return out


def kernel_of(name: str, kernels: Mapping[str, ProgramKernel]) -> ProgramKernel | None:
    """The kernel of the program whose rows the captured instance `name` gets: its template kernel
    (``axpby`` for ``axpby<float>``, the instance's rows under it), else the instance itself where a
    translator listed only the instances (OpenCL's ``axpy<float>`` and ``axpy<double>`` of a template
    in a header), each judged by its own launches."""
    base = name.split("<", 1)[0].strip()
    found = kernels.get(base) or kernels.get(base.rsplit("::", 1)[-1])
    if found is not None or base == name:
        return found
    wanted = spelled(name)
    return next((k for k in kernels.values() if spelled(k.name) == wanted), None)


def kernel_scan(plan: ProgramPlan, name: str, rel: str) -> Kernel | None:
    """The scan of the kernel `name` (an instance: its template's) listed in the file `rel`: where it
    is defined there, else in a header `rel` reaches (a unit's kernels are listed under the unit when a
    translator of units saw them in its headers); None when no scan finds it."""
    names = tuple(dict.fromkeys((name, name.split("<", 1)[0].strip())))
    f = plan.file(rel)
    for where in (rel, *(str(h.rel) for h in (plan.reached(f) if f is not None else ()))):
        for n in names:
            if (found := plan.kernel_scan(n, where)) is not None:
                return found
    return None


def build_replay(
    name: str,
    launches: Sequence[capture.Launch],
    atomics: Sequence[str],
    written: Collection[int] | None = None,
    original: replaying.Original | None = None,
) -> replaying.Replay:
    """The replay of `name`'s launches (a launch that changed nothing run again by `original` with the
    arrays the kernel writes, `written`, poisoned); a capture porter cannot read is its reason, never
    raised."""
    try:
        rep = replaying.build(name, launches, atomics=atomics, written=written, original=original)
    except (ValueError, KeyError, TypeError, OSError) as err:
        return replaying.Replay(
            name, None, problem=f"the capture cannot be read ({type(err).__name__}: {err})"
        )
    first = launches[0] if launches else None
    as_lanes = tuple(
        f"arg{a.index} ({a.element}) compared field by field as {a.dtype}"
        for a in (first.args if first is not None and rep.spec is not None else ())
        if a.kind == "pointer" and a.dtype and a.element_bytes > np.dtype(a.dtype).itemsize
    )
    return replace(rep, typed=as_lanes) if as_lanes else rep


def struct_lanes(launches: Sequence[capture.Launch], plan: ProgramPlan) -> list[capture.Launch]:
    """`launches` with each pointer to a struct whose fields are all one scalar type (``FOUR_VECTOR``: four
    doubles) typed as that scalar, when the fields the program's source declares add up to the element
    size the compiler reported: such arrays are compared field by field within the scalar's tolerance,
    not byte for byte (where a port's last-bit rounding of a double would fail it)."""
    from porter.scan.structs import homogeneous_structs

    def unknown(a: capture.Arg) -> bool:
        return a.kind == "pointer" and not a.dtype and replaying.element_dtype("", a.element) == "uint8"

    if not any(unknown(a) for la in launches for a in la.args):
        return list(launches)
    texts = (plan.text(f) for f in plan.program.files)
    structs = homogeneous_structs(t for t in texts if t is not None)
    out = []
    for la in launches:
        args = []
        for a in la.args:
            name = " ".join(w for w in a.element.split() if w not in ("const", "volatile", "struct"))
            lanes = structs.get(name) if unknown(a) else None
            if lanes is not None and lanes.count * np.dtype(lanes.dtype).itemsize == a.element_bytes:
                a = replace(a, dtype=lanes.dtype)
            args.append(a)
        out.append(replace(la, args=tuple(args)))
    return out


def variant_name(variant: Variant) -> str:
    return "original" if variant.provenance == "original" else variant.target


def _key(name: str, planned: PlannedVariant, devices: Sequence[Device], run_keys: Sequence[str]) -> str:
    """Everything a replay verdict depends on: the captured runs (their keys), the variant's code and
    build, what it includes (the plan's digest), the devices' toolchains and porter's own code; "" when a
    toolchain is unknown."""
    variant, copts = planned.variant, planned.compile
    chains = [toolchain_of(d.backend, d) for d in devices]
    if any(c is None for c in chains):
        return ""
    return key_of(
        "kernel-replay", name, list(run_keys), variant.target, variant.source, variant.entry,
        list(variant.arg_map or ()), list(variant.extra_args), list(copts.include_dirs), list(copts.defines),
        planned.headers, [d.label for d in devices], chains,
    )  # fmt: skip


def _row_from(doc: Mapping[str, Any], key: str) -> KernelReplay:
    def number(name: str) -> float | None:
        value = doc.get(name)
        return float(value) if isinstance(value, int | float) else None

    return KernelReplay(
        str(doc.get("variant", "")), str(doc.get("device", "")), str(doc.get("status", "")),
        str(doc.get("reason", "")), int(doc.get("launches") or 0), int(doc.get("held_back") or 0),
        tuple(doc.get("checks") or ()), wavefront=int(doc.get("wavefront") or 0),
        instance=str(doc.get("instance") or ""), log=str(doc.get("log") or ""), time_ms=number("time_ms"),
        time_iqr_ms=number("time_iqr_ms"), original_ms=number("original_ms"), speedup=number("speedup"),
        floor_ms=number("floor_ms"),
        timed_at=str(doc.get("timed_at") or ""), contended=str(doc.get("contended") or ""), key=key,
        resumed=True,
    )  # fmt: skip


def _timed(
    row: KernelReplay,
    planned: PlannedVariant,
    device: Device,
    rep: replaying.Replay,
    original: PlannedVariant,
) -> KernelReplay:
    """`row` with the variant's time at its largest captured launch on `device` (the original's on the
    same device beside it, and the model's floor); a failed timing says why in ``timed_at``."""
    from porter.harness.bench import CPU_PLAN, GPU_PLAN
    from porter.harness.cost import estimate
    from porter.plan import run_devices

    variant, copts = planned.variant, planned.compile
    source, options = original.variant, original.compile

    def cost_at(spec: Any, size: dict[str, int]) -> Any:  # the original's work: one floor for every port
        try:
            return estimate(source.source, spec, size, kernel=source.entry)
        except Exception:  # noqa: BLE001 - a launch the model cannot cost: the time stands alone
            return None

    plan = replace(GPU_PLAN if device.times else CPU_PLAN, compile=copts)
    same = variant.source == source.source and variant.entry == source.entry
    found = replaying.timed(
        variant, rep, device, plan, original=None if same else source, original_options=options,
        reference_devices=run_devices(SOURCE_DIALECT), cost_at=cost_at, most=1,
    )  # fmt: skip
    if not found:
        return replace(row, timed_at="not timed: nothing to time")
    res = found[0]
    at = ", ".join(f"{k}={v}" for k, v in res.size.items())
    if not res.ok or res.timing is None:
        return replace(row, timed_at=f"not timed at {at}: {res.reason}")
    floor = res.assessment.floor_ms if res.assessment is not None else None
    mine, theirs = res.timing.median_ms, res.baseline_ms
    if same:  # the original itself: its own time is the one beside it
        theirs = mine
    # the speedup from the two times shown (the harness withholds one below the physical floor)
    speedup = theirs / mine if res.speedup is not None and theirs is not None and mine > 0 else None
    return replace(
        row, time_ms=mine, time_iqr_ms=res.timing.iqr_ms, original_ms=theirs, speedup=speedup, floor_ms=floor,
        timed_at=at, contended=res.contended,
    )  # fmt: skip


def _with_floors(
    base: Callable[[], replaying.Replay],
    original: replaying.Original,
    captured_on: str,
    ports: Sequence[Device] = (),
) -> replaying.Replay:
    """The replay, with the original's own spread on each device other than the capture's as the floor
    of every variant there, and for the ports' devices it does not run on: its spread when built to contract
    (where their compilers contract and the capture's did not), or between the compilers it was built with
    (where theirs is another) (:func:`porter.harness.replay.cross_device_floors`)."""
    return replaying.cross_device_floors(base(), original, captured_on, ports)


def _settled(
    base: Callable[[], replaying.Replay],
    original: replaying.Original,
    captured_on: str,
    ports: Sequence[Device] = (),
) -> replaying.Replay:
    """The replay with what its outputs keep where the original's own runs differ (:func:`settle`), then
    its floors (:func:`_with_floors`) measured under those comparisons: an output whose stores race is
    held to the original's nearest value at the elements that race, on every device alike."""
    return _with_floors(lambda: replaying.settle(base(), original), original, captured_on, ports)


def _order_dependent(rows: Sequence[KernelReplay]) -> bool:
    """Whether the original's replay failed on some device because its own runs do not repeat the
    capture (two runs differ, or a run differs from what the capture recorded)."""
    return any(
        r.status == "failed" and r.reason.startswith(("deterministic", "matches-reference")) for r in rows
    )


def _undefined_lanes(rows: Sequence[KernelReplay], on: Sequence[Device]) -> bool:
    """Whether the original's replay failed only because its result depends on what the warp-shuffle lanes
    CUDA leaves undefined return (check ``undefined``), on a device that can run it with them poisoned."""
    failed = [r for r in rows if r.status == "failed"]
    return (
        bool(failed)
        and not any(r.status == "validated" for r in rows)
        and all(r.reason.startswith("undefined:") for r in failed)
        and any(get_backend(d.backend).poisons_undefined_lanes for d in on)
    )


def _with_lanes(base: Callable[[], replaying.Replay], original: replaying.Original) -> replaying.Replay:
    """The replay with the original's outputs under poisoned undefined lanes (a verdict kept from the ledger
    was judged by them); the replay as it is where they cannot be made."""
    lanes = replaying.with_undefined_lanes(base(), original)
    return base() if isinstance(lanes, str) else lanes


def _lanes_blind(device: Device, said: str) -> str:
    """Why a port's row on `device` is not judged when the original's result depends on the shuffle lanes CUDA
    leaves undefined (`said`: the original's own failure, naming the read)."""
    return (
        f"the original {said or 'reads shuffle lanes CUDA leaves undefined, and its result depends on them'}; "
        f"{device.label} reads such lanes as its hardware does (Intel's OpenCL: what they last held) and cannot "
        "be made to read them as the capture did, so only a device that reads them as 0 and as a poison pattern "
        "(porter's CPU emulator) judges the port"
    )


def _built_as_a_program(row: KernelReplay, report: ProgramReport) -> KernelReplay:
    """`row` as the evidence has it: a port's kernel that does not build alone for its replay on a
    device where the port's whole program built (the same code through the same compiler) fails in
    porter's replay build -- host code of the file it includes, a header only the program sets up -- not
    in the port: then it is ``not-replayable`` with the compiler's first error, never ``failed``."""
    if row.variant == "original" or row.status != "failed" or not row.reason.startswith("compile"):
        return row
    built = [
        b
        for b in report.builds
        if b.variant == row.variant and b.status == "built" and b.device == row.device
    ]
    if not built:
        return row
    return replace(
        row,
        status="not-replayable",
        reason=f"the kernel alone does not build for its replay, though the {row.variant} program builds with "
        f"{built[0].toolchain} on {row.device} (porter's replay build, not the port): {row.reason}",
    )


def timed_on(device: Device) -> bool:
    """Whether a validated replay is timed on `device`: where its times say something of GPU speed."""
    return device.times


def _verdict_row(variant: str, v: Verdict, rep: replaying.Replay) -> KernelReplay:
    if v.status is Status.VALIDATED:
        status = "validated"
    elif v.status is Status.COMPILED:
        status = "compiled"
    elif v.reason.startswith("not replayable"):
        status = "not-replayable"
    else:
        status = "failed"
    held = len(rep.spec.hidden_sizes) if rep.spec else 0
    log = "\n".join(v.logs)[-LOG_TAIL:] if status == "failed" else ""
    return KernelReplay(
        variant,
        v.device or v.backend,
        status,
        v.reason,
        len(rep.instances) + sum(len(o.instances) for o in rep.others),
        held,
        tuple(v.checks),
        log=log,
    )


def replay_program(
    plan: ProgramPlan,
    out: Path,
    report: ProgramReport,
    say: Progress,
    save: Callable[[], None],
    ledger: Ledger | None = None,
    timeout: float = 120.0,
) -> None:
    """Validate every captured kernel's original and ports from the capture; see the module docstring.
    ``ledger``: the previous report's rows (a replay whose key matches is kept, not run again)."""

    launches, run_keys = _launches(report)
    for k in report.kernels:
        k.replays = []
    if launches:
        _replay(plan, out, report, launches, run_keys, say, save, ledger or Ledger(), timeout)
    if report.runs:  # every kernel has a row for the original and each target, with its reason
        _every_definition(plan, report)
        _rows_for_the_rest(report)
        for note in missing_here((SOURCE_DIALECT, *report.targets)):  # never a silent degradation
            if note not in report.notes:
                report.notes.append(note)
                say(note)
        save()


def missing_here(dialects: Sequence[str]) -> list[str]:
    """One note per backend that runs one of `dialects` and lacks something here -- every device (it only
    compiles), or a checking device -- saying what the replays did without and what to install."""
    from porter.backends import get_backend, runners

    notes: list[str] = []
    for name in dict.fromkeys(b for d in dialects for b in runners(d)):
        try:
            avail = get_backend(name).availability()
        except Exception as err:  # noqa: BLE001 - a backend that cannot say is said to be missing
            notes.append(f"{name}: not available here ({err}): no replay ran on its devices")
            continue
        if not avail.run:
            notes.append(
                f"{name}: no device runs code here ({avail.hint or 'none found'}): its kernels were judged on "
                "the other devices only"
            )
        elif avail.hint:
            notes.append(
                f"{name}: part of what it checks is missing here ({avail.hint}): replayed without it"
            )
    return notes


def _rows_for_the_rest(report: ProgramReport) -> None:
    """A ``not-replayable`` row, with the reason, for the original and each target of every kernel the
    replays left without one (no launch of it was captured): never an empty kernel."""
    failed = [
        f"run {n}: {o.reason}" for n, run in enumerate(report.runs, 1) for o in run.originals[:1]
        if o.status != "ran"
    ]  # fmt: skip
    unsaid = [n for n in report.notes if "capturing build of the original failed" in n]
    captured = any(o.capture for run in report.runs for o in run.originals)
    if failed:
        why = "no launch to replay: " + "; ".join(failed)
    elif not captured:
        why = "no launch to replay: " + (
            "; ".join(unsaid) or "no run of the original recorded its launches (no capturing build ran it)"
        )
    else:
        why = f"{NOT_LAUNCHED} (no captured launch)"
    by_name = {k.name: k for k in report.kernels}
    for k in report.kernels:
        if k.replays or _replayed_as_instance(k.name, by_name):
            continue
        k.replays = [KernelReplay(v, "", "not-replayable", why) for v in ("original", *report.targets)]


def _replayed_as_instance(name: str, kernels: Mapping[str, ProgramKernel]) -> bool:
    """Whether `name` is a template instantiation (``MatrixMulCUDA<16>``, listed where a translator
    made one kernel of it) whose rows are its template kernel's, under the instance's name."""
    base = name.split("<", 1)[0].strip()
    template = kernels.get(base) if base != name else None
    squash = "".join(name.split())
    return template is not None and any("".join(r.instance.split()) == squash for r in template.replays)


def _replay(
    plan: ProgramPlan,
    out: Path,
    report: ProgramReport,
    launches: list[capture.Launch],
    run_keys: Sequence[str],
    say: Progress,
    save: Callable[[], None],
    ledger: Ledger,
    timeout: float,
) -> None:
    """Every captured instance replayed: its original first, then each target's port."""
    from porter.plan import lacking, needs_reason, run_devices, wavefront_devices

    def judged(
        planned: PlannedVariant,
        devices: Sequence[Device],
        replay_of: Callable[[], replaying.Replay],
        base_of: Callable[[], replaying.Replay],
        name: str,
        original: PlannedVariant,
        again: bool = False,
    ) -> list[KernelReplay]:
        """The verdicts of `planned` on `devices`, reused from the previous report when its key matches
        (then the capture's arrays are not even read: `replay_of` builds the replay on first need);
        `again`: judged anew whatever the ledger holds (the original, once what its runs keep is known).
        A reused verdict whose time was contended (the GPU was not porter's alone) is timed again, at the
        launches `base_of` (the replay without floors) gives: a time is a measurement taken under a
        condition, kept only where the condition held."""
        variant, copts = planned.variant, planned.compile
        key = _key(name, planned, devices, run_keys)
        old = [] if again else ledger.rows(key)
        by_label = {d.label: d for d in devices}

        def timed(rows: list[KernelReplay], rep_of: Callable[[], replaying.Replay], contended: bool) -> None:
            """Each validated row on a device whose times mean something timed (`contended`: only those whose
            earlier time was contended), in place."""
            for i, row in enumerate(rows):
                device = by_label.get(row.device)
                if (
                    row.status != "validated"
                    or device is None
                    or not timed_on(device)
                    or (contended and not row.contended)
                ):
                    continue
                when = "again (contended before)" if contended else "at a captured launch"
                say(f"{name}: timing {variant_name(variant)} on {device.label} {when}")
                with report.clock("timing"):
                    rows[i] = _timed(row, planned, device, rep_of(), original)

        if old:
            say(f"{name}: {variant_name(variant)} replayed earlier with the same inputs; kept")
            kept = [replace(_row_from(d, key), instance=name) for d in old]
            timed(kept, base_of, contended=True)
            return kept
        rep = replay_of()
        verdicts = replaying.replay(variant, rep, devices, ValidateOptions(compile=copts, timeout_s=timeout))
        width = {d.label: d.facts.warp_size for d in devices}
        rows = [
            replace(
                _verdict_row(variant_name(variant), v, rep),
                key=key,
                wavefront=width.get(v.device, 0),
                instance=name,
            )
            for v in verdicts
        ]
        rows = [_built_as_a_program(row, report) for row in rows]
        timed(rows, lambda: rep, contended=False)
        saved()
        return rows

    kernels = {k.name: k for k in report.kernels}
    scanned: dict[str, Kernel] = {}
    for listed in kernels.values():
        if (found := kernel_scan(plan, listed.name, listed.file)) is not None:
            scanned[listed.name] = found
            scanned.setdefault(found.name, found)  # a listed instance's template: how launches are named
    launches = resolved_launches(launches, scanned)
    launches = struct_lanes(launches, plan)
    said = {k.name: k.targets for k in report.kernels}  # what each translation said of a kernel
    grouped = capture.by_kernel(launches)
    groups = _by_definition(plan, report, grouped, kernels)
    lock = threading.RLock()  # the report's rows, notes and saves, as groups judged side by side add them
    order: dict[
        int, tuple[int, int]
    ] = {}  # id(row) -> (group, sequence): the rows' order, whatever ends first

    def add(pk: ProgramKernel, n: int, *rows: KernelReplay) -> None:
        with lock:
            for row in rows:
                order[id(row)] = (n, len(order))
            pk.replays += rows

    def saved() -> None:
        with lock:
            save()

    def prepare(
        n: int, name: str, las: list[capture.Launch], pk: ProgramKernel | None
    ) -> Callable[[], None] | None:
        """What judging group `n` needs from the plan, made here, one group after another (the plan's
        translations and scans); the judging itself, the children's work, as a function (None: nothing
        to judge)."""
        if pk is None:
            report.notes.append(f"captured launches of {name}: not a kernel porter found in the program")
            return None
        k_scan = scanned.get(pk.name) if kernels.get(pk.name) is pk else kernel_scan(plan, pk.name, pk.file)
        atomics = tuple(k_scan.atomics) if k_scan is not None else ()
        # the arrays the kernel stores through (its scan): what a launch that changed nothing is poisoned in
        written = (
            frozenset(i for i, p in enumerate(k_scan.params) if p.pointer and p.written and not p.const)
            if k_scan is not None
            else None
        )
        made = plan.original(name, pk.file)
        if isinstance(made, Refusal):
            add(pk, n, KernelReplay("original", "", "not-replayable", made.reason, instance=name))
            return None
        made = _as_captured(made, las[0].defines)
        ports: list[tuple[str, PlannedVariant | Refusal]] = []
        for target in report.targets:
            what = said.get(name, {}).get(target, "") or pk.targets.get(target, "")
            port = plan.variant(target, name, pk.name, pk.file, out, what)
            ports.append((target, port if isinstance(port, Refusal) else _as_captured(port, las[0].defines)))
        return functools.partial(judge, n, name, las, pk, atomics, written, made, ports)

    def judge(
        n: int,
        name: str,
        las: list[capture.Launch],
        pk: ProgramKernel,
        atomics: tuple[str, ...],
        written: frozenset[int] | None,
        made: PlannedVariant,
        ports: list[tuple[str, PlannedVariant | Refusal]],
    ) -> None:
        say(f"replaying {name} ({len(las)} captured launch(es)): {n}/{len(groups)}")
        on = run_devices(SOURCE_DIALECT)
        original = replaying.Original(made.variant, made.compile, tuple(on), timeout)
        built = functools.cache(functools.partial(build_replay, name, las, atomics, written, original))
        # on first need only; a capture made on another device: the original's own spread there first; the
        # ports' devices, judged with the original's own spread under contraction or between its compilers
        port_devices = [d for t in report.targets for d in (*run_devices(t), *wavefront_devices(t))]
        replay_of = functools.cache(
            functools.partial(_with_floors, built, original, las[0].device, port_devices)
        )
        rows = judged(made, on, replay_of, built, name, made)
        unsettled = ""
        if _order_dependent(rows):  # the original's own runs differ: compare by what they keep
            say(f"{name}: the original's runs differ from the capture; finding what stays the same")
            settled = _settled(built, original, las[0].device, port_devices)
            if settled.unordered or settled.compared:
                replay_of = functools.cache(lambda settled=settled: settled)
                rows = judged(made, on, replay_of, built, name, made, again=True)
            else:
                unsettled = settled.unsettled
        elif _undefined_lanes(
            rows, on
        ):  # its result depends on what shuffle lanes CUDA leaves undefined return
            say(
                f"{name}: the original's result depends on shuffle lanes CUDA leaves undefined; judging by both"
            )
            defect = next(r.reason for r in rows if r.status == "failed").partition("undefined: ")[2]
            lanes = replaying.with_undefined_lanes(replay_of(), original, defect)
            if isinstance(lanes, str):
                unsettled = lanes
            else:
                replay_of = functools.cache(lambda lanes=lanes: lanes)
                rows = judged(made, on, replay_of, built, name, made, again=True)
        elif any(
            r.status == "validated" and replaying.KEPT in r.reason for r in rows
        ):  # kept from the ledger
            replay_of = functools.cache(
                functools.partial(_settled, built, original, las[0].device, port_devices)
            )
        elif any(
            r.status == "validated" and replaying.LANES in r.reason for r in rows
        ):  # kept from the ledger
            replay_of = functools.cache(functools.partial(_with_lanes, replay_of, original))
        add(pk, n, *rows)
        if not any(r.status == "validated" for r in rows):
            first = rows[0] if rows else None
            if first is None:
                why = "no device here runs the original kernel"
            elif first.status == "not-replayable":
                why = first.reason  # the capture's own limits: the same for every variant
            else:
                why = f"the original kernel's replay does not reproduce the captured run: {first.reason}"
                if unsettled:
                    why += f" (and no comparison holds for its own runs: {unsettled})"
            add(
                pk,
                n,
                *(
                    KernelReplay(target, "", "not-replayable", why, instance=name)
                    for target in report.targets
                ),
            )
            return
        for target, port in ports:
            if isinstance(port, Refusal):
                add(pk, n, KernelReplay(target, "", "not-replayable", port.reason, instance=name))
                continue
            # every device of the target, and its other wavefront widths where emulated (HIP: 64 lanes)
            every = [*run_devices(target), *wavefront_devices(target)]
            lacks = {d.label: lacking(target, d, port.requires) for d in every}
            devices = [d for d in every if not lacks[d.label]]
            if every and not devices:  # e.g. sub-groups of 32 that no OpenCL device here runs right
                why = f"no {target} device here has what it needs ({', '.join(port.requires)}): " + "; ".join(
                    f"{d.label} lacks {', '.join(lacks[d.label])}" for d in every
                )
                add(pk, n, KernelReplay(target, "", "not-replayable", why, instance=name))
                continue
            defect_said = replay_of().lanes_said if replay_of().poisoned_lanes else None
            if (
                defect_said is not None
            ):  # judged as a function of the undefined lanes: where they can be poisoned
                blind = [d for d in devices if not get_backend(d.backend).poisons_undefined_lanes]
                devices = [d for d in devices if d not in blind]
                add(
                    pk,
                    n,
                    *(
                        KernelReplay(
                            target, d.label, "not-replayable", _lanes_blind(d, defect_said), instance=name
                        )
                        for d in blind
                    ),
                )
            if devices:
                kinds = {d.label: d.kind for d in (*on, *devices)}
                ported = judged(port, devices, replay_of, built, name, made)
                if any(r.status == "failed" and r.reason.startswith(COMPARED) for r in ported):
                    ported = _unstable_there(ported, replay_of())
                ported = _originals_defect(ported, rows, kinds)
                ported = _read_elsewhere(ported)
                add(pk, n, *_originals_race(ported, made, port, pk.name, target, plan.program.root))
            for d in every:  # a device that cannot run it says so in a row of its own (another judges it)
                if lacks[d.label]:
                    why = needs_reason(target, name, d, port.requires, lacks[d.label])
                    add(pk, n, KernelReplay(target, d.label, "not-replayable", why, instance=name))

    work = [w for n, group in enumerate(groups, 1) if (w := prepare(n, *group)) is not None]
    side_by_side(work, plan.jobs)
    for k in report.kernels:  # rows as if the groups had been judged one after another
        k.replays.sort(key=lambda row: order.get(id(row), (0, -1)))
    captured_on = {name: las[0].device for name, las in grouped.items() if las}
    for k in report.kernels:
        for row in k.replays:
            row.captured_on = captured_on.get(row.instance, "")


def _finding(reason: str) -> str:
    """What an out-of-bounds verdict found, as an array, an access and a side of it (``out-of-bounds read: arg4
    read before its first element``), without the element first hit or where it was seen -- which element a
    device hits first follows the order its work-items run (srad's read of ``J[-cols]`` stopped at arg4[-64] on
    the emulator, at arg4[-48] on Intel's OpenCL); "" for any other reason."""
    check, _, rest = reason.partition(": ")
    return re.sub(r"\[-?\d+\]", "", rest.split(" (", 1)[0], count=1) if check == "guard" else ""


COMPARED = "matches-reference"  # a verdict's check: the outputs against what the capture recorded


def _unstable_there(rows: Sequence[KernelReplay], rep: replaying.Replay) -> list[KernelReplay]:
    """A port's rows that failed their comparison with the capture on a device where the original itself, built
    as a port there is (to contract a*b+c, or by that device's other compiler), is farther from the capture than
    a rounding (:meth:`porter.harness.replay.Replay.unstable_on`: myocyte's ODE solver): not failed but not
    replayable there, naming the original's own spread -- the capture cannot judge a port on that device.
    Other failures, and those on other devices, stay failed."""
    out = []
    for row in rows:
        why = rep.unstable_on(row.device) if row.device else ""
        if row.status == "failed" and why and row.reason.startswith(COMPARED):
            row = replace(
                row,
                status="not-replayable",
                reason=f"{why}; so no port on {row.device} can be judged by the capture (this port: {row.reason})",
            )
        out.append(row)
    return out


def _read_elsewhere(rows: Sequence[KernelReplay]) -> list[KernelReplay]:
    """A port's rows failed only because, on a device that cannot count its reads of the shuffle lanes CUDA leaves
    undefined (OpenCL), it reads them otherwise than its original, which depends on them, while matching the
    original reading them as 0 (NVIDIA's reading): not replayable there, both said -- the original's defect
    leaves the capture unable to judge it.  The CUDA samples' reduce7<int, 4u> on Intel's CPU runtime: poisoned,
    the port adds the poison 2 times where the original on the emulator adds it 17 (why was not traced)."""
    out = []
    for row in rows:
        if row.status == "failed" and READ_ELSEWHERE in row.reason:
            row = replace(
                row,
                status="not-replayable",
                reason="the original's result depends on shuffle lanes CUDA leaves undefined, which the port reads "
                f"otherwise on {row.device} ({row.reason})",
            )
        out.append(row)
    return out


def _originals_defect(
    rows: Sequence[KernelReplay], original: Sequence[KernelReplay], kinds: Mapping[str, str] | None = None
) -> list[KernelReplay]:
    """A port's failed rows that are the original's own failure, kept by the port: not failed, not replayable
    there, naming the original's finding.  That is a row stepping out of bounds as the original does on any
    device (the same array, access and side: srad's read of ``J[-cols]`` at the top edge), or failing the
    check the original fails on the same device -- or, on a device the original does not run on, on one as
    much a GPU or not (`kinds`: label -> Device.kind; a race of the original's, myocyte's, fails its ports on
    every CPU device as it fails the original on the emulator).  A port that fails where the original passes, or another check,
    still fails."""
    kinds = kinds or {}
    theirs = {f: r for r in original if r.status == "failed" and (f := _finding(r.reason))}
    # the original reads out of bounds where its outputs do not depend on it (validated, the read named): a
    # checker that stops a port at a read out of bounds meets the defect the port keeps
    harmless = next(
        (r for r in original if r.status == "validated" and OUT_OF_BOUNDS_READS in r.checks), None
    )
    ran = {r.device for r in original if r.device}
    failed = [r for r in original if r.status == "failed" and r.device]
    out = []
    for row in rows:
        same = None
        if row.status == "failed":
            check = row.reason.partition(":")[0]  # (an out-of-bounds one only by its finding, above)
            same = theirs.get(_finding(row.reason)) or next(
                (
                    r
                    for r in failed
                    if r.reason.partition(":")[0] == check != "guard"
                    and (
                        r.device == row.device
                        or (
                            row.device not in ran
                            and _on_a_gpu(kinds, r.device) == _on_a_gpu(kinds, row.device)
                        )
                    )
                ),
                None,
            )
        if (
            same is None
            and row.status == "failed"
            and harmless is not None
            and _stopped_at_a_read(row.reason)
        ):
            read = read_past(harmless.reason)
            out.append(
                replace(
                    row,
                    status="not-replayable",
                    reason=f"the original kernel reads out of bounds too ({read}, on {harmless.device}, where its "
                    f"outputs do not depend on it), and the checker stops the port at such a read ({row.reason}): "
                    "the original's defect, which the port keeps, so this device cannot judge the port",
                )
            )
            continue
        out.append(
            row
            if same is None
            else replace(
                row,
                status="not-replayable",
                reason=f"the original kernel fails the same way on {same.device} ({same.reason}): its own "
                "defect, which the port keeps, so this device cannot judge the port",
            )
        )
    return out


def _originals_race(
    rows: Sequence[KernelReplay],
    original: PlannedVariant,
    port: PlannedVariant,
    kernel: str,
    target: str,
    root: Path,
) -> list[KernelReplay]:
    """A port's rows a checker failed with a data race that is the original's own
    (:func:`porter.harness.races.originals_race`: both accesses are statements of the original's functions,
    which the port keeps with the same synchronisation): not failed but not replayable on that device,
    naming the original's functions and lines -- the checker stops the port at a defect the original has.
    Any other race stays the port's failure."""
    from porter.harness import races
    from porter.includes import reachable

    originals: list[tuple[str, str]] | None = None
    out = []
    for row in rows:
        lines = (
            races.race_lines(row.reason) if row.status == "failed" and ": data-race: " in row.reason else None
        )
        if lines is None:
            out.append(row)
            continue
        if originals is None:
            unit = original.variant.path or ""
            originals = [
                (
                    os.path.relpath(path, root) if os.path.isabs(path) else path,
                    data.decode("utf-8", "replace"),
                )
                for path, data in reachable([(unit, None)], original.compile.include_dirs, quoted_only=True)
            ]
        why = races.originals_race(
            port.variant.source,
            races.barrier_calls(target),
            port.variant.entry,
            kernel.split("<", 1)[0].split("::")[-1],
            lines,
            originals,
            races.barrier_calls(SOURCE_DIALECT),
        )
        if why is None:
            out.append(row)
            continue
        if races.one_warp(row.reason):
            why += (
                " -- two threads of one warp: code written for a warp's lockstep, which CUDA has not promised "
                "since Volta's independent thread scheduling"
            )
        out.append(
            replace(
                row,
                status="not-replayable",
                reason=f"{why}; so the checker, which stops the port at that race, cannot judge it ({row.reason})",
            )
        )
    return out


def _stopped_at_a_read(reason: str) -> bool:
    """Whether a failed verdict is a checker's out-of-bounds finding on a read (Oclgrind's "Invalid read of size
    4 ...", compute-sanitizer's "Invalid __global__ read ..."): ``CHECK: out-of-bounds: MESSAGE``."""
    _, sep, message = reason.partition(": out-of-bounds: ")
    words = message.split(" at ", 1)[0].lower().split()
    return bool(sep) and "read" in words and "write" not in words


def _on_a_gpu(kinds: Mapping[str, str], label: str) -> bool | None:
    """Whether the device `label` names is a GPU (None: not known)."""
    kind = kinds.get(label)
    return None if kind is None else kind == "gpu"


def side_by_side(work: Sequence[Callable[[], None]], most: int) -> None:
    """Run `work` in order, one piece at a time, plus up to `most` at once while the machine has idle cores
    (a 1-minute load average a core below their count): a program alone, or the last of a suite, judges its
    kernels side by side, while programs that already keep every core busy add no more children.  The first
    exception stops what has not started and is raised once the pieces under way end."""
    cores = os.cpu_count() or 1
    pending, running = list(work), set[Future[None]]()
    pool = ThreadPoolExecutor(max(1, most), thread_name_prefix="replay")
    try:
        while pending or running:
            while pending and (not running or (len(running) < most and os.getloadavg()[0] <= cores - 1)):
                running.add(pool.submit(pending.pop(0)))
            done, running = wait(running, timeout=IDLE_POLL_S, return_when=FIRST_COMPLETED)
            for f in done:
                f.result()
    finally:  # on Ctrl-C or SIGTERM the CLI gives the pieces under way a grace, never a wait without end
        pool.shutdown(wait=not pending and not running, cancel_futures=True)


def _by_definition(
    plan: ProgramPlan,
    report: ProgramReport,
    grouped: Mapping[str, list[capture.Launch]],
    kernels: Mapping[str, ProgramKernel],
) -> list[tuple[str, list[capture.Launch], ProgramKernel | None]]:
    """The captured launches of each kernel instance with the kernel they ran.  Where the program defines
    a kernel of that name in several files (a folder of several programs: Rodinia's cfd, whose four
    executables each define ``cuda_compute_flux``), a launch ran the definition its run's executable
    reaches, and each definition gets its own row, judged by its own launches only."""
    runs = _run_units(plan, report)
    out: list[tuple[str, list[capture.Launch], ProgramKernel | None]] = []
    for name, las in grouped.items():
        pk = kernel_of(name, kernels)
        defined = _definitions(plan, pk.name) if pk is not None else []
        if pk is None or len(defined) < 2:
            out.append((name, las, pk))
            continue
        parts: dict[str, list[capture.Launch]] = {}
        for la in las:
            unit = runs.get(la.run)
            reached = (
                {unit, *(str(h.rel) for h in plan.reached(f))} if unit and (f := plan.file(unit)) else set()
            )
            where = next((d for d, _line in defined if d in reached), pk.file)
            parts.setdefault(where, []).append(la)
        for where, part in parts.items():
            row = next((k for k in report.kernels if k.name == pk.name and k.file == where), None)
            if row is None:
                line = next((ln for d, ln in defined if d == where), 0)
                row = ProgramKernel(pk.name, where, line, targets=dict(pk.targets))
                report.kernels.append(row)
            out.append((name, part, row))
    return out


def _every_definition(plan: ProgramPlan, report: ProgramReport) -> None:
    """A row for each definition of a kernel name the program defines in several files (a folder of several
    programs), those no run launched too: every kernel of the program appears, each with its status."""
    for k in list(report.kernels):
        defined = _definitions(plan, k.name)
        if (
            len(defined) < 2
        ):  # one definition: its row is the listed one (which may name the unit including it)
            continue
        for where, line in defined:
            if not any(o.name == k.name and o.file == where for o in report.kernels):
                report.kernels.append(ProgramKernel(k.name, where, line, targets=dict(k.targets)))


def _definitions(plan: ProgramPlan, name: str) -> list[tuple[str, int]]:
    """The files of the program that define a kernel `name`, with its line: one for most programs."""
    return [
        (str(f.rel), line)
        for f in plan.program.files
        if plan.uses_cuda(f)
        for n, line in plan.facts(f).kernels
        if n == name
    ]


def _run_units(plan: ProgramPlan, report: ProgramReport) -> dict[int, str]:
    """Each --run's number -> the unit whose executable it ran (from the builds' executables)."""
    by_exe: dict[str, str] = {}
    for b in report.builds:
        for unit, exe in b.executables.items():
            by_exe.setdefault(Path(exe).name, unit)
    return {n: by_exe[run.executable] for n, run in enumerate(report.runs, 1) if run.executable in by_exe}


def _as_captured(planned: PlannedVariant, defines: Sequence[str]) -> PlannedVariant:
    """`planned` compiled with the macros of the build that captured its launches (the CPU runtime's one
    host-and-device pass: ``PORTER_HOST_PASS``), so a kernel with ``#if __CUDA_ARCH__ >= 800`` takes the
    branch the captured run took; every variant alike, so a port is judged against the same paths."""
    extra = tuple(d for d in defines if d not in planned.compile.defines)
    if not extra:
        return planned
    return replace(planned, compile=replace(planned.compile, defines=(*planned.compile.defines, *extra)))


__all__ = ["build_replay", "kernel_of", "kernel_scan", "replay_program", "resolved_launches"]
