"""`porter capture PATH --run "ARGS"`: record every kernel launch of a program's own run.

The program (:func:`porter.program.discover`) is built with one capturing program toolchain -- the
first whose device is a GPU here (``nvcc``: an instrumented build, backends/cuda/porter_capture_cuda.h;
for a HIP program ``hip-on-cuda`` on an NVIDIA GPU, ``hipcc`` on an AMD one,
backends/hip/porter_capture_hip.h), else the CPU runtime (``cpu-runtime``: its allocator knows every
allocation; it runs CUDA and HIP programs) -- and each ``--run`` is run
once, in a scratch copy of the program's files, jailed as ``port --run`` runs are, with capture on.  ``<out>/run-<N>/`` then holds
that run's capture in the documented folder format (``docs/CAPTURE_FORMAT.md``): what other tools, and
``porter check --capture``-style replays, read.  ``<out>/work/`` keeps the build and the runs, so a
second capture of an unchanged program reuses them.  The user's files are never written; ``--out``
defaults to ``<root>.capture/`` beside the program's root.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from porter import capture
from porter.backends.programs import ProgramToolchain
from porter.defines import BuildFlags
from porter.errors import UsageError
from porter.program import Program, discover
from porter.results import CapturedRun, CaptureReport, ProgramReport
from porter.workflows.program_run import ProgramRuns
from porter.workflows.resume import Ledger, is_porter_output

Progress = Callable[[str], None]
FALLBACK = "cpu-runtime"  # runs everywhere


def _capturing(language: str = "cuda") -> list[ProgramToolchain]:
    """Every program toolchain whose builds can capture their launches, in registration order."""
    from porter.backends.programs import toolchains_for

    return [c for c in toolchains_for(language) if getattr(c, "captures", False)]


def capturing_toolchains(language: str = "cuda") -> list[str]:
    """The names of :func:`_capturing`'s toolchains."""
    return [c.name for c in _capturing(language)]


def capturing_toolchain(language: str = "cuda") -> str:
    """The program toolchain a capture is made with: the first capturing one that runs on a GPU here,
    else the first that runs on anything (the CPU runtime)."""
    usable = [
        (not d.times, c.name) for c in _capturing(language) if not c.unavailable() and (d := c.device())
    ]
    return sorted(usable, key=lambda u: u[0])[0][1] if usable else FALLBACK  # stable: registration order


def program_language(program: Program) -> str:
    """The dialect a program is written in: HIP when a file includes HIP's runtime header (the
    registry's ``dialect_of_text``), else CUDA."""
    from porter.backends import SOURCE_DIALECT, dialect_of_text
    from porter.files import decode_text, read_input

    for f in program.files:
        if f.kind == "other":
            continue
        found = dialect_of_text(f.path.suffix, decode_text(read_input(str(f.path))))
        if found is not None and found != SOURCE_DIALECT and _capturing(found):
            return found
    return SOURCE_DIALECT


def _check_out(out: Path, root: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError("--out exists and is not a folder", path=str(out))
    if out.resolve() == root.resolve() or root.resolve().is_relative_to(out.resolve()):
        raise UsageError("--out would hold the program itself; choose another folder", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not (out / "work").is_dir():
        raise UsageError(
            "--out holds files that are not a porter capture; choose another folder", path=str(out)
        )


def capture_program(
    paths: Sequence[str],
    run: ProgramRuns,
    *,
    flags: BuildFlags | None = None,
    out_dir: str | None = None,
    toolchain: str | None = None,
    progress: Progress | None = None,
) -> CaptureReport:
    """Build the program with a capturing toolchain and capture each of ``run.runs``; see the module
    docstring.  ``run``: besides the runs, the seconds each may take (``timeout``, 0: the default), the
    launches kept per kernel, MiB per launch and per kernel's first launch kept (``capture_limits``), the bytes a run (or the build) may
    print per stream (``max_output``) and the folders the runs may read (``data``).  ``flags``: the
    command line's ``-I`` and ``-D``/``-U`` (over a compilation database's).
    The build and the runs are jailed as ``port --run``'s are (:mod:`porter.sandbox.jail`)."""
    from porter.sandbox import jail
    from porter.workflows.program_run import (
        DEFAULT_TIMEOUT_S,
        _Runner,
        check_data,
        check_max_output,
        main_units,
        require_jail,
    )

    say = progress or (lambda _m: None)
    flags = flags or BuildFlags()
    if not run.runs:
        raise UsageError('capture needs a run of the program: --run "ARGS"')
    if min(run.capture_limits) < 1:
        raise UsageError("--launches, --mib and --first-mib must be at least 1")
    folders = check_data(run.data)
    check_max_output(run.max_output)
    require_jail()
    skip = [out_dir] if out_dir is not None else []
    program = discover(
        paths,
        flags.include_dirs,
        skip=skip,
        defines=flags.defines,
        undefines=flags.undefines,
        is_output=is_porter_output,
    )
    language = program_language(program)
    if toolchain is not None:
        chains = {c.name: c for c in _capturing(language)}
        if toolchain not in chains:
            raise UsageError(
                f"--toolchain {toolchain!r}: not a capturing toolchain (choose from {', '.join(chains)})"
            )
        chain = chains[toolchain]
        why = chain.unavailable() or (
            "" if chain.device() is not None else "no device here runs its programs"
        )
        if why:
            raise UsageError(f"--toolchain {toolchain}: {why}")
    out = Path(out_dir) if out_dir is not None else program.root.parent / f"{program.root.name}.capture"
    out = out.absolute()
    _check_out(out, program.root)
    mains = main_units(program)
    if not mains:
        raise UsageError("no unit of the program defines main(): nothing to run", path=str(program.root))
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    report = ProgramReport(root=str(program.root), out_dir=str(work), targets=())
    options = replace(run, timeout=run.timeout or DEFAULT_TIMEOUT_S, data=folders)
    runner = _Runner(program, work, report, options, Ledger(), say, [Path(p) for p in skip])
    runner.repeat = False  # one run each: what varies between runs is not compared here
    runner.language = language
    chosen = toolchain or capturing_toolchain(language)
    # the GPU's build first; where it cannot capture (the instrumented copy does not compile), the CPU
    # runtime's -- unless the user chose the toolchain
    tried = [chosen] if toolchain or chosen == FALLBACK else [chosen, FALLBACK]
    notes: list[str] = []
    for name in tried:
        runner.only = {name}
        built = runner.build_all(1)
        build = next((b for b, _ in built.values()), None)
        if build is not None and build.status == "built" and build.captures:
            break
        why = (
            "not built"
            if build is None
            else f"{build.status}: {build.reason}"
            if build.status != "built"
            else ("built without capture (its instrumented copy does not build; see the build log)")
        )
        notes.append(f"{name}: {why}")
    result = CaptureReport(str(program.root), str(out), "not built" if build is None else build.status)
    result.device = build.device if build is not None else ""
    result.notes = [n for n in [jail.note()] if n]
    if build is None or build.status != "built" or not build.captures:
        result.build = "; ".join(notes)
        return result
    if notes:
        result.build += f" ({'; '.join(notes)})"
    runner.run_all(built, mains)
    for n, ran in enumerate(report.runs, 1):
        rec = ran.original
        dest = out / f"run-{n}"
        if dest.exists():
            shutil.rmtree(dest)
        entry = CapturedRun(
            ran.args, "", None if rec is None else rec.exit, "failed" if rec is None else rec.status
        )
        if rec is not None:
            entry.reason = rec.reason
            if rec.capture and (Path(rec.capture) / capture.MANIFEST).is_file():
                shutil.copytree(rec.capture, dest)
                entry.folder = str(dest)
                for la in capture.load(dest).launches:
                    entry.kernels.setdefault(la.kernel, []).append(la.launch)
            elif not entry.reason:
                entry.reason = "the run launched no kernel"
        result.runs.append(entry)
    return result


__all__ = ["capture_program"]
