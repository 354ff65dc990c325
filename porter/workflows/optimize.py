"""`porter optimize FILE --model M`: ask a model for faster versions of a CUDA kernel and prove them.

The kernel's spec comes from the spec file or inference (as for ``porter check``).  The loop
(:mod:`porter.llm.loop`) runs ``--candidates`` conversations for up to ``--rounds`` rounds; this
module supplies its evaluator: every screened candidate is validated against the ORIGINAL kernel
(:func:`porter.harness.validate.validate`) on every device here that runs CUDA (an NVIDIA GPU, the
CPU emulator), then benchmarked there (:func:`porter.harness.bench.benchmark`) against the
original's time on the same device, beside the roofline floor of the performance model.  All of it
runs in the harness's isolated child processes.

Outputs (default ``<stem>.optimized/`` beside the input; the user's files are never written): the
best validated rewrite and the trade-off set (fastest, least memory, most precise) as ``.cu`` files,
every attempt's code under ``attempts/``, ``report.json`` and ``report.md``.  Exit status: 0 when a
validated candidate exists, 1 otherwise, 2 for bad usage (a missing API key included).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from porter.backends import Device, get_backend
from porter.errors import PorterError, UsageError
from porter.harness import cexpr, perfmodel
from porter.harness.bench import BenchPlan, BenchResult, benchmark
from porter.harness.cost import KernelCost, estimate
from porter.harness.inputs import ctype_size, element_count
from porter.harness.spec import spec_for
from porter.harness.validate import Reference, ValidateOptions, tolerance_for, validate
from porter.llm.base import Provider
from porter.llm.cache import ReplyCache
from porter.llm.loop import (
    Attempt,
    Budget,
    Evaluation,
    LoopOptions,
    LoopResult,
    Progress,
    Screened,
    attempt_doc,
    run_loop,
    unvalidated,
    usage_doc,
)
from porter.llm.prompting import PromptContext
from porter.llm.redact import redact
from porter.model import FileScan, Kernel, KernelSpec, Role, Status, Variant, to_jsonable
from porter.workflows.source import includes, load_cuda, qualifier_macros, sibling_dir, squeeze

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
ROLES = ("best", "fastest", "least_memory", "most_precise")
RUNNERS = ("cuda", "cpu")  # backends whose devices run a CUDA candidate


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Selected:
    role: str  # one of ROLES
    attempt: Attempt
    path: str  # the file written


@dataclass
class OptimizeReport:
    source: str
    kernel: str
    model: str
    out_dir: str
    devices: tuple[str, ...]
    loop: LoopResult
    selected: list[Selected] = field(default_factory=list)
    baselines: dict[str, float | None] = field(default_factory=dict)  # device label -> original's ms
    floors: dict[str, float | None] = field(default_factory=dict)  # device label -> roofline floor ms
    attempt_paths: dict[tuple[int, int], str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> Attempt | None:
        return self.loop.best

    @property
    def exit_code(self) -> int:
        """0: a validated candidate exists; 1: none."""
        return 0 if self.best is not None else 1

    def rows(self) -> list[dict[str, Any]]:
        """One row per (selected file, device); without a validated candidate, each candidate's last
        attempt as a failed row."""
        rows: list[dict[str, Any]] = []
        for sel in self.selected:
            ev = sel.attempt.evaluation
            timings = {str(t["device"]): t for t in (ev.timings if ev else ())}
            for v in ev.verdicts if ev else ():
                t = timings.get(v.device, {})
                rows.append(
                    {
                        "target": "cuda",
                        "path": sel.path,
                        "status": v.status.value,
                        "device": v.device,
                        "max_rel_err": v.max_rel_err,
                        "trials": v.trials,
                        "reason": v.reason,
                        "time_ms": t.get("time_ms"),
                        "speedup": t.get("speedup"),
                        "role": sel.role,
                        "candidate": sel.attempt.candidate,
                        "round": sel.attempt.round,
                    }
                )
        if self.selected:
            return rows
        last: dict[int, Attempt] = {}
        for a in self.loop.attempts:
            last[a.candidate] = a
        for a in last.values():
            ev = a.evaluation
            rows.append(
                {
                    "target": "cuda",
                    "path": self.attempt_paths.get((a.candidate, a.round), ""),
                    "status": Status.FAILED.value,
                    "device": ev.device if ev else "",
                    "max_rel_err": ev.max_rel_err if ev else None,
                    "trials": max((v.trials for v in ev.verdicts), default=0) if ev else 0,
                    "reason": redact(f"{a.status}: {a.reason}"),
                    "time_ms": None,
                    "speedup": None,
                    "role": "candidate",
                    "candidate": a.candidate,
                    "round": a.round,
                }
            )
        return rows

    def document(self) -> dict[str, Any]:
        """The JSON of ``porter optimize --json``: port's schema plus time_ms, speedup and usage."""
        provider, _, model = self.model.partition(":")
        return {
            "source": self.source,
            "kernels": [{"name": self.kernel, "variants": self.rows()}],
            "usage": usage_doc(self.loop.totals, provider, model),
        }

    def full_document(self) -> dict[str, Any]:
        """``report.json``: the document plus every attempt, the budget outcome and the baselines."""
        doc = self.document()
        doc.update(
            model=self.model,
            out=self.out_dir,
            devices=list(self.devices),
            rounds=self.loop.rounds,
            stop_reason=self.loop.stop_reason,
            baselines_ms=dict(self.baselines),
            floors_ms=dict(self.floors),
            outputs={s.role: s.path for s in self.selected},
            attempts=[
                attempt_doc(a) | {"path": self.attempt_paths.get((a.candidate, a.round), "")}
                for a in self.loop.attempts
            ],
            notes=[*self.loop.notes, *self.notes],
            exit_code=self.exit_code,
        )
        return doc


# --------------------------------------------------------------------------- setup


def default_out_dir(source: str | Path) -> Path:
    return sibling_dir(source, "optimized")


def _load(path: str) -> tuple[str, FileScan]:
    return load_cuda(path, "optimize")


def _pick(scan: FileScan, kernel: str | None, path: str) -> Kernel:
    names = [k.name for k in scan.kernels]
    if not names:
        raise UsageError("no __global__ kernel found", path=path)
    if kernel is None:
        if len(names) > 1:
            raise UsageError(f"several kernels ({', '.join(names)}); choose one with --kernel", path=path)
        kernel = names[0]
    found = next((k for k in scan.kernels if k.name == kernel), None)
    if found is None:
        raise UsageError(f"no kernel named {kernel!r} (kernels: {', '.join(names)})", path=path)
    return found


def run_devices() -> list[Device]:
    """Devices here that run a CUDA candidate: NVIDIA GPUs, then the CPU emulator."""
    out: list[Device] = []
    for name in RUNNERS:
        try:
            out.extend(d for d in get_backend(name).devices() if d.kind != "checker")
        except Exception:  # noqa: BLE001 - a backend that cannot list devices has none here
            continue
    return out


def _fmt_rate(value: float | None, unit: str) -> str:
    if not value:
        return "unknown"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _fmt_bytes(value: int | float | None) -> str:
    if value is None:
        return "unknown"
    for scale, prefix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= scale:
            return f"{value / scale:.4g} {prefix}"
    return f"{int(value)} B"


def hardware_fields(device: Device, cost: KernelCost | None, size: dict[str, int]) -> dict[str, str]:
    """The hardware.md fields for `device` from the performance model's table."""
    entry = perfmodel.entry_for(device)
    fields = {
        "device_name": device.name,
        "device_kind": device.kind,
        "arch": device.arch,
        "warp_size": str(device.facts.warp_size),
        "bench_size": ", ".join(f"{k}={v}" for k, v in size.items()) or "unknown",
    }
    notes: list[str] = []
    if device.kind != "gpu":
        notes.append(
            f"Note: this is a {device.kind} device; its times say little about GPU speed, so favour "
            "changes that help real GPUs (coalescing, fewer memory passes, occupancy)."
        )
    if entry is not None:
        fields.update(
            bandwidth=_fmt_rate(entry.memory_bandwidth, "B/s"),
            fp32_flops=_fmt_rate(entry.flops_vector.get("fp32"), "FLOP/s"),
            fp64_flops=_fmt_rate(entry.flops_vector.get("fp64"), "FLOP/s"),
            multiprocessors=str(entry.multiprocessors or device.facts.multiprocessors or "unknown"),
            warp_size=str(entry.warp_size),
            shared_per_sm=_fmt_bytes(entry.shared_per_sm),
            registers_per_sm=str(entry.registers_per_sm or "unknown"),
            max_threads_per_sm=str(entry.max_threads_per_sm or "unknown"),
            cache_bytes=_fmt_bytes(entry.cache_bytes or None),
        )
    if cost is not None:
        fields.update(bytes=str(cost.bytes), flops=str(cost.total_flops))
        if entry is not None:
            roof = perfmodel.roofline(
                cost, entry, device.facts.multiprocessors if device.kind == "cpu" else None
            )
            if roof.floor_ms is not None:
                fields.update(floor=f"{roof.floor_ms:.4g} ms", bound=roof.bound)
            elif roof.note:
                notes.append(f"No roofline floor here: {roof.note}.")
    fields.setdefault("floor", "unknown")
    fields.setdefault("bound", "unknown")
    fields["hardware_notes"] = "\n".join(notes)
    return fields


def _bench_size(spec: KernelSpec, device: Device, override: dict[str, int] | None) -> dict[str, int]:
    if override:
        return dict(override)
    from porter.workflows.bench import CPU_ELEMENTS, GPU_ELEMENTS, scale_size

    base = dict(spec.sizes[0]) if spec.sizes else {}
    if device.kind == "gpu":
        return dict(spec.bench_sizes[0]) if spec.bench_sizes else scale_size(spec, base, GPU_ELEMENTS)
    counts = [element_count(a, base) for a in spec.args if a.role is not Role.SCALAR]
    return scale_size(spec, base, CPU_ELEMENTS) if max(counts, default=0) > CPU_ELEMENTS else base


def _static_shared(kernel: Kernel, env: dict[str, int]) -> int | None:
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


# --------------------------------------------------------------------------- the evaluator


class HarnessEvaluator:
    """Validate then benchmark a screened candidate against the original, on every device here."""

    def __init__(
        self,
        *,
        spec: KernelSpec,
        scan: FileScan,
        original: Variant,
        devices: Sequence[Device],
        options: ValidateOptions,
        plan: BenchPlan | None,
        bench_size: dict[str, int] | None,
        provenance: str,
        bench: bool = True,
    ):
        self.spec, self.scan, self.original = spec, scan, original
        self.bench = bench
        self.devices = list(devices)
        self.options, self.plan, self.override = options, plan, bench_size
        self.provenance = provenance
        self.reference = Reference(original=original, devices=tuple(self.devices), options=options.compile)
        self._lock = threading.Lock()
        self._baselines: dict[str, BenchResult] = {}
        self._costs: dict[str, KernelCost | None] = {}

    def size(self, device: Device) -> dict[str, int]:
        return _bench_size(self.spec, device, self.override)

    def cost(self, device: Device) -> KernelCost | None:
        with self._lock:
            if device.label not in self._costs:
                try:
                    self._costs[device.label] = estimate(
                        self.original.source, self.spec, self.size(device), self.scan, kernel=self.spec.kernel
                    )
                except (cexpr.ExprError, ValueError, KeyError):
                    self._costs[device.label] = None
            return self._costs[device.label]

    def plan_for(self, device: Device) -> BenchPlan:
        from porter.workflows.bench import CPU_PLAN, GPU_PLAN

        plan = self.plan or (GPU_PLAN if device.kind == "gpu" else CPU_PLAN)
        return replace(plan, compile=self.options.compile)

    def baseline(self, device: Device) -> BenchResult:
        with self._lock:
            known = self._baselines.get(device.label)
        if known is not None:
            return known
        plan = replace(self.plan_for(device), revalidate=False)
        result = benchmark(self.original, self.spec, device, self.size(device), plan, cost=self.cost(device))
        with self._lock:
            return self._baselines.setdefault(device.label, result)

    def __call__(self, cand: Screened) -> Evaluation:
        name = self.spec.kernel
        variant = Variant(
            kernel=name, target="cuda", source=cand.code, entry=name, provenance=self.provenance
        )
        verdicts = tuple(validate(variant, self.spec, self.reference, self.devices, self.options))
        failed = unvalidated(verdicts)
        if failed is not None:
            return failed
        errs = [v.max_rel_err for v in verdicts if v.max_rel_err is not None]
        first = verdicts[0]
        memory = _static_shared(cand.kernel, dict(self.spec.sizes[0]) if self.spec.sizes else {})
        timings: list[dict[str, object]] = []
        if self.bench:
            for device in self.devices:
                base = self.baseline(device)
                r = benchmark(
                    variant,
                    self.spec,
                    device,
                    self.size(device),
                    self.plan_for(device),
                    reference=self.reference,
                    cost=self.cost(device),
                    baseline=base if base.ok else None,
                )
                if not r.ok:
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
                if r.occupancy is not None and r.occupancy.registers is not None:
                    regs = r.occupancy.registers * 4 * r.occupancy.block_threads
                    memory = r.occupancy.shared_bytes + regs
                timings.append(
                    {
                        "device": device.label,
                        "time_ms": r.timing.median_ms if r.timing else None,
                        "iqr_ms": r.timing.iqr_ms if r.timing else None,
                        "baseline_ms": r.baseline_ms,
                        "speedup": r.speedup,
                        "floor_ms": r.roofline.floor_ms if r.roofline else None,
                        "pct_of_floor": r.assessment.pct_of_floor if r.assessment else None,
                        "representative": r.representative,
                        "suspect": r.suspect,
                        "notes": list(r.notes),
                    }
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


# --------------------------------------------------------------------------- the workflow


def _write(path: Path, text: str, source: Path) -> None:
    if path.resolve() == source.resolve():
        raise UsageError("refusing to overwrite the input file; choose another --out", path=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(redact(text), encoding="utf-8")  # model output too: a key it echoes is never written
    tmp.replace(path)


def _header(attempt: Attempt, model: str, role: str, kernel: str) -> str:
    ev = attempt.evaluation
    lines = [
        f"// {kernel}: {role.replace('_', ' ')} validated rewrite by {model} (candidate {attempt.candidate}, "
        f"round {attempt.round}), written by porter optimize.",
    ]
    if ev is not None:
        for t in ev.timings:
            sp = t.get("speedup")
            lines.append(
                f"// {t['device']}: {t['time_ms']} ms median"
                + (f", {float(sp):.2f}x the original" if isinstance(sp, (int, float)) else "")
            )
        if ev.max_rel_err is not None:
            lines.append(f"// max relative error against the original: {ev.max_rel_err:.3g}")
    return "\n".join(lines) + "\n"


def open_model(
    model: str,
    *,
    base_url: str | None = None,
    replay: str | None = None,
    record: str | None = None,
    timeout: float = 120,
    max_retries: int = 3,
    cache: ReplyCache | None = None,
) -> Provider:
    """The provider for ``--model`` (``--replay`` needs no key and makes no request)."""
    from porter.llm.cache import open_provider

    return open_provider(
        model,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        record=record,
        replay=replay,
        cache=cache,
    )


def optimize_file(
    path: str,
    *,
    model: str,
    kernel: str | None = None,
    candidates: int = 2,
    rounds: int = 3,
    out_dir: str | None = None,
    base_url: str | None = None,
    replay: str | None = None,
    record: str | None = None,
    max_tokens_total: int | None = None,
    max_dollars: float | None = None,
    max_seconds: float | None = None,
    include_dirs: Sequence[str] = (),
    provider: Provider | None = None,
    reply_cache: ReplyCache | None = None,
    devices: Sequence[Device] | None = None,
    options: ValidateOptions | None = None,
    plan: BenchPlan | None = None,
    bench_size: dict[str, int] | None = None,
    stream: bool = False,
    timeout: float = 120,
    max_retries: int = 3,
    max_reply_tokens: int = 8000,
    progress: Progress | None = None,
    wrap_evaluator: Callable[[Callable[[Screened], Evaluation]], Callable[[Screened], Evaluation]]
    | None = None,
) -> OptimizeReport:
    """Run the loop on one kernel of `path`; see the module docstring."""
    if candidates < 1:
        raise UsageError("--candidates must be at least 1")
    if rounds < 1:
        raise UsageError("--rounds must be at least 1")
    for d in include_dirs:
        if not Path(d).is_dir():
            raise UsageError("include directory not found (-I)", path=str(d))
    text, scan = _load(path)
    k = _pick(scan, kernel, path)
    out = Path(out_dir) if out_dir is not None else default_out_dir(path)
    if out.exists() and not out.is_dir():
        raise UsageError("--out exists and is not a folder", path=str(out))
    if provider is None:
        provider = open_model(
            model,
            base_url=base_url,
            replay=replay,
            record=record,
            timeout=timeout,
            max_retries=max_retries,
            cache=reply_cache,
        )
    src_dir = str(Path(path).resolve().parent)
    dirs = (src_dir, *(str(Path(d).resolve()) for d in include_dirs))
    spec = spec_for(path, scan, k.name, dirs)
    run_on = list(devices) if devices is not None else run_devices()
    if not run_on:
        raise PorterError(
            "no device here can run CUDA kernels (no NVIDIA GPU, and the CPU emulator needs g++)"
        )
    opts = options or ValidateOptions()
    if not opts.compile.include_dirs:
        opts = replace(opts, compile=replace(opts.compile, include_dirs=dirs))
    from porter.scan.extract import device_code

    device_text = device_code(text, macros=qualifier_macros(path, dirs))
    original = Variant(
        kernel=k.name, target="cuda", source=device_text, entry=k.qualified, provenance="original", path=path
    )
    evaluator = HarnessEvaluator(
        spec=spec,
        scan=scan,
        original=original,
        devices=run_on,
        options=opts,
        plan=plan,
        bench_size=bench_size,
        provenance=f"llm:{model}",
    )
    shown = next((d for d in run_on if d.kind == "gpu"), run_on[0])
    out_arg = next((a for a in spec.args if a.role is not Role.SCALAR and a.role is not Role.IN), None)
    rtol = tolerance_for(out_arg.dtype if out_arg else "float32", spec).rtol
    ctx = PromptContext(
        kernel=k,
        path=Path(path).name,
        source=squeeze(device_text),
        dialect="cuda",
        task="optimize",
        hardware=hardware_fields(shown, evaluator.cost(shown), evaluator.size(shown)),
        spec=spec,
        hazards=scan.hazards,
        trials=opts.trials,
        rtol=f"{rtol:g}",
        original_includes=includes(text),
    )
    loop_options = LoopOptions(
        candidates=candidates,
        budget=Budget(
            rounds=rounds, max_tokens=max_tokens_total, max_dollars=max_dollars, max_seconds=max_seconds
        ),
        max_reply_tokens=max_reply_tokens,
        stream=stream,
    )
    evaluate: Callable[[Screened], Evaluation] = evaluator
    if wrap_evaluator is not None:
        evaluate = wrap_evaluator(evaluator)
    result = run_loop(provider, ctx, evaluate, loop_options, progress=progress)

    report = OptimizeReport(
        source=path,
        kernel=k.name,
        model=model,
        out_dir=str(out),
        devices=tuple(d.label for d in run_on),
        loop=result,
    )
    src = Path(path)
    for a in result.attempts:
        if a.code is not None:
            p = out / "attempts" / f"candidate{a.candidate}_round{a.round}.cu"
            _write(p, a.code, src)
            report.attempt_paths[(a.candidate, a.round)] = str(p)
    trade = result.tradeoffs()
    if trade:
        chosen = {"best": trade["fastest"], **trade}
        for role in ROLES:
            att = chosen.get(role)
            if att is None or att.code is None:
                continue
            p = out / f"{src.stem}.{role}.cu"
            _write(p, _header(att, model, role, k.name) + att.code, src)
            report.selected.append(Selected(role, att, str(p)))
    for d in run_on:
        with evaluator._lock:
            base = evaluator._baselines.get(d.label)
        if base is not None:
            report.baselines[d.label] = base.timing.median_ms if base.ok and base.timing else None
            report.floors[d.label] = base.roofline.floor_ms if base.roofline else None
    if not any(d.kind == "gpu" for d in run_on):
        report.notes.append("no GPU here: times come from the CPU emulator and say little about GPU speed")
    _write(out / REPORT_JSON, redact(json.dumps(to_jsonable(report.full_document()), indent=2)) + "\n", src)
    from porter.report.optimize_view import markdown

    _write(out / REPORT_MD, redact(markdown(report)), src)
    return report
