"""The user's input, read once: a :class:`SourceUnit` made by :func:`load`.

A unit holds the file's bytes exactly as read, its text, every header it reaches through
``#include`` (bytes, read once however many files include them), the macro table of qualifier and
scope macros across them, and its scan.  Every command runs inside :func:`porter.files.snapshot`
(:func:`porter.files.reads_once` on each workflow), so whatever stage asks for one of these files
again -- a translator walking the headers, spec inference, the LLM loop -- gets the bytes this
load saw, never a second read of the disk; syntax trees are shared the same way
(:func:`porter.grammars.parse`).  ``files.READS`` and ``grammars.PARSES`` count both, for tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from porter import files
from porter.errors import NoKernelError, UsageError
from porter.model import FileScan
from porter.scan.macros import MacroTable


@dataclass(frozen=True)
class Scanned:
    """A file's scan with the macro table it was made with (the qualifier and scope macros of the file
    and the headers it reaches): what a translator would otherwise make again."""

    macros: MacroTable
    scan: FileScan
    # the build's -D NAME[=VALUE] for the file (decides conditionals a translator must decide: an
    # OpenCL kernel's parameter list); None: not known
    defines: tuple[str, ...] | None = None
    # the scans of the files it reaches through `#include "..."` (absolute path, scan), where the caller
    # holds them: a template kernel's instances are those launched anywhere in the unit (Rodinia huffman's
    # main file includes scan.cu, which launches prescan<true, false>); a file not here is scanned when needed
    included: tuple[tuple[str, FileScan], ...] = ()


@dataclass(frozen=True)
class SourceUnit:
    path: str  # as the user gave it
    data: bytes  # exactly as read
    text: str  # `data` decoded as UTF-8
    include_dirs: tuple[str, ...]
    macros: MacroTable
    scan: FileScan
    # every header reached through #include (absolute path -> bytes), the input itself excluded
    headers: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))
    defines: tuple[str, ...] = ()  # the build's -D NAME[=VALUE] (the command line's)

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def scanned(self) -> Scanned:
        return Scanned(self.macros, self.scan, self.defines)


def load(
    path: str | os.PathLike[str],
    command: str,
    include_dirs: Sequence[str | os.PathLike[str]] = (),
    defines: Sequence[str] = (),
    *,
    unity: bool = False,
) -> SourceUnit:
    """The CUDA source at `path` with at least one kernel, as one unit; UsageError (exit 2) naming the
    file (and line) when it is missing, not a regular file, too large, not UTF-8, not CUDA or without
    a kernel; ``command`` names the porter command in those messages.  ``defines``: the build's
    ``-D NAME[=VALUE]`` (UsageError for one that is not a macro name).  ``unity``: a file without
    kernels of its own whose ``#include "x.cu"`` lines pull in source files that define them (a unity
    build: lavaMD's wrapper, myocyte's main.cu) is read with those files' text in place of the lines,
    so its kernels are built with the types and macros the unit gives them."""
    from porter.defines import check_defines

    check_defines(defines, ())
    from porter.includes import reachable
    from porter.scan import binary_reason, language_for, scan_source
    from porter.scan.macros import collect

    name = os.fspath(path)
    if Path(name).is_dir():
        raise UsageError(f"is a directory; porter {command} takes one CUDA source file", path=name)
    dirs = tuple(os.fspath(d) for d in include_dirs)
    with files.snapshot():
        # the macro table first: an #include of a FIFO or a device is a UsageError at its line
        macros = collect([(name, None)], dirs, strict=True)
        data = files.read_input(name)  # UsageError: missing, a directory or special file, too large
        reason = binary_reason(data)
        if reason is not None:
            raise UsageError(reason, path=name)
        scan = scan_source(data, name, macros=macros)
        if unity and not scan.kernels:
            inlined = unity_source(name, data, dirs)
            if inlined is not None:
                data, folders = inlined
                dirs = (*dirs, *(f for f in folders if f not in dirs))
                scan = scan_source(data, name, macros=macros)
        if language_for(name, data) != "cuda" or scan.language != "cuda":
            raise UsageError(
                "not a CUDA source (expected a .cu/.cuh file, or C++ with CUDA kernels)", path=name
            )
        if not scan.kernels:
            first = scan.warnings[0] if scan.warnings else None
            if first is not None:
                raise UsageError(
                    f"no __global__ kernel found (parse error: {first.message})", path=name, line=first.line
                )
            raise NoKernelError(
                "no __global__ kernel found" + _kernels_in_headers(name, data, dirs, command), path=name
            )
        me = os.path.abspath(name)
        reached = reachable([(name, data)], dirs, strict=True)
        headers = {os.path.abspath(p): b for p, b in reached if os.path.abspath(p) != me}
    return SourceUnit(
        path=name,
        data=data,
        text=data.decode("utf-8", "surrogateescape"),
        include_dirs=dirs,
        macros=macros,
        scan=scan,
        headers=MappingProxyType(headers),
        defines=tuple(defines),
    )


def unity_source(name: str, data: bytes, dirs: Sequence[str]) -> tuple[bytes, list[str]] | None:
    """`data` with each ``#include "x"`` of a local source file (.cu, .c, .cpp ...) replaced by that
    file's bytes, recursively (each file once, as its include guard-less unity build would), and the
    folders of the files inlined (their own quoted includes resolve there); None when no inlined file
    defines a kernel."""
    from porter.includes import SOURCE_SUFFIXES, directives, resolve_local_include

    seen: set[str] = {os.path.abspath(name)}
    folders: list[str] = []
    kernels = False

    def inline(path: str, body: bytes, depth: int) -> bytes:
        nonlocal kernels
        out, last = [], 0
        for start, end, quoted, included in directives(body):
            if not quoted or depth > 16:
                continue
            target = resolve_local_include(included, path, dirs)
            if target is None or target.suffix not in SOURCE_SUFFIXES or not files.is_regular(str(target)):
                continue
            key = os.path.abspath(target)
            if key in seen:
                continue
            seen.add(key)
            text = files.read_header(str(target), quiet=True)
            if text is None:
                continue
            kernels = kernels or b"__global__" in text
            if str(target.parent) not in folders:
                folders.append(str(target.parent))
            out += [body[last:start], inline(str(target), text, depth + 1), b"\n"]
            last = end
        return b"".join([*out, body[last:]])

    result = inline(name, data, 0)
    return (result, folders) if kernels else None


def _kernels_in_headers(name: str, data: bytes, dirs: Sequence[str], command: str) -> str:
    """'; the headers it includes define ...' naming the local headers with kernels (where a program's
    kernels usually live), or '' when none does."""
    from porter.includes import reachable
    from porter.scan import scan_source

    found: list[str] = []
    try:
        for path, body in reachable([(name, data)], dirs, strict=False):
            if os.path.abspath(path) == os.path.abspath(name) or b"__global__" not in body:
                continue
            kernels = sorted({k.name for k in scan_source(body, path).kernels})
            if kernels:
                found.append(
                    f"{os.path.relpath(path, os.path.dirname(os.path.abspath(name)))} ({', '.join(kernels)})"
                )
    except (OSError, UsageError, ValueError):
        return ""
    if not found:
        return ""
    return (
        f"; the headers it includes define {'; '.join(found)}: give porter {command} that header "
        "(its launches from this file's run: porter capture, then --capture)"
    )
