"""Build the original and each whole-program port, run them, and compare the runs (`port --run`).

The original (written in CUDA) and every port whose dialect is single-source (a HIP tree) are built
with every program toolchain here that builds their language (:func:`porter.backends.programs.
toolchains_for`: the CPU runtime always; nvcc, HIP-on-CUDA or hipcc where they exist).  Then, for each
``--run "ARGS"``, each build that can run here is run in a scratch copy of its tree (data files beside
the sources are visible; writes go to the copy), with a timeout, in the program jail
(:mod:`porter.sandbox.jail`: no network; it sees the system read-only, its copy, and the folders given
with ``--data`` read-only -- not the rest of the file system; a ``--data`` folder outside the program's
folder is also where the program's relative paths look, a symbolic link at the same position from the
copy, :func:`data_placement`).  Its stdout and stderr are streamed to
files in its run folder, each capped (``--max-output``: past it the run is stopped and failed), and
compared from there; report.json keeps only their last lines, with secret values masked.  Each port's run is compared
(:mod:`porter.harness.outputs`) with the original's run on the same device where there is one, else
with the first original run: ``matches``, ``differs`` (each difference with its line), ``failed``
(a build or a run that failed, with the log) or ``not-run`` (with the reason).

Builds and runs are keyed by everything they depend on; a re-run with the same inputs reuses them from
the previous report.json (``--fresh`` does everything again).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from porter.backends import Device, get_dialect
from porter.backends.programs import (
    BuiltProgram,
    ProgramSource,
    ProgramToolchain,
    defines_main,
    toolchains_for,
)
from porter.capture import DEFAULT_FIRST_MIB, DEFAULT_LAUNCHES, DEFAULT_MIB, MANIFEST, capture_env, finish
from porter.defines import merge_defines
from porter.errors import PorterError, UsageError
from porter.files import decode_text, read_input
from porter.harness.outputs import (
    Rule,
    RunOutput,
    Unstable,
    Written,
    also_varies,
    as_device,
    compare,
    default_rule,
    nothing_compared,
    property_lines,
    snapshot,
    statistic_lines,
    timer_notes,
    unstable,
    width_lines,
    written_files,
)
from porter.program import Program, ProgramFile
from porter.redact import redact
from porter.results import ProgramBuild, ProgramReport, ProgramRun, RunResult
from porter.sandbox import SandboxError, clock
from porter.sandbox import jail as program_jail
from porter.sandbox.jail import DEFAULT_MAX_OUTPUT, Jail, read_tail
from porter.workflows.program_sanitizer import defect
from porter.workflows.resume import Ledger, key_of, seal, sealed

Progress = Callable[[str], None]
DEFAULT_TIMEOUT_S = 300.0
_RULE = re.compile(r"^([A-Za-z_][\w.+-]*)\s*:(?!=)(.*)$")
_ASSIGN = re.compile(r"^([A-Za-z_]\w*)\s*[:?]?=\s*([^\s#]+)\s*$", re.MULTILINE)
TAIL_CHARS = 4000  # of a run's stdout and stderr, kept in report.json (the whole is in its run folder)
LOG_CHARS = 20_000  # of a build's log, kept in report.json (the whole is in its build folder)
_STOPPED = ("timed out", "printed more than")  # how a run porter stopped is said (jail.Ran.reason)
MAX_DATA_FILES = 100_000  # files of the --data folders a run's key lists (beyond: the run is never reused)
MAX_DATA_CLIMB = 64  # folders a --data folder may lie above the program's and still be placed


ORIGINAL = "original"  # the variant name of the program as the user wrote it
# said of an original whose output varied, where its second run had its blocks in another order
REORDERED = (
    "(its second run had the wall clock shifted and, on porter's CPU runtime, every launch's blocks and threads "
    "in another order: what varies depends on a clock or on the order its blocks run in)"
)


def _tail(text: str, chars: int = TAIL_CHARS) -> str:
    """The end of `text` (at most `chars` characters), secret values of porter's environment masked."""
    text = redact(text)
    return text if len(text) <= chars else "..." + text[-chars:]


def _file_tail(path: Path) -> str:
    return _tail(read_tail(path, TAIL_CHARS))


def main_units(program: Program) -> list[ProgramFile]:
    found = []
    for f in program.units:
        try:
            text = decode_text(read_input(f.path))
        except UsageError:
            continue
        if defines_main(text):
            found.append(f)
    return found


def program_names(program: Program, main: ProgramFile) -> set[str]:
    """The names a user calls the executable built from `main` by: its stem, each Makefile target beside
    or above it whose rule names the unit (or its object), and the ``-o NAME`` of that rule's recipe."""
    names = {main.path.stem}
    mentions = re.compile(rf"(?<![\w.]){re.escape(main.path.stem)}\.(?:cu|c|cc|cpp|cxx|o)\b")
    folder = main.path.parent
    while folder.is_relative_to(program.root):
        for mk in ("Makefile", "makefile", "GNUmakefile"):
            path = folder / mk
            if not path.is_file():
                continue
            try:
                lines = decode_text(read_input(path)).splitlines()
            except UsageError:
                continue
            variables = dict(_ASSIGN.findall("\n".join(lines)))
            for k, raw in enumerate(lines):
                line = _expand(raw, variables)
                m = _RULE.match(line)
                if not (m and mentions.search(m.group(2)) and "%" not in m.group(1)):
                    continue
                names.add(m.group(1))
                for recipe in lines[k + 1 :]:
                    if not recipe.startswith("\t"):
                        break
                    out = re.search(r"-o\s*([^\s$()]+)", recipe)
                    if out:
                        names.add(os.path.basename(out.group(1)))
        if folder == program.root:
            break
        folder = folder.parent
    return names


def _expand(line: str, variables: Mapping[str, str]) -> str:
    """`line` with ``$(NAME)`` / ``${NAME}`` replaced by the Makefile's simple assignments."""
    return re.sub(r"\$[({]([A-Za-z_]\w*)[)}]", lambda v: variables.get(v.group(1), v.group(0)).strip(), line)


def run_folder(program: Program, main: ProgramFile) -> Path:
    """Where the program runs, relative to its root: the nearest folder at or above the main unit with a
    Makefile (where its README's commands run), else the unit's folder."""
    folder = main.path.parent
    while folder.is_relative_to(program.root):
        if any((folder / mk).is_file() for mk in ("Makefile", "makefile", "GNUmakefile", "CMakeLists.txt")):
            return folder.relative_to(program.root)
        if folder == program.root:
            break
        folder = folder.parent
    return main.path.parent.relative_to(program.root)


@dataclass(frozen=True)
class Placement:
    """Where a run's copy of the program lies in its scratch folder (``runs/<key>/tree``) so that each
    ``--data`` folder outside the program's folder is at the same relative position from the copy as from
    the program's own folder (srad_v1 in rodinia/cuda/srad/ opens ``../../../data/srad/image.pgm``).
    ``nest``: the copy's path under the scratch folder ("": the scratch folder itself, as without such a
    folder); ``links``: (a path under the scratch folder, the --data folder a symbolic link there names);
    ``notes``: a line for each --data folder whose position cannot be kept (the run sees it at its own
    path only)."""

    nest: str = ""
    links: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()


def data_placement(root: Path | str, data: Sequence[str]) -> Placement:
    """The :class:`Placement` of a program whose folder is `root` for the ``--data`` folders `data`
    (absolute).  Positions are measured between the folders' real paths, as the kernel resolves a
    run's ``..``; a folder inside the program's is its copy's business (as ever), one that holds the
    program's folder cannot be reproduced (the copy cannot lie inside it)."""
    program = os.path.realpath(root)
    climbs: dict[str, tuple[str, int]] = {}  # real path -> (the path the jail is given, folders climbed)
    notes: list[str] = []
    for folder in data:
        real = os.path.realpath(folder)
        parts = Path(os.path.relpath(real, program)).parts
        up = next((i for i, part in enumerate(parts) if part != ".."), len(parts))
        if up == 0:  # inside the program's folder: its copy is there
            continue
        if up == len(parts):
            notes.append(
                f"--data {folder} holds the program's folder: its scratch copy cannot lie inside it, so runs "
                "see that folder at its own path only, not at its relative position"
            )
        elif up > MAX_DATA_CLIMB:
            notes.append(
                f"--data {folder} is {up} folders above the program's: runs see it at its own path only, "
                "not at its relative position"
            )
        else:
            climbs[real] = (folder, up)
    if not climbs:
        return Placement(notes=tuple(notes))
    anchor = Path(program).parents[max(up for _f, up in climbs.values()) - 1]
    links: list[tuple[str, str]] = []
    for real in sorted(climbs, key=lambda r: (len(Path(r).parts), r)):
        where = os.path.relpath(real, anchor)
        if not any(Path(where).is_relative_to(w) for w, _ in links):  # else seen through that link
            links.append((where, climbs[real][0]))
    return Placement(os.path.relpath(program, anchor), tuple(links), tuple(notes))


def _placed(base: Path, placement: Placement) -> Path:
    """The folder under `base` (a run's fresh scratch folder) that the program's copy goes in, with the
    symbolic links of `placement` made beside it (the jail lets a run read the --data folders they name,
    never write them)."""
    for where, target in placement.links:
        (base / where).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, base / where, target_is_directory=True)
    return base / placement.nest if placement.nest else base


def run_name(main: ProgramFile, argv: Sequence[str], args: str) -> str:
    """The executable's name a run gives it (its argv[0], the same for every build): the one ARGS starts with
    (:func:`choose` took it off `argv`), else the main unit's."""
    words = shlex.split(args)
    return os.path.basename(words[0]) if len(words) == len(argv) + 1 else main.path.stem


def choose(program: Program, mains: Sequence[ProgramFile], args: str) -> tuple[ProgramFile, list[str]]:
    """(the main unit a ``--run`` names, its arguments).  ARGS may start with the program's name
    (``./smooth data/values.txt``); with one executable it may be the arguments alone, and a first word
    starting with ``./`` or ``/``, or a path that is no file of the program (``cuda/lud_cuda``), names it."""
    try:
        words = shlex.split(args)
    except ValueError as err:
        raise UsageError(f"--run {args!r}: {err}") from None
    if words:
        first = os.path.basename(words[0])
        named = [m for m in mains if first in program_names(program, m)]
        folder = os.path.dirname(words[0]).removeprefix("./")
        if len(named) > 1 and folder:  # `cuda/lud` and `base/lud`: the folder says which
            named = [m for m in named if str(m.rel.parent).endswith(folder)] or named
        if not named and folder:  # `cuda/lud_cuda`: the one main unit in that folder
            named = [
                m for m in mains if str(m.rel.parent) == folder or str(m.rel.parent).endswith("/" + folder)
            ]
        if len(named) == 1:
            return named[0], words[1:]
    if len(mains) == 1:  # "./prog ARGS" or "dir/prog ARGS" names the one executable, whatever it is called
        here = program.root / run_folder(program, mains[0])
        is_name = bool(words) and (
            words[0].startswith(("./", "/")) or ("/" in words[0] and not (here / words[0]).exists())
        )
        return mains[0], words[1:] if is_name else words
    names = ", ".join(
        sorted(
            {
                f"{m.rel.parent}/{n}" if str(m.rel.parent) != "." else n
                for m in mains
                for n in program_names(program, m)
            }
        )
    )
    raise UsageError(
        f"--run {args!r}: the program builds several executables; start ARGS with one of: {names}"
    )


def _tree_digest(tree: Path, files: Sequence[str], include_dirs: Sequence[str], root: Path) -> str:
    """What a build of `tree` depends on: the program's files in it (relative paths, sizes, contents)
    and the headers of include folders outside the program.  Regular files only (a FIFO beside a
    single-file program is never opened)."""
    h = hashlib.sha256()
    listed: list[tuple[str, Path]] = [(rel, tree / rel) for rel in files]
    for d in include_dirs:
        folder = Path(d)
        if folder.is_relative_to(root) or not folder.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(x for x in dirnames if not x.startswith("."))
            listed += [
                (str(Path(dirpath, n).relative_to(folder)), Path(dirpath, n)) for n in sorted(filenames)
            ]
    for rel, p in listed:
        try:
            st = p.stat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        h.update(f"{rel}\0{st.st_size}\0".encode("utf-8", "surrogateescape"))
        if st.st_size <= 4 << 20:
            h.update(p.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class ProgramRuns:
    """How a program is built and run (``port DIR --run``'s and ``capture``'s options).

    ``runs``: each ``--run`` (a command line, ``"./prog ARGS"``, or the arguments alone); ``timeout``:
    seconds per run; ``rule``: how outputs are compared (None: :func:`default_rule`); ``toolchains``: the
    program toolchains by name (None: every one here); ``build_command``: the user's own build (``make``)
    run with porter's compiler drivers; ``capture_limits``: launches kept per kernel, MiB per launch and MiB for a kernel's first launch kept;
    ``max_output``: bytes a run or build command may print per stream; ``data``: folders every run may
    read; ``jobs``: builds at a time (0: one per CPU)."""

    runs: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT_S
    rule: Rule | None = None
    toolchains: tuple[str, ...] | None = None
    build_command: str = ""
    capture_limits: tuple[int, ...] = (DEFAULT_LAUNCHES, DEFAULT_MIB, DEFAULT_FIRST_MIB)
    max_output: int = DEFAULT_MAX_OUTPUT
    data: tuple[str, ...] = ()
    jobs: int = 0
    expect_exit: int = 0  # the original's exit status when it works (--expect-exit: a failing one on purpose)


class _Runner:
    def __init__(
        self,
        program: Program,
        out: Path,
        report: ProgramReport,
        options: ProgramRuns,
        ledger: Ledger,
        say: Progress,
        skip: Sequence[Path] = (),
        saver: Callable[[], None] = lambda: None,
    ) -> None:
        self.saver, self.ledger = saver, ledger  # the earlier report's rows: builds and runs reused by key
        self.options = options
        # runs whose original the sanitizer checks whatever the ports did (glibc's check stopped it before)
        self.checked_runs: tuple[int, ...] = ()
        # the toolchains to build with (None: every one here)
        self.only: set[str] | None = None if options.toolchains is None else set(options.toolchains)
        self.command = options.build_command  # the user's build command, run with porter's compiler drivers
        self.program, self.out, self.report, self.runs = program, out, report, list(options.runs)
        self.timeout, self.rule, self.say, self.skip = (
            options.timeout,
            options.rule or default_rule(),
            say,
            list(skip),
        )
        self.capture_limits = options.capture_limits  # launches kept per kernel, MiB per launch
        self.language = "cuda"  # what the original program is written in (`porter capture` of a HIP one)
        self.repeat = True  # the original run twice: what varies between its own runs is not compared
        self.max_output = options.max_output  # bytes a run (or a build command) may print, per stream
        self.data = options.data  # folders every run may read (--data), absolute
        # where each run's copy lies so the --data folders outside the program's are where it looks
        self.placement = data_placement(program.root, self.data)
        self.expect_exit = options.expect_exit
        # a variant whose tree is a program of its own (porter verify: a port someone wrote, its own files
        # and units), by variant; every other variant's tree mirrors the original's files
        self.trees: dict[str, Program] = {}
        self._mains: dict[Path, list[ProgramFile]] = {}  # such a tree's main units
        self._run_caches: set[Path] = set()  # the runtime caches emptied by this run of porter (run_cache)
        self._run_caches_lock = threading.Lock()
        self.outputs: dict[int, RunOutput] = {}  # id(RunResult) -> what that run printed and wrote
        self.varies: dict[int, Unstable] = {}  # id(an original's RunResult) -> what varies between its runs
        self.widths: dict[str, int] = {}  # device label -> its warp width (the runs compared across widths)
        self.names: dict[str, str] = {}  # device label -> the name its runtime reports (cudaDeviceProp.name)

    # ------------------------------------------------------------------ builds

    def variants(self) -> list[tuple[str, str, Path]]:
        """(variant, its language, its tree): the original, then each single-source port."""
        found = [("original", self.language, self.program.root)]
        for target in self.report.targets:
            language = get_dialect(target).program_language
            if language is not None and (self.out / target).is_dir():
                found.append((target, language, self.out / target))
        return found

    def build_all(self, jobs: int) -> dict[tuple[str, str], tuple[ProgramBuild, ProgramToolchain]]:
        """Every variant with every toolchain, ``jobs`` builds at a time (each is its own compiler
        processes); the report lists them in a fixed order however they interleave."""
        from concurrent.futures import ThreadPoolExecutor

        work = [
            (v, lang, tree, chain)
            for v, lang, tree in self.variants()
            for chain in toolchains_for(lang)
            if self.only is None or chain.name in self.only or getattr(chain, "family", "") in self.only
        ]
        built: dict[tuple[str, str], tuple[ProgramBuild, ProgramToolchain]] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(work) or 1))) as pool:
            futures = [pool.submit(self.build, v, lang, tree, chain) for v, lang, tree, chain in work]
            for n, ((variant, _lang, _tree, chain), fut) in enumerate(zip(work, futures, strict=True), 1):
                record = fut.result()
                self.report.builds.append(record)
                built[(variant, chain.name)] = (record, chain)
                self.say(f"program builds: {n}/{len(work)} done")
                self.save()
        return built

    def build(self, variant: str, language: str, tree: Path, chain: ProgramToolchain) -> ProgramBuild:
        why = chain.unavailable()
        if why:
            return ProgramBuild(variant, chain.name, "unavailable", reason=why)
        device = chain.device()
        label = device.label if device is not None else ""
        prog = self.trees.get(variant, self.program)
        source = ProgramSource(
            tree, tuple(str(u.rel) for u in prog.units), prog.include_dirs,
            prog.defines, language, prog.root, tuple(str(f.rel) for f in prog.files),
            capture=variant == "original",  # only the original's runs are captured
            max_output=self.max_output, unit_defines=prog.unit_defines,
        )  # fmt: skip
        ident = getattr(chain, "toolchain_id", lambda: chain.name)()
        key = key_of(
            "program", variant, chain.name, ident, language, source.units, self.command,
            source.include_dirs, source.defines, list(source.unit_defines), self.max_output,
            _tree_digest(tree, source.files, source.include_dirs, prog.root),
        )  # fmt: skip
        old = self.ledger.get(key)
        if (
            old is not None
            and old.get("key") == key
            and old.get("status") in ("built", "failed", "refused")
            and all(_is_built_here(Path(str(p)), self.out) for p in (old.get("executables") or {}).values())
            and sealed(
                self.out / "build" / variant / chain.name,
                [Path(str(p)) for p in (old.get("executables") or {}).values()],
            )
        ):
            self.say(f"{variant}: {chain.name} build {old['status']} earlier, same inputs; kept")
            return ProgramBuild(
                variant, chain.name, str(old["status"]), label, str(old.get("reason", "")), ident,
                dict(old.get("executables") or {}), float(old.get("seconds") or 0.0),
                list(old.get("commands") or ()), _tail(str(old.get("log", "")), LOG_CHARS), key, True,
                bool(old.get("captures", False)),
            )  # fmt: skip
        self.say(f"building the {variant} with {chain.name}" + (f": {self.command}" if self.command else ""))
        start = time.monotonic()
        where = self.out / "build" / variant / chain.name
        try:
            if self.command:
                with_command = getattr(chain, "build_with", None)
                result: BuiltProgram = (
                    with_command(source, where, self.command)
                    if with_command is not None
                    else BuiltProgram(
                        False, ident, reason=f"--build does not run with {chain.name}", unavailable=True
                    )
                )
            else:
                result = chain.build(source, where)
        except OSError as err:
            result = BuiltProgram(False, ident, reason=f"build failed: {err}")
        seconds = round(time.monotonic() - start, 3)
        status = (
            "built"
            if result.ok
            else ("refused" if result.refused else "unavailable" if result.unavailable else "failed")
        )
        captures = getattr(chain, "captures", False) if result.captures is None else result.captures
        if variant == "original" and result.ok and result.fallback:
            # the instrumented build failed and the program was built as written: said, never silent
            said = (
                f"{chain.name}: the capturing build of the original failed ({result.fallback}); "
                "built as written, without capture: its runs record no launch to replay"
            )
            self.say(said)
            if said not in self.report.notes:  # (builds run on threads: a list append is atomic)
                self.report.notes.append(said)
        if result.ok:  # what a re-run reuses, signed (issue #37)
            seal(where, [Path(str(p)) for p in result.executables.values()])
        return ProgramBuild(
            variant, chain.name, status, label, redact(result.reason), result.toolchain or ident,
            dict(result.executables), seconds, list(result.commands), _tail(result.log, LOG_CHARS), key,
            captures=bool(captures and result.ok),
        )  # fmt: skip

    # ------------------------------------------------------------------ runs

    def run_all(
        self,
        built: Mapping[tuple[str, str], tuple[ProgramBuild, ProgramToolchain]],
        mains: Sequence[ProgramFile],
    ) -> None:
        if not mains:
            self.report.notes.append("no unit defines main(): nothing to run")
            return
        runnable = [(b, c) for b, c in built.values() if b.status == "built" and b.device]
        for n, args in enumerate(self.runs, 1):
            main, argv = choose(self.program, mains, args)
            name = run_name(main, argv, args)
            run = ProgramRun(args, main.path.stem)
            self.report.runs.append(run)
            for build, chain in runnable:
                if build.variant != "original":
                    continue
                self.say(f"run {n}/{len(self.runs)}: the original on {build.device}")
                rec = self.run_one(build, chain, main, argv, n, name)
                why = original_failure(
                    rec,
                    self.outputs.get(id(rec)),
                    self.expect_exit,
                    self.program,
                    run_folder(self.program, main),
                )
                if why and rec.exit is not None and rec.exit != self.expect_exit and program_jail.tracer():
                    # once more, watched from outside the jail: the files it looked for and did not find
                    missing = self.missing_files(build, chain, main, argv, name)
                    why = original_failure(
                        rec, self.outputs.get(id(rec)), self.expect_exit, self.program,
                        run_folder(self.program, main), missing,
                    )  # fmt: skip
                if why:  # no evidence: nothing a port does can be compared with it
                    rec.status, rec.reason = "failed", why
                    self.say(f"run {n}: {why}")
                if (
                    rec.status == "ran" and self.repeat
                ):  # a second run says what varies by itself (clocks, random seeds)
                    again = self.run_one(build, chain, main, argv, n, name, repeat=True, shift_clock=True)
                    first, second = self.outputs.get(id(rec)), self.outputs.get(id(again))
                    if again.status == "ran" and first is not None and second is not None:
                        self.varies[id(rec)] = unstable(first, second, self.rule)
                        rec.varies = self.varies[id(rec)].describe()
                        if rec.varies and getattr(chain, "reorder_env", None):
                            rec.varies.append(REORDERED)
                run.originals.append(rec)
                run.original = run.original or rec
                self.save()
            for variant, _language, _tree in self.variants()[1:]:
                mine = [(b, c) for b, c in runnable if b.variant == variant]
                if not mine:
                    why = "; ".join(
                        f"{b.toolchain}: {b.reason or b.status}"
                        for b in self.report.builds
                        if b.variant == variant
                    )
                    run.variants.append(
                        RunResult(variant, "", "", "not-run", reason=why or "no build of it runs here")
                    )
                for build, chain in mine:
                    ref = _reference(run, build.device)
                    if ref is not None and ref.exit is None and ref.reason.startswith(_STOPPED):
                        option = "--timeout" if ref.reason.startswith("timed out") else "--max-output"
                        run.variants.append(
                            RunResult(
                                variant,
                                build.toolchain,
                                build.device,
                                "not-run",
                                reason=f"the original {ref.reason} on {ref.device}: give a larger {option} or "
                                "smaller arguments",
                            )  # fmt: skip
                        )
                        continue
                    self.say(f"run {n}/{len(self.runs)}: {variant} on {build.device}")
                    rec = self.run_one(build, chain, main, argv, n, name)
                    self.judge(run, rec)
                    run.variants.append(rec)
                    self.save()
            for target in self.report.targets:
                if get_dialect(target).program_language is None:
                    run.variants.append(
                        RunResult(
                            target,
                            "",
                            "",
                            "not-run",
                            reason=f"the {target} port is device code only (one file per unit): its kernels are "
                            "built here, not a program",
                        )  # fmt: skip
                    )

    def sanitize_original(
        self,
        built: Mapping[tuple[str, str], tuple[ProgramBuild, ProgramToolchain]],
        mains: Sequence[ProgramFile],
    ) -> None:
        """Where a port's run differs or fails, the original once more, built with AddressSanitizer by a toolchain here
        that can (its ``sanitized()``: the CPU runtime) and run with that run's arguments: a memory error of
        its own code is named with its file and line (:mod:`porter.workflows.program_sanitizer`) in
        ``report.original_defects``, and the check and what it found in the notes.  Runs are checked in order
        until one shows an error; nothing runs when no port differs and glibc's check stopped no run of the
        original (:func:`fortify_stops`: those runs are checked whatever the ports did)."""
        # a port's run that differs, or that was stopped or crashed where the original's finished (b+tree's HIP
        # port on an H100 ran past its --timeout, scanning a buffer its original never terminated)
        differing = [
            (n, r)
            for n, r in enumerate(self.report.runs, 1)
            if (n in self.checked_runs or any(
                v.status == "differs" or (v.status == "failed" and v.reason.startswith((*_STOPPED, "killed by signal")))
                for v in r.variants
            ))
            and r.original is not None and r.original.status == "ran"
        ]  # fmt: skip
        chains = [
            san for b, c in built.values()
            if b.variant == ORIGINAL and b.status == "built" and (san := getattr(c, "sanitized", lambda: None)())
        ]  # fmt: skip
        if not differing or not chains or not mains:
            return
        chain = chains[0]
        why = "glibc stopped the original" if self.checked_runs else "a port's run differs"
        self.say(f"{why}: building the original with {chain.name} to check its own memory use")
        build = self.build(ORIGINAL, self.language, self.program.root, chain)
        self.report.builds.append(build)
        if build.status != "built":
            self.report.notes.append(
                f"the original's {chain.name} build (a check of its own memory use) failed: {build.reason}"
            )
            return
        for n, run in differing:
            main, argv = choose(self.program, mains, run.args)
            name = run_name(main, argv, run.args)
            rec = self.run_one(build, chain, main, argv, n, name, repeat=True)
            stderr = self.out / "runs" / rec.key[:16] / "stderr.txt"
            text = (
                stderr.read_text(encoding="utf-8", errors="replace") if stderr.is_file() else rec.stderr_tail
            )
            found = defect(text, str(self.out / "build" / ORIGINAL / chain.name / "src"))
            said = f"run {n} ({run.args or 'no arguments'}) of the original built with {chain.name}: "
            if found:
                self.report.original_defects.append(f"{found} (run {n}: {run.args or 'no arguments'})")
                self.report.notes.append(said + found)
                self.say(said + found)
                return
            ref = run.original
            if ref is not None and rec.exit != ref.exit:  # it did not get as far: no evidence either way
                lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
                last = next((ln for ln in lines if ln.startswith("SUMMARY: ")), lines[-1] if lines else "")
                ended = "was stopped" if rec.exit is None else f"exited {rec.exit}"
                self.report.notes.append(
                    said + f"it {ended} where the original's run exited {ref.exit}"
                    + (f" ({last[:200]})" if last else "") + "; no memory error of its own code found before that"
                )  # fmt: skip
                continue
            self.report.notes.append(said + "no memory error of its own code found")

    def judge(self, run: ProgramRun, rec: RunResult) -> None:
        """Compare a port's run with the original's (same device, else the first)."""
        ref = _reference(run, rec.device)
        if ref is not None and ref.status != "ran":  # an original that failed is no evidence either way
            why = ref.reason if ref.reason.startswith("the original") else f"the original was {ref.reason}"
            rec.status, rec.reason = "not-run", why
            return
        if rec.status in ("failed", "not-run"):
            return
        if ref is None:
            builds = [b for b in self.report.builds if b.variant == ORIGINAL and b.status != "built"]
            why = "; ".join(dict.fromkeys(f"{b.toolchain}: {b.reason or b.status}" for b in builds))
            rec.status, rec.reason = "not-run", "the original did not run here" + (f" ({why})" if why else "")
            return
        rec.against = ref.device
        original, mine = self.outputs.get(id(ref)), self.outputs.get(id(rec))
        if original is None or mine is None:
            rec.status, rec.reason = "not-run", "the original's output is not available"
            return
        # what varies between two runs of the original on any device: a property of the program, not of the
        # device the reference ran on (a GPU may run its blocks in one order twice; porter's CPU runtime varies it)
        varies = also_varies(
            self.varies.get(id(ref)), original,
            [(self.varies[id(o)], out) for o in run.originals
             if o is not ref and id(o) in self.varies and (out := self.outputs.get(id(o))) is not None],
            self.rule,
        )  # fmt: skip
        widths = (self.widths.get(ref.device, 0), self.widths.get(rec.device, 0))
        if all(widths) and widths[0] != widths[1]:  # a port run at another warp width (HIP at 64 lanes)
            named = width_lines(original, mine, widths, self.rule)
            if named.lines:
                varies = replace(
                    varies or Unstable(), lines=(varies.lines if varies else frozenset()) | named.lines
                )
                rec.reason = "; ".join(
                    f"stdout line {n} reports the warp width ({widths[0]} on {ref.device}, {widths[1]} here): "
                    "not compared"
                    for n in named.numbers
                )
        names = (self.names.get(ref.device, ""), self.names.get(rec.device, ""))
        if not _same_device(ref.device, rec.device):
            mine, numbers = as_device(mine, names)  # a line naming the device it ran on, as the original's
            if numbers:
                said = f"stdout line{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers[:5]))} name the device"
                said += f" ({names[1]} here, {names[0]} on {ref.device}): compared with that name swapped"
                rec.reason = "; ".join(part for part in (rec.reason, said) if part)
            props = property_lines(original, mine, self.rule)  # its memory, limits, clocks: the device's
            if props.lines:
                varies = replace(
                    varies or Unstable(), lines=(varies.lines if varies else frozenset()) | props.lines
                )
                said = "; ".join(
                    f"stdout line {n} reports a property of the device ({rec.device} here, {ref.device} for the "
                    "original): not compared"
                    for n in props.numbers
                )
                rec.reason = "; ".join(part for part in (rec.reason, said) if part)
            # its own error measure (how far from its own reference): the device's rounding
            stats, described = statistic_lines(original, mine, self.rule)
            if stats.lines:
                varies = replace(
                    varies or Unstable(), lines=(varies.lines if varies else frozenset()) | stats.lines
                )
                said = "; ".join(
                    f"{d} -- the program's own error statistic, which follows the device's rounding ({rec.device}"
                    f" here, {ref.device} for the original), and its own check passed in both runs: not compared"
                    for d in described
                )
                rec.reason = "; ".join(part for part in (rec.reason, said) if part)
        timed = timer_notes(original.stdout, self.rule)  # printed from a timer, as the program's source shows
        rec.reason = "; ".join(part for part in (rec.reason, *timed) if part)
        # all of it first: a port whose output equals the original's everywhere, what varies included, is
        # said to match on everything (a port on the runtime the original ran on, in its order)
        whole = varies is not None and not compare(original, mine, self.rule)
        rec.differences = [] if whole else compare(original, mine, self.rule, varies)
        if not whole and not rec.differences:  # a match with what varies left out: on what, said with it
            left = nothing_compared(original, self.rule, varies)
            if left:  # no evidence: a match on nothing the original determines
                rec.status, rec.reason = "not-run", "; ".join(part for part in (rec.reason, left) if part)
                return
            said = varies.uncompared() if varies is not None else ""
            rec.reason = "; ".join(part for part in (rec.reason, said) if part)
        rec.status = "differs" if rec.differences else "matches"
        if rec.differences and not _same_device(rec.against, rec.device):
            rec.differences.insert(
                0, f"(compared with the original on {rec.against}: no original run on {rec.device})"
            )

    def run_cache(self, folder: Path) -> Path:
        """`folder`, emptied the first time this run of porter uses it: a build's runs share what the
        toolchain's runtime keeps there (porter_opencl.h: each .cl's binary for the device, so the second run
        does not compile it again), and never what an earlier run of porter left, which nothing vouches for."""
        with self._run_caches_lock:
            if folder not in self._run_caches:
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True, exist_ok=True)
                self._run_caches.add(folder)
        return folder

    def run_one(
        self, build: ProgramBuild, chain: ProgramToolchain, main: ProgramFile, argv: list[str], n: int,
        name: str = "", repeat: bool = False, shift_clock: bool = False,
    ) -> RunResult:  # fmt: skip
        """One run of `build`'s executable for `main` as ``./<name> ARGV`` (so argv[0] is the same for every
        build) in a scratch copy of its tree.  ``repeat``: the original's second run (what varies);
        Every run's wall clock starts at one instant (:mod:`porter.sandbox.clock`); with ``shift_clock`` nine days
        later, so whatever the program derives from it varies between the original's two runs."""
        # every run's wall clock starts at one instant (the original's second run: nine days later); not where
        # the toolchain's executables take no preloaded library (AddressSanitizer's must come first)
        shift = (
            clock.pinned(self.out / "build" / "clock", later=shift_clock)
            if getattr(chain, "accepts_preload", True)
            else None
        )
        found = chain.device()
        if found is not None:  # its warp width: a run at another width is compared knowing it
            self.widths[build.device] = found.facts.warp_size
            self.names[build.device] = getattr(chain, "device_name", lambda: found.name)()
        prog = self.trees.get(build.variant, self.program)
        if prog is not self.program:  # its main units, read once per program
            mains = self._mains.setdefault(prog.root, main_units(prog))
            main = _counterpart(mains, main)
        exe = build.executables.get(str(main.rel))
        if exe is None:  # a user's build (--build): its executables by the names the program goes by
            known = program_names(prog, main) | {name or main.path.stem}
            exe = next((e for rel, e in sorted(build.executables.items()) if Path(rel).name in known), None)
            if exe is None and len(build.executables) == 1:
                exe = next(iter(build.executables.values()))
        base = RunResult(build.variant, build.toolchain, build.device, "failed")
        if exe is None or not _is_built_here(Path(exe), self.out):
            base.reason = f"the {build.toolchain} build has no executable for {main.rel}"
            return base
        tree = self.program.root if build.variant == "original" else self.out / build.variant
        name = name or main.path.stem
        # the original's first run on a toolchain that can records its launches
        capturing = build.variant == "original" and not repeat and build.captures
        reordered: dict[str, str] = dict(getattr(chain, "reorder_env", lambda: {})()) if repeat else {}
        key = key_of(
            "program-run", build.key, argv, name, str(run_folder(prog, main)), self.timeout, repeat,
            self.expect_exit,
            capture_env(Path("capture"), *self.capture_limits) if capturing else None, self.max_output,
            self.data, _data_digest(self.data),
            *((self.placement.nest, self.placement.links) if self.placement.links else ()),
            *((clock.EPOCH, clock.SHIFT_S if shift_clock else 0) if shift is not None else ()),
            *(sorted(reordered.items()) if reordered else ()),
        )  # fmt: skip
        old = self.ledger.get(key)
        if repeat and build.resumed and (self.out / "runs" / key[:16] / "run.json").is_file():
            old = {"status": "ran"}  # the original's second run of an earlier report (not listed in it)
        if (
            old is not None
            and old.get("status") in ("ran", "matches", "differs")
            and (self.out / "runs" / key[:16]).is_dir()
        ):
            saved = _load_output(self.out / "runs" / key[:16])
            captured = self.out / "runs" / key[:16] / "capture"
            if saved is not None and (not old.get("capture") or (captured / MANIFEST).is_file()):
                self.say(
                    f"run {n}: {build.variant} on {build.device}: same build and arguments as before; kept"
                )
                rec = RunResult(
                    build.variant, build.toolchain, build.device,
                    "ran" if build.variant == "original" else str(old["status"]),
                    exit=old.get("exit"), seconds=old.get("seconds"), reason=str(old.get("reason", "")),
                    stdout_tail=_tail(str(old.get("stdout_tail", ""))),
                    stderr_tail=_tail(str(old.get("stderr_tail", ""))),
                    key=key, resumed=True, capture=str(captured) if old.get("capture") else "",
                    capture_kind=str(old.get("capture_kind", "")) if old.get("capture") else "",
                )  # fmt: skip
                self.outputs[id(rec)] = saved
                return rec
        scratch = self.out / "runs" / key[:16]
        if scratch.exists():
            shutil.rmtree(scratch)
        copy = _placed(scratch / "tree", self.placement)  # the program's copy: its written files compared
        cwd, name = _staged(copy, prog, tree, main, Path(exe), name)
        before = snapshot(copy)
        env = dict(getattr(chain, "run_env", lambda: {})())
        # the original's second run: blocks and threads in another order where the runtime fixes one
        env.update(reordered)
        if shift is not None:  # before any library the system preloads
            env.update(shift[0])
            if os.environ.get("LD_PRELOAD"):
                env["LD_PRELOAD"] += " " + os.environ["LD_PRELOAD"]
        home = scratch / "home"  # HOME, TMPDIR and /tmp of the run: not compared, removed after it
        writable = [scratch / "tree"]
        if capturing:  # beside the tree, so the program's written files are not mixed with it
            (scratch / "capture").mkdir(parents=True, exist_ok=True)
            writable.append(scratch / "capture")
            env.update(capture_env(scratch / "capture", *self.capture_limits))
        cache_var = str(getattr(chain, "run_cache_env", ""))
        if cache_var:  # what the toolchain's runtime keeps between runs of one build (compiled kernels)
            kept = self.run_cache(self.out / "build" / build.variant / build.toolchain / "run-cache")
            writable.append(kept)
            env[cache_var] = str(kept)
        device = chain.device()
        on_gpu = device is not None and device.times
        # what the toolchain's runtime reads besides the system (an OpenCL ICD folder of porter's)
        readable = (*self.data, *getattr(chain, "run_readable", lambda: [])(), *(shift[1] if shift else ()))
        jail = Jail(tuple(map(str, writable)), readable=readable, home=str(home), gpu=on_gpu)
        ran = program_jail.run(
            [f"./{name}", *argv], jail, cwd, stdout=scratch / "stdout.txt", stderr=scratch / "stderr.txt",
            env=env, timeout=self.timeout, max_output=self.max_output,
        )  # fmt: skip
        exit_code = ran.exit
        output = _keep_output(scratch, exit_code, written_files(copy, before, self.rule))
        shutil.rmtree(scratch / "tree", ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        rec = RunResult(
            build.variant, build.toolchain, build.device, "ran", exit=exit_code, seconds=round(ran.seconds, 4),
            stdout_tail=_file_tail(scratch / "stdout.txt"), stderr_tail=_file_tail(scratch / "stderr.txt"),
            key=key,
        )  # fmt: skip
        if capturing and (scratch / "capture" / "launches").is_dir():
            finish(
                scratch / "capture", shlex.join([f"./{name}", *argv]), n, exit_code, str(self.program.root),
                build.device, getattr(chain, "replay_defines", ()),
            )  # fmt: skip
            rec.capture = str(scratch / "capture")
            rec.capture_kind = device.kind if device is not None else ""
        stopped = ran.reason(self.timeout, self.max_output)
        # a toolchain's runtime that stopped because this device cannot run the port (OpenCL without sub-groups)
        unavailable = getattr(chain, "not_run_here", lambda _e, _s: "")(exit_code, rec.stderr_tail)
        if stopped:
            rec.status, rec.reason = "failed", stopped
        elif unavailable:
            rec.status, rec.reason = "not-run", unavailable
        elif _killed_by(exit_code):
            number = _killed_by(exit_code)
            said = (
                f", exit {exit_code} as the jail reports it"
                if exit_code is not None and exit_code > 0
                else ""
            )
            rec.status, rec.reason = (
                "failed",
                f"killed by signal {number} ({_signal_name(number)}{said}) running "
                f"{shlex.join([f'./{name}', *argv])} on {_where_run(build, device)}; its last output is "
                "in the report (stdout_tail, stderr_tail)",
            )
        self.outputs[id(rec)] = output
        return rec

    def missing_files(
        self, build: ProgramBuild, chain: ProgramToolchain, main: ProgramFile, argv: list[str], name: str
    ) -> list[str]:
        """The files the original looked for and did not find, from a run of it that strace watches
        (a diagnostic run: its output is not kept, nothing is compared with it)."""
        exe = Path(build.executables.get(str(main.rel), ""))
        if not build.executables.get(str(main.rel)) or not _is_built_here(exe, self.out):
            return []
        scratch = Path(tempfile.mkdtemp(prefix="opens-", dir=self.out / "runs"))
        try:
            copy = _placed(scratch / "tree", self.placement)
            cwd, name = _staged(copy, self.program, self.program.root, main, exe, name)
            device = chain.device()
            jail = Jail(
                (str(scratch / "tree"),), readable=self.data, home=str(scratch / "home"),
                gpu=device is not None and device.times,
            )  # fmt: skip
            program_jail.run(
                [f"./{name}", *argv], jail, cwd, stdout=scratch / "stdout.txt", stderr=scratch / "stderr.txt",
                env=dict(getattr(chain, "run_env", lambda: {})()), timeout=self.timeout,
                max_output=self.max_output, trace_opens=scratch / "opens.txt",
            )  # fmt: skip
            return program_jail.missing_files(scratch / "opens.txt", f"./{name}")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def save(self) -> None:
        self.saver()


# what an error line of a program says (its usage text, a file it could not open)
_ERROR_LINE = re.compile(
    r"\b(error|cannot|can't|could not|couldn't|unable|failed|no such file|doesn't exist|does not exist|"
    r"not found|usage|missing)\b",
    re.IGNORECASE,
)
_USAGE = re.compile(r"\s*usage\b", re.IGNORECASE)  # a line that starts with it: the program's usage text
_OPEN_ERROR = re.compile(
    r"no such file|(cannot|can't|could not|couldn't|unable to|failed to) (open|read|find|load)|error (opening|reading)|"
    r"(doesn't|does not) exist|file not found",
    re.IGNORECASE,
)
_FILE_WORD = re.compile(r"[\w./+-]*\w\.[A-Za-z][A-Za-z0-9]{0,5}\b")  # input.dat, data/mcmd.inp
_EVIDENCE = re.compile(r"\d|\bPASS|\bFAIL", re.IGNORECASE)


def original_failure(
    rec: RunResult, output: RunOutput | None, expect_exit: int, program: Program, run_dir: Path,
    missing: Sequence[str] = (),
) -> str:  # fmt: skip
    """Why the original's run is no evidence to compare a port with ("" when it is): an exit status other
    than `expect_exit` (its first error line quoted, with a hint: `missing`, the files it looked for and
    did not find, when a watched run saw them), or -- expecting success -- its usage text, an error
    opening a file, or an output
    with no number, no PASS/FAIL word and no file written.  A run porter stopped (time-out, signal) already says why."""
    if rec.status != "ran":
        return ""
    if rec.exit is not None and rec.exit != expect_exit:
        line = _error_line(rec.stderr_tail) or _error_line(rec.stdout_tail)
        said = f': "{line}"' if line else ""
        expected = f", expected {expect_exit} (--expect-exit)" if expect_exit else ""
        return (
            f"the original failed (exit {rec.exit}{said}{expected}); "
            f"{_failure_hint(line, program, run_dir, missing)}"
        )
    if expect_exit:  # the status the user expects is itself what a port must reproduce
        return ""
    gave_up = _gave_up(_output_lines(output), rec.stderr_tail.splitlines())
    if gave_up:
        return (
            f'the original exited 0 but printed "{gave_up[:200]}" (its usage or an input it could not '
            f"open: it did not do its work); {_failure_hint(gave_up, program, run_dir, missing)}"
        )
    printed = [*_output_lines(output), *rec.stderr_tail.splitlines()]
    if not any(_EVIDENCE.search(line) for line in printed) and not (output is not None and output.files):
        return (
            "nothing to compare: the original printed no number and no PASS/FAIL word and wrote no file "
            f"(its output: {(rec.stdout_tail or rec.stderr_tail).strip()[:120]!r})"
        )
    return ""


def _gave_up(stdout: Sequence[str], stderr: Sequence[str]) -> str:
    """The line by which a program that exited 0 says it did not do its work ("" when none): its usage
    text anywhere, or an error opening or reading a file on stderr (its error path).  On stdout an open
    error may be the program's own report of what it could not read, and is compared as any line."""
    for line in (*stdout, *stderr):
        if _USAGE.match(line):
            return line.strip()
    for line in stderr:
        if _OPEN_ERROR.search(line) and not _PORTERS.match(line):
            return line.strip()
    return ""


# porter's own runtimes' lines on a program's stderr (backends/porter_capture.h, porter_runtime.h, the OpenCL
# runtime): a capture that could not read back or write an array says so there, but the program did its work
_PORTERS = re.compile(r"\s*porter (capture|cpu runtime|opencl runtime):")


def _output_lines(output: RunOutput | None) -> list[str]:
    if output is None:
        return []
    if isinstance(output.stdout, Path):
        return read_tail(output.stdout, TAIL_CHARS * 4).splitlines()
    return output.stdout.splitlines()


def _error_line(text: str) -> str:
    """The first line of `text` that reads as an error or usage message, else its first non-empty line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = next((line for line in lines if _ERROR_LINE.search(line)), lines[0] if lines else "")
    return found[:200]


def _failure_hint(line: str, program: Program, run_dir: Path, missing: Sequence[str] = ()) -> str:
    """What to check: a file the program looked for and did not find (`missing`, seen by a watched
    run) or that its error line names, which the program's folder does not hold (or holds elsewhere
    than where the run starts), else the arguments and the working folder."""
    where = str(run_dir) if str(run_dir) not in ("", ".") else "the program's folder"
    if missing:
        opened = ", ".join(repr(m) for m in missing[:3])
        return f"it tried to open {opened}, which the run did not find; " + _where_it_is(
            missing[0], program, where
        )
    for word in _FILE_WORD.findall(line):
        if not (program.root / run_dir / word).exists():
            return _where_it_is(word, program, where)
    return (
        f"check the arguments and the working folder (the run starts in {where}), or give --expect-exit "
        "if it fails on purpose"
    )


def _where_it_is(name: str, program: Program, where: str) -> str:
    found = [f for f in program.files if f.path.name == Path(name).name]
    if found:
        return f"{name!r} is at {found[0].rel}, but the run starts in {where}: give arguments that name it from there"
    return (
        f"{name!r} is not in the program's folder (the run starts in {where}): give the folder holding it with "
        "--data and arguments that name it, or --expect-exit if it fails on purpose"
    )


# the signals a crashing program dies of; the jail's init (bubblewrap) reports such a death as 128 + n
_FATAL = {
    signal.SIGSEGV,
    signal.SIGABRT,
    signal.SIGBUS,
    signal.SIGFPE,
    signal.SIGILL,
    signal.SIGKILL,
    signal.SIGSYS,
}


def _killed_by(exit_code: int | None) -> int:
    """The signal a run died of (0: none): a negative status, or 128 + a fatal signal's number."""
    if exit_code is None:
        return 0
    if exit_code < 0:
        return -exit_code
    return exit_code - 128 if exit_code - 128 in {int(s) for s in _FATAL} else 0


def _staged(
    dest: Path, program: Program, tree: Path, main: ProgramFile, exe: Path, name: str
) -> tuple[Path, str]:
    """A scratch copy at `dest` of `program`'s files (sources, headers, data) as `tree` holds them, with
    `exe` as ``./name`` in the folder the run starts in (argv[0], which programs print, the same for every
    build); returns that folder and the name.  Where the program's own folder holds a folder or file of that
    name (a CMake project's ``bump/`` beside the executable ``bump`` its build makes elsewhere), the
    executable is ``./name.exe`` instead, for every build alike.  The copies are the owner's to write
    whatever the originals' mode (a read-only checkout or share): a program that rewrites one of its own
    files (hotspot3D's ``output.out``) does so in the copy as in a writable checkout, original and ports
    alike."""
    for f in program.files:
        src = tree / f.rel
        if src.is_file():
            (dest / f.rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f.rel)
            mode = (dest / f.rel).stat().st_mode
            if not mode & stat.S_IWUSR:
                os.chmod(dest / f.rel, mode | stat.S_IWUSR)
    cwd = dest / run_folder(program, main)
    cwd.mkdir(parents=True, exist_ok=True)
    while os.path.lexists(cwd / name):
        name += ".exe"
    shutil.copy2(exe, cwd / name)
    return cwd, name


def _counterpart(mains: Sequence[ProgramFile], main: ProgramFile) -> ProgramFile:
    """The main unit among `mains` (a port's, with files of its own) that stands for the original's
    `main`: the one of the same path but its suffix, else of the same name, else its only one."""
    stem = main.rel.with_suffix("")
    for same in (
        [m for m in mains if m.rel.with_suffix("") == stem],
        [m for m in mains if m.path.stem == main.path.stem],
        mains if len(mains) == 1 else [],
    ):
        if same:
            return same[0]
    return main


def _where_run(build: ProgramBuild, device: Device | None) -> str:
    """The device a run crashed on, with its driver and the toolchain (and version) that built it."""
    driver = f", driver {device.driver}" if device is not None and device.driver else ""
    return f"{build.device}{driver} (built by {(build.toolchain_id or build.toolchain).split(' [')[0]})"


def _same_device(a: str, b: str) -> bool:
    """Whether two device labels name one device: ``cuda:NVIDIA H200`` and ``hip:NVIDIA H200`` (the same GPU
    reached through two runtimes), ``cpu:cpu-emulator`` and ``cpu:cpu-emulator-wave64`` (the CPU emulator at
    another warp width: where the original timed out there, so would a port at 64 lanes)."""
    from porter.harness.replay import physical

    return physical(a) == physical(b)


def _reference(run: ProgramRun, device: str) -> RunResult | None:
    """The original's run a port's run on `device` is compared with: on the same device, else the first."""
    return next((o for o in run.originals if _same_device(o.device, device)), run.original)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


def _is_built_here(exe: Path, out: Path) -> bool:
    """Whether `exe` is an executable a build of this output folder made (a path read back from an
    earlier report.json is never taken on trust)."""
    from porter.backends.programs import is_executable

    try:
        inside = exe.resolve().is_relative_to((out / "build").resolve())
    except OSError:
        return False
    return inside and is_executable(exe)


def _data_digest(folders: Sequence[str]) -> str:
    """What a run reads from the --data folders, as a key can hold it: each file's path, size and
    modification time (a folder of more than MAX_DATA_FILES files: a fresh value, so the run is redone)."""
    h = hashlib.sha256()
    count = 0
    for folder in folders:
        for here, dirs, names in os.walk(folder):
            dirs.sort()
            for name in sorted(names):
                count += 1
                if count > MAX_DATA_FILES:
                    return os.urandom(16).hex()
                try:
                    st = os.lstat(os.path.join(here, name))
                except OSError:
                    continue
                h.update(
                    f"{here}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode("utf-8", "surrogateescape")
                )
    return h.hexdigest()


def _keep_output(scratch: Path, exit_code: int | None, written: Mapping[str, Written]) -> RunOutput:
    """The run's output as kept under runs/<key>/ for comparisons and a re-run: stdout.txt (streamed
    there by the run), the files it wrote moved from its tree to files/ (never read into memory), and
    run.json (exit code, the files, the size and digest of those over the rule's cap)."""
    files: dict[str, Written] = {}
    for rel, data in written.items():
        if isinstance(data, Path):
            dest = scratch / "files" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(data, dest)
            files[rel] = dest
        elif isinstance(data, tuple):
            files[rel] = data
    meta = {
        "exit": exit_code,
        "big": {rel: list(v) for rel, v in files.items() if isinstance(v, tuple)},
        "files": sorted(files),
    }
    (scratch / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    seal(
        scratch,
        [scratch / "run.json", scratch / "stdout.txt", *(p for p in files.values() if isinstance(p, Path))],
    )
    return RunOutput(exit_code, scratch / "stdout.txt", files)


def _load_output(scratch: Path) -> RunOutput | None:
    """What :func:`_keep_output` kept, or None when it is not all there (or names a file outside the
    run's folder: run.json is read back, never trusted)."""
    try:
        meta = json.loads((scratch / "run.json").read_text(encoding="utf-8"))
        stdout = scratch / "stdout.txt"
        if not stdout.is_file() or stdout.is_symlink():
            return None
        files: dict[str, Written] = {}
        kept = (scratch / "files").resolve()
        for rel in meta["files"]:
            big = meta["big"].get(rel)
            if big:
                files[str(rel)] = (int(big[0]), str(big[1]))
                continue
            path = scratch / "files" / str(rel)
            if os.path.isabs(str(rel)) or ".." in Path(str(rel)).parts or path.is_symlink():
                return None
            if not path.resolve().is_relative_to(kept) or not path.is_file():
                return None
            files[str(rel)] = path
        exit_code = meta.get("exit")
        if exit_code is not None and not isinstance(exit_code, int):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not sealed(
        scratch, [scratch / "run.json", stdout, *(p for p in files.values() if isinstance(p, Path))]
    ):
        return None
    return RunOutput(exit_code, stdout, files)


def check_toolchains(names: Sequence[str], targets: Sequence[str]) -> None:
    """UsageError naming the choices when a name is no program toolchain of the original's or a target's
    language."""
    chains = [c for lang in ("cuda", *targets) for c in toolchains_for(lang)]
    known = {c.name for c in chains} | {str(getattr(c, "family", "")) for c in chains} - {""}
    unknown = sorted(set(names) - known)
    if unknown:
        raise UsageError(
            f"unknown program toolchain(s) {', '.join(unknown)}; choose from {', '.join(sorted(known))}"
        )


def build_and_run(
    program: Program,
    out: Path,
    report: ProgramReport,
    options: ProgramRuns,
    *,
    ledger: Ledger | None = None,
    say: Progress | None = None,
    skip: Sequence[Path] = (),
    save: Callable[[], None] | None = None,
    trees: Mapping[str, Program] | None = None,
) -> None:
    """Build the original and each port as programs, run each of ``options.runs``, compare; fill
    `report` (see :class:`ProgramRuns` for the options: a toolchain name no backend has is a UsageError).
    ``save`` writes the report (called after every build and run, so an interrupted run keeps them);
    ``ledger``: the rows of the output folder's previous report.json (builds and runs are reused where
    their keys match; None: read here, an empty Ledger: build and run everything again).  ``trees``: a
    variant whose tree (``out/<variant>``) is a program of its own, with its own files and units.  Every build
    and run is jailed (:mod:`porter.sandbox.jail`); where the jail is weaker here the report's notes say
    so, and with ``--require-sandbox`` a PorterError (exit 2) refuses before anything is built."""
    mains = main_units(program)
    for args in options.runs:  # a bad --run is a usage error before anything is built
        if mains:
            choose(program, mains, args)
    options = replace(options, data=check_data(options.data))
    check_max_output(options.max_output)
    require_jail()
    report.build["jail"] = program_jail.describe()
    if options.expect_exit and options.runs:
        said = f"the original is expected to exit {options.expect_exit} (--expect-exit): runs that do are compared"
        if said not in report.notes:
            report.notes.append(said)
    note = program_jail.note()
    if note and note not in report.notes:
        report.notes.append(note)
    if options.toolchains is not None:
        check_toolchains(options.toolchains, report.targets)
    runner = _Runner(
        program, out, report, options, Ledger.of(out, "program") if ledger is None else ledger,
        say or (lambda _m: None), skip, save or (lambda: None),
    )  # fmt: skip
    if options.runs:  # a --data folder whose relative position the runs' copies cannot keep
        for said in runner.placement.notes:
            if said not in report.notes:
                report.notes.append(said)
    runner.trees = dict(trees or {})  # a port of the user's: its own program (porter verify)
    jobs = options.jobs if options.jobs > 0 else (os.cpu_count() or 1)
    built = runner.build_all(jobs)
    if options.runs:
        runner.run_all(built, mains)
        if stopped := fortify_stops(report):
            runner = _unfortified(runner, stopped)
            built = runner.build_all(jobs)
            runner.run_all(built, mains)
        runner.sanitize_original(built, mains)
    runner.save()


# glibc's message when a fortified string or memory call (_FORTIFY_SOURCE) would write past its buffer
FORTIFY_STOP = "*** buffer overflow detected ***"
FORTIFY_OFF = "_FORTIFY_SOURCE=0"


def fortify_stops(report: ProgramReport) -> list[int]:
    """The runs (numbered from 1) in which glibc's buffer-overflow check stopped the original on some toolchain:
    a system compiler that fortifies by default (Ubuntu's gcc: ``-D_FORTIFY_SOURCE=3`` at ``-O1`` and up) built
    it, and the original writes past a buffer -- a defect its authors' toolchain did not check."""
    return [
        n for n, run in enumerate(report.runs, 1)
        if any(o.status == "failed" and FORTIFY_STOP in o.stderr_tail for o in run.originals)
    ]  # fmt: skip


def _unfortified(runner: _Runner, stopped: Sequence[int]) -> _Runner:
    """`runner`'s builds and runs made again with ``-D_FORTIFY_SOURCE=0`` (every variant alike), after glibc's
    check stopped the original's runs `stopped`: the first pass's rows give way to the second's, the notes and
    the original's defects say what stopped it and how it was run, and the sanitizer checks those runs (it names
    the write's file and line).  Nothing is hidden: the program verdicts hold for builds without the check."""
    report = runner.report
    said = "; ".join(
        f"run {n} ({report.runs[n - 1].args or 'no arguments'}) on "
        + ", ".join(
            o.device or o.toolchain for o in report.runs[n - 1].originals if FORTIFY_STOP in o.stderr_tail
        )
        for n in stopped
    )
    defect = (
        f"glibc stopped the original ({FORTIFY_STOP}): it writes past a buffer, which the system compiler's "
        f"_FORTIFY_SOURCE check catches ({said})"
    )
    report.original_defects.append(defect)
    report.notes.append(
        f"{defect}. Every variant was built again with -D{FORTIFY_OFF}, the check off as the original's authors "
        "had it, and run again: the runs and verdicts below are those builds'. Fix the overflow; the "
        "AddressSanitizer note names it where the CPU runtime can build the original."
    )
    runner.say(
        f"glibc's buffer-overflow check stopped the original: building every variant again with -D{FORTIFY_OFF}"
    )

    def off(prog: Program) -> Program:  # -D_FORTIFY_SOURCE=0 over whatever value a unit's build gave it
        def merged(defines: Sequence[str]) -> tuple[str, ...]:
            return merge_defines(defines, (FORTIFY_OFF,), (), "porter")[0]

        units = tuple((u, merged(ds)) for u, ds in prog.unit_defines)
        return replace(prog, defines=merged(prog.defines), unit_defines=units)

    report.builds.clear()
    report.runs.clear()
    again = _Runner(
        off(runner.program),
        runner.out,
        report,
        runner.options,
        runner.ledger,
        runner.say,
        runner.skip,
        runner.saver,
    )
    again.trees = {v: off(p) for v, p in runner.trees.items()}
    again.checked_runs = tuple(stopped)
    return again


def require_jail() -> None:
    """PorterError (exit 2) when ``--require-sandbox`` refuses the program jail here."""
    try:
        program_jail.require()
    except SandboxError as err:
        raise PorterError(str(err), exit_code=2) from None


def check_data(folders: Sequence[str]) -> tuple[str, ...]:
    """The ``--data`` folders as absolute paths; UsageError for one that is not a folder."""
    found = []
    for d in folders:
        if not Path(d).is_dir():
            raise UsageError("--data: not a folder", path=str(d))
        found.append(os.path.abspath(d))
    return tuple(dict.fromkeys(found))


def check_max_output(max_output: int) -> None:
    if max_output < 1:
        raise UsageError("--max-output must be a positive number of MiB")


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Placement",
    "build_and_run",
    "check_data",
    "check_max_output",
    "check_toolchains",
    "choose",
    "data_placement",
    "main_units",
    "program_names",
    "require_jail",
    "run_folder",
]
