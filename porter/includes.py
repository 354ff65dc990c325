"""The headers a C/CUDA source reaches through ``#include``, found without a preprocessor.

``"x.h"`` is looked for beside the including file, then in the include directories; ``<x.h>`` only
in the include directories (system and toolkit headers are never searched: they belong to the
toolchain, which callers identify otherwise).  Each header is read once, however many files
include it; ``#include`` lines inside ``#if 0`` blocks count too, so the walk may reach a header
the compiler would not (never fewer).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

# Starts at the `#` (a literal prefix the regex engine finds fast); the line start is checked after.
_INCLUDE = re.compile(rb'#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]')
MAX_HEADERS = 20_000  # headers read in one walk at most (a guard against include mazes)


def at_line_start(source: bytes, at: int) -> bool:
    """Only blanks between the line's start and ``at`` (a directive's `#`)."""
    return not source[source.rfind(b"\n", 0, at) + 1 : at].strip(b" \t")


def reachable(
    files: Iterable[tuple[str, bytes | None]],
    include_dirs: Iterable[str | Path] = (),
    *,
    quoted_only: bool = False,
) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of ``files`` (bytes None: read it) and of every header they reach, each once.

    A path that cannot be read is skipped: callers report unreadable inputs themselves.  A file
    given with the path "" (text with no file behind it) finds its headers in ``include_dirs`` only.
    ``quoted_only``: follow ``#include "..."`` (the program's own headers) and not ``<...>``.
    """
    dirs = [os.fspath(d) for d in include_dirs]
    seen: set[str] = set()  # absolute paths (no realpath: a header behind a symlink is read twice)
    queued: set[str] = set()  # paths as found, so a header included everywhere is resolved once
    lookups: dict[tuple[str, str], str | None] = {}  # (folder searched first or "", name) -> path
    queue: list[tuple[str, bytes | None]] = [(os.fspath(name), source) for name, source in files]
    queue.reverse()  # the given files first, in order
    read = 0
    while queue:
        path, source = queue.pop()
        key = os.path.abspath(path) if path else f"<text {len(seen)}>"
        if key in seen:
            continue
        seen.add(key)
        if source is None:
            if read >= MAX_HEADERS:
                continue
            read += 1
            try:
                with open(path, "rb") as fh:
                    source = fh.read()
            except OSError:
                continue
        yield path, source
        if b"include" not in source:
            continue
        # a source given without a path ("") has no folder of its own to search
        here = (os.path.dirname(path) or ".") if path else ""
        for m in _INCLUDE.finditer(source):
            if not at_line_start(source, m.start()):
                continue
            quoted = m.group(1) == b'"'
            if quoted_only and not quoted:
                continue
            lookup = (here if quoted else "", m.group(2).decode("utf-8", "replace").strip())
            if lookup not in lookups:
                lookups[lookup] = _find(lookup[1], [here, *dirs] if quoted and here else dirs)
            header = lookups[lookup]
            if header is not None and header not in queued:
                queued.add(header)
                queue.append((header, None))


def resolve_local_include(
    name: str, including_file: str | Path, include_dirs: Sequence[str | Path] = ()
) -> Path | None:
    """The file ``#include "name"`` reads: the including file's folder first, then ``include_dirs``."""
    found = _find(name, [os.fspath(Path(including_file).parent), *(os.fspath(d) for d in include_dirs)])
    return Path(found) if found is not None else None


def _find(name: str, folders: list[str]) -> str | None:
    for folder in folders:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None
