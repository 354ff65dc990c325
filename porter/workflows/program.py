"""`porter port DIR` (or several files, or a ``compile_commands.json``): port a whole program.

The program (:func:`porter.program.discover`) is every translation unit under its root, the local
headers they reach and the other files beside them.  For each target:

* a single-source dialect (HIP) gets a **mirrored tree** under ``<out>/<target>/``: every source and
  header translated file by file (host-only files and headers too; names and relative includes
  kept, so the program's own build still finds them), a file with nothing to translate and every
  other file (Makefile, data, README) copied byte for byte;
* a device-only dialect (OpenCL C) gets **one file per unit** that reaches a kernel (the unit's device
  code with its headers' kernels inlined by the translator), ``<out>/<target>/<rel>.cl``, with its
  launch mapping beside it (``<rel>.launch.json``: each CUDA kernel's entry, argument mapping, added
  arguments, device needs).

Every output holding a kernel is compiled by a real compiler here (:func:`porter.harness.gate.
compile_check`: hipcc/clang for AMD archs or the CPU emulator for HIP, an OpenCL runtime for OpenCL C),
so an output that does not build is reported ``failed`` with the log, never left unnoticed.  A step
that fails (a translator crash, an unreadable file) fails that file for that target only.
``report.json`` (schema ``porter-program-report/1``, ``docs/REPORT_FORMAT.md``), ``report.md`` and
``diagnostics.txt`` describe it all; report.json is rewritten after every file, so an interrupted run
keeps what it did.  The user's files are never written: ``--out`` defaults to ``<root>.ported/``
beside the program's root.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from porter.backends import CompileOptions, get_dialect, runners, translation_targets
from porter.backends.spares import warm
from porter.defines import BuildFlags
from porter.errors import UsageError
from porter.files import carried, encode_text, reads_once
from porter.harness.gate import compile_check
from porter.model import Severity, TranslatedKernel, Translation, to_jsonable
from porter.program import ProgramFile, discover
from porter.results import FileTarget, ProgramFileResult, ProgramKernel, ProgramReport
from porter.workflows.program_plan import ProgramPlan
from porter.workflows.program_replay import replay_program
from porter.workflows.program_run import (
    ProgramRuns,
    build_and_run,
    check_data,
    check_max_output,
    check_toolchains,
    require_jail,
)
from porter.workflows.program_timers import timer_rule
from porter.workflows.resume import (
    Ledger,
    check_out_dir,
    is_porter_output,
    key_of,
    toolchain_of,
    write_atomic,
)
from porter.workflows.source import sibling_dir

Progress = Callable[[str], None]
REPORT_NAME = "report.json"
MARKDOWN_NAME = "report.md"
DIAGNOSTICS_NAME = "diagnostics.txt"
_NO_LAUNCHES = (
    "kernels are translated and built here; validating each one needs its launches: give --run to "
    "replay the launches of the program's own run"
)


def default_out_dir(root: Path) -> Path:
    """``<root>.ported/`` beside the program's root folder."""
    return root.parent / f"{root.name}.ported"


def save_report(out: Path, report: ProgramReport, last: str = "") -> str:
    """report.json, rewritten whole (atomically) after every step, so an interrupted run keeps it;
    not written again when it would say the same as `last` (what the previous call wrote).  Returns
    what it holds now."""
    text = json.dumps(report.full_document(), indent=2) + "\n"
    if text != last:
        write_atomic(out / REPORT_NAME, text)
    return text


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class _Porter:
    """The writers and unit builds of a program port: each target's outputs written from the plan's
    translations, each output holding a kernel compiled, the report kept up to date."""

    def __init__(
        self, plan: ProgramPlan, out: Path, report: ProgramReport, build: bool, say: Progress, ledger: Ledger
    ) -> None:
        self.plan, self.program, self.out, self.report = plan, plan.program, out, report
        self.build, self.say, self.jobs = build, say, plan.jobs
        self.ledger = ledger  # the previous report's rows in this folder: build verdicts reused by key
        self.lock = threading.RLock()
        self.results = {f.path: ProgramFileResult(str(f.rel), f.kind) for f in self.program.files}
        report.files = list(self.results.values())
        self.kernels: dict[str, ProgramKernel] = {}
        self.saved = ""  # report.json as last written

    def save(self) -> None:
        with self.lock:
            self.saved = save_report(self.out, self.report, self.saved)

    # ------------------------------------------------------------------ a target

    def port(self, target: str) -> None:
        """Translate (mirror or per unit) for `target`; the builds run ``jobs`` at a time, each a
        sandboxed child compiler, and report.json is rewritten as each file is done."""
        dialect = get_dialect(target)
        self.plan.pretranslate(target, self.say)
        if dialect.single_source:
            for f in self.program.files:  # each translation is remembered (cache): saved once after
                self.results[f.path].targets[target] = self.mirror(target, f)
            self.save()
            if self.build:
                self._each(self.program.units, lambda f: self.build_unit(target, f), f"{target} builds")
        else:

            def one(f: ProgramFile) -> None:
                done = self.unit(target, f)
                with self.lock:
                    self.results[f.path].targets[target] = done

            self._each(self.program.units, one, f"{target} units")
            if dialect.host_program:
                self.host_tree(target)

    def _each(self, files: Sequence[ProgramFile], work: Callable[[ProgramFile], None], what: str) -> None:
        """`work` on every file, ``jobs`` at a time, with counts and the time left in the progress."""
        from concurrent.futures import ThreadPoolExecutor, as_completed

        if not files:
            return
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(files)))) as pool:
            futures = [pool.submit(carried(work), f) for f in files]  # in this command's snapshot
            for n, fut in enumerate(as_completed(futures), 1):
                fut.result()
                self.save()
                left = (time.monotonic() - start) / n * (len(files) - n)
                self.say(
                    f"{what}: {n}/{len(files)} done"
                    + (f", about {left:.0f} s left" if n < len(files) else "")
                )

    def _note_kernels(self, target: str, tr: Translation, f: ProgramFile) -> None:
        """Each kernel of the translation, under its name, where it is defined (a unit's kernels may
        come from its headers: then the header that defines it, when a mirrored port saw it)."""
        with self.lock:
            self._note(target, tr, f)

    def _note(self, target: str, tr: Translation, f: ProgramFile) -> None:
        for tk in tr.kernels:
            k = self.kernels.get(tk.name)
            if k is None:
                k = self.kernels[tk.name] = ProgramKernel(tk.name, str(f.rel), 0)
                self.report.kernels.append(k)
            k.targets[target] = (
                "untranslatable: " + "; ".join(tk.untranslatable) if tk.untranslatable else "translated"
            )

    def _locate_kernels(self, f: ProgramFile) -> None:
        for name, line in self.plan.facts(f).kernels:
            with self.lock:
                k = self.kernels.get(name)
                if k is None:
                    k = self.kernels[name] = ProgramKernel(name, str(f.rel), line)
                    self.report.kernels.append(k)
                else:
                    k.file, k.line = str(f.rel), line

    def mirror(self, target: str, f: ProgramFile) -> FileTarget:
        dest = self.out / target / f.rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not self.plan.uses_cuda(f):
            shutil.copyfile(f.path, dest)
            return FileTarget(str(dest), "copied")
        self.say(f"translating {f.rel} to {target}")
        tr = self.plan.translation(target, f)
        if isinstance(tr, str):
            shutil.copyfile(f.path, dest)
            return FileTarget(str(dest), "failed", reason=f"{tr}; the original was copied")
        _write_bytes(dest, encode_text(tr.text))
        self._note_kernels(target, tr, f)
        self._locate_kernels(f)
        status = "untranslatable" if any(tk.untranslatable for tk in tr.kernels) else "translated"
        return FileTarget(str(dest), status, diagnostics=tuple(tr.diagnostics))

    def host_tree(self, target: str) -> None:
        """The program's files beside `target`'s device code, their host side translated (the port is a
        program: backends' ``host_text``); a unit's own result stays its device code's."""
        dialect = get_dialect(target)
        held: list[tuple[str, Sequence[TranslatedKernel]]] = []
        for f in self.program.units:
            tr = self.plan.translation(target, f)  # as unit() made it (kernels of included .cu too)
            if isinstance(tr, Translation) and tr.kernels:
                held.append((f.rel.with_name(f.rel.stem + dialect.suffix).as_posix(), tr.kernels))
        for f in self.program.files:
            dest = self.out / target / f.rel
            text = self.plan.text(f)
            if text is None or not self.plan.uses_cuda(f):
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f.path, dest)
                continue
            # its own unit's kernels first: two programs in one folder (Rodinia's cfd) each define a kernel
            # of the same name, and a unit's launches are of its own
            own = f.rel.with_name(f.rel.stem + dialect.suffix).as_posix()
            mine = [h for h in held if h[0] == own] + [h for h in held if h[0] != own]
            _write_bytes(dest, encode_text(dialect.host_text(text, mine)))
            self._locate_instances(f)  # a header's kernels: defined there, not in the unit including it
            with self.lock:
                if f.path not in {u.path for u in self.program.units}:
                    self.results[f.path].targets[target] = FileTarget(str(dest), "translated")

    def _locate_instances(self, f: ProgramFile) -> None:
        """Each kernel `f` defines, where it is defined: a template's rows are its translated instances
        (``twice<float>``: each judged by its own launches), which take the template's file and line; a
        kernel without such rows gets its own row (:meth:`_locate_kernels`)."""
        for name, line in self.plan.facts(f).kernels:
            with self.lock:
                instances = [
                    k for n, k in self.kernels.items() if "<" in n and n.split("<", 1)[0].strip() == name
                ]
                for k in instances:
                    k.file, k.line = str(f.rel), line
            if not instances:
                with self.lock:
                    known = self.kernels.get(name)
                    if known is None:
                        self.kernels[name] = ProgramKernel(name, str(f.rel), line)
                        self.report.kernels.append(self.kernels[name])
                    else:
                        known.file, known.line = str(f.rel), line

    def build_unit(self, target: str, f: ProgramFile) -> None:
        """Compile the mirrored unit's device code, kernels of its headers included, with a real
        compiler (a host-only unit reaching no kernel is not built: nothing device-side to check)."""
        result = self.results[f.path].targets.get(target)
        # a unit copied as it is can still reach kernels of the headers or .cu files it includes
        # (hotspot3D's 3D.cu includes opt1.cu): built too, as what the port compiles
        if result is None or result.status not in ("translated", "copied"):
            return
        reached = {str(f.rel), *(str(g.rel) for g in self.plan.reached(f))}
        entry = self.plan.instance_entry(target, f)
        if entry is None:
            entry = next((e for e, where in self.plan.entries(target).values() if where in reached), None)
        if entry is None:
            return
        if result.status == "copied":
            text = self.plan.text(f)
        else:
            tr = self.plan.translation(target, f)
            text = None if isinstance(tr, str) else tr.text
        if text is None:
            return
        dirs = self.program.mirrored_dirs(self.out / target, Path(result.path))
        built = self._build(target, f, text, entry, result, dirs)
        with self.lock:
            self.results[f.path].targets[target] = built

    def unit(self, target: str, f: ProgramFile) -> FileTarget:
        if self.plan.text(f) is None:
            return FileTarget("", "failed", reason="not a text file")
        self.say(f"translating {f.rel} to {target}")
        tr = self.plan.translation(target, f)
        if isinstance(tr, str):
            return FileTarget("", "failed", reason=tr)
        if not tr.kernels:
            return FileTarget("", "none", reason="reaches no kernel", diagnostics=tuple(tr.diagnostics))
        dialect = get_dialect(target)
        dest = self.out / target / f.rel.with_name(f.rel.stem + dialect.suffix)
        _write_bytes(dest, encode_text(tr.text))
        mapping = {
            "source": str(f.rel),
            "kernels": [to_jsonable(tk) for tk in tr.kernels],
            # where each untranslatable construct is (the program's refusal names its file and line)
            "errors": [
                {"file": self._shown(d.path), "line": d.line, "what": f"{d.construct}: {d.reason}"}
                for d in tr.diagnostics
                if d.severity == Severity.ERROR
            ],
        }
        write_atomic(dest.with_name(dest.stem + ".launch.json"), json.dumps(mapping, indent=2) + "\n")
        self._note_kernels(target, tr, f)
        status = "untranslatable" if all(tk.untranslatable for tk in tr.kernels) else "translated"
        result = FileTarget(str(dest), status, diagnostics=tuple(tr.diagnostics))
        if status == "translated" and self.build:
            tk = next(tk for tk in tr.kernels if not tk.untranslatable)
            result = self._build(target, f, tr.text, tk.entry or tk.name, result, ())
        return result

    def _shown(self, path: str) -> str:
        """A diagnostic's file as the user knows it: relative to the program's folder when inside it."""
        p = Path(path)
        return (
            str(p.relative_to(self.program.root))
            if p.is_absolute() and p.is_relative_to(self.program.root)
            else path
        )

    def _build(
        self, target: str, f: ProgramFile, text: str, entry: str, result: FileTarget, dirs: tuple[str, ...]
    ) -> FileTarget:
        """Compile `f`'s `target` output (`text`) as device code, with `f`'s own -D (its build line's)."""
        defines = self.program.defines_for(f.rel)
        source = text
        if get_dialect(target).single_source:
            from porter.scan.extract import device_code

            source = device_code(text)
        rel = str(Path(result.path).relative_to(self.out))
        chains = [toolchain_of(b) for b in runners(target)]
        key = (
            ""
            if any(c is None for c in chains)
            else key_of(
                "program-build",
                target,
                source,
                entry,
                self.plan.tree_digest(target, f) if dirs else "",  # what it includes, from the plan
                chains,
                list(defines),
            )
        )
        old = self.ledger.get(key)
        if old is not None and old.get("status") in ("compiled", "failed"):
            self.say(f"{rel}: {old['status']} earlier, same inputs; kept")
            return FileTarget(
                result.path, str(old["status"]), str(old.get("reason", "")), result.diagnostics,
                str(old.get("toolchain", "")), str(old.get("log", "")), key, True,
            )  # fmt: skip
        self.say(f"compiling {rel}")
        gate = compile_check(target, source, entry, CompileOptions(include_dirs=dirs, defines=defines))
        if gate.ok:
            return FileTarget(
                result.path, "compiled", gate.reason, result.diagnostics, gate.toolchain, key=key
            )
        if gate.reason.startswith("no compiler here"):
            return FileTarget(result.path, "translated", gate.reason, result.diagnostics)
        return FileTarget(
            result.path, "failed", gate.reason, result.diagnostics, gate.toolchain, gate.log, key=key
        )


def _diagnostic_lines(report: ProgramReport) -> list[str]:
    lines = []
    for f in report.files:
        for target, t in f.targets.items():
            if t.status == "failed":
                lines.append(f"{f.path}: {target}: error: {t.reason}")
            for d in t.diagnostics:
                lines.append(f"{f.path}:{d.line}: {target}: {d.severity.value}: {d.construct}: {d.reason}")
    return lines


@dataclass(frozen=True)
class Hooks:
    """What the caller plugs into a program port: ``progress`` lines, ``markdown`` (renders report.md)
    and ``chart`` (draws the run times); the CLI passes its views'."""

    progress: Progress | None = None
    markdown: Callable[[ProgramReport], str] | None = None
    chart: Callable[[ProgramReport, Path], str] | None = None


@reads_once
@warm
def port_program(
    paths: Sequence[str],
    targets: Sequence[str] | None = None,
    *,
    flags: BuildFlags | None = None,
    out_dir: str | None = None,
    translate_only: bool = False,
    translate_options: Mapping[str, Mapping[str, str]] | None = None,
    jobs: int = 0,
    fresh: bool = False,
    run: ProgramRuns | None = None,
    hooks: Hooks | None = None,
) -> ProgramReport:
    """Port the program `paths` make to each target; see the module docstring.  ``flags``: the command
    line's ``-I``, ``-D NAME[=VALUE]`` and ``-U NAME``, over a compilation database's (every build of the
    program and every kernel replay gets the merged macros).  ``translate_only``: write the
    translations, compile nothing.  ``jobs``: builds at a time (0: one per CPU).  A build verdict of the
    previous report.json in the output folder is kept when everything it depends on is the same (the
    key: porter's code, the device code, its headers, the toolchain); ``fresh`` builds everything again.

    Unless ``translate_only``, the original and each single-source port are then built as whole programs
    with every program toolchain here, and each of ``run.runs`` is run and compared
    (:mod:`porter.workflows.program_run`, :class:`ProgramRuns`: timeout, comparison rule, toolchains,
    build command, capture limits, output cap, ``--data`` folders); every captured kernel is replayed
    (:mod:`porter.workflows.program_replay`).  Builds and runs are jailed (:mod:`porter.sandbox.jail`)."""
    from porter.workflows.port import parse_targets

    began = time.monotonic()
    flags, hooks = flags or BuildFlags(), hooks or Hooks()
    run = ProgramRuns(jobs=jobs) if run is None else replace(run, jobs=jobs)
    include_dirs = flags.include_dirs
    say = hooks.progress or (lambda _msg: None)
    chosen = parse_targets(list(translation_targets() if targets is None else targets))
    for target, opts in (translate_options or {}).items():
        try:
            get_dialect(target).check_options(opts)
        except ValueError as err:
            raise UsageError(str(err)) from None
    for d in include_dirs:
        if not Path(d).is_dir():
            raise UsageError("include directory not found (-I)", path=str(d))
    # a given --out is never walked as part of the program; the default one lies beside the root (or is
    # a porter output the walk leaves out), so the program is discovered once
    skip_dirs = [out_dir] if out_dir is not None else []
    program = discover(
        paths,
        include_dirs,
        skip=skip_dirs,
        defines=flags.defines,
        undefines=flags.undefines,
        is_output=is_porter_output,
        cmake_target=flags.cmake_target,
    )
    if out_dir is not None:
        out = Path(out_dir)
    elif len(paths) == 1 and Path(paths[0]).is_file() and Path(paths[0]).name != "compile_commands.json":
        out = sibling_dir(paths[0], "ported")  # one file: <stem>.ported/ beside it, as for a kernel file
    else:
        out = default_out_dir(program.root)
    out = out.absolute()  # the builds and runs work in other folders: a relative --out would not reach it
    check_out_dir(out, program.root / ".", "port")  # inside the root: empty, new or a porter output
    if out.resolve() in {f.path.resolve() for f in program.files} or any(
        f.path.resolve().is_relative_to(out.resolve()) for f in program.files
    ):
        raise UsageError("the output folder holds input files; choose another --out", path=str(out))
    plan = ProgramPlan(
        program, translate_options, jobs if jobs > 0 else (os.cpu_count() or 1)
    )  # each file read and scanned once, from here on
    if not any(plan.uses_cuda(f) for f in program.files):
        raise UsageError(
            "nothing to port: no kernel, launch, CUDA runtime call or CUDA header in the program",
            path=str(paths[0]),
        )
    if run.toolchains is not None:
        check_toolchains(run.toolchains, chosen)
    if run.build_command and translate_only:
        raise UsageError("--build builds the program; it cannot go with --translate-only")
    if run.runs and translate_only:
        raise UsageError("--run builds and runs the program; it cannot go with --translate-only")
    if run.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if run.data and translate_only:
        raise UsageError("--data is what --run reads; it cannot go with --translate-only")
    if not translate_only:
        check_data(run.data)
        check_max_output(run.max_output)
        require_jail()  # --require-sandbox: before anything is translated or built
    if run.runs and not translate_only:  # the lines printed from a timer are not compared (scan/timers.py)
        run = replace(run, rule=timer_rule(plan, run.rule))
    report = ProgramReport(root=str(program.root), out_dir=str(out), targets=chosen)
    report.stages["plan"] = round(time.monotonic() - began, 3)
    report.build = {
        "flags_from": program.flags_from or "none",
        "include_dirs": list(program.include_dirs),
        "defines": list(program.defines),
        "define_origins": dict(program.define_origins),  # NAME -> "command line" | "compile_commands.json"
        "built": "translations only (--translate-only)"
        if translate_only
        else "each output with a kernel compiled; the original and each single-source port built as programs",
    }
    report.notes += [f"skipped {s}" for s in program.skipped]
    if not run.runs:  # the hint for a missing --run, only when it is missing
        report.notes.append(_NO_LAUNCHES)
    ledger = Ledger.of(out, "program", fresh)  # what the previous report in this folder may lend
    porter = _Porter(plan, out, report, not translate_only, say, ledger)
    porter.save()
    say(f"porting {len(program.files)} file(s) ({len(program.units)} unit(s)) under {program.root}")
    with report.clock("translate"):
        for target in chosen:
            porter.port(target)
    report.kernels.sort(key=lambda k: (k.file, k.line, k.name))  # the same order however builds interleave
    if not translate_only:
        with report.clock("build and run"):
            build_and_run(
                program, out, report, run, ledger=ledger, say=say, skip=[Path(p) for p in skip_dirs],
                save=porter.save,
            )  # fmt: skip
        with report.clock("replay"):
            replay_program(plan, out, report, say, porter.save, ledger)
        if hooks.chart is not None and report.runs:
            same = all(r.resumed for run in report.runs for r in [*run.originals, *run.variants] if r.key)
            kept = out / "runs.png"
            report.chart = (
                str(kept) if same and kept.is_file() else hooks.chart(report, out)
            )  # nothing re-ran: kept
    lines = _diagnostic_lines(report)
    write_atomic(out / DIAGNOSTICS_NAME, "\n".join(lines) + ("\n" if lines else ""))
    report.complete = True
    porter.save()
    if hooks.markdown is not None:
        write_atomic(out / MARKDOWN_NAME, hooks.markdown(report))
    return report


__all__ = ["Hooks", "default_out_dir", "port_program"]
