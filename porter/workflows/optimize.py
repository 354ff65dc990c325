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
every attempt's code under ``attempts/``, ``report.json`` and ``report.md`` -- all rewritten
(atomically) after every attempt and when the run is interrupted, so a validated candidate is never
lost; a re-run resumes what the previous report validated for the same inputs (``fresh``: not).  Exit
status: 0 when a validated candidate exists, 1 otherwise, 2 for bad usage (a missing API key included).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from porter.backends import SOURCE_DIALECT, Device, get_backend, runners
from porter.errors import PorterError, UsageError
from porter.files import reads_once
from porter.harness import perfmodel
from porter.harness.bench import BenchPlan, benchmark
from porter.harness.cost import estimate
from porter.harness.gate import device_build_check
from porter.harness.inputs import ctype_size, element_count
from porter.harness.spec import spec_for
from porter.harness.validate import Reference, ValidateOptions, tolerance_for, validate
from porter.llm.base import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Provider
from porter.llm.cache import ReplyCache
from porter.llm.loop import Budget, Event, LoopOptions, Progress, run_loop
from porter.llm.prompting import PromptContext
from porter.llm.records import VALIDATED, Attempt, Evaluation, LoopResult, Screened, Totals, unvalidated
from porter.llm.redact import redact
from porter.model import FileScan, Kernel, KernelSpec, Role, Variant, to_jsonable
from porter.results import BenchResult, KernelCost, OptimizeReport, Selected, code_sha, file_digest
from porter.scan import cexpr
from porter.source import load
from porter.workflows.resume import (
    check_out_dir,
    code_fingerprint,
    evaluation_from_json,
    load_report,
    sha,
    toolchain_of,
    write_atomic,
)
from porter.workflows.source import includes, qualifier_macros, sibling_dir, squeeze

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
ROLES = ("best", "fastest", "least_memory", "most_precise")


# --------------------------------------------------------------------------- setup


def default_out_dir(source: str | Path) -> Path:
    return sibling_dir(source, "optimized")


def _load(path: str) -> tuple[str, FileScan]:
    unit = load(path, "optimize")
    return unit.text, unit.scan


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
    for name in runners(SOURCE_DIALECT):  # the backends whose devices run a CUDA candidate
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
        gate = device_build_check(variant, self.options.compile)  # before anything runs model code
        if not gate.ok:
            return Evaluation(ok=False, stage="compile", reason=gate.reason, log=gate.log)
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
    write_atomic(path, redact(text))  # model output too: a key it echoes is never written


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
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_RETRIES,
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


@reads_once
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
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_RETRIES,
    max_reply_tokens: int = 8000,
    progress: Progress | None = None,
    wrap_evaluator: Callable[[Callable[[Screened], Evaluation]], Callable[[Screened], Evaluation]]
    | None = None,
    fresh: bool = False,
    markdown: Callable[[OptimizeReport], str] | None = None,
) -> OptimizeReport:
    """Run the loop on one kernel of `path`; see the module docstring.

    Everything is written after every attempt (atomically), and once more when the run is interrupted
    (Ctrl-C, SIGTERM) or fails: what was validated is never lost.  A previous report in the output folder
    made for the same inputs (source, spec, model, options, devices and toolchains) is resumed: a
    candidate it validated is not run again (the reply cache brings the same candidates back), and one
    this run does not meet again is kept.  ``fresh`` ignores the previous report.  ``markdown`` renders
    ``report.md`` from the report (the CLI passes :func:`porter.report.optimize_view.markdown`); without
    it no ``report.md`` is written."""
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
    check_out_dir(out, Path(path), "optimize")  # before any request is paid for
    earlier = load_report(out, "optimize")
    previous = None if fresh else earlier
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
    identity = _identity(device_text, k.name, spec, model, opts, plan, bench_size, run_on)
    known, kept = _previous_validated(previous, identity, out)
    reusing = _Resumed(evaluator, known)
    evaluate: Callable[[Screened], Evaluation] = reusing
    if wrap_evaluator is not None:
        evaluate = wrap_evaluator(reusing)
    outputs = _Outputs(
        out=out,
        src=Path(path),
        model=model,
        kernel=k.name,
        run_on=run_on,
        evaluator=evaluator,
        identity=identity,
        kept=kept,
        resumer=reusing,
        previous=previous if known else None,
        earlier_outputs=(earlier or {}).get("outputs") or {},
        markdown=markdown,
    )
    outputs.save(LoopResult((), 0, "running", Totals()))
    seen: list[Attempt] = []
    state: dict[str, Any] = {"round": 0, "totals": Totals()}

    def on_event(event: Event) -> None:
        if progress is not None:
            progress(event)
        state["round"] = max(state["round"], event.round)
        if event.totals is not None:
            state["totals"] = event.totals
        if event.kind == "attempt" and event.attempt is not None:
            seen.append(event.attempt)  # written at once: a validated candidate survives any interruption
            outputs.save(LoopResult(tuple(seen), event.round, "running", state["totals"]))

    try:
        result = run_loop(provider, ctx, evaluate, loop_options, progress=on_event)
    except BaseException as exc:
        stopped = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"stopped by {type(exc).__name__}"
        why = f"{stopped} in round {state['round']}"
        with contextlib.suppress(Exception):  # the error itself is what the user must see
            outputs.save(LoopResult(tuple(seen), state["round"], why, state["totals"]))
            if progress is not None and isinstance(exc, KeyboardInterrupt):
                progress(
                    Event(
                        "stop",
                        state["round"],
                        totals=state["totals"],
                        text=f"interrupted; what was validated so far is in {out / REPORT_JSON}",
                    )
                )
        raise
    return outputs.save(result)


def _identity(
    device_text: str,
    kernel: str,
    spec: KernelSpec,
    model: str,
    options: ValidateOptions,
    plan: BenchPlan | None,
    bench_size: dict[str, int] | None,
    devices: Sequence[Device],
) -> str:
    """The key of everything a candidate's evaluation depends on besides its code ("" when a toolchain
    cannot be told: then nothing is reused)."""
    from porter.cache import headers_digest

    chains = [(d.label, toolchain_of(d.backend, d)) for d in devices]
    if any(chain is None for _, chain in chains):
        return ""
    return sha(
        "optimize",
        code_fingerprint(),
        device_text,
        headers_digest(device_text, options.compile.include_dirs),
        kernel,
        to_jsonable(spec),
        model,
        to_jsonable(options),
        to_jsonable(plan) if plan is not None else None,
        bench_size,
        chains,
    )


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False


def _previous_validated(
    doc: dict[str, Any] | None, identity: str, out: Path
) -> tuple[dict[str, Evaluation], list[Attempt]]:
    """From a previous report made for the same inputs: the evaluation of every candidate it validated
    (by code_sha) and those candidates, their code read back from their files (unchanged since)."""
    resume = doc.get("resume") if doc is not None else None
    if not identity or not isinstance(resume, dict) or resume.get("identity") != identity:
        return {}, []
    known: dict[str, Evaluation] = {}
    kept: list[Attempt] = []
    for entry in resume.get("validated") or ():
        try:
            evaluation = evaluation_from_json(entry["evaluation"])
            file = Path(entry["path"])
            if not evaluation.ok or not _inside(file, out) or file_digest(file) != entry["file_sha"]:
                continue
            code = file.read_text(encoding="utf-8")
            known[str(entry["code_sha"])] = known[code_sha(code)] = evaluation
            kept.append(
                Attempt(
                    candidate=int(entry["candidate"]),
                    round=int(entry["round"]),
                    status=VALIDATED,
                    reason=evaluation.reason,
                    code=code,
                    evaluation=evaluation,
                    source="resumed",
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError, OSError):
            continue
    return known, kept


_NO_GPU = "no GPU here: times come from the CPU emulator and say little about GPU speed"


class _Resumed:
    """The evaluator, except for candidates the previous run validated for the same inputs: their
    evaluation is taken from its report (and their code_sha noted in `hits`) instead of run again."""

    def __init__(self, inner: Callable[[Screened], Evaluation], known: dict[str, Evaluation]):
        self.inner, self.known = inner, known
        self.hits: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, cand: Screened) -> Evaluation:
        key = code_sha(cand.code)
        found = self.known.get(key)
        if found is None:
            return self.inner(cand)
        with self._lock:
            self.hits.add(key)
        return found

    def taken(self) -> set[str]:
        with self._lock:
            return set(self.hits)


class _Outputs:
    """Everything optimize leaves in its folder -- attempts/, the selected rewrites, report.json and
    report.md --, rewritten (atomically) from the attempts so far each time :meth:`save` is called."""

    def __init__(
        self,
        *,
        out: Path,
        src: Path,
        model: str,
        kernel: str,
        run_on: Sequence[Device],
        evaluator: HarnessEvaluator,
        identity: str,
        kept: list[Attempt],
        resumer: _Resumed,
        previous: dict[str, Any] | None,
        earlier_outputs: dict[str, Any],
        markdown: Callable[[OptimizeReport], str] | None = None,
    ):
        self.out, self.src, self.model, self.kernel = out, src, model, kernel
        self.run_on, self.evaluator, self.identity = list(run_on), evaluator, identity
        self.kept, self.resumer = kept, resumer
        self.previous = previous  # the previous report, when made for the same inputs
        self.earlier_outputs = earlier_outputs  # role -> file, of the previous report whatever its inputs
        self.markdown = markdown  # renders report.md (a view, handed in by the caller)
        self.written: dict[Path, str] = {}

    def _put(self, path: Path, text: str) -> None:
        if self.written.get(path) != text:
            _write(path, text, self.src)
            self.written[path] = text

    def report(self, result: LoopResult) -> OptimizeReport:
        met = {code_sha(a.code) for a in result.attempts if a.code is not None}
        report = OptimizeReport(
            source=str(self.src),
            kernel=self.kernel,
            model=self.model,
            out_dir=str(self.out),
            devices=tuple(d.label for d in self.run_on),
            loop=result,
            kept=[a for a in self.kept if code_sha(a.code) not in met],
            resumed=self.resumer.taken(),
            identity=self.identity,
        )
        for a in result.attempts:
            if a.code is not None:
                p = self.out / "attempts" / f"candidate{a.candidate}_round{a.round}.cu"
                self._put(p, a.code)
                report.attempt_paths[(a.candidate, a.round)] = str(p)
        for a in report.kept:  # under a name of its own: this run's attempts may reuse the old one's
            key = code_sha(a.code)
            p = self.out / "attempts" / f"kept_{key[:16]}.cu"
            self._put(p, a.code or "")
            report.kept_paths[key] = str(p)
        trade = report.tradeoffs()
        chosen = {"best": trade["fastest"], **trade} if trade else {}
        for role in ROLES:
            att = chosen.get(role)
            p = self.out / f"{self.src.stem}.{role}.cu"
            if att is None or att.code is None:
                if p in self.written or self._stale(role, p):
                    p.unlink(missing_ok=True)  # never a rewrite the report does not vouch for
                    self.written.pop(p, None)
                continue
            self._put(p, _header(att, self.model, role, self.kernel) + att.code)
            report.selected.append(Selected(role, att, str(p)))
        old = self.previous or {}
        for d in self.run_on:
            with self.evaluator._lock:
                base = self.evaluator._baselines.get(d.label)
            if base is not None:
                report.baselines[d.label] = base.timing.median_ms if base.ok and base.timing else None
                report.floors[d.label] = base.roofline.floor_ms if base.roofline else None
            elif d.label in (old.get("baselines_ms") or {}):  # measured by the previous run, same inputs
                report.baselines[d.label] = old["baselines_ms"][d.label]
                report.floors[d.label] = (old.get("floors_ms") or {}).get(d.label)
        if not any(d.kind == "gpu" for d in self.run_on):
            report.notes.append(_NO_GPU)
        return report

    def _stale(self, role: str, path: Path) -> bool:
        """The role's file as an earlier run in this folder wrote it (its report names it)."""
        named = self.earlier_outputs.get(role)
        return isinstance(named, str) and _inside(path, self.out) and Path(named).resolve() == path.resolve()

    def save(self, result: LoopResult) -> OptimizeReport:
        report = self.report(result)
        doc = redact(json.dumps(to_jsonable(report.full_document()), indent=2)) + "\n"
        _write(self.out / REPORT_JSON, doc, self.src)
        if self.markdown is not None:
            _write(self.out / REPORT_MD, redact(self.markdown(report)), self.src)
        return report
