"""What every workflow does first with the user's CUDA file, written once."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from porter.errors import UsageError
from porter.files import read_input
from porter.model import FileScan
from porter.scan.macros import MacroTable


def load_cuda(path: str, command: str, macros: MacroTable | None = None) -> tuple[str, FileScan]:
    """The text and scan of one CUDA source with at least one kernel; UsageError (exit 2) otherwise.
    ``macros``: the macro table (:func:`qualifier_macros`) when the caller has it."""
    from porter.scan import language_for, scan_file

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"is a directory; porter {command} takes one CUDA source file", path=path)
    scan = scan_file(path, macros=macros)  # UsageError for a missing, unreadable or binary file
    raw = read_input(path)
    if language_for(path, raw) != "cuda" or scan.language != "cuda":
        raise UsageError("not a CUDA source (expected a .cu/.cuh file, or C++ with CUDA kernels)", path=path)
    if not scan.kernels:
        first = scan.warnings[0] if scan.warnings else None
        if first is not None:
            raise UsageError(
                f"no __global__ kernel found (parse error: {first.message})", path=path, line=first.line
            )
        raise UsageError("no __global__ kernel found", path=path)
    return raw.decode("utf-8"), scan


def qualifier_macros(path: str | Path, include_dirs: Sequence[str | Path] = ()) -> MacroTable:
    """The macro table (:class:`porter.scan.macros.MacroTable`: qualifier macros such as
    ``#define KERNEL __global__``, scope and blank macros) of the file at ``path`` and the headers
    it includes, for every tool that scans it or cuts device code out of it.  These tools hand the
    source to compilers: an ``#include`` of a FIFO or a device (``/dev/zero``) is a UsageError here."""
    from porter.scan.macros import collect

    return collect([(str(path), None)], include_dirs, strict=True)


def sibling_dir(source: str | Path, suffix: str) -> Path:
    """The default output folder: `<stem>.<suffix>/` beside the input (never the input itself)."""
    src = Path(source)
    return src.parent / f"{src.stem}.{suffix}"


def includes(text: str) -> tuple[str, ...]:
    """Every header a source includes, as written between the brackets or quotes."""
    return tuple(
        m.strip() for m in re.findall(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', text, re.MULTILINE)
    )


def squeeze(text: str) -> str:
    """Device code without the blank runs where host code was."""
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"
