"""The build's macros as compilers take them: ``-D NAME[=VALUE]`` and ``-U NAME`` from the command line,
merged over what a compilation database defines."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from porter.errors import UsageError


@dataclass(frozen=True)
class BuildFlags:
    """The build flags the command line gives (``-I``, ``-D NAME[=VALUE]``, ``-U NAME``), merged over a
    compilation database's where there is one."""

    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    undefines: tuple[str, ...] = ()
    cmake_target: str | None = (
        None  # a compile_commands.json's units of this CMake target only (--cmake-target)
    )


def merge_defines(
    found: Sequence[str], defines: Sequence[str], undefines: Sequence[str], origin: str
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``-D`` macros `found` in a build's flags (from `origin`) merged with the command line's, as a
    compiler takes them: a command-line ``-D NAME[=VALUE]`` replaces the same NAME, ``-U NAME`` removes
    it.  Returns the macros and, for each NAME, where its value came from."""
    merged: dict[str, tuple[str, str]] = {}
    for d in found:
        merged[define_name(d)] = (d, origin)
    for d in defines:
        merged[define_name(d)] = (d, "command line")
    for name in undefines:
        merged.pop(name, None)
    return tuple(d for d, _ in merged.values()), tuple((n, o) for n, (_d, o) in merged.items())


def define_name(define: str) -> str:
    """The macro a ``-D`` argument defines: ``N`` of ``N=1024``."""
    return define.split("=", 1)[0].strip()


def check_defines(defines: Sequence[str], undefines: Sequence[str]) -> None:
    """UsageError for a ``-D``/``-U`` whose name is not a C identifier."""
    for flag, values in (("-D", defines), ("-U", undefines)):
        for v in values:
            name = define_name(v) if flag == "-D" else v.strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise UsageError(f"{flag} {v!r}: {name!r} is not a macro name (NAME or NAME=VALUE)")
