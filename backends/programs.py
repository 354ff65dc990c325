"""The program-toolchain contract: build a whole program (host code and kernels) and say where it runs.

A backend that can build whole programs in a dialect returns :class:`ProgramToolchain` objects from
``program_toolchains()`` (the CPU backend: g++ with porter's CPU runtime, for CUDA and HIP programs;
the CUDA backend: nvcc; the HIP backend: hipcc for AMD GPUs and nvcc through porter's HIP-on-CUDA
headers).  :func:`toolchains_for` asks every registered backend, so the program workflow never names
a target.  A build never raises for a program that does not build: it returns a
:class:`BuiltProgram` whose ``ok`` is false and whose ``log`` says why.

Every command a build runs -- each compiler run over the program's files, a user's ``--build`` command
(a Makefile's recipes) -- runs in the program jail (:mod:`porter.sandbox.jail`, :func:`build_jail`): the
system and the toolchains read-only, the program's tree and the include folders the user named
read-only, only the build's own folder writable, no network, a scrubbed environment, its output capped
(``ProgramSource.max_output``).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from porter.backends import first_error

from porter.sandbox.jail import DEFAULT_MAX_OUTPUT, Jail, read_tail
from porter.sandbox.jail import run as run_jailed

if TYPE_CHECKING:
    from porter.backends import Device


@dataclass(frozen=True)
class ProgramSource:
    """What to build: a program's tree (the original's root, or a mirrored port of it)."""

    tree: Path
    units: tuple[str, ...]  # translation units, relative to the tree
    include_dirs: tuple[str, ...] = ()  # absolute; those under the original's root are mapped into the tree
    defines: tuple[str, ...] = ()
    language: str = "cuda"  # the dialect its files are written in
    original_root: Path | None = None  # the root `include_dirs` refer to (None: the tree itself)
    files: tuple[str, ...] = ()  # every file of the program, relative to the tree (empty: all under it)
    # build it so its runs can record their launches, where the toolchain can (the original program);
    # False: as written (a port, whose runs are compared, not captured)
    capture: bool = True
    max_output: int = DEFAULT_MAX_OUTPUT  # bytes a build command may print (stdout and stderr, each)
    # units whose own build line (a compilation database's entry) has other -D than `defines`
    unit_defines: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def defines_for(self, unit: str) -> tuple[str, ...]:
        """The -D the unit `unit` (relative to the tree) is compiled with."""
        return dict(self.unit_defines).get(unit, self.defines)


@dataclass(frozen=True)
class BuiltProgram:
    ok: bool
    toolchain: str  # name and version: "g++ 14.2 + porter cpu runtime", "nvcc 13.0 sm_90"
    executables: Mapping[str, str] = field(default_factory=dict)  # main unit (relative) -> absolute path
    log: str = ""
    commands: tuple[str, ...] = ()
    reason: str = ""  # one line when not ok ("cannot emulate: cuBLAS (main.cu line 3)")
    refused: bool = False  # a construct this toolchain cannot provide, found before building
    unavailable: bool = False  # this toolchain cannot do what was asked (a --build it cannot run)
    env: Mapping[str, str] = field(default_factory=dict)  # what running an executable needs
    # whether its executables record their launches under porter.capture.capture_env (None: as the
    # toolchain's ``captures`` says)
    captures: bool | None = None
    # why a toolchain that captures built it without capture, when its capturing build failed and it fell
    # back to the program as written ("" when it did not): the report says so, never silently
    fallback: str = ""


class ProgramToolchain(Protocol):
    name: str  # "cpu-runtime", "cpu-runtime-wave64", "nvcc", "hip-on-cuda", "hipcc"
    # (optional attribute) family: the name --toolchains selects it by with its siblings ("cpu-runtime"
    # selects the CPU runtime at every width)
    backend: str  # the backend owning it
    # Whether its executables record their kernel launches when run with porter.capture.capture_env
    # (docs/CAPTURE_FORMAT.md); a toolchain without the attribute does not.
    captures: bool

    def languages(self) -> tuple[str, ...]: ...

    def unavailable(self) -> str:
        """Why it cannot build here ("" when it can)."""
        ...

    def device(self) -> Device | None:
        """The device its executables run on here (None: it only builds)."""
        ...

    def build(self, source: ProgramSource, out: Path) -> BuiltProgram: ...


def toolchains_for(language: str) -> list[ProgramToolchain]:
    """Every program toolchain of every registered backend that builds `language`, in registration
    order (a backend that cannot be imported contributes none)."""
    from porter.backends import backend_names, get_backend

    found: list[ProgramToolchain] = []
    for name in backend_names():
        try:
            chains = get_backend(name).program_toolchains()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a backend that cannot be imported builds nothing here
            continue
        found.extend(c for c in chains if language in c.languages())
    return found


# --------------------------------------------------------------------------- a compiler-driver toolchain

_MAIN = re.compile(
    r'^[ \t]*(?:extern\s+"C"\s+)?(?:static\s+)?(?:int|void|signed|auto)\s+main\s*\(', re.MULTILINE
)
BUILD_TIMEOUT_S = 600


def defines_main(text: str) -> bool:
    """Whether a unit's text defines ``main`` (outside comments and strings)."""
    from porter.backends.launches import blank_comments_and_strings

    return bool(_MAIN.search(blank_comments_and_strings(text)))


LOG_CHARS = 64_000  # the end of a build command's log a BuiltProgram keeps (the whole log stays on disk)


def build_jail(source: ProgramSource, out: Path) -> Jail:
    """The jail of every command building `source` into `out`: `out` writable (its ``tmp/`` is HOME,
    TMPDIR and /tmp), the tree and its include folders read-only, the toolchains' folders read-only."""
    readable = [str(source.tree), *source.include_dirs, *mapped_include_dirs(source)]
    if source.original_root is not None:
        readable.append(str(source.original_root))
    out.mkdir(parents=True, exist_ok=True)
    return Jail(writable=(str(out),), readable=tuple(readable), home=str(out / "tmp"), toolchain=True)


def run_tool(
    cmd: Sequence[str],
    cwd: Path,
    jail: Jail,
    env: Mapping[str, str] | None = None,
    *,
    max_output: int = DEFAULT_MAX_OUTPUT,
    timeout: float = BUILD_TIMEOUT_S,
) -> tuple[int, str]:
    """(exit code, stdout + stderr) of a compiler command run in `jail` (`env`: what the toolchain sets
    on top of the scrubbed environment); a timeout (124), output past `max_output` (125), a refusal or
    a missing tool (127) is a code too, with the reason ending the text."""
    home = Path(jail.home_dir)
    home.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".tool-", suffix=".log", dir=home)
    os.close(fd)
    log = Path(name)
    try:
        ran = run_jailed(cmd, jail, cwd, stdout=log, env=env, timeout=timeout, max_output=max_output)
        text = log.read_bytes().decode("utf-8", "replace")
    finally:
        log.unlink(missing_ok=True)
    if ran.error:
        return 127, f"{cmd[0]}: {ran.error}"
    if ran.timed_out:
        return 124, text + f"\n{cmd[0]} timed out after {timeout:g} s"
    if ran.overflow:
        return 125, text + f"\n{cmd[0]}: {ran.reason(timeout, max_output)}"
    return (ran.exit if ran.exit is not None else 1), text


def run_build_command(
    command: str, tree: Path, out: Path, jail: Jail, env: Mapping[str, str], source: ProgramSource,
    timeout: float,
) -> tuple[int | None, str, str]:  # fmt: skip
    """(exit code, the end of its log, why it did not finish) of a user's ``--build`` command run by
    bash in `tree`, jailed; the whole log is ``out/build.log``.  The exit code is None and the reason
    says why when it timed out, printed past ``source.max_output`` or could not run."""
    log_path = out / "build.log"
    ran = run_jailed(
        ["bash", "-c", command], jail, tree, stdout=log_path, env=env, timeout=timeout,
        max_output=source.max_output,
    )  # fmt: skip
    why = ran.reason(timeout, source.max_output, "the build's time limit")
    return ran.exit, read_tail(log_path, LOG_CHARS), f"--build {command!r}: {why}" if why else ""


def is_executable(path: Path) -> bool:
    """An ELF executable (what a build makes), not a script, a data file with the x bit or a symbolic
    link (a jailed build could point one anywhere)."""
    import stat

    try:
        st = path.lstat()
        if not (stat.S_ISREG(st.st_mode) and st.st_mode & 0o111):
            return False
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def mapped_include_dirs(source: ProgramSource) -> list[str]:
    """The include folders as the tree being built sees them: those under the original's root mapped
    into the tree (a mirrored port has the same layout), the others as they are."""
    root = source.original_root or source.tree
    out = []
    for d in source.include_dirs:
        p = Path(d)
        out.append(str(source.tree / p.relative_to(root)) if p.is_relative_to(root) else d)
    return out


@dataclass
class DriverToolchain:
    """A program built by one compiler driver (nvcc, hipcc) straight from the tree: each unit compiled
    to an object (units holding device code with ``device_flags``), then one executable linked per unit
    defining ``main``."""

    name: str
    backend: str
    language: str
    compiler: str | None  # None: not installed (``missing`` says what to install)
    version: str
    missing: str = ""
    flags: tuple[str, ...] = ()  # every unit
    device_flags: tuple[str, ...] = ()  # units with device code (".cu", or CUDA/HIP in the text)
    all_device: bool = False  # every C++ unit gets device_flags (its headers may define device code)
    link_flags: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()  # porter's own headers for this toolchain, searched first
    # writes generated headers into the build folder; returns more folders to search first
    prepare: Callable[[Path], Sequence[str]] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    find_device: Callable[[], Device | None] = field(default=lambda: None)
    # `--build "CMD"`: the variables naming this compiler for the user's build (("NVCC",); a HIP tree's
    # Makefile copied from CUDA still says $(NVCC): ("HIPCC", "NVCC")); empty: it cannot run one
    command_vars: tuple[str, ...] = ()
    # the runtime's launch-capture header (backends/cuda/porter_capture_cuda.h): with one, a build is
    # of an instrumented copy of the program (launches through porter's wrappers, global symbols
    # registered; backends/launches.py) with the header force-included, so its runs can record their
    # launches (docs/CAPTURE_FORMAT.md); None: the program is built as it is
    capture_header: Path | None = None
    capture_headers: tuple[Path, ...] = ()  # headers the capture header includes, copied beside it
    capture_flags: tuple[str, ...] = ()  # what the capturing build compiles with besides (-std=c++17)
    capture_link_flags: tuple[str, ...] = ()  # what the capturing build links with besides (-rdynamic)

    @property
    def captures(self) -> bool:
        return self.capture_header is not None

    def languages(self) -> tuple[str, ...]:
        return (self.language,)

    def unavailable(self) -> str:
        return "" if self.compiler else self.missing

    def device(self) -> Device | None:
        return self.find_device()

    def toolchain_id(self) -> str:
        ident = f"{self.name}: {self.version} [{' '.join((*self.flags, *self.device_flags))}]"
        if self.capture_header is not None:
            import hashlib

            headers = (self.capture_header, Path(__file__).parent / "porter_capture.h", *self.capture_headers)
            ident += " capture " + hashlib.sha256(b"".join(h.read_bytes() for h in headers)).hexdigest()[:10]
        return ident

    def run_env(self) -> Mapping[str, str]:
        return dict(self.env)

    def build_with(
        self, source: ProgramSource, out: Path, command: str, timeout: float = 1800
    ) -> BuiltProgram:
        """The user's own build command run in a copy of the tree with ``command_vars`` (``NVCC``,
        ``HIPCC``) naming this compiler; the executables are the new ELF files it leaves there."""
        import shutil

        chain = self.toolchain_id()
        if self.compiler is None:
            return BuiltProgram(False, chain, reason=self.missing)
        if not self.command_vars:
            why = f"--build does not run with {self.name} (its headers are porter's)"
            return BuiltProgram(False, chain, reason=why, unavailable=True)
        tree = out / "src"
        if tree.exists():
            shutil.rmtree(tree)
        for rel in source.files or [
            str(p.relative_to(source.tree)) for p in source.tree.rglob("*") if p.is_file()
        ]:
            src = source.tree / rel
            if src.is_file():
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, tree / rel)
        before = {p for p in tree.rglob("*") if is_executable(p)}
        env = {**self.env, **dict.fromkeys(self.command_vars, self.compiler)}
        code, log, stopped = run_build_command(
            command, tree, out, build_jail(source, out), env, source, timeout
        )
        made = sorted(p for p in tree.rglob("*") if is_executable(p) and p not in before)
        if code != 0:
            why = stopped or f"--build {command!r} exited with {code}"
            return BuiltProgram(False, chain, log=log, commands=(command,), reason=why)
        if not made:
            return BuiltProgram(
                False, chain, log=log, commands=(command,), reason=f"--build {command!r} made no executable"
            )
        return BuiltProgram(
            True, chain, {str(p.relative_to(tree)): str(p) for p in made}, log, (command,), env=dict(self.env),
            captures=False,  # the user's own build: its launches are as written
        )  # fmt: skip

    def build(self, source: ProgramSource, out: Path) -> BuiltProgram:
        """The program built; with a capture header, from its instrumented copy first (a program that
        builds only as it is is then built so, without capture, and the log says why)."""
        if self.capture_header is None:
            return self._build(source, out)
        if not source.capture:
            return replace(self._build(source, out), captures=False)
        instrumented = self._instrumented(source, out / "capture")
        built = self._build(
            instrumented,
            out,
            extra_flags=(*self.capture_flags, "-include", self.capture_header.name),
            extra_link=self.capture_link_flags,
        )
        if built.ok:
            return replace(built, captures=True)
        plain = self._build(source, out)
        said = first_error(built.log)  # the reason names it already where a unit did not compile
        why = built.reason if said in built.reason else "; ".join(p for p in (built.reason, said) if p)
        note = f"the capturing build failed ({why}); built as written, without capture\n"
        return replace(plain, log=note + built.log + "\n" + plain.log, captures=False, fallback=why)

    def _instrumented(self, source: ProgramSource, out: Path) -> ProgramSource:
        """The program's instrumented copy under `out`, porter's capture headers in ``out/porter-include``."""
        import shutil

        from porter.backends.launches import instrument, instrumented_copy

        assert self.capture_header is not None
        tree, include_dirs, _texts = instrumented_copy(source, out, instrument)
        inc = out / "porter-include"
        inc.mkdir(parents=True, exist_ok=True)
        for header in (
            self.capture_header,
            Path(__file__).parent / "porter_capture.h",
            *self.capture_headers,
        ):
            shutil.copyfile(header, inc / header.name)
        return replace(
            source, tree=tree, include_dirs=(str(inc), *include_dirs), original_root=tree, files=source.files
        )

    def _build(
        self,
        source: ProgramSource,
        out: Path,
        extra_flags: Sequence[str] = (),
        extra_link: Sequence[str] = (),
    ) -> BuiltProgram:
        from porter.files import decode_text
        from porter.scan import has_cuda

        chain = self.toolchain_id()
        if self.compiler is None:
            return BuiltProgram(False, chain, reason=self.missing)
        obj_dir = out / "obj"
        obj_dir.mkdir(parents=True, exist_ok=True)
        jail = build_jail(source, out)
        extra = list(self.prepare(out)) if self.prepare is not None else []
        incs = [f"-I{d}" for d in (*extra, *self.include_dirs, *mapped_include_dirs(source))]
        commands: list[str] = []
        logs: list[str] = []
        objects: dict[str, Path] = {}
        mains: list[str] = []
        for unit in source.units:
            path = source.tree / unit
            data = path.read_bytes()
            if defines_main(decode_text(data)):
                mains.append(unit)
            # a .c unit stays C (HIP's and porter's runtime headers are C-compatible), as hipcc builds it
            device = path.suffix in (".cu", ".hip") or (
                path.suffix != ".c" and (self.all_device or has_cuda(data))
            )
            obj = obj_dir / (unit.replace(os.sep, "__") + ".o")
            defines = [f"-D{d}" for d in source.defines_for(unit)]
            cmd = [self.compiler, *self.flags, *(self.device_flags if device else ()), *extra_flags, *defines]
            cmd += incs
            cmd += ["-c", str(path), "-o", str(obj)]
            commands.append(" ".join(cmd))
            code, log = run_tool(cmd, path.parent, jail, self.env, max_output=source.max_output)
            if log.strip():
                logs.append(log)
            if code != 0:
                return BuiltProgram(
                    False, chain, log="\n".join(logs), commands=tuple(commands),
                    reason=f"{unit} does not compile with {self.name}" + (f": {said}" if (said := first_error(log)) else ""),
                )  # fmt: skip
            objects[unit] = obj
        if not mains:
            return BuiltProgram(
                False, chain, log="\n".join(logs), reason="no unit defines main(): nothing to run"
            )
        executables: dict[str, str] = {}
        others = [str(o) for u, o in objects.items() if u not in mains]
        for main in mains:
            exe = out / "bin" / Path(main).with_suffix("")
            exe.parent.mkdir(parents=True, exist_ok=True)
            cmd = [self.compiler, *self.flags, str(objects[main]), *others, "-o", str(exe), *self.link_flags]
            cmd += extra_link
            commands.append(" ".join(cmd))
            code, log = run_tool(cmd, out, jail, self.env, max_output=source.max_output)
            if log.strip():
                logs.append(log)
            if code != 0:
                return BuiltProgram(
                    False,
                    chain,
                    log="\n".join(logs),
                    commands=tuple(commands),
                    reason=f"linking {Path(main).stem} failed",
                )
            executables[main] = str(exe)
        return BuiltProgram(True, chain, executables, "\n".join(logs), tuple(commands), env=dict(self.env))


__all__ = [
    "LOG_CHARS",
    "BuiltProgram",
    "DriverToolchain",
    "ProgramSource",
    "ProgramToolchain",
    "defines_main",
    "is_executable",
    "mapped_include_dirs",
    "build_jail",
    "run_build_command",
    "run_tool",
    "toolchains_for",
]
