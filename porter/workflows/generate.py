"""`porter generate "DESCRIPTION" --reference FILE.py::FUNC`: kernels from a description, each proven
against a Python reference, with the trade-offs between them and the performance model's floors.

The reference is the specification of correctness; without one porter refuses (exit 2): an
unvalidated kernel is not a result.  Then:

1. **estimates before anything runs**: the reference's compulsory bytes and FLOPs
   (:mod:`porter.lift.estimate`) at the chosen size, and the floor they put under any kernel on each
   GPU of the performance model's device table;
2. **candidates**: the kernels porter's own rules make of the reference (:mod:`porter.lift`), when they
   lift it; and, with ``--model``, the model's, asked under the contract of :mod:`porter.lift.model`
   with the description, the requirements and the reference, screened, built for a real GPU compiler and
   judged against the Python on every device at every size (held-back ones included) by the harness --
   the Python function is its reference, the checks those of every kernel -- mismatches and compiler
   logs fed back;
3. a candidate that computes in reduced precision (fp16/bf16 types) is kept only when the requirements
   allow it (``lift.toml [generate]``), judged with that precision's tolerance, its error shown;
4. every validated candidate is timed on every device that runs it (the first GPU here, else the first
   device, is its headline) by the harness's bench, as every command times (warm-up, rounds until the
   interquartile range settles, the median), and set beside its floor (a time under it is suspect,
   never a speed); its memory is the device bytes its launch allocates plus its static shared memory
   per block;
5. the trade-off set: the fastest, the least memory, the most precise; ``report.json``, ``report.md``,
   ``tradeoffs.png`` (time against error, point size = memory) and each candidate's CUDA (with its HIP
   and OpenCL translations) in the output folder (default ``<file>.generated/``).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from porter.backends.spares import warm
from porter.errors import UsageError
from porter.files import reads_once
from porter.lift import inputs, validate
from porter.lift import model as lm
from porter.lift.ir import Lifted
from porter.model import Status
from porter.plan import run_devices, wavefront_devices
from porter.results import Candidate, Estimate, GenerateReport
from porter.workflows import written
from porter.workflows.lift import TARGETS, _fmt, _targets, split_target
from porter.workflows.options import ModelOptions, OutputOptions, RunOptions
from porter.workflows.resume import REPORT_NAME, write_atomic

Progress = Callable[[str], None]


def _estimates(
    lifted: Lifted, args: Mapping[str, Any], changed: set[str], text: str
) -> tuple[Any, list[Estimate]]:
    from porter.harness import perfmodel
    from porter.lift.estimate import cost

    c = cost(lifted, args, changed, text)
    out = []
    for entry in perfmodel.gpu_entries():
        roof = perfmodel.roofline(c, entry)
        out.append(Estimate(entry.name, roof.floor_ms, roof.bound, roof.note))
    return c, out


def _memory(plan_buffers: Mapping[str, np.ndarray], code: str, entry: str) -> int | None:
    """Device bytes a launch allocates plus the kernel's static shared memory per block."""
    from porter.harness.evaluate import static_shared
    from porter.scan import scan_source

    try:
        kernel = next(k for k in scan_source(code.encode(), "c.cu", "cuda").kernels if k.name == entry)
    except (StopIteration, Exception):  # noqa: BLE001 - a kernel porter cannot scan has no shared figure
        return None
    shared = static_shared(kernel, {})
    return sum(int(a.nbytes) for a in plan_buffers.values()) + (shared or 0)


def cuda_reference(reference: str | None) -> tuple[str, str] | None:
    """(file, kernel) when `reference` names a CUDA kernel (FILE.cu::KERNEL); None for a Python one."""
    from porter.backends import SOURCE_DIALECT, dialect_of_suffix

    if not reference:
        return None
    path, name = split_target(reference)
    if dialect_of_suffix(Path(path).suffix) != SOURCE_DIALECT:
        return None
    if not name:
        raise UsageError("--reference takes a kernel: FILE.cu::KERNEL", path=path)
    return path, name


@reads_once
@warm
def generate(
    description: str,
    *,
    reference: str | None,
    requirements: str = "",
    to: Sequence[str] = TARGETS,
    sizes: Mapping[str, int] | None = None,
    model: ModelOptions | None = None,
    run: RunOptions | None = None,
    output: OutputOptions[GenerateReport] | None = None,
    progress: Progress | None = None,
) -> GenerateReport:
    """See the module docstring.  `run`: the ``seed`` of the arguments drawn, and ``validate.timeout_s``
    (seconds per child job and per call of the Python reference); `model`: the model asked for candidates
    beside the rules' kernel."""
    from porter.files import read_text
    from porter.harness.trial import ValidateOptions
    from porter.lift.analyze import analyze, signature

    run, output = run or RunOptions(), output or OutputOptions()
    seed, timeout = run.seed, (run.validate or ValidateOptions()).timeout_s
    say = progress or (lambda _m: None)
    if not description.strip():
        raise UsageError("generate needs a description of the operation")
    if not reference:
        raise UsageError(
            "generate needs --reference FILE.py::FUNCTION: a kernel no reference validates is not a result"
        )
    path, func = split_target(reference)
    if not path.endswith(".py") or not func:
        raise UsageError(
            "--reference takes a Python function (FILE.py::FUNCTION) or a CUDA kernel (FILE.cu::KERNEL)",
            path=path,
        )
    text = read_text(path)
    targets = _targets(to)
    sig = signature(text, func)
    if isinstance(sig, str):
        raise UsageError(f"--reference: {sig}", path=path)
    params, bound = sig
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == func)
    source = ast.get_source_segment(text, fn) or ast.unparse(fn)
    imports = tuple(ast.get_source_segment(text, n) or "" for n in ast.parse(text).body
                    if isinstance(n, (ast.Import, ast.ImportFrom)))  # fmt: skip
    shell = Lifted(func, fn.lineno, (), params, bound, (), (), (), source=source, imports=imports)
    try:
        visible = inputs.default_sizes(shell, dict(sizes or {}))
    except KeyError as err:
        raise UsageError(str(err).strip("\"'"), path=path) from None
    hidden = inputs.hidden_sizes(visible)
    sets = [(f"size {_fmt(visible)}", visible)] + [(f"hidden size {_fmt(h)}", h) for h in hidden]
    src = Path(path)
    out = Path(output.out_dir) if output.out_dir else src.parent / f"{src.stem}.generated"
    if out.exists() and not out.is_dir():
        raise UsageError("--out exists and is not a folder", path=str(out))
    report = GenerateReport(description, reference, requirements, str(out), targets)

    def save() -> None:
        write_atomic(out / REPORT_NAME, json.dumps(report.document(), indent=2) + "\n")
        if output.markdown is not None:
            write_atomic(out / "report.md", output.markdown(report))

    say("running the reference")
    ran = validate.reference_run(path, shell, sets, seed, timeout, say)
    refs = ran.sets
    broken = ran.broken()
    if broken is not None:
        why = (
            ran.hang.describe() if ran.hang is not None else f"the Python function failed: {broken[1].error}"
        )
        raise UsageError(f"--reference: {why}", path=path)
    first_args, first_ref = refs[0][1], refs[0][2]
    changed = {k for k, v in first_ref.arrays.items() if not np.array_equal(v, first_args[k])}
    returns = ""
    if first_ref.returned is not None:
        if first_ref.returned.ndim != 0:
            raise UsageError("--reference returns an array: porter generates kernels for functions that write their "
                             "arrays in place or return a number", path=path)  # fmt: skip
        returns = first_ref.returned.dtype.name
    from porter.harness.spec.sizes import GPU_ELEMENTS
    from porter.lift.estimate import cost as lift_cost

    report.timing_size = inputs.timing_sizes(shell, visible, GPU_ELEMENTS)
    gpu_args = inputs.draw(shell, report.timing_size, seed)
    cost_gpu, report.estimates = _estimates(shell, gpu_args, changed, text)  # before any candidate runs
    cost_cpu = lift_cost(shell, first_args, changed, text)  # CPU devices time at the reference's size
    out.mkdir(parents=True, exist_ok=True)  # only once the reference ran: a refused request writes nothing
    save()
    devices = {t: [*run_devices(t), *wavefront_devices(t)] for t in targets}
    # every device that runs a target times it once (a GPU at the timing size, a CPU device at the visible
    # size); the first GPU's time is the candidate's headline
    timers = [(t, d) for t in targets for d in run_devices(t) if not d.checks]
    timers.sort(key=lambda p: not p[1].times)
    timing_device = timers[0][1] if timers else None

    def measure(cand: Candidate, lifted_fn: Lifted, srcs: Mapping[str, Any]) -> None:
        """Time a validated candidate on every device and size it, through the harness's bench (a GPU at
        the timing size, a CPU device at the visible size); a time under the floor: suspect."""
        for t, d in timers:
            if srcs.get(t) is None or d.label in cand.times:
                continue
            gpu = d.times
            at = report.timing_size if gpu else visible
            r = validate.bench(lifted_fn, srcs[t], d, gpu_args if gpu else first_args,
                               f"{'timing ' if gpu else ''}size {_fmt(at)}", cost_gpu if gpu else cost_cpu)  # fmt: skip
            if not r.ok or r.timing is None:
                continue
            ms = r.timing.median_ms
            cand.times[d.label] = ms
            floor = r.roofline.floor_ms if r.roofline is not None else None
            if floor:
                cand.pct_of_peak[d.label] = 100.0 * floor / ms
            if cand.time_ms is None:
                cand.time_ms, cand.device, cand.floor_ms = ms, d.label, floor
                cand.suspect = r.suspect
        from porter.lift import hostexpr

        plan = hostexpr.plan(lifted_fn, first_args, poison=False)
        code = srcs["cuda"].text if srcs.get("cuda") is not None else ""
        cand.memory_bytes = _memory(plan.buffers, code, lifted_fn.kernels[0].name) if code else None

    judged: list[tuple[Candidate, Lifted, dict[str, Any]]] = []

    # the rules' kernels, when they lift the reference
    rules = analyze(path, text, func)
    if rules.lifted:
        (lifted_fn,) = rules.lifted
        srcs = validate.sources(lifted_fn, targets)
        say("judging the kernels porter's rules make of the reference")
        verdicts = [validate.judge(lifted_fn, srcs[t], d, refs, timeout) for t in targets for d in devices[t]]
        ok = bool(verdicts) and all(v.status is Status.VALIDATED for v in verdicts)
        errs = [v.max_rel_err for v in verdicts if v.max_rel_err is not None]
        cand = Candidate("rules", "rules", ok, "validated" if ok else next(v.reason for v in verdicts
                         if v.status is not Status.VALIDATED), max_rel_err=max(errs, default=None),
                         verdicts=verdicts)  # fmt: skip
        if ok:
            say("timing it")
            measure(cand, lifted_fn, srcs)
        judged.append((cand, lifted_fn, srcs))
        report.candidates.append(cand)  # on disk at once: an interrupted run keeps what was verified
        save()
    else:
        report.notes.append(
            f"porter's rules do not lift the reference: {rules.refused[0].reason if rules.refused else '-'}"
        )

    c = lm.contract(func, params, bound, returns, source, imports)
    if model is not None and isinstance(c, str):
        raise UsageError(f"--reference: no kernel contract for it: {c}", path=path)
    if model is not None and not isinstance(c, str):
        baseline = judged[0][0].time_ms if judged else None
        asking = _Asking(
            description, requirements, refs, targets, devices, timeout, report, say, measure, save
        )
        judged += _ask(asking, c, model, baseline)
    if not judged:
        raise UsageError(
            "porter's rules do not lift the reference and no --model was given: nothing to judge"
        )

    # every candidate's source (with its translations) in the output folder, each read back: a validated
    # candidate whose file is not the text that was validated is not one (porter.workflows.written)
    for k, (cand, _lifted_fn, srcs) in enumerate(judged, 1):
        name = f"candidate-{k}-{cand.provenance.replace(':', '-')}"
        for t, s_ in srcs.items():
            if s_ is not None and s_.text:
                from porter.backends import get_dialect

                suffix = ".cu" if t == "cuda" else get_dialect(t).suffix
                dest = out / f"{name}{suffix}"
                write_atomic(dest, s_.text)
                wrong = written.differs(dest, s_.text)
                if wrong and cand.validated:
                    dest.unlink(missing_ok=True)
                    cand.validated, cand.reason = False, f"not kept: {wrong}"
                if t == "cuda" and dest.is_file():
                    cand.file = str(dest)
    good = [c_ for c_, _, _ in judged if c_.validated]
    timed = [c_ for c_ in good if c_.time_ms and not c_.suspect]
    if timed:
        report.tradeoffs["fastest"] = min(timed, key=lambda c_: c_.time_ms or 0.0).label
    sized = [c_ for c_ in good if c_.memory_bytes is not None]
    if sized:
        report.tradeoffs["least_memory"] = min(sized, key=lambda c_: c_.memory_bytes or 0).label
    if good:
        report.tradeoffs["most_precise"] = min(good, key=lambda c_: c_.max_rel_err or 0.0).label
    report.candidates = [c_ for c_, _, _ in judged] + report.rejected
    if output.chart is not None and good:
        report.chart = output.chart(report, out / "tradeoffs.png")
    if timing_device is not None and not timing_device.times:
        report.notes.append(f"no GPU here: times are {timing_device.label}'s, a ranking on that device")
    save()
    return report


@dataclass(frozen=True)
class _Asking:
    """What asking a model for candidates needs of one `generate`: the request (`description`,
    `requirements`), the reference's results, the targets and the devices that judge each, the time
    limit, and the report with what measures and saves it."""

    description: str
    requirements: str
    refs: Sequence[Any]
    targets: Sequence[str]
    devices: Mapping[str, Sequence[Any]]
    timeout: float
    report: GenerateReport
    say: Progress
    measure: Callable[[Candidate, Lifted, Mapping[str, Any]], None]
    save: Callable[[], None]


def _ask(
    g: _Asking, c: lm.Contract, model: ModelOptions, baseline_ms: float | None
) -> list[tuple[Candidate, Lifted, dict[str, Any]]]:
    """Every validated kernel the model wrote (and the rejected ones, as records).  Each validated one is
    timed at once, and its time, the floor and the rules' kernel's time go back to the model."""
    from porter.llm.loop import run_loop
    from porter.llm.prompting import PromptContext
    from porter.records import Evaluation, Screened

    name, report = model.name, g.report
    ctx = PromptContext(
        kernel=lm.prompt_kernel(c), path=c.function, source=c.source, dialect="cuda", task="generate",
        trials=len(g.refs), constraints=lm.constraints(c, {}, lm.allowed(g.requirements)),
        description=g.description, requirements=g.requirements,
    )  # fmt: skip
    kept: dict[str, tuple[Candidate, Lifted, dict[str, Any]]] = {}

    def evaluate(screened: Screened) -> Evaluation:
        precision = lm.reduced_precision(screened.code)
        if precision and not lm.allowed(g.requirements):
            return Evaluation(False, "validate", f"it computes in {precision}, which the requirements do not allow "
                              "(say fp16 or bf16 in --requirements to allow it)")  # fmt: skip
        evaluation, judged = lm.judge(
            c, screened.code, name, g.refs, g.targets, g.devices, g.timeout, precision
        )
        if judged is not None:
            errs = [v.max_rel_err for v in judged.verdicts if v.max_rel_err is not None]
            cand = Candidate(f"{name} #{len(kept) + 1}", f"llm:{name}", True, "validated",
                             max_rel_err=max(errs, default=None), precision=precision, verdicts=list(judged.verdicts))  # fmt: skip
            if screened.code not in kept:
                g.measure(cand, judged.lifted, judged.sources)
                kept[screened.code] = (cand, judged.lifted, judged.sources)
                report.candidates.append(cand)
                g.save()
            else:
                cand = kept[screened.code][0]
            evaluation = replace(evaluation, time_ms=cand.time_ms, floor_ms=cand.floor_ms, device=cand.device,
                                 baseline_ms=baseline_ms, memory_bytes=cand.memory_bytes)  # fmt: skip
        return evaluation

    g.say(f"asking {name}")
    result = run_loop(model.provider(), ctx, evaluate, model.loop(candidates=2))
    report.requests += result.totals.requests
    report.input_tokens += result.totals.usage.input_tokens
    report.output_tokens += result.totals.usage.output_tokens
    report.cost_usd += result.totals.cost_usd
    report.rejected += [
        Candidate(f"{name} (round {a.round}, candidate {a.candidate})", f"llm:{name}", False, a.reason)
        for a in result.attempts if a.status != "validated"
    ]  # fmt: skip
    report.notes.append(f"{name}: {len(result.attempts)} attempt(s), {result.stop_reason}")
    return list(kept.values())


__all__ = ["generate"]
