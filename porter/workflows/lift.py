"""`porter lift FILE.py[::FUNC]`: Python loop nests as verified GPU kernels, and a drop-in module.

For each top-level function of the file (or the one named): the analysis (:mod:`porter.lift.analyze`)
lifts it -- kernels and the launches that run them -- or refuses it with the line and why.  Then:

1. sizes: ``--sizes n=1000,m=64`` (the names the function binds, ``n = x.shape[0]``), the shapes of an
   ``--example FILE.py::make_inputs`` call's arguments, or lift.toml's defaults; plus held-back sizes;
2. the Python function runs on seeded arguments at each size, in a sandboxed child: the reference;
3. the kernels, in CUDA and in porter's own HIP and OpenCL translations, run on every device of each
   target (the CPU emulator at 32 and 64 lanes, every OpenCL device, the GPUs here) and are judged
   against it (:mod:`porter.lift.validate`);
4. written to the output folder (default ``<file>.lifted/`` beside the file): each function's kernels
   per target (``<function>.cu``, ``.hip``, ``.cl``), ``<module>_gpu.py`` -- the validated functions under
   their own names and signatures, running through CuPy, HIP Python or pyopencl and falling back to the
   original (:mod:`porter.lift.dropin`) -- and ``report.json`` / ``report.md`` (``markdown``: the view the
   CLI passes), rewritten atomically as
   each function is judged, so an interrupted run keeps what it verified; a re-run keeps every verdict
   whose inputs are unchanged (``--fresh`` starts over);
5. the drop-in module as users run it: the written file imported and every function called through it
   on each stack it offers that runs here and its Python fallback, compared with the Python function
   (:func:`porter.lift.validate.check_dropin`); a function whose call fails or differs is not validated
   (a ``drop-in`` verdict says why) and the module is written again without it.

The user's module runs in a sandboxed child, imported once per function, each call limited to
``--timeout``: a module that hangs at import is stopped once and reported with its line, and nothing of
it runs again; a call that hangs fails that function only.

The user's file is read, never written; the output folder is refused when it holds files porter did not
write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from porter.backends import dialect_names
from porter.backends.pycall import Hang
from porter.backends.spares import warm
from porter.errors import UsageError
from porter.files import reads_once
from porter.harness.trial import ValidateOptions
from porter.lift import dropin, inputs, validate
from porter.lift.analyze import analyze
from porter.lift.ir import Lifted
from porter.model import Status, Verdict
from porter.plan import run_devices, wavefront_devices
from porter.results import LiftedFunction, LiftReport, RefusedFunction
from porter.workflows.options import ModelOptions, OutputOptions, RunOptions
from porter.workflows.resume import REPORT_NAME, Ledger, key_of, write_atomic

Progress = Callable[[str], None]
TARGETS = ("cuda", "hip", "opencl")
DROPIN = validate.DROPIN


def split_target(target: str) -> tuple[str, str | None]:
    """``file.py::func`` -> (file.py, func); a path alone -> (path, None)."""
    path, sep, func = target.partition("::")
    return path, (func or None) if sep else None


def _example(spec: str, timeout: float, say: Progress) -> dict[str, Any]:
    """The arguments an ``--example FILE.py::FUNC`` (or ``FILE.py:FUNC``) call returns: a dict by
    parameter name, run in a sandboxed child like the reference (a hang stopped once, with its line)."""
    from porter.backends.pycall import Call, run_calls

    path, sep, func = spec.partition("::")
    if not sep:
        path, sep, func = spec.rpartition(":")
    if not sep or not func or not path.endswith(".py"):
        raise UsageError(f"--example {spec!r}: expected FILE.py::FUNCTION returning a dict of arguments")
    if not Path(path).is_file():
        raise UsageError("--example: no such file", path=path)
    ran = run_calls(
        path,
        [Call(func, {})],
        timeout,
        progress=lambda what, s: say(f"running the example ({what})... {s:.0f} s"),
    )
    (got,) = ran.results
    if not got.ok or (not got.mapping and got.returned is not None):
        error = got.error or f"{func} did not return a dict of arguments by name"
        raise UsageError(f"--example {spec}: {error}", path=path)
    return dict(got.mapping)


@dataclass
class _Run:
    """One `lift`: what it was given (the file and its text, the targets, the sizes named, the example's
    arguments, the seed, the time limit, where progress goes) and what it learns of the user's module as
    it goes:
    the Python function's results by function (the drop-in module is checked against them), and whether
    the module hangs at import (then nothing of it is run again: one wait in all)."""

    path: str
    text: str
    targets: tuple[str, ...]
    given: dict[str, int]
    example_args: dict[str, Any]
    seed: int
    timeout: float
    say: Progress
    refs: dict[str, validate.Sets] = field(default_factory=dict)
    hung: Hang | None = None
    modules: dict[str, str] = field(default_factory=dict)  # function -> the module holding it, if not path

    def sizes(self, lifted: Lifted) -> dict[str, int]:
        """The visible sizes of `lifted`: the example's, then those named, the rest lift.toml's."""
        chosen = inputs.sizes_of_args(lifted, self.example_args) if self.example_args else {}
        chosen.update({k: v for k, v in self.given.items() if k in inputs.size_names(lifted)})
        return inputs.default_sizes(lifted, chosen)

    def learn(self, refs: validate.References) -> None:
        if refs.hang is not None and refs.hang.stage != "call":
            self.hung = refs.hang

    def not_run(self, function: str) -> Verdict:
        assert self.hung is not None
        return Verdict(function, "python", "", "", "", False, False, False, Status.FAILED,
                       f"reference: not run: {self.hung.describe()}")  # fmt: skip


def _targets(to: Sequence[str]) -> tuple[str, ...]:
    known = set(dialect_names())
    bad = [t for t in to if t not in known]
    if bad:
        raise UsageError(f"--to {', '.join(bad)}: unknown target (targets: {', '.join(sorted(known))})")
    return tuple(dict.fromkeys(to))


def _check_out(out: Path, source: Path) -> None:
    from porter.workflows.resume import is_porter_output

    if out.exists() and not out.is_dir():
        raise UsageError("--out exists and is not a folder", path=str(out))
    if out.resolve() == source.parent.resolve():
        raise UsageError("--out is the source's own folder; choose another", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not is_porter_output(out):
        raise UsageError("--out holds files porter did not write; choose another folder", path=str(out))


@reads_once
@warm
def lift_file(
    target: str,
    *,
    to: Sequence[str] = TARGETS,
    sizes: Mapping[str, int] | None = None,
    example: str | None = None,
    run: RunOptions | None = None,
    output: OutputOptions[LiftReport] | None = None,
    model: ModelOptions | None = None,
    progress: Progress | None = None,
) -> LiftReport:
    """See the module docstring.  `run`: the ``seed`` of the arguments drawn, and ``validate.timeout_s``
    (seconds per child job and per import or call of the user's Python); `model`: the model asked for a
    kernel where the rules refuse one."""
    from porter.files import read_text

    run, output = run or RunOptions(), output or OutputOptions()
    seed, timeout = run.seed, (run.validate or ValidateOptions()).timeout_s
    say = progress or (lambda _m: None)
    path, only = split_target(target)
    if not path.endswith(".py"):
        raise UsageError("porter lift takes a Python file (FILE.py or FILE.py::FUNCTION)", path=path)
    text = read_text(path)  # UsageError: missing, not a regular file, too large, not UTF-8
    targets = _targets(to)
    given = dict(sizes or {})
    example_args = _example(example, timeout, say) if example else {}
    analysis = analyze(path, text, only, example_args)
    if (
        only is not None
        and not analysis.lifted
        and analysis.refused
        and "no top-level function" in analysis.refused[0].reason
    ):
        raise UsageError(analysis.refused[0].reason, path=path)
    if analysis.refused and analysis.refused[0].reason.startswith("not valid Python"):
        r = analysis.refused[0]
        raise UsageError(r.reason, path=f"{path}:{r.line}")
    src_path = Path(path)
    out = Path(output.out_dir) if output.out_dir else src_path.parent / f"{src_path.stem}.lifted"
    _check_out(out, src_path)
    ledger = Ledger.of(out, "lift", output.fresh)  # the previous report's function rows, by key
    report = LiftReport(str(src_path), str(out), targets)
    report.refused = [RefusedFunction(r.function, r.line, r.reason) for r in analysis.refused]
    known = {name for f in analysis.lifted for name in inputs.size_names(f)}
    unknown = sorted(set(given) - known)
    if unknown and analysis.lifted:
        raise UsageError(
            f"--sizes names {', '.join(unknown)}, which no lifted function has (sizes: {', '.join(sorted(known)) or 'none'})",
            path=path,
        )
    out.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        write_atomic(out / REPORT_NAME, json.dumps(report.document(), indent=2) + "\n")
        if output.markdown is not None:
            write_atomic(out / "report.md", output.markdown(report))

    save()
    ctx = _Run(path, text, targets, given, example_args, seed, timeout, say)
    sources_by_function: dict[str, dict[str, tuple[str, dropin.Entries]]] = {}
    partly: list[Lifted] = []  # functions lifted partly whose every lifted nest validated
    todo = list(analysis.lifted)
    if analysis.partial:
        # each lifted nest is a function of its own, judged against its own Python: the file's text with
        # those functions added, beside the report
        nests = [p.lifted for part in analysis.partial for p in part.parts if p.lifted is not None]
        beside = out / f"{src_path.stem}_nests.py"
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(beside, text.rstrip("\n") + "\n\n\n# porter lift: the nests of functions lifted partly\n\n"
                     + "\n\n\n".join(f.source for f in nests) + "\n")  # fmt: skip
        ctx.modules.update({f.function: str(beside) for f in nests})
        todo += nests
    for lifted in todo:
        say(f"{lifted.function}: {', '.join(lifted.patterns)}")
        try:
            visible = ctx.sizes(lifted)
        except KeyError as err:
            raise UsageError(str(err).strip("\"'"), path=path) from None
        hidden = inputs.hidden_sizes(visible)
        srcs = validate.sources(lifted, targets)
        row = LiftedFunction(lifted.function, lifted.line, lifted.patterns, tuple(k.name for k in lifted.kernels),
                             sizes=visible, hidden=hidden, notes=lifted.notes)  # fmt: skip
        _write_sources(out, lifted.function, srcs, row)
        devices = {t: [*run_devices(t), *wavefront_devices(t)] for t in targets}
        key = key_of(
            "lift", lifted.source, text if example else "", visible, hidden, seed,
            {t: srcs[t].text for t in targets}, {t: [d.label for d in ds] for t, ds in devices.items()},
            sorted(example_args) if example_args else [],
        )  # fmt: skip
        old = ledger.get(key)
        if old and old.get("verdicts"):  # (the drop-in is checked again below)
            row.verdicts = [_verdict(v) for v in old["verdicts"] if v.get("target") != DROPIN]
            row.key, row.resumed, row.reference_s = key, True, float(old.get("reference_s") or 0.0)
            say(f"{lifted.function}: verdicts of an earlier run with the same inputs kept")
        elif ctx.hung is not None:  # the module hangs at import: not waited on again
            row.verdicts = [ctx.not_run(lifted.function)]
        else:
            row.verdicts = _judge(ctx, lifted, srcs, devices, row)
            # a reference that failed may fail for what the key does not cover (the module's top level)
            row.key = key if lifted.function in ctx.refs else ""
        report.functions.append(row)
        if row.validated and not row.failed:
            sources_by_function[lifted.function] = _validated_sources(row, srcs)
        save()
    for part in analysis.partial:
        nests = [p.lifted for p in part.parts if p.lifted is not None]
        shell = part.shell
        if not all(f.function in sources_by_function for f in nests):
            continue
        common = set.intersection(*(set(sources_by_function[f.function]) for f in nests))
        visible = ctx.sizes(shell)
        row = LiftedFunction(shell.function, shell.line, shell.patterns, (), sizes=visible,
                             hidden=inputs.hidden_sizes(visible), notes=(part.sentence,))  # fmt: skip
        report.functions.append(row)
        report.refused = [r for r in report.refused if r.function != shell.function]
        sources_by_function[shell.function] = {d: ("", {}) for d in sorted(common)}
        partly.append(shell)
        save()
    written_by_model: list[Lifted] = []
    if model is not None:
        for refusal in list(report.refused):
            if ctx.hung is not None:
                break
            got = _ask_model(ctx, refusal, model)
            if got is None:
                continue
            row, lifted_fn, srcs = got
            report.functions.append(row)
            if row.validated and not row.failed:
                report.refused.remove(refusal)
                written_by_model.append(lifted_fn)
                sources_by_function[lifted_fn.function] = _validated_sources(row, srcs)
                _write_sources(out, lifted_fn.function, srcs, row)
            save()
    good = [f for f in (*todo, *partly, *written_by_model) if f.function in sources_by_function]
    module = out / f"{src_path.stem}_gpu.py"
    if good:
        good = _write_checked_module(ctx, module, good, sources_by_function, report)
    if good:
        report.module = str(module)
    else:  # (porter's own output folder) no module here vouches for a function it does not hold
        module.unlink(missing_ok=True)
    report.complete = True
    save()
    return report


def _write_sources(
    out: Path, function: str, srcs: Mapping[str, validate.Source], row: LiftedFunction
) -> None:
    """Each target's kernels of `function` in the output folder (``<function>.cu``, ``.hip``, ``.cl``)."""
    from porter.backends import get_dialect

    for t, s in srcs.items():
        if s.text:
            dest = out / f"{function}{get_dialect(t).suffix}"
            write_atomic(dest, s.text)
            row.files[t] = str(dest)


def _write_checked_module(
    ctx: _Run,
    module: Path,
    good: list[Lifted],
    sources_by_function: Mapping[str, dict[str, tuple[str, dropin.Entries]]],
    report: LiftReport,
) -> list[Lifted]:
    """Write the drop-in module and call every function through the written file, as a user does
    (:func:`porter.lift.validate.check_dropin`); a function whose call fails or differs is left out with
    its row saying why, and the module is written again without it and checked again.  The functions the
    module finally holds."""
    rows = {r.function: r for r in report.functions}

    def fail(f: Lifted, reason: str) -> None:
        rows[f.function].verdicts.append(
            Verdict(f.function, DROPIN, "", "", "", False, False, False, Status.FAILED, reason)
        )

    kept: list[Lifted] = []
    for f in good:
        why = dropin.clash(f)
        if why:
            fail(f, f"drop-in: {why}")
            continue
        if f.function not in ctx.refs:  # a resumed row: its reference is run again for the module's check
            if ctx.hung is not None:
                fail(f, f"drop-in: not run: {ctx.hung.describe()}")
                continue
            row = rows[f.function]
            refs = _references(ctx, f, row.sizes, row.hidden)
            ctx.learn(refs)
            broken = refs.broken()
            if broken is not None:
                fail(f, f"drop-in: the Python function failed at {broken[0]}: {broken[1].error}")
                continue
            ctx.refs[f.function] = refs.sets
        kept.append(f)
    devices = _stack_devices()
    while kept:
        text = dropin.module(Path(ctx.path).name, tuple(kept), sources_by_function, kept[0].imports)
        write_atomic(module, text)
        offered = {f.function: tuple(stack for stack, dialect in dropin.STACKS
                                     if dialect in sources_by_function[f.function]) for f in kept}  # fmt: skip
        checked = validate.check_dropin(
            str(module),
            [validate.DropinTarget(f, ctx.refs[f.function], offered[f.function]) for f in kept],
            ctx.timeout,
            devices,
            ctx.say,
        )
        for f in kept:
            row = rows[f.function]
            row.verdicts = [v for v in row.verdicts if v.target != DROPIN] + checked[f.function]
        bad = {name for name, vs in checked.items() if any(v.status is Status.FAILED for v in vs)}
        if not bad:
            break
        kept = [f for f in kept if f.function not in bad]
    return kept


def _stack_devices() -> dict[str, list[Any]]:
    """Per stack of the drop-in module, the devices here its dialect's own backend runs (GPUs, OpenCL CPU
    devices; not the emulator, not a checker): the child that calls the module through that stack opens
    them before its sandbox, as a kernel job's child does."""
    return {
        stack: [d for d in run_devices(dialect) if d.backend == dialect and d.native]
        for stack, dialect in dropin.STACKS
    }


def _sets(
    visible: Mapping[str, int], hidden: Sequence[Mapping[str, int]]
) -> list[tuple[str, Mapping[str, int]]]:
    return [(f"size {_fmt(visible)}", visible)] + [(f"hidden size {_fmt(h)}", h) for h in hidden]


def _references(
    ctx: _Run, lifted: Lifted, visible: Mapping[str, int], hidden: Sequence[Mapping[str, int]]
) -> validate.References:
    """The Python function at the example's arguments (when they are all of its arguments) and at each
    size set, in one child."""
    given: list[tuple[str, dict[str, Any]]] = []
    if ctx.example_args:
        args = {p.name: ctx.example_args[p.name] for p in lifted.params if p.name in ctx.example_args}
        if len(args) == len(lifted.params):
            given.append(("the example's arguments", args))
    return validate.reference_run(
        ctx.modules.get(lifted.function, ctx.path), lifted, _sets(visible, hidden), ctx.seed, ctx.timeout,
        ctx.say, given,
    )  # fmt: skip


def _ask_model(
    ctx: _Run, refusal: RefusedFunction, model: ModelOptions
) -> tuple[LiftedFunction, Lifted, dict[str, validate.Source]] | None:
    """A kernel for a function the rules refused, from the model, validated against the Python; None
    when the refusal is not one a kernel can address (side effects, Python objects)."""
    from porter.lift import model as lm
    from porter.lift.analyze import signature
    from porter.llm.loop import run_loop
    from porter.llm.prompting import PromptContext
    from porter.records import Evaluation, Screened

    if not lm.eligible(refusal.reason):
        return None
    sig = signature(ctx.text, refusal.function, ctx.example_args)
    if isinstance(sig, str):
        return None
    params, sizes = sig
    import ast as _ast

    tree = _ast.parse(ctx.text)
    fn = next(n for n in tree.body if isinstance(n, _ast.FunctionDef) and n.name == refusal.function)
    source = _ast.get_source_segment(ctx.text, fn) or _ast.unparse(fn)
    imports = tuple(
        _ast.get_source_segment(ctx.text, n) or ""
        for n in tree.body
        if isinstance(n, (_ast.Import, _ast.ImportFrom))
    )
    shell = Lifted(
        refusal.function, refusal.line, (), params, sizes, (), (), (), source=source, imports=imports
    )
    visible = ctx.sizes(shell)
    hidden = inputs.hidden_sizes(visible)
    sets = _sets(visible, hidden)
    ctx.say(f"{refusal.function}: asking {model.name} (the rules refused it: {refusal.reason})")
    ran = validate.reference_run(ctx.path, shell, sets, ctx.seed, ctx.timeout, ctx.say)
    ctx.learn(ran)
    refs = ran.sets
    broken = next((r for _, _, r in refs if not r.ok), None)
    row = LiftedFunction(refusal.function, refusal.line, (f"llm:{model.name}",), (f"{refusal.function}_model",),
                         sizes=visible, hidden=hidden,
                         notes=(f"the rules refused it (line {refusal.line}): {refusal.reason}; written by {model.name}",))  # fmt: skip
    if broken is not None:
        row.verdicts = [Verdict(refusal.function, "python", "", "", "", False, False, False, Status.FAILED,
                                f"reference: the Python function failed: {broken.error}")]  # fmt: skip
        return row, shell, {}
    returned = refs[0][2].returned
    returns = ""
    if returned is not None:
        if returned.ndim != 0 or returned.dtype.name not in ("float32", "float64", "int32", "int64"):
            return None
        returns = returned.dtype.name
    c = lm.contract(refusal.function, params, sizes, returns, source, imports)
    if isinstance(c, str):
        return None
    devices = {t: [*run_devices(t), *wavefront_devices(t)] for t in ctx.targets}
    prompt = PromptContext(
        kernel=lm.prompt_kernel(c), path=Path(ctx.path).name, source=source, dialect="cuda", task="lift",
        trials=len(sets), constraints=lm.constraints(c, {}), untranslatable=refusal.reason,
    )  # fmt: skip
    found: dict[str, Any] = {}

    def evaluate(screened: Screened) -> Evaluation:
        evaluation, judged = lm.judge(c, screened.code, model.name, refs, ctx.targets, devices, ctx.timeout)
        if judged is not None:
            found[screened.code] = (judged.lifted, judged.sources, judged.verdicts)
        return evaluation

    result = run_loop(model.provider(), prompt, evaluate, model.loop(candidates=1))
    best = result.best
    row.notes = (*row.notes, f"{result.totals.requests} request(s), {result.totals.usage.input_tokens} input and "
                 f"{result.totals.usage.output_tokens} output tokens, "
                 f"${result.totals.cost_usd:.4f}; {result.stop_reason}")  # fmt: skip
    if best is None or best.code not in found:
        last = result.attempts[-1].reason if result.attempts else result.stop_reason
        row.verdicts = [Verdict(refusal.function, "cuda", "", "", "", False, False, False, Status.FAILED,
                                f"the model's kernels were not validated: {last}")]  # fmt: skip
        return row, shell, {}
    candidate, srcs, verdicts = found[best.code]
    row.verdicts = list(verdicts)
    ctx.refs[candidate.function] = refs
    return row, candidate, srcs


def _validated_sources(
    row: LiftedFunction, srcs: Mapping[str, validate.Source]
) -> dict[str, tuple[str, dropin.Entries]]:
    """The dialects the drop-in module may use -- those validated on some device and rejected on none --
    each with its kernels' entries and argument orders."""
    out: dict[str, tuple[str, dropin.Entries]] = {}
    for t, s in srcs.items():
        mine = [v for v in row.verdicts if v.target == t]
        if any(v.status is Status.VALIDATED for v in mine) and not any(
            v.status is Status.FAILED for v in mine
        ):
            out[t] = (s.text, {k: (entry, arg_map) for k, (entry, arg_map, _) in s.entries.items()})
    return out


def _judge(
    ctx: _Run,
    lifted: Lifted,
    srcs: Mapping[str, validate.Source],
    devices: Mapping[str, Sequence[Any]],
    row: LiftedFunction,
) -> list[Verdict]:
    """The Python function run at the row's sizes (its reference), then the kernels judged against it
    on every device of every target by the harness (:func:`porter.lift.validate.judge`)."""
    start = time.monotonic()
    ran = _references(ctx, lifted, row.sizes, row.hidden)
    ctx.learn(ran)
    refs = ran.sets
    row.reference_s = round(time.monotonic() - start, 3)
    broken = ran.broken()
    if broken is not None:
        label, r = broken
        why = (
            ran.hang.describe()
            if ran.hang is not None
            else f"the Python function failed at {label}: {r.error}"
        )
        return [
            Verdict(lifted.function, "python", "", "", "", False, False, False, Status.FAILED,
                    f"reference: {why}", logs=(r.log[-4000:],))
        ]  # fmt: skip
    ctx.refs[lifted.function] = refs
    verdicts = []
    for t in srcs:
        if not devices[t]:
            verdicts.append(Verdict(lifted.function, t, "", "", "", False, False, False, Status.COMPILED,
                                    f"no device here runs {t}: not validated"))  # fmt: skip
            continue
        for d in devices[t]:
            ctx.say(f"{lifted.function}: {t} on {d.label}")
            verdicts.append(validate.judge(lifted, srcs[t], d, refs, ctx.timeout))
    return verdicts


def _fmt(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _verdict(doc: Mapping[str, Any]) -> Verdict:
    fields = {k: doc[k] for k in Verdict.__dataclass_fields__ if k in doc}
    fields["status"] = Status(fields["status"])
    for k in ("logs", "checks"):
        fields[k] = tuple(fields.get(k) or ())
    fields["sizes"] = tuple(fields.get("sizes") or ())
    fields.pop("timing", None)
    return Verdict(**fields)


def parse_sizes(items: Sequence[str]) -> dict[str, int]:
    """``["n=1000,m=64", "k=3"]`` -> {"n": 1000, "m": 64, "k": 3}."""
    out: dict[str, int] = {}
    for item in items:
        for part in (p for p in item.split(",") if p.strip()):
            name, sep, value = part.partition("=")
            if not sep or not name.strip():
                raise UsageError(f"--sizes {part!r}: expected NAME=INTEGER")
            try:
                out[name.strip()] = int(value)
            except ValueError:
                raise UsageError(f"--sizes {part!r}: {value!r} is not an integer") from None
            if out[name.strip()] < 1:
                raise UsageError(f"--sizes {part!r}: a size is at least 1")
    return out


__all__ = ["lift_file", "parse_sizes", "split_target"]
