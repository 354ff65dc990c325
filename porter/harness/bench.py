"""Benchmarking one variant on one device: device-event timing, re-validation, % of peak, speedup.

:func:`benchmark` times through the isolated child (:func:`porter.backends.isolate.run_job` with a
:class:`~porter.backends.isolate.TimingPlan`): warm-up launches, an L2 flush before every timed
launch, input sets rotated between launches (separate buffers), device events (CUDA events,
OpenCL profiling events; host time around launch + synchronize where the backend has none).
Rounds of timed launches are added until the interquartile range over the median settles (or
the run or time budget is spent), all in the one child (:func:`porter.backends.isolate.timed_rounds`);
the result is the median and the IQR over all runs.

After timing, the outputs the timed launches left are checked again (the checks of
:mod:`porter.harness.validate`: guard, inputs unchanged, all written, identical across the
rotated sets, against the reference), so a kernel that is only right when untimed is caught.
The measurement is put beside the performance model (:mod:`porter.harness.perfmodel`): % of
peak bandwidth / compute, and ``suspect`` below the physical floor, in which case no speedup is
reported.  Times on the CPU emulator or a CPU OpenCL device are reported but marked as not
representative of GPU speed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from porter.backends import CompileOptions, Device
from porter.backends.isolate import JobResult, TimingPlan, run_job
from porter.harness import contention, perfmodel
from porter.harness.checks import check_instance
from porter.harness.reference import Reference, reference_outputs
from porter.harness.spec import geometry
from porter.harness.trial import Instance, Reject, ValidateOptions, by_spec, job_failure, make_job, tail
from porter.model import KernelSpec, Role, Timing, Variant
from porter.results import BenchResult, KernelCost, Occupancy

# Re-validate every rotated set while their total size stays under this; only the last one above.
READ_BACK_BYTES = 1 << 30


@dataclass(frozen=True)
class BenchPlan:
    warmup: int = 3
    min_runs: int = 10  # timed launches in the first round
    max_runs: int = 200  # stop adding rounds past this many timed launches
    target_rel_iqr: float = 0.05  # stop when IQR / median is at most this ...
    settle: float = 0.01  # ... or changed by less than this between rounds
    max_seconds: float = 10.0  # budget of timed device time over all rounds
    flush_l2: bool = True
    rotate: int = 3  # input sets (separate buffers) rotated between timed launches
    revalidate: bool = True
    timeout_s: float = 600.0  # per child job
    seed: int = 20240917
    compile: CompileOptions = CompileOptions()


GPU_PLAN = BenchPlan()
CPU_PLAN = BenchPlan(warmup=1, min_runs=5, max_runs=20, max_seconds=2.0, rotate=2)


def plan_for(device: Device) -> BenchPlan:
    """The default timing plan on `device`: full on a GPU, short on CPU devices (their times say
    nothing about GPU speed; they show that the variant runs)."""
    return GPU_PLAN if device.times else CPU_PLAN


def summarize(times_ms: Sequence[float]) -> tuple[float, float]:
    """(median, interquartile range) of the times, linear interpolation between order statistics."""
    if not times_ms:
        raise ValueError("no times to summarize")
    arr = np.asarray(times_ms, dtype=np.float64)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    return float(med), float(q3 - q1)


def representative(device: Device) -> bool:
    """Whether times on the device say anything about GPU speed."""
    return device.times


def _label(size: Mapping[str, int]) -> str:
    return "bench size " + ", ".join(f"{k}={v}" for k, v in size.items())


def _occupancy(device: Device, spec: KernelSpec, size: Mapping[str, int], res: JobResult) -> Occupancy | None:
    entry = perfmodel.entry_for(device)
    if entry is None or entry.registers_per_sm is None or not device.times:
        return None
    _, block, dynamic = geometry(spec, size)
    threads = int(np.prod(block))
    report = res.report
    regs = report.registers if report is not None else None
    shared = ((report.shared_bytes or 0) if report is not None else 0) + dynamic
    occ = perfmodel.occupancy(entry, threads, regs or 0, shared)
    limiter = occ.limiter if regs is not None else f"{occ.limiter} (register count unknown)"
    return Occupancy(occ.active_blocks, occ.fraction, limiter, regs, shared, threads)


def _revalidate(
    variant: Variant,
    spec: KernelSpec,
    device: Device,
    inst: Instance,
    arrays: list[int],
    res: JobResult,
    reference: Reference | None,
    plan: BenchPlan,
) -> tuple[bool, str]:
    """Check the arrays the timed launches left behind; (passed, what was checked or why not)."""
    if not res.timed_outputs:
        return False, "the backend returned no outputs of the timed launches"
    runs = [by_spec(spec, arrays, outs) for outs in res.timed_outputs]
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    logs: list[str] = []
    if reference is not None and (reference.original is not None or reference.python is not None):
        opts = ValidateOptions(timeout_s=plan.timeout_s, seed=plan.seed)
        expected, _ = reference_outputs(reference, spec, inst, device, opts, logs)
        against = "the reference"
    else:
        first = by_spec(spec, arrays, res.outputs[0]) if res.outputs else {}
        expected = [first[i][: inst.length(i)] for i in array_idx]
        against = "its own untimed run"
    check_instance(spec, inst, runs, expected, {})
    sets = len(runs)
    return True, f"outputs of the timed launches ({sets} input set{'s' if sets > 1 else ''}) match {against}"


def benchmark(
    variant: Variant,
    spec: KernelSpec,
    device: Device,
    size: Mapping[str, int],
    plan: BenchPlan = BenchPlan(),
    *,
    reference: Reference | None = None,
    cost: KernelCost | None = None,
    baseline: BenchResult | None = None,
    instance: Instance | None = None,
) -> BenchResult:
    """Time `variant` on `device` at `size`; failures come back as a result with ok=False.

    ``instance``: the inputs to time with (a captured launch's, :mod:`porter.harness.replay`) instead
    of seeded ones drawn at `size`.

    ``reference``: what the timed outputs are re-validated against (default: the variant's own
    untimed run).  ``cost``: the static estimate for the roofline (see
    :func:`porter.harness.cost.estimate`).  ``baseline``: the reference's result on the same
    device, for the speedup; when absent and ``reference.original`` is another kernel that can run
    on this device, it is benchmarked here first.
    """
    size = dict(size)
    base: dict[str, Any] = dict(
        kernel=spec.kernel,
        target=variant.target,
        provenance=variant.provenance,
        backend=device.backend,
        device=device.label,
        device_name=device.name,
        device_kind=device.kind,
        size=size,
        representative=representative(device),
    )
    notes: list[str] = []
    if not representative(device):
        notes.append(f"{device.kind} device: times are reported but say nothing about GPU speed")
    if baseline is None and reference is not None and reference.original is not None:
        original = reference.original
        if original.source != variant.source or original.entry != variant.entry:
            ref_dev = next(
                (d for d in reference.devices if d.name == device.name and d.kind == device.kind), None
            )
            if ref_dev is not None:
                baseline = benchmark(
                    original, spec, ref_dev, size, replace(plan, revalidate=False), cost=cost,
                    instance=instance,
                )  # fmt: skip
    try:
        inst = instance if instance is not None else Instance.draw(spec, size, _label(size), plan.seed)
        job, arrays = make_job(variant, spec, device, inst, 1, plan.compile, plan.seed)
    except (ValueError, Reject) as err:
        return BenchResult(**base, ok=False, reason=f"cannot set up the benchmark: {err}")
    inout = [spec.args[i].name for i in arrays if spec.args[i].role is Role.INOUT]
    nbytes = sum(int(a.nbytes) for a in job.args if isinstance(a, np.ndarray))
    read_back = 0
    if plan.revalidate and not inout:
        read_back = max(1, plan.rotate) if nbytes * max(1, plan.rotate) <= READ_BACK_BYTES else 1

    logs: list[str] = []
    revalidated: bool | None = None
    revalidation = (
        f"not re-validated: {', '.join(inout)} change with every timed launch (inout)"
        if inout and plan.revalidate
        else ("not re-validated (disabled)" if not plan.revalidate else "")
    )
    timing = TimingPlan(
        warmup=plan.warmup,
        repeats=max(1, plan.min_runs),
        flush_l2=plan.flush_l2,
        rotate=max(1, plan.rotate),
        max_seconds=plan.max_seconds,
        read_back=read_back,
        max_runs=plan.max_runs,
        target_rel_iqr=plan.target_rel_iqr,
        settle=plan.settle,
    )  # every round in one child: one process, compile and driver start per timing
    with contention.timing(device) as watch:
        res = run_job(replace(job, timing=timing, device_lock_fd=watch.lock_fd), plan.timeout_s)
    contended = watch.reason  # why the device was not porter's alone while timed ("" when it was)
    rounds, toolchain = res.rounds, res.toolchain
    if not res.ok:
        fail = job_failure("the variant", res, inst.label)
        logs.append(tail(fail.log or res.log))
        return BenchResult(
            **base, ok=False, reason=fail.reason, toolchain=toolchain, rounds=rounds, notes=tuple(notes),
            logs=tuple(logs),
        )  # fmt: skip
    occ = _occupancy(device, spec, size, res)
    bad = [t for t in res.times_ms if not (math.isfinite(t) and t >= 0)]
    if bad or not res.times_ms:
        return BenchResult(
            **base, ok=False, reason=f"the device timer returned {bad or 'no times'}", toolchain=toolchain,
            rounds=rounds, notes=tuple(notes),
        )  # fmt: skip
    times = list(res.times_ms)
    if read_back:
        try:
            revalidated, revalidation = _revalidate(variant, spec, device, inst, arrays, res, reference, plan)
        except Reject as rej:
            if rej.log:
                logs.append(tail(rej.log))
            return BenchResult(
                **base, ok=False, reason=f"re-validation after timing failed: {rej.check}: {rej.reason}",
                toolchain=toolchain, rounds=rounds, revalidated=False, revalidation=f"{rej.check}: {rej.reason}",
                times_ms=tuple(times), notes=tuple(notes), logs=tuple(logs),
            )  # fmt: skip
    med, iqr = summarize(times)
    if med > 0 and iqr / med > plan.target_rel_iqr:
        notes.append(f"noisy: IQR is {100 * iqr / med:.1f}% of the median after {len(times)} runs")

    roof = assessment = None
    entry = perfmodel.entry_for(device)
    cores = device.host_cores
    if cost is not None and entry is not None:
        roof = perfmodel.roofline(cost, entry, cores)
        assessment = perfmodel.assess(cost, entry, med, cores)
        if assessment.suspect:
            notes.append(assessment.reason)
    elif entry is None:
        notes.append(f"{device.name} is not in the device table: no % of peak")

    speedup = baseline_ms = None
    if baseline is not None and baseline.ok and baseline.timing is not None:
        baseline_ms = baseline.timing.median_ms
        if assessment is not None and assessment.suspect:
            notes.append("no speedup reported: the time is below the physical floor")
        elif baseline.suspect:
            notes.append("no speedup reported: the reference's time is below the physical floor")
        elif med > 0:
            speedup = baseline_ms / med
        if baseline.contended and not contended:
            contended = f"the original's time beside it is {baseline.contended}"
    if contended:
        notes.append(contended)
    return BenchResult(
        **base,
        ok=True,
        toolchain=toolchain,
        timing=Timing(median_ms=med, iqr_ms=iqr, runs=len(times), size=size),
        times_ms=tuple(times),
        rounds=rounds,
        revalidated=revalidated,
        revalidation=revalidation,
        roofline=roof,
        assessment=assessment,
        occupancy=occ,
        baseline_ms=baseline_ms,
        speedup=speedup,
        contended=contended,
        notes=tuple(notes),
        logs=tuple(logs),
    )
