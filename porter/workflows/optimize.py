"""`porter optimize FILE --model M`: ask a model for faster versions of a CUDA kernel and prove them.

The kernel's spec comes from the spec file or inference (as for ``porter check``).  The loop
(:mod:`porter.llm.loop`) runs ``--candidates`` conversations for up to ``--rounds`` rounds; this
module supplies its evaluator: every screened candidate is validated against the ORIGINAL kernel
(:func:`porter.harness.validate.validate`) on every device here that runs CUDA (an NVIDIA GPU, the
CPU emulator), then benchmarked there (:func:`porter.harness.bench.benchmark`) against the
original's time on the same device, beside the roofline floor of the performance model.  All of it
runs in the harness's isolated child processes.

The trade-off set is chosen from one pool measured alike: the validated rewrites, the original (timed as
the baseline; error 0: it is the reference) and, with ``tune``, the autotuner's fastest configuration of
each kernel it searched (timed again here, at the evaluator's size, not the search's).  ``best`` is the
fastest rewrite or configuration; fastest, least memory and most precise are of the whole pool, the
original winning one only by being strictly better (on a full tie, the proposal).

Outputs (default ``<stem>.optimized/`` beside the input; the user's files are never written): the
best and each trade-off role as ``.cu`` files (a role the original holds names the input file),
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from porter import plan as planning
from porter.backends import SOURCE_DIALECT, Device
from porter.backends.spares import warm
from porter.errors import PorterError, UsageError
from porter.files import reads_once
from porter.harness.bench import BenchPlan
from porter.harness.evaluate import Evaluator, static_shared
from porter.harness.validate import Reference, ValidateOptions, tolerance_for
from porter.llm.hardware import hardware_fields
from porter.llm.loop import Event, Progress, run_loop
from porter.llm.prompting import PromptContext
from porter.model import Kernel, KernelSpec, Role, Variant, to_jsonable
from porter.plan import make_plan
from porter.records import VALIDATED, Attempt, Evaluation, LoopResult, Screened, Totals
from porter.redact import redact
from porter.results import (
    ORIGINAL,
    TUNED,
    Contender,
    OptimizeReport,
    Selected,
    TunedConfig,
    TuneReport,
    code_sha,
    file_digest,
)
from porter.workflows import written
from porter.workflows.options import ModelOptions, OutputOptions, RunOptions
from porter.workflows.resume import (
    Ledger,
    check_out_dir,
    evaluation_from_json,
    key_of,
    load_report,
    toolchain_of,
    write_atomic,
)
from porter.workflows.source import includes, pick_kernel, sibling_dir, squeeze

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
ROLES = ("best", "fastest", "least_memory", "most_precise")


# --------------------------------------------------------------------------- setup


def default_out_dir(source: str | Path) -> Path:
    return sibling_dir(source, "optimized")


def run_devices() -> list[Device]:
    """Devices here that run a CUDA candidate: NVIDIA GPUs, then the CPU emulator."""
    return list(planning.reference_devices())


# --------------------------------------------------------------------------- the workflow


def _write(path: Path, text: str, source: Path) -> None:
    if path.resolve() == source.resolve():
        raise UsageError("refusing to overwrite the input file; choose another --out", path=str(path))
    write_atomic(path, redact(text))  # model output too: a key it echoes is never written


def _header(c: Contender, model: str, role: str, kernel: str) -> str:
    """The comment a role's file starts with: what it is, how to launch and build it, and its times."""
    ev, what = c.evaluation, role.replace("_", " ")
    if c.kind == TUNED and c.launch is not None:
        lines = [f"// {kernel}: {what} -- {c.label}: a configuration of porter optimize's launch search (--tune).",
                 f"// Launch with block ({', '.join(c.launch.block)}), grid ({', '.join(c.launch.grid)})"
                 + (f", dynamic shared memory {c.launch.shared} bytes" if c.launch.shared is not None else "")
                 + "."]  # fmt: skip
        if c.launch.flags:
            lines.append(f"// Build with {' '.join(c.launch.flags)}.")
    else:
        a = c.attempt
        lines = [f"// {kernel}: {what} validated rewrite by {model}"
                 + (f" (candidate {a.candidate}, round {a.round})" if a is not None else "")
                 + ", written by porter optimize."]  # fmt: skip
    for t in ev.timings:
        sp = t.get("speedup")
        lines.append(
            f"// {t['device']}: "
            + (f"{t['time_ms']:.4g} ms median" if t.get("time_ms") else "not timed")
            + (f", {float(sp):.2f}x the original" if isinstance(sp, (int, float)) else "")
        )
    if ev.max_rel_err is not None:
        lines.append(f"// max relative error against the original: {ev.max_rel_err:.3g}")
    # plain line comments whatever a name holds: none reaches into the code below (a newline, a trailing
    # backslash)
    safe = []
    for line in "\n".join(lines).replace("??/", "?? /").splitlines():
        line = line.rstrip().rstrip("\\").rstrip()
        safe.append(line if line.startswith("//") else f"// {line}")
    return "\n".join(safe) + "\n"


@reads_once
@warm
def optimize_file(
    path: str,
    *,
    model: ModelOptions,
    kernel: str | None = None,
    run: RunOptions | None = None,
    output: OutputOptions[OptimizeReport] | None = None,
    progress: Progress | None = None,
    wrap_evaluator: Callable[[Callable[[Screened], Evaluation]], Callable[[Screened], Evaluation]]
    | None = None,
    description: str = "",
    requirements: str = "",
    tune: OutputOptions[TuneReport] | None = None,
) -> OptimizeReport:
    """Run the loop on one kernel of `path`; see the module docstring.

    Everything is written after every attempt (atomically), and once more when the run is interrupted
    (Ctrl-C, SIGTERM) or fails: what was validated is never lost.  A previous report in the output folder
    made for the same inputs (source, spec, model, options, devices and toolchains) is resumed: a
    candidate it validated is not run again (the reply cache brings the same candidates back), and one
    this run does not meet again is kept.  ``output``: the folder, ``fresh`` (ignore the previous report),
    ``markdown`` (renders ``report.md`` from the report: the CLI passes
    :func:`porter.report.optimize_view.markdown`; without it no ``report.md`` is written) and ``chart``
    (``tradeoffs.png``).  ``run``: the include dirs, the build's -D, the devices (None: every one here
    that runs CUDA), the validation options, the timing plan and the size timed at (``sizes``).
    ``description`` and ``requirements`` (``porter generate`` with a CUDA reference) go into the prompt;
    a candidate computing in half or bfloat16 is refused unless the requirements allow it, and then
    judged with that precision's tolerance.  ``tune``: afterwards, the autotuner's search over launch
    geometries and compile options, with the model's fastest validated rewrite joining the original in
    it (its report in ``<out>/tuned/`` unless ``tune`` names a folder, rendered by its ``markdown``, and
    under ``tuned``)."""
    run = run or RunOptions()
    output = output or OutputOptions()
    include_dirs, out_dir, fresh = run.include_dirs, output.out_dir, output.fresh
    plan, bench_size = run.bench, dict(run.sizes) if run.sizes is not None else None
    if model.count(2) < 1:
        raise UsageError("--candidates must be at least 1")
    if model.rounds < 1:
        raise UsageError("--rounds must be at least 1")
    for d in include_dirs:
        if not Path(d).is_dir():
            raise UsageError("include directory not found (-I)", path=str(d))
    src_dir = str(Path(path).resolve().parent)
    dirs = (src_dir, *(str(Path(d).resolve()) for d in include_dirs))
    opts = run.validation()
    source_plan = make_plan(path, "optimize", dirs, defines=opts.compile.defines)
    text, scan = source_plan.text, source_plan.scan
    k = pick_kernel(scan, kernel, path)
    out = Path(out_dir) if out_dir is not None else default_out_dir(path)
    check_out_dir(out, Path(path), "optimize")  # before any request is paid for
    earlier = load_report(out, "optimize")
    previous = None if fresh else earlier
    provider = model.provider()
    spec = source_plan.spec(k.name, dirs)
    run_on = list(run.devices) if run.devices is not None else run_devices()
    if not run_on:
        raise PorterError(
            "no device here can run CUDA kernels (no NVIDIA GPU, and the CPU emulator needs g++)"
        )
    if not opts.compile.include_dirs:
        opts = replace(opts, compile=replace(opts.compile, include_dirs=dirs))
    original = replace(source_plan.original(k.name, "file"), entry=k.qualified)
    device_text = original.source
    evaluator = Evaluator(
        spec=spec,
        reference=Reference(original=original, devices=tuple(run_on), options=opts.compile),
        devices=run_on,
        options=opts,
        template=Variant(
            kernel=k.name, target=SOURCE_DIALECT, source="", entry=k.name, provenance=f"llm:{model.name}"
        ),
        scan=scan,
        plan=plan,
        bench_size=bench_size,
        must_time=True,
    )
    shown = next((d for d in run_on if d.times), run_on[0])
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
        description=description,
        requirements=requirements,
    )
    loop_options = model.loop(2)
    identity = _identity(
        device_text, k.name, spec, model.name, opts, plan, bench_size, run_on, (description, requirements)
    )
    known, kept = _previous_validated(Ledger(previous), identity, out)
    reusing = _Resumed(_Precision(evaluator, requirements), known)
    evaluate: Callable[[Screened], Evaluation] = reusing
    if wrap_evaluator is not None:
        evaluate = wrap_evaluator(reusing)
    outputs = _Outputs(
        out=out,
        src=Path(path),
        model=model.name,
        run_on=run_on,
        evaluator=evaluator,
        earlier=_Earlier(
            identity=identity,
            kept=kept,
            resumer=reusing,
            previous=previous if known else None,
            outputs=(earlier or {}).get("outputs") or {},
        ),
        views=output,
        scan_kernel=k,
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
                        # the command line says "interrupted" (or "terminated"), once
                        text=f"what was validated so far is in {out / REPORT_JSON}",
                    )
                )
        raise
    report = outputs.save(result)
    if tune is not None:
        from porter.workflows.tune import tune_file

        best = report.best
        rewrites = {f"the model's fastest (candidate {best.candidate}, round {best.round})": best.code} if (
            best is not None and best.code) else {}  # fmt: skip
        searched = RunOptions(flags=run.flags, devices=tuple(run_on))
        tuned_output = replace(tune, out_dir=tune.out_dir or str(out / "tuned"))
        outputs.tuned = tune_file(path, kernel=k.name, run=searched, output=tuned_output, rewrites=rewrites)
        outputs.configurations = _configurations(outputs.tuned, evaluator, best, outputs.static_memory)
        report = outputs.save(result)
    return report


def _identity(
    device_text: str,
    kernel: str,
    spec: KernelSpec,
    model: str,
    options: ValidateOptions,
    plan: BenchPlan | None,
    bench_size: dict[str, int] | None,
    devices: Sequence[Device],
    request: tuple[str, str] = ("", ""),
) -> str:
    """The key (:func:`porter.workflows.resume.key_of`) of everything a candidate's evaluation depends on
    besides its code ("" when a toolchain cannot be told: then nothing is reused): every validated
    candidate is stored under it."""
    from porter.cache import headers_digest

    chains = [(d.label, toolchain_of(d.backend, d)) for d in devices]
    if any(chain is None for _, chain in chains):
        return ""
    return key_of(
        "optimize",
        device_text,
        headers_digest(device_text, options.compile.include_dirs),
        kernel,
        to_jsonable(spec),
        model,
        to_jsonable(options),
        to_jsonable(plan) if plan is not None else None,
        bench_size,
        chains,
        *([list(request)] if any(request) else []),  # (unchanged keys for plain `optimize`)
    )


class _Precision:
    """The evaluator behind a precision policy: a candidate computing in half or bfloat16 is refused
    unless the requirements allow it; an allowed one is judged by an evaluator whose tolerance is that
    precision's (made once, on first need)."""

    def __init__(self, evaluator: Evaluator, requirements: str) -> None:
        self.evaluator, self.requirements = evaluator, requirements
        self.loose: dict[str, Evaluator] = {}
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # known_baselines, cost, size: the strict evaluator's
        return getattr(self.evaluator, name)

    def __call__(self, screened: Screened) -> Evaluation:
        from porter.harness.checks import tolerances
        from porter.lift import model as lm

        if redact(screened.code) != screened.code:  # every file porter writes is redacted: not this code
            return Evaluation(False, "validate", "it contains text shaped like an API key (e.g. `api_key = ...` "
                              "or `sk-...`), which porter masks in every file it writes: written out, it would "
                              "not be the code that was validated; name it otherwise")  # fmt: skip
        precision = lm.reduced_precision(screened.code)
        if not precision:
            return self.evaluator(screened)
        if not lm.allowed(self.requirements):
            return Evaluation(False, "validate", f"it computes in {precision}, which the requirements do "
                              "not allow (say fp16 or bf16 in the requirements to allow it)")  # fmt: skip
        with self.lock:
            if precision not in self.loose:
                low = tolerances()[precision]
                ev = self.evaluator
                spec = ev.spec
                spec = replace(spec, rtol=max(spec.rtol or 0.0, float(low["rtol"])),
                               atol=max(spec.atol or 0.0, float(low["atol"])))  # fmt: skip
                self.loose[precision] = ev.with_spec(spec)
        judged = self.loose[precision](screened)
        return replace(judged, reason=f"{judged.reason} [{precision}, allowed by the requirements]")


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False


def _previous_validated(
    ledger: Ledger, identity: str, out: Path
) -> tuple[dict[str, Evaluation], list[Attempt]]:
    """The candidates the previous report stored under `identity` (the ledger's rows under the key of
    this run's inputs): the evaluation of each (by code_sha) and those candidates, their code read back
    from their files (unchanged since)."""
    known: dict[str, Evaluation] = {}
    kept: list[Attempt] = []
    for entry in ledger.rows(identity):
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


def _configurations(
    tuned: TuneReport, evaluator: Evaluator, rewrite: Attempt | None, original_memory: int | None = None
) -> list[Contender]:
    """The launch search's fastest configuration of each kernel it tried (the original's, the model's
    rewrite), timed again by `evaluator` -- as every candidate and the original were -- to join the
    trade-off set; a kernel's fastest is left out when it is that kernel as the pool already holds it
    (the original's own launch, the rewrite at the original's launch without other options).  Where no
    device reports the memory a block uses, the kernel's own figure stands (the original's
    `original_memory`, the rewrite's evaluation's): its static shared memory, as for every candidate."""
    from porter.harness.tune import Config

    fastest: dict[str, TunedConfig] = {}
    for c in tuned.configs:
        eligible = c.validated and c.time_ms and not c.suspect
        if eligible and (c.source not in fastest or (c.time_ms or 0.0) < (fastest[c.source].time_ms or 0.0)):
            fastest[c.source] = c
    spec = evaluator.spec
    sizes = [*spec.sizes, *spec.hidden_sizes, *spec.bench_sizes, tuned.size]
    out: list[Contender] = []
    for source, c in fastest.items():
        config = Config(tuple(c.block), tuple(c.grid), c.label, flags=tuple(c.flags), shared=c.shared)
        if c.original or (not c.flags and config.launches_as(spec, sizes)):
            continue
        if source and rewrite is None:
            continue  # (a rewrite this run does not know)
        original = evaluator.original
        variant = evaluator.variant(rewrite.code or "") if source and rewrite else original
        if variant is None:
            continue
        # options are the search's timing device's backend's: timed where they apply, as they were validated
        on = {tuned.device} if c.flags else None
        timings, memory, _ = evaluator.measure(variant, config.shaped(spec), c.flags, on)
        if memory is None:
            memory = (
                rewrite.evaluation.memory_bytes
                if source and rewrite and rewrite.evaluation
                else original_memory
            )
        first: dict[str, Any] = timings[0] if timings else {}
        label = f"tuned: {c.label}"  # (a rewrite's label names it; the original's is plain)
        evaluation = Evaluation(
            ok=True, stage="done",
            reason=f"validated by the launch search; {c.time_ms:.4g} ms there on {tuned.device}",
            max_rel_err=c.max_rel_err, time_ms=first.get("time_ms"), baseline_ms=first.get("baseline_ms"),
            speedup=first.get("speedup"), floor_ms=first.get("floor_ms"), memory_bytes=memory,
            device=str(first.get("device", "")), timings=tuple(timings),
        )  # fmt: skip
        out.append(Contender(TUNED, label, variant.source, evaluation, rewrite if source else None, c))
    return out


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


@dataclass(frozen=True)
class _Earlier:
    """What the runs before this one in the output folder leave it: ``identity``, the key of this run's
    inputs; ``kept``, the candidates a previous run validated for the same inputs; ``resumer``, the
    evaluator that takes their evaluations from its report; ``previous``, that report (when made for the
    same inputs); ``outputs``, the files the previous report names by role, whatever its inputs."""

    identity: str
    kept: list[Attempt]
    resumer: _Resumed
    previous: dict[str, Any] | None
    outputs: dict[str, Any]


class _Outputs:
    """Everything optimize leaves in its folder -- attempts/, the selected rewrites, report.json and
    report.md --, rewritten (atomically) from the attempts so far each time :meth:`save` is called."""

    def __init__(
        self,
        *,
        out: Path,
        src: Path,
        model: str,
        run_on: Sequence[Device],
        evaluator: Evaluator,
        earlier: _Earlier,
        views: OutputOptions[OptimizeReport],
        scan_kernel: Kernel,
    ):
        self.out, self.src, self.model, self.kernel = out, src, model, scan_kernel.name
        identity, kept, resumer = earlier.identity, earlier.kept, earlier.resumer
        previous, earlier_outputs = earlier.previous, earlier.outputs
        markdown, chart = views.markdown, views.chart
        spec = evaluator.spec
        # the original kernel's static shared memory: its memory where no device reports occupancy
        self.static_memory = static_shared(scan_kernel, dict(spec.sizes[0]) if spec.sizes else {})
        self.original_code = evaluator.original.source if evaluator.original is not None else ""
        self.run_on, self.evaluator, self.identity = list(run_on), evaluator, identity
        self.kept, self.resumer = kept, resumer
        self.previous = previous  # the previous report, when made for the same inputs
        self.earlier_outputs = earlier_outputs  # role -> file, of the previous report whatever its inputs
        self.markdown = markdown  # renders report.md (a view, handed in by the caller)
        self.tuned: TuneReport | None = None  # --tune's search, once it ran
        self.configurations: list[Contender] = []  # its fastest configurations, timed as the candidates
        self.chart = chart  # draws tradeoffs.png (a view, handed in by the caller)
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
            tuned=self.tuned,
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
        old = self.previous or {}
        for d in self.run_on:
            base = self.evaluator.known_baselines().get(d.label)
            if base is not None:
                report.baselines[d.label] = base.timing.median_ms if base.ok and base.timing else None
                report.floors[d.label] = base.roofline.floor_ms if base.roofline else None
            elif d.label in (old.get("baselines_ms") or {}):  # measured by the previous run, same inputs
                report.baselines[d.label] = old["baselines_ms"][d.label]
                report.floors[d.label] = (old.get("floors_ms") or {}).get(d.label)
        report.original = self._original(report)
        report.configurations = list(self.configurations)
        roles = report.roles()
        for role in ROLES:
            c = roles.get(role)
            p = self.out / f"{self.src.stem}.{role}.cu"
            if c is None or c.kind == ORIGINAL:  # the original's file is the input, never copied or written
                if p in self.written or self._stale(role, p):
                    p.unlink(missing_ok=True)  # never a rewrite the report does not vouch for
                    self.written.pop(p, None)
                if c is not None:
                    report.selected.append(Selected(role, c, str(self.src)))
                continue
            header = _header(c, self.model, role, self.kernel)
            self._put(p, header + c.code)
            # the file is the deliverable: only comment lines before exactly the validated code
            wrong = written.comment_only(header) or written.differs(p, header + c.code)
            if wrong:
                p.unlink(missing_ok=True)
                self.written.pop(p, None)
                report.notes.append(f"{role}: {c.label} is not written: {wrong}")
                continue
            report.selected.append(Selected(role, c, str(p)))
        if not any(d.times for d in self.run_on):
            report.notes.append(_NO_GPU)
        return report

    def _original(self, report: OptimizeReport) -> Contender | None:
        """The original, timed (by the evaluator, or by the previous run for the same inputs) as every
        candidate is; None before it was.  Its error is 0: it is the reference."""
        from porter.harness.bench import representative

        measured = self.evaluator.known_baselines()
        timings: list[dict[str, Any]] = []
        memory: int | None = None
        for d in self.run_on:
            if d.checks or d.label not in report.baselines:
                continue
            ms, floor = report.baselines[d.label], report.floors.get(d.label)
            base = measured.get(d.label)
            occ = base.occupancy if base is not None and base.ok else None
            if occ is not None and occ.block_bytes is not None:
                memory = occ.block_bytes
            timings.append({"device": d.label, "time_ms": ms, "baseline_ms": ms, "speedup": 1.0 if ms else None,
                            "floor_ms": floor, "pct_of_floor": 100.0 * floor / ms if floor and ms else None,
                            "representative": representative(d), "suspect": False, "notes": []})  # fmt: skip
        if not timings:
            return None
        first = timings[0]
        return Contender(ORIGINAL, "the original", self.original_code, Evaluation(
            ok=True, stage="done", reason=f"the original kernel of {self.src.name} (the reference)", max_rel_err=0.0,
            time_ms=first["time_ms"], baseline_ms=first["time_ms"], speedup=first["speedup"],
            floor_ms=first["floor_ms"], memory_bytes=memory if memory is not None else self.static_memory, device=first["device"], timings=tuple(timings),
        ))  # fmt: skip

    def _stale(self, role: str, path: Path) -> bool:
        """The role's file as an earlier run in this folder wrote it (its report names it)."""
        named = self.earlier_outputs.get(role)
        return isinstance(named, str) and _inside(path, self.out) and Path(named).resolve() == path.resolve()

    def save(self, result: LoopResult) -> OptimizeReport:
        report = self.report(result)
        if self.chart is not None and result.stop_reason != "running":  # once, when the loop has ended
            with contextlib.suppress(Exception):  # a chart that cannot be drawn costs only the chart
                report.chart = self.chart(report, self.out / "tradeoffs.png")
        doc = redact(json.dumps(to_jsonable(report.full_document()), indent=2)) + "\n"
        _write(self.out / REPORT_JSON, doc, self.src)
        if self.markdown is not None:
            _write(self.out / REPORT_MD, redact(self.markdown(report)), self.src)
        return report
