"""The headers a C/CUDA source reaches through ``#include``, found without a preprocessor.

``"x.h"`` is looked for beside the including file, then in the include directories; ``<x.h>`` only
in the include directories (system and toolkit headers are never searched: they belong to the
toolchain, which callers identify otherwise).  Each header is read once, however many files
include it; ``#include`` lines inside ``#if 0`` blocks count too, so the walk may reach a header
the compiler would not (never fewer).

Headers are read through :mod:`porter.files`: a header that is not a regular file (``#include
"/dev/zero"``, a FIFO) is never opened, and one larger than the input cap is skipped, each with a
warning (``strict``: the special file is a usage error naming the including file and line, as a
compiler handed that source would read it forever).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from porter import files
from porter.errors import UsageError

# a C/C++/CUDA translation unit, and a header, by the file's suffix
SOURCE_SUFFIXES = frozenset({".cu", ".hip", ".cpp", ".cc", ".cxx", ".c++", ".c"})
HEADER_SUFFIXES = frozenset({".cuh", ".h", ".hpp", ".hh", ".hxx", ".inl", ".inc", ".tcc"})

# Starts at the `#` (a literal prefix the regex engine finds fast); the line start is checked after.
_INCLUDE = re.compile(rb'#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]')
MAX_HEADERS = 20_000  # headers read in one walk at most (a guard against include mazes)


def at_line_start(source: bytes, at: int) -> bool:
    """Only blanks between the line's start and ``at`` (a directive's `#`)."""
    return not source[source.rfind(b"\n", 0, at) + 1 : at].strip(b" \t")


def directives(source: bytes) -> Iterator[tuple[int, int, bool, str]]:
    """Each ``#include`` of `source` at a line's start: (start, end of the directive, quoted, the name)."""
    for m in _INCLUDE.finditer(source):
        if at_line_start(source, m.start()):
            name = m.group(2).decode("utf-8", "surrogateescape").strip()
            yield m.start(), m.end(), m.group(1) == b'"', name


def reachable(
    files_: Iterable[tuple[str, bytes | None]],
    include_dirs: Iterable[str | Path] = (),
    *,
    quoted_only: bool = False,
    strict: bool = False,
    allow: Callable[[str], bool] | None = None,
) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of ``files_`` (bytes None: read it) and of every header they reach, each once.

    A given path that cannot be read is skipped: callers report unreadable inputs themselves.  A
    file given with the path "" (text with no file behind it) finds its headers in ``include_dirs``
    only.  ``quoted_only``: follow ``#include "..."`` (the program's own headers) and not ``<...>``.
    A header that is not a regular file is never read: a warning, or with ``strict`` a UsageError
    naming the including file and line; one larger than the cap is skipped with a warning.  ``allow``:
    a header for which it is false is neither read nor followed (a program's headers outside its folder).
    """
    dirs = [os.fspath(d) for d in include_dirs]
    seen: set[str] = set()  # absolute paths (no realpath: a header behind a symlink is read twice)
    queued: set[str] = set()  # paths as found, so a header included everywhere is resolved once
    lookups: dict[tuple[str, str], str | None] = {}  # (folder searched first or "", name) -> path
    queue: list[tuple[str, bytes | None, bool]] = [(os.fspath(name), source, True) for name, source in files_]
    queue.reverse()  # the given files first, in order
    read = 0
    while queue:
        path, source, given = queue.pop()
        key = os.path.abspath(path) if path else f"<text {len(seen)}>"
        if key in seen:
            continue
        seen.add(key)
        if source is None:
            if read >= MAX_HEADERS:
                continue
            read += 1
            source = files.read_header(path, quiet=given)  # never blocks on a FIFO, never reads /dev/zero
            if source is None:
                continue
        yield path, source
        if b"include" not in source:
            continue
        # a source given without a path ("") has no folder of its own to search
        here = (os.path.dirname(path) or ".") if path else ""
        for start, end, quoted, name in directives(source):
            if quoted_only and not quoted:
                continue
            lookup = (here if quoted else "", name)
            if lookup not in lookups:
                lookups[lookup] = _find(lookup[1], [here, *dirs] if quoted and here else dirs)
            header = lookups[lookup]
            if header is None or header in queued:
                continue
            queued.add(header)
            if allow is not None and not allow(header):
                continue
            why = files.refusal(header)
            if why is not None:
                _refuse(
                    header,
                    why,
                    path,
                    source.count(b"\n", 0, start) + 1,
                    source[start:end].decode("utf-8", "surrogateescape"),
                    strict,
                )
                continue
            queue.append((header, None, False))


def _refuse(header: str, why: str, including: str, line: int, directive: str, strict: bool) -> None:
    """A header porter will not read: a warning, or (``strict``, for a special file, which a compiler
    handed the source would read forever) a UsageError at the ``#include``."""
    where = f"{including}:{line}: " if including else ""
    if strict and not files.is_regular(header) and files.exists(header):
        kind = files.kind_of(os.stat(header).st_mode)
        raise UsageError(
            f"{directive} names {header}, {kind}, not a regular file; porter does not read it "
            "(and a compiler would wait on it or read it forever)",
            path=including or None,
            line=line if including else None,
        )
    files.warn(f"{where}{directive}: header {header} skipped: {why}")


def resolve_local_include(
    name: str, including_file: str | Path, include_dirs: Sequence[str | Path] = ()
) -> Path | None:
    """The file ``#include "name"`` reads: the including file's folder first, then ``include_dirs``."""
    found = _find(name, [os.fspath(Path(including_file).parent), *(os.fspath(d) for d in include_dirs)])
    return Path(found) if found is not None else None


def _find(name: str, folders: list[str]) -> str | None:
    """The first candidate that exists and is not a folder, as a compiler picks it: a FIFO or a
    device is found too (so that it is refused, never searched past)."""
    for folder in folders:
        candidate = os.path.join(folder, name)
        if files.exists(candidate) and not os.path.isdir(candidate):
            return candidate
    return None
