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
   float atomics; catches races and uninitialised reads), ``undefined`` (on the CPU emulator, when a run's
   warp shuffles read lanes CUDA leaves undefined: the launch run again with those reads poisoned leaves the
   same outputs -- :func:`_poisoned_lanes`), ``matches-reference`` (every element
   within the per-dtype tolerance of ``tolerances.toml``, max abs/rel error reported);
4. when the reference output is near-constant for the inputs drawn, other inputs are drawn
   (``near-constant`` guard) instead of passing;
5. a memory-checker pass where one exists: Oclgrind for OpenCL (the checker device, which also runs
   the comparisons), compute-sanitizer memcheck and racecheck for CUDA and HIP (hip-on-cuda) on an NVIDIA GPU.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from porter.backends import Device, get_backend
from porter.backends.guards import HOST_MEMORY_KINDS
from porter.backends.isolate import Job, JobResult, prestart, run_job
from porter.harness import races
from porter.harness.checkers import CHECKER_LOG, checker_findings, sanitizer_pass
from porter.harness.checks import (
    Comparison,
    Raced,
    Tolerance,
    Undefined,
    Unordered,
    check_instance,
    compare,
    discriminating,
    tolerance_for,
    undefined_difference,
)
from porter.harness.reference import Reference, ref_name_of, reference_outputs
from porter.harness.trial import (
    GUARD_ELEMENTS,
    Instance,
    Reject,
    SequenceVariant,
    ValidateOptions,
    all_sizes,
    by_spec,
    guard_side,
    job_failure,
    make_job,
    run_together,
    seed_for,
    tail,
)
from porter.model import KernelSpec, Status, Variant, Verdict
from porter.scan import cexpr

__all__ = [
    "Comparison",
    "Reference",
    "Tolerance",
    "Raced",
    "Unordered",
    "ValidateOptions",
    "compare",
    "compile_only",
    "ref_name_of",
    "tolerance_for",
    "validate",
]


def validate(
    variant: Variant,
    spec: KernelSpec,
    reference: Reference,
    devices: Sequence[Device],
    options: ValidateOptions = ValidateOptions(),
    unordered: Sequence[Unordered | Raced] = (),
    floors: Mapping[str, Mapping[int, float]] | None = None,
) -> list[Verdict]:
    """One Verdict per device; a variant that cannot run anywhere gets a compile-only verdict.
    `unordered`: outputs compared by what the original's own runs keep (a compaction's elements as a
    multiset, :class:`porter.harness.checks.Unordered`) instead of element by element.  `floors`: by
    device label, per output (spec index) the absolute difference it may have from the reference there
    besides the tolerance (a capture made on another device: the original's own spread on this one,
    porter.harness.replay.cross_device_floors); devices not named compare strictly."""
    if not devices:
        verdict = compile_only(variant, spec, options)
        return [verdict] if verdict else []
    for device in devices[1:]:  # their children come up while the first device's jobs run
        if not device.checks:  # (a checker's job starts under its wrapper)
            prestart(Job(device.backend, "", "", options.compile, device), options.timeout_s)
    return [
        _validate_on(variant, spec, reference, d, options, tuple(unordered), (floors or {}).get(d.label))
        for d in devices
    ]


def _together(
    variant: Variant,
    spec: KernelSpec,
    device: Device,
    opts: ValidateOptions,
    sizes: Sequence[tuple[dict[str, int], str]],
    given: Mapping[str, Instance],
) -> dict[str, tuple[Job, list[int], JobResult]]:
    """The captured launches `sizes` names run on `device` as :func:`_validate_on` would run them one at a
    time, through :func:`porter.harness.trial.run_together` (in one child where they fit): by label, each
    launch's job, arrays and result.  Empty for one launch, or launches that cannot be made (then one at a
    time says where)."""
    if len(sizes) < 2 or isinstance(variant, SequenceVariant):
        return {}
    made = []
    try:
        for s_i, (_size, label) in enumerate(sizes):
            inst, seed = given[label], seed_for(opts.seed, s_i, 0)
            job, arrays = make_job(variant, spec, device, inst, opts.runs, opts.compile, seed)
            made.append((label, job, arrays))
    except Exception:  # noqa: BLE001 - a launch that cannot be made: one at a time says where
        return {}
    results = run_together([job for _, job, _ in made], opts.timeout_s)
    return {label: (job, arrays, res) for (label, job, arrays), res in zip(made, results, strict=True)}


def _over_checker_limit(spec: KernelSpec, sizes: Sequence[Mapping[str, int]], most: int) -> str:
    """Why a checker device does not simulate the launches at `sizes` ("" when it does): the smallest
    has more work-items than `most`."""
    from porter.harness.spec import geometry

    counts = []
    for size in sizes:
        try:
            grid, block, _ = geometry(spec, size)
        except ValueError:
            return ""
        counts.append(int(np.prod(grid)) * int(np.prod(block)))
    if not counts or min(counts) <= most:
        return ""
    return f"its smallest launch has {min(counts)} work-items, over the {most} a checker simulates"


def compile_only(
    variant: Variant,
    spec: KernelSpec,
    options: ValidateOptions = ValidateOptions(),
    backend: str | None = None,
) -> Verdict | None:
    """Build the variant where no device can run it: status compiled, or failed with the compiler log.
    None when the backend cannot compile here at all (toolchain missing)."""
    job, _ = make_job(variant, spec, None, None, 1, options.compile, 0)
    if backend:
        job = Job(backend=backend, source=job.source, entry=job.entry, options=job.options)
    res = run_job(job, options.timeout_s)
    if res.stage == "unavailable":
        return None
    base: dict[str, Any] = dict(
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
            logs=(tail(res.log),) if res.log.strip() else (),
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
        logs=(tail(res.log),),
    )


def _poisoned_lanes(
    job: Job,
    first: str,
    spec: KernelSpec,
    arrays: list[int],
    opts: ValidateOptions,
    label: str,
    logs: list[str],
) -> Undefined | None:
    """The launch of `job` run again, its first run's schedule (seed) and inputs, with the warp-shuffle
    reads CUDA leaves undefined returning a poison pattern instead of 0 (the CPU emulator's
    Job.poison_undefined_lanes): its outputs, or how it failed.  Only when the runs made such reads
    (`first`, the first of them), so an ordinary replay costs nothing more.  None when the run could
    not be made at all (no verdict either way)."""
    res = run_job(replace(job, runs=1, poison_undefined_lanes=True), opts.timeout_s)
    if res.ok and res.outputs:
        return Undefined(first, by_spec(spec, arrays, res.outputs[0]))
    if res.stage in ("compile", "unavailable", "load", "sandbox") or res.ok:
        logs.append(
            f"{label}: the run with undefined warp-shuffle lanes poisoned could not be made: {res.error}"
        )
        return None
    return Undefined(first, failed=job_failure("the variant", res, label).reason)


# what a verdict says of reads it could not count (a backend poisoning by its build: Backend.poison_lanes_flags)
UNCOUNTED = "the reads of its shuffles through porter's lane helpers, which this device does not count"
# ... and of a port that, on such a device, matches the original with those lanes read as 0 but not poisoned
READ_ELSEWHERE = "with them reading 0 it matches the original: it reads lanes CUDA leaves undefined otherwise"


def _uncounted_lanes(
    job: Job,
    device: Device,
    spec: KernelSpec,
    inst: Instance,
    run: Mapping[int, np.ndarray],
    arrays: list[int],
    opts: ValidateOptions,
    label: str,
    logs: list[str],
) -> Undefined | None:
    """Against an original whose result depends on the shuffle lanes CUDA leaves undefined, on a device whose
    backend poisons them by its build and does not count its reads (OpenCL): the launch run again so built.
    Outputs that do not change (:func:`~porter.harness.checks.undefined_difference`) read none that matter (None:
    the port is held to the original reading them as 0, as on AMD's 64-lane wavefronts); else what they became,
    judged against the original's own poisoned run."""
    if not get_backend(device.backend).poison_lanes_flags:
        return None
    found = _poisoned_lanes(job, UNCOUNTED, spec, arrays, opts, label, logs)
    if found is None or found.failed:
        return found
    return found if undefined_difference(spec, inst, run, found, arrays) else None


# The bytes a kernel that reads out of bounds finds there in its two runs again (Job.readable_guards): all ones
# (NaN as a float, -1 as an integer: what a NaN-propagating or sign-sensitive use shows) and a large finite
# positive value (0x5A5A5A5A: 1.5e16 as a float).
READABLE_BYTES = (0xFF, 0x5A)
# a validated verdict's check: the kernel reads out of bounds, and its outputs ignore what it reads there
OUT_OF_BOUNDS_READS = "out-of-bounds-reads"
READS_PAST = (
    "reads out of bounds ("  # how its log line and its reason name the read: "...(arg4[-64] before ...)"
)


def read_past(text: str) -> str:
    """The read a line of :func:`_read_past`'s (or a reason quoting it) names, "arg4[-64] before its first
    element"; "" where it names none."""
    _, sep, rest = text.partition(READS_PAST)
    return rest.split(")", 1)[0] if sep else ""


def _read_past(job: Job, res: JobResult, who: str, label: str, timeout_s: float) -> tuple[JobResult, str]:
    """A job the guard zone stopped at a read (on a host-memory device: the CPU emulator, an OpenCL CPU device),
    run twice again with the zones readable and holding each of READABLE_BYTES.  When both runs end and give
    the same outputs, what the kernel reads out of bounds does not reach its result (srad reads J[-cols] into
    a shared array and overwrites it): the first of them, and a sentence for the log.  Otherwise the stop,
    raised as the guard failure it is, saying why the outputs cannot be used.  Any other result as it was."""
    hit = res.guard
    read = res.stage == "guard" and hit is not None and hit.access == "read"
    # a segmentation fault on a host-memory device that porter could not place (Intel's OpenCL runtime takes
    # the signal first): if it comes back, readable zones show whether it was a read of them
    unplaced = (
        res.stage == "crash"
        and res.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV)
        and job.device is not None
        and job.device.kind in HOST_MEMORY_KINDS
    )
    if res.ok or not (read or unplaced):
        return res, ""
    if unplaced:  # a crash that does not come back is no read of the zones (a race, say): as it was
        same = run_job(job, timeout_s)
        if same.stage != "crash" or same.returncode != res.returncode:
            return res, ""
    again = [run_job(replace(job, readable_guards=byte), timeout_s) for byte in READABLE_BYTES]
    if unplaced:
        if not all(r.ok for r in again):
            return res, ""  # not (only) a read of the zones: the crash as it was
        hit = None
    stop = job_failure(who, res, label)

    def amended(extra: str) -> Reject:  # the stop, its closing parenthesis saying why it stands
        said = f"{stop.reason[:-1]}; {extra})" if stop.reason.endswith(")") else f"{stop.reason} ({extra})"
        return Reject(stop.check, said, res.log)

    if not all(r.ok and len(r.outputs) == len(again[0].outputs) for r in again):
        failed = next((r for r in again if not r.ok), again[0])
        raise amended(f"with the bytes there readable it still fails: {failed.error}")
    for run_a, run_b in zip(again[0].outputs, again[1].outputs, strict=True):
        for k, (a, b) in enumerate(zip(run_a, run_b, strict=True)):
            if a.tobytes() != b.tobytes():
                raise amended(
                    f"its outputs depend on what it reads there: array output {k + 1} differs between the bytes "
                    f"0x{READABLE_BYTES[0]:02X} and 0x{READABLE_BYTES[1]:02X}"
                )
    if hit is None:
        where = "into a guard zone, where the device's runtime took the fault before porter could place it"
    else:
        where = f"{hit.argument}[{hit.element}] {guard_side(hit)}"
    note = (
        f"{label}: {READS_PAST}{where}); its outputs are the same with the bytes there "
        f"0x{READABLE_BYTES[0]:02X} and 0x{READABLE_BYTES[1]:02X}: they do not depend on it"
    )
    return again[0], note


def _validate_on(
    variant: Variant,
    spec: KernelSpec,
    ref: Reference,
    device: Device,
    opts: ValidateOptions,
    unordered: tuple[Unordered | Raced, ...] = (),
    floor: Mapping[int, float] | None = None,
) -> Verdict:
    logs: list[str] = []
    checks: list[str] = []
    stats: dict[str, float] = {}
    toolchain = ""
    compiled = executed = False
    tested: list[dict[str, int]] = []
    trials_done = 0
    checker = device.checks
    sizes = all_sizes(spec, opts)
    given = {inst.label: inst for inst in opts.given}  # captured inputs: each run once, never redrawn
    trials = 1 if given else opts.checker_trials if checker else opts.trials
    if checker:  # the simulator is slow: its smallest size only, plus a hidden one

        def volume(s: dict[str, int]) -> int:
            return int(np.prod(list(s.values()) or [1]))

        visible = [s for s in sizes if not s[1].startswith("hidden")]
        sizes = [min(visible, key=lambda s: volume(s[0]))] if visible else sizes[:1]
        too_big = _over_checker_limit(spec, [s for s, _ in sizes], opts.checker_max_work_items)
        if too_big:
            built = compile_only(variant, spec, opts, backend=device.backend)
            if built is not None:
                return replace(
                    built,
                    device=device.label,
                    reason=f"{built.reason if built.status is not Status.COMPILED else 'compiled'}; not "
                    f"simulated here: {too_big}",
                )
    base: dict[str, Any] = dict(
        kernel=spec.kernel, target=variant.target, device=device.label, backend=device.backend
    )
    last_inst: Instance | None = None
    without: list[str] = []  # checker options left out: plugins that stopped the simulator on this kernel
    try:
        # captured launches on a device that is no checker: run in one child, then judged one by one below
        together = {} if checker or not given else _together(variant, spec, device, opts, sizes, given)
        if len(sizes) < 2 and not checker and not given:
            logs.append("warning: fewer than two problem sizes in the spec")
        for s_i, (size, label) in enumerate(sizes):
            for trial in range(trials):
                seed = seed_for(opts.seed, s_i, trial)
                for redraw in range(opts.redraws + 1):
                    inst = (
                        given[label]
                        if given
                        else Instance.draw(spec, size, label, seed, 0 if checker else GUARD_ELEMENTS)
                    )
                    last_inst = inst
                    if label in together:  # its part of the job that ran the captured launches together
                        job, arrays, res = together.pop(label)
                        findings = []
                    else:
                        while True:  # under a checker: again without a plugin that stopped the simulator
                            wrapper: tuple[str, ...] = ()
                            if checker:
                                wrapper = get_backend(device.backend).checker_wrapper(
                                    device, "{scratch}/" + CHECKER_LOG, tuple(without)
                                )
                            job, arrays = make_job(
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
                            findings = checker_findings(device, res) if checker else []
                            stop = next((f for f in findings if f.kind == "simulator-error"), None)
                            option = get_backend(device.backend).checker_relief(device, stop) if stop else ""
                            if stop is None or not option or option in without:
                                break
                            without.append(option)
                            logs.append(
                                f"{label}: the checker stopped ({stop.message}): run again without {option}"
                            )
                    toolchain = toolchain or res.toolchain
                    compiled = compiled or res.stage not in ("compile", "unavailable")
                    # a write onto a guard page: it ran, and ran wrong (like a poisoned guard touched)
                    executed = executed or res.stage == "guard"
                    if not checker:  # a read there: does its result depend on what it read?
                        res, note = _read_past(job, res, "the variant", label, opts.timeout_s)
                        if note:
                            logs.append(note)
                            if OUT_OF_BOUNDS_READS not in checks:
                                checks.append(OUT_OF_BOUNDS_READS)
                    if not res.ok:
                        raise job_failure("the variant", res, label)
                    executed = True
                    if findings:
                        f = findings[0]
                        more = f" (+{len(findings) - 1} more findings)" if len(findings) > 1 else ""
                        who = next(iter(get_backend(device.backend).checkers(device)), "checker")
                        raise Reject(who, f"{f.kind}: {f.message}{races.where(f)}{more} at {label}")
                    runs = [by_spec(spec, arrays, out) for out in res.outputs]
                    expected, ref_name = reference_outputs(ref, spec, inst, device, opts, logs)
                    if not given and not discriminating(spec, inst, expected):
                        logs.append(
                            f"{label} trial {trial + 1}: reference output near-constant; drew other inputs"
                        )
                        seed = seed_for(opts.seed, s_i, trial, "redraw", redraw)
                        if redraw == opts.redraws:
                            raise Reject(
                                "near-constant",
                                f"inconclusive: the reference output is near-constant at {label} for every input drawn "
                                f"({opts.redraws + 1} draws); give the spec other input ranges (low/high)",
                            )
                        continue
                    lanes = ref.poisoned_lanes.get(inst.label) if ref.poisoned_lanes else None
                    undefined = (
                        _poisoned_lanes(job, res.undefined, spec, arrays, opts, label, logs)
                        if res.undefined and not checker
                        else _uncounted_lanes(job, device, spec, inst, runs[0], arrays, opts, label, logs)
                        if lanes is not None and not checker
                        else None
                    )
                    try:
                        check_instance(spec, inst, runs, expected, stats, unordered, floor, undefined, lanes)
                    except Reject as rej:
                        if rej.check != "undefined" or undefined is None or undefined.first != UNCOUNTED:
                            raise
                        # read otherwise than the original where CUDA leaves them undefined: is it the original
                        # reading them as 0 (NVIDIA's reading)?  A port that is not fails as any other
                        check_instance(spec, inst, runs, expected, stats, unordered, floor)
                        raise Reject("undefined", f"{rej.reason}; {READ_ELSEWHERE}") from None
                    if undefined is not None:
                        logs.append(
                            f"{label}: warp shuffles read lanes CUDA leaves undefined ({undefined.first}); the "
                            + (
                                "outputs are the original's with them reading a poison pattern too"
                                if lanes is not None
                                else "outputs are the same with them reading a poison pattern"
                            )
                        )
                        if "undefined-lanes" not in checks:
                            checks.append("undefined-lanes")
                    break
                trials_done += 1
            if not label.startswith("hidden"):
                tested.append(size)
        if checker:
            named = get_backend(device.backend).checkers(device) or ("checker",)
            checks.extend(f"{c} (without {' '.join(without)})" if without else c for c in named)
        if (
            opts.memcheck
            and last_inst is not None
            and "compute-sanitizer" in get_backend(device.backend).checkers(device)
        ):
            odd = next((s for s in all_sizes(spec, opts)[1:2]), None)
            if given or odd is None:
                inst = last_inst
            else:
                inst = Instance.draw(spec, odd[0], odd[1], seed_for(opts.seed, "memcheck"))
            report = getattr(res, "report", None)  # the compiler's, of the build every launch above ran
            static = report.shared_bytes if report is not None else None
            checks.extend(sanitizer_pass(variant, spec, device, inst, opts, logs, static))
    except Reject as rej:
        if rej.log:
            logs.append(tail(rej.log))
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
    passed += ["matches-reference"] + ([] if given else ["near-constant"])
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
