"""Preprocessor conditionals inside parentheses: a kernel's parameter list, or a launch's argument list,
that holds ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else``/``#endif`` lines
(``k(int* a,\\n#ifdef TESTING\\n int* t,\\n#endif\\n int* out)``).

Tree-sitter does not run the preprocessor: it reads such a list as an ERROR node and a parameter whose
type starts with the macro's name.  The OpenCL port keeps the directives where the program wrote them, in
the ``.cl`` kernel's parameter list and in the host stub that sets the kernel's arguments, so that each
side's preprocessor takes the same branch under whatever macros the program is built with; only the
parser is shown the list without them (:func:`in_parentheses` finds them, the translator masks them).

Which parameters the program's own build passes (the launch mapping, ``arg_map``, that replays the
original's captured launches) is decided here with porter's reading of the conditionals
(:func:`porter.scan.macros.dead_ranges`: the macros defined above, in the file and the headers inlined
before it, and the command line's ``-D``/``-U``): :func:`liveness`.  A conditional it cannot decide is
refused, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from porter.scan.macros import dead_ranges

CONDITIONAL_KINDS = frozenset({"if", "ifdef", "ifndef", "elif", "else", "endif", "elifdef", "elifndef"})

# What moves the parenthesis depth, and what hides parentheses from it: comments, string and character
# literals, directive lines (continuations included; group 1: the directive's name).
_LEXEME = re.compile(
    rb"//[^\n]*"
    rb"|/\*.*?\*/"
    rb'|"(?:\\.|[^"\\\n])*"'
    rb"|'(?:\\.|[^'\\\n])*'"
    rb"|^[ \t]*#[ \t]*(\w*)(?:[^\n\\]|\\\r?\n|\\)*"
    rb"|[()]",
    re.M | re.S,
)
_ANY_CONDITIONAL = re.compile(rb"^[ \t]*#[ \t]*(?:if|el|endif)", re.M)


@dataclass(frozen=True)
class Directive:
    """A conditional directive line inside parentheses."""

    start: int  # byte offset of its line's start
    end: int  # byte offset past it (its continuation lines included, the final newline not)
    row: int  # 0-based row of its first line
    kind: str  # if, ifdef, ifndef, elif, else, endif, elifdef, elifndef
    text: str  # as written, continuation lines joined into one

    @property
    def rows(self) -> int:
        """How many lines it spans."""
        return self.text.count("\n") + 1


def in_parentheses(data: bytes) -> list[Directive]:
    """The conditional directive lines of `data` that lie inside parentheses, in order."""
    if _ANY_CONDITIONAL.search(data) is None:
        return []
    found: list[Directive] = []
    depth = 0
    for m in _LEXEME.finditer(data):
        tok = m.group(0)
        if tok == b"(":
            depth += 1
        elif tok == b")":
            depth = max(0, depth - 1)
        elif m.group(1) is not None:
            kind = m.group(1).decode("ascii", "replace")
            if depth > 0 and kind in CONDITIONAL_KINDS:
                raw = tok.decode("utf-8", "surrogateescape").replace("\r\n", "\n")
                found.append(
                    Directive(m.start(), m.end(), data.count(b"\n", 0, m.start()), kind, raw.lstrip(" \t"))
                )
    return found


def branch_values(data: bytes, known: Mapping[str, bool] | None = None) -> dict[int, bool | None]:
    """Each ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else`` line's start -> whether its branch is
    taken (None: porter cannot tell), as :func:`porter.scan.macros.dead_ranges` reads `data`."""
    values: dict[int, bool | None] = {}
    dead_ranges(data, known, values)
    return values


def known_from(defines: Sequence[str], undefines: Sequence[str] = ()) -> dict[str, bool]:
    """What the command line's ``-D``/``-U`` decide, over :data:`porter.scan.macros.KNOWN_MACROS`."""
    from porter.scan.macros import CommandLine

    return CommandLine(tuple(defines), tuple(undefines)).known()


# Macros of the program's own: upper case, no leading underscore (the implementation's), none of the
# CUDA toolkit's or its libraries' (their headers are not read).
_PROGRAM_MACRO = re.compile(r"(?!CUDA|CUDART|CU_|CUB_|THRUST_|CUTLASS_|NV_|HIP)[A-Z][A-Z0-9_]*")
_NAMES = re.compile(r"[A-Za-z_]\w*")
# an include guard: `#ifndef X` (or `#if !defined(X)`) whose next line defines X
_GUARD = re.compile(
    rb"^[ \t]*#[ \t]*(?:ifndef[ \t]+([A-Za-z_]\w*)|if[ \t]+![ \t]*defined[ \t]*\(?[ \t]*([A-Za-z_]\w*)[ \t]*\)?)"
    rb"[ \t]*(?://[^\n]*)?\r?\n[ \t]*#[ \t]*define[ \t]+(?:\1|\2)\b",
    re.M,
)


def program_macro(name: str) -> bool:
    """Whether `name` is spelled as a macro of the program's own (``TESTING``, ``USE_SMEM``)."""
    return _PROGRAM_MACRO.fullmatch(name) is not None


def undefined_by_default(
    data: bytes, directives: Sequence[Directive], known: Mapping[str, bool] | None
) -> dict[str, bool]:
    """`known` (the command line's macros, :func:`known_from`) with each macro of the program's own that
    `directives` name, and each include guard of `data` (``#ifndef X`` / ``#define X``), that the
    command line does not define taken as undefined: the build's command line is the whole of it, so
    such a macro is defined only where a file of the program defines it (which
    :func:`porter.scan.macros.dead_ranges` sees, in order)."""
    from porter.scan.macros import KNOWN_MACROS

    out = dict(KNOWN_MACROS if known is None else known)
    for m in _GUARD.finditer(data):
        out.setdefault((m.group(1) or m.group(2)).decode("ascii"), False)
    for d in directives:
        for name in _NAMES.findall(d.text.split(None, 1)[1] if len(d.text.split(None, 1)) > 1 else ""):
            if name != "defined" and name not in out and program_macro(name):
                out[name] = False
    return out


def liveness(
    rows: Sequence[int], directives: Sequence[Directive], values: Mapping[int, bool | None]
) -> tuple[list[bool], Directive | None]:
    """Whether each item starting on `rows` (0-based rows inside one parenthesised list, in order; a
    directive has its lines to itself, so an item's row tells which side of it the item is) is compiled,
    given the conditional `directives` of that list and their `values` (:func:`branch_values`); and the
    first directive that leaves any of them undecided (or that does not pair up inside the list), else
    None."""
    live: list[bool] = []
    stack: list[tuple[Directive, bool | None]] = []
    undecided: Directive | None = None
    pending = sorted(directives, key=lambda d: d.start)
    i = 0
    for row in rows:
        while i < len(pending) and pending[i].row < row:
            d = pending[i]
            i += 1
            if d.kind in ("if", "ifdef", "ifndef"):
                stack.append((d, values.get(d.start)))
            elif d.kind == "endif":
                if not stack:
                    return live, d
                stack.pop()
            else:
                if not stack:
                    return live, d
                stack[-1] = (d, values.get(d.start) if d.kind in ("elif", "else") else None)
        values_here = [value for _, value in stack]
        if False not in values_here and None in values_here and undecided is None:
            undecided = next(d for d, value in stack if value is None)
        live.append(all(value is True for value in values_here))
    depth = len(stack)
    for d in pending[i:]:  # the rest must close what the list opened
        depth += 1 if d.kind in ("if", "ifdef", "ifndef") else -1 if d.kind == "endif" else 0
        if depth < 0:
            return live, d
    if depth != 0:
        return live, pending[-1] if pending else None
    return live, undecided


def describe(d: Directive) -> str:
    """The directive as a diagnostic shows it, on one line."""
    return " ".join(d.text.replace("\\\n", " ").split())


__all__ = [
    "CONDITIONAL_KINDS",
    "Directive",
    "branch_values",
    "describe",
    "in_parentheses",
    "known_from",
    "liveness",
    "program_macro",
    "undefined_by_default",
]
