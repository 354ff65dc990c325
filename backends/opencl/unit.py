"""The device translation unit an OpenCL program is built from.

OpenCL programs are built from one string, so local ``#include "x.cuh"`` files are inlined here
(only their device side: :func:`porter.scan.extract.device_code`), system headers are dropped,
and every line remembers where it came from so that diagnostics name the user's file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from porter.errors import UsageError
from porter.files import read_text
from porter.includes import resolve_local_include
from porter.model import Diagnostic, Severity
from porter.scan.extract import device_code

_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\b")
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# `#ifdef __cplusplus` / `extern "C" {` / `#endif` (and its closing `}`): a C header's guard for C++
# callers.  OpenCL C never defines __cplusplus, but the parser cannot see past the unbalanced brace, so
# the guard's lines are blanked (a kernel after such a header would otherwise be lost in an ERROR node).
_IF_CPLUSPLUS = re.compile(
    r"^\s*#\s*(?:ifdef\s+__cplusplus|if\s+defined\s*\(?\s*__cplusplus\s*\)?)\s*(?://.*|/\*.*)?$"
)
_EXTERN_C_OPEN = re.compile(r'^\s*extern\s+"C"\s*\{\s*(?://.*|/\*.*)?$')
_CLOSE_BRACE = re.compile(r"^\s*\}\s*;?\s*(?://.*|/\*.*)?$")
_ENDIF = re.compile(r"^\s*#\s*endif\b")


@dataclass
class Unit:
    lines: list[str] = field(default_factory=list)
    origins: list[tuple[str, int]] = field(default_factory=list)  # per line: (file, 1-based line)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    included: list[str] = field(default_factory=list)  # files inlined, in order

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def origin(self, row: int) -> tuple[str, int]:
        """(file, line) of a 0-based row of :attr:`text`."""
        if 0 <= row < len(self.origins):
            return self.origins[row]
        return self.origins[-1] if self.origins else ("<input>", row + 1)


def build_unit(
    source: str,
    path: str,
    include_dirs: Sequence[str],
    dropped: frozenset[str],
    unsupported: dict[str, str],
    rewrite: Callable[[str], str] | None = None,
) -> Unit:
    """The device code of `source` with its local includes inlined (each file once).

    ``rewrite`` is applied to each file's text first; it must keep the number of lines.
    """
    unit = Unit()
    _append(
        unit,
        source,
        path,
        include_dirs,
        dropped,
        unsupported,
        {str(Path(path).resolve())},
        0,
        rewrite or (lambda text: text),
    )
    return unit


def _without_cplusplus_guards(lines: list[str]) -> list[str]:
    """`lines` with each three-line ``#ifdef __cplusplus`` guard of an ``extern "C" {`` or of its
    closing ``}`` blanked (the number of lines is kept)."""
    out = list(lines)
    for i in range(len(out) - 2):
        if (
            _IF_CPLUSPLUS.match(out[i])
            and (_EXTERN_C_OPEN.match(out[i + 1]) or _CLOSE_BRACE.match(out[i + 1]))
            and _ENDIF.match(out[i + 2])
        ):
            out[i] = out[i + 1] = out[i + 2] = ""
    return out


def _append(
    unit: Unit,
    source: str,
    path: str,
    include_dirs: Sequence[str],
    dropped: frozenset[str],
    unsupported: dict[str, str],
    seen: set[str],
    depth: int,
    rewrite: Callable[[str], str],
) -> None:
    for index, line in enumerate(_without_cplusplus_guards(device_code(rewrite(source)).split("\n"))):
        lineno = index + 1
        if depth and _PRAGMA_ONCE.match(line):
            line = ""
        m = _INCLUDE.match(line)
        if m is None:
            unit.lines.append(line)
            unit.origins.append((path, lineno))
            continue
        kind, name = m.group(1), m.group(2).strip()
        replacement = ""
        if name in unsupported:
            unit.diagnostics.append(
                Diagnostic(
                    path, lineno, f"#include {m.group(1)}{name}", f"header dropped: {unsupported[name]}"
                )
            )
        elif kind == '"' and name not in dropped:
            found = resolve_local_include(name, path, include_dirs) if depth < 32 else None
            if found is None:
                unit.diagnostics.append(
                    Diagnostic(
                        path,
                        lineno,
                        f'#include "{name}"',
                        "local header not found (searched the file's folder and the include directories); "
                        "its macros and helpers are missing from the OpenCL program",
                        Severity.ERROR,
                    )
                )
            else:
                key = str(found.resolve())
                if key not in seen:
                    seen.add(key)
                    try:  # never a FIFO or a device, never past the size cap (porter.files)
                        text = read_text(found)
                    except UsageError as err:
                        unit.diagnostics.append(
                            Diagnostic(
                                path,
                                lineno,
                                f'#include "{name}"',
                                f"cannot read {err}",
                                Severity.ERROR,
                            )
                        )
                    else:
                        unit.lines.append(f'/* porter: inlined "{name}" (device code only) */')
                        unit.origins.append((path, lineno))
                        unit.included.append(str(found))
                        _append(
                            unit,
                            text,
                            str(found),
                            include_dirs,
                            dropped,
                            unsupported,
                            seen,
                            depth + 1,
                            rewrite,
                        )
                        unit.lines.append(f'/* porter: end of "{name}" */')
                        unit.origins.append((path, lineno))
                        continue
        elif name not in dropped:
            unit.diagnostics.append(
                Diagnostic(
                    path,
                    lineno,
                    f"#include <{name}>",
                    "system header dropped: OpenCL C programs cannot include host headers",
                    Severity.INFO,
                )
            )
        unit.lines.append(replacement)
        unit.origins.append((path, lineno))
