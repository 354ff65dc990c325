"""Helpers the workflows share: default output folders, the macro table, include lists (the input
itself is read by :func:`porter.source.load`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from porter.errors import UsageError
from porter.model import FileScan, Kernel
from porter.scan.macros import MacroTable


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


def pick_kernel(scan: FileScan, kernel: str | None, path: str) -> Kernel:
    """The kernel named `kernel`, or the file's only one; a UsageError naming the choices otherwise."""
    names = [k.name for k in scan.kernels]
    if not names:
        raise UsageError("no __global__ kernel found", path=path)
    if kernel is None:
        if len(names) > 1:
            raise UsageError(f"several kernels ({', '.join(names)}); choose one with --kernel", path=path)
        kernel = names[0]
    found = next((k for k in scan.kernels if k.name == kernel), None)
    if found is None:
        raise UsageError(f"no kernel named {kernel!r} (kernels: {', '.join(names)})", path=path)
    return found
