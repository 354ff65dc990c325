"""The evaluator of model-written code: one for `porter port --model` and `porter optimize`.

A screened candidate (:class:`porter.records.Screened`: device code only) becomes a variant
from a template (the kernel, dialect, entry and argument mapping it must keep), must build as device
code for a real GPU compiler before anything runs it (:func:`porter.harness.gate.device_build_check`),
is validated against the ORIGINAL on every device given (:func:`porter.harness.validate.validate`,
run in sandboxed children; the verdicts are computed here, in the parent), then timed on each device
that is not a checker beside the original on the same device, with the static cost's roofline floor
(a time under it is suspect, never a speedup).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from porter.backends import SOURCE_DIALECT, Device
from porter.harness.bench import BenchPlan, benchmark, plan_for
from porter.harness.cost import estimate
from porter.harness.gate import device_build_check
from porter.harness.inputs import ctype_size
from porter.harness.spec import timing_size
from porter.harness.validate import Reference, ValidateOptions, validate
from porter.model import FileScan, Kernel, KernelSpec, Variant
from porter.records import Evaluation, Screened, unvalidated
from porter.results import BenchResult, KernelCost
from porter.scan import cexpr


def static_shared(kernel: Kernel, env: dict[str, int]) -> int | None:
    """Bytes of the kernel's static shared arrays, None when a size cannot be evaluated."""
    total = 0
    for s in kernel.shared:
        if s.extern or s.size is None:
            continue
        elem = ctype_size(s.type)
        try:
            count = cexpr.eval_text(s.size, env)
        except (cexpr.ExprError, ValueError, ZeroDivisionError):
            return None
        if elem is None or not isinstance(count, int):
            return None
        total += elem * count
    return total


class Evaluator:
    """Validate then time a screened candidate against the original; see the module docstring.

    ``template``: the variant the candidate's code goes into.  ``scan``: the original's, for the
    static cost (None: no roofline).  ``plan`` / ``bench_size``: the timing plan and size on every
    device (default: per device kind).  ``must_time``: a candidate that cannot be timed fails (the
    optimizer's, whose point is speed); otherwise it stays validated, its timing noted as missing."""

    def __init__(
        self,
        *,
        spec: KernelSpec,
        reference: Reference,
        devices: Sequence[Device],
        options: ValidateOptions,
        template: Variant,
        scan: FileScan | None = None,
        bench: bool = True,
        plan: BenchPlan | None = None,
        bench_size: dict[str, int] | None = None,
        must_time: bool = False,
    ):
        self.spec, self.reference, self.devices = spec, reference, list(devices)
        self.options, self.template, self.scan = options, template, scan
        self.bench, self.plan, self.override, self.must_time = bench, plan, bench_size, must_time
        self._lock = threading.Lock()
        self._baselines: dict[str, BenchResult | None] = {}
        self._costs: dict[str, KernelCost | None] = {}

    def with_spec(self, spec: KernelSpec) -> Evaluator:
        """The same evaluator judging with `spec` (another tolerance); the original's timings and costs,
        which the tolerance does not change, are shared rather than measured again."""
        twin = copy.copy(self)
        twin.spec = spec
        return twin

    @property
    def original(self) -> Variant | None:
        return self.reference.original

    def variant(self, code: str) -> Variant:
        return replace(self.template, source=code)

    def size(self, device: Device) -> dict[str, int]:
        return timing_size(self.spec, device.size_class, self.override)

    def cost(self, device: Device) -> KernelCost | None:
        """The original's static cost at the timing size on `device` (None when it cannot be told)."""
        original = self.reference.original
        if self.scan is None or original is None:
            return None
        with self._lock:
            if device.label not in self._costs:
                try:
                    self._costs[device.label] = estimate(
                        original.source, self.spec, self.size(device), self.scan, kernel=self.spec.kernel
                    )
                except (cexpr.ExprError, ValueError, KeyError):
                    self._costs[device.label] = None
            return self._costs[device.label]

    def plan_for(self, device: Device) -> BenchPlan:
        return replace(self.plan or plan_for(device), compile=self.options.compile)

    def baseline(self, device: Device) -> BenchResult | None:
        """The original timed on the same physical device (once); None where it does not run."""
        with self._lock:
            if device.label in self._baselines:
                return self._baselines[device.label]
        original = self.reference.original
        ref_dev = next(
            (d for d in self.reference.devices if d.name == device.name and d.kind == device.kind), None
        )
        result = None
        if original is not None and ref_dev is not None:
            plan = replace(self.plan_for(device), revalidate=False)
            result = benchmark(original, self.spec, ref_dev, self.size(device), plan, cost=self.cost(device))
        with self._lock:
            return self._baselines.setdefault(device.label, result)

    def known_baselines(self) -> dict[str, BenchResult]:
        """The original's results timed so far, by device label."""
        with self._lock:
            return {k: v for k, v in self._baselines.items() if v is not None}

    def measure(
        self,
        variant: Variant,
        spec: KernelSpec | None = None,
        flags: Sequence[str] = (),
        on: Collection[str] | None = None,
    ) -> tuple[list[dict[str, Any]], int | None, tuple[Device, BenchResult] | None]:
        """Time `variant` -- launched as `spec` says (default: the evaluator's), built with the extra compile
        `flags` -- on every device that is not a checker (of those labelled in `on`, when given), beside the original's time there: a timing
        per device, the memory it uses per block where the device reports it (shared memory plus
        registers), and the first device where it could not be timed, with that result (None: timed
        everywhere).  After a device it cannot be timed on, the evaluator that must time stops."""
        timings: list[dict[str, Any]] = []
        memory: int | None = None
        untimed: tuple[Device, BenchResult] | None = None
        for device in self.devices if self.bench else ():
            if device.checks or (on is not None and device.label not in on):
                continue
            base = self.baseline(device)
            plan = self.plan_for(device)
            if flags:
                plan = replace(plan, compile=replace(plan.compile, flags=(*plan.compile.flags, *flags)))
            r = benchmark(
                variant,
                spec or self.spec,
                device,
                self.size(device),
                plan,
                reference=self.reference,
                cost=self.cost(device),
                baseline=base if base is not None and base.ok else None,
            )
            if not r.ok and untimed is None:
                untimed = (device, r)
                if self.must_time:
                    break
            if r.ok and r.occupancy is not None and r.occupancy.block_bytes is not None:
                memory = r.occupancy.block_bytes
            timings.append(
                {
                    "device": device.label,
                    "time_ms": r.timing.median_ms if r.ok and r.timing else None,
                    "iqr_ms": r.timing.iqr_ms if r.ok and r.timing else None,
                    "baseline_ms": r.baseline_ms if r.ok else None,
                    "speedup": r.speedup if r.ok else None,
                    "contended": r.contended,
                    "floor_ms": r.roofline.floor_ms if r.ok and r.roofline else None,
                    "pct_of_floor": r.assessment.pct_of_floor if r.ok and r.assessment else None,
                    "representative": r.representative,
                    "suspect": r.suspect,
                    "notes": [*r.notes, *([] if r.ok else [f"not timed: {r.reason}"])],
                }
            )
        return timings, memory, untimed

    def __call__(self, cand: Screened) -> Evaluation:
        variant = self.variant(cand.code)
        gate = device_build_check(variant, self.options.compile)  # before anything runs model code
        if not gate.ok:
            return Evaluation(ok=False, stage="compile", reason=gate.reason, log=gate.log)
        verdicts = tuple(validate(variant, self.spec, self.reference, self.devices, self.options))
        failed = unvalidated(verdicts)
        if failed is not None:
            return failed
        errs = [v.max_rel_err for v in verdicts if v.max_rel_err is not None]
        first = verdicts[0]
        memory = (
            static_shared(cand.kernel, dict(self.spec.sizes[0]) if self.spec.sizes else {})
            if variant.target == SOURCE_DIALECT  # the screened scan is the candidate's own
            else None
        )
        timings, occupied, untimed = self.measure(variant)
        memory = occupied if occupied is not None else memory
        if untimed is not None and self.must_time:
            device, r = untimed
            return Evaluation(
                ok=False,
                stage="bench",
                reason=f"{device.label}: {r.reason}",
                log="\n".join(r.logs),
                sizes=first.sizes,
                max_rel_err=max(errs, default=None),
                device=device.label,
                verdicts=verdicts,
            )
        t0: dict[str, Any] = timings[0] if timings else {}
        return Evaluation(
            ok=True,
            stage="done",
            reason=f"{first.device}: {first.reason}",
            sizes=first.sizes,
            checks=first.checks,
            max_rel_err=max(errs, default=None),
            time_ms=t0.get("time_ms"),
            baseline_ms=t0.get("baseline_ms"),
            speedup=t0.get("speedup"),
            floor_ms=t0.get("floor_ms"),
            memory_bytes=memory,
            device=str(t0.get("device", first.device)),
            verdicts=verdicts,
            timings=tuple(timings),
        )
