"""Macros that hide CUDA structure from a parser that does not expand them.

*Qualifier macros.* Legacy code and libraries rarely spell ``__global__`` where a kernel is
defined: they write ``KERNEL void k(...)``, ``HOST_DEVICE inline float f(...)`` or CCCL's
``CUB_DETAIL_KERNEL_ATTRIBUTES void DeviceReduceKernel(...)``, with the macro defined in some
header.  Tree-sitter does not expand macros, so the scanner asks this table which identifiers
expand (through other macros) to ``__global__``, ``__device__``, ``__host__`` and friends.

*Scope macros.* Libraries open and close their namespaces through macros (``CUB_NAMESPACE_BEGIN``
... ``CUB_NAMESPACE_END``, ``NS_BEGIN(detail)``).  Seen as plain identifiers they make tree-sitter
misread everything between them, so no kernel in such a file is found.  :func:`mask` writes
each use as the brace it stands for (``namespace{`` / ``}``), padded to the same length so that
byte offsets and line numbers of everything else stay those of the file, and remembers which
namespaces it opened (``cub``).

*Blank macros* stand for nothing in every definition (an attribute, ``CUB_NS_PREFIX``): they are
blanked as the preprocessor would.

The table is built lexically, without parsing: ``#define`` lines of the scanned files and of the
headers they include (``"..."`` beside the including file or in the include directories,
``<...>`` in the include directories), each header read once.  Conditionals are honoured as far as
they can be decided: porter reads code as CUDA compiled by nvcc (``__CUDACC__`` defined, ``__HIPCC__``
not: :data:`KNOWN_MACROS`), with the macros a file defines above a conditional; a definition in a
branch known to be dead (``#if !defined(__CUDACC__)`` / ``#define __global__``) is never seen.  A
macro defined differently under undecided ``#if`` branches carries the qualifiers of every definition
(``_CCCL_DEVICE`` under ``__CUDA_ARCH__`` is ``__device__`` in one pass and empty in the other).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from porter.includes import at_line_start, reachable

if TYPE_CHECKING:
    from tree_sitter import Node

# The qualifiers a macro may stand for, as the scanner spells them (tree-sitter node types).
QUALIFIERS = frozenset(
    {"__global__", "__device__", "__host__", "__forceinline__", "__noinline__", "__inline__", "inline"}
)


@dataclass(frozen=True)
class ScopeMacro:
    """A macro that opens or closes a scope: ``#define NS_BEGIN namespace lib {`` / ``#define NS_END }``."""

    opens: bool  # True: it opens scopes; False: it closes them
    namespace: bool  # what it opens is a namespace or an extern "C" block (not a bare `{`)
    function_like: bool  # used with an argument list: `NS_BEGIN(detail)`
    # The names of the namespaces it opens, outermost first, that qualify what is declared inside
    # (inline namespaces, which need no spelling, left out): ("cub",) for CUB_NAMESPACE_BEGIN.  A
    # function-like macro's parameters stand in it for the arguments of each use.
    path: tuple[str, ...] = ()
    params: tuple[str, ...] = ()


class MacroTable(dict[str, tuple[str, ...]]):
    """Qualifier macros (a macro name -> the qualifiers it stands for, as the scanner spells them),
    plus ``scopes``, the scope macros by name, and ``blanks``, the macros that stand for nothing."""

    def __init__(
        self,
        qualifiers: Mapping[str, tuple[str, ...]] | None = None,
        scopes: Mapping[str, ScopeMacro] | None = None,
        blanks: Iterable[str] = (),
    ) -> None:
        super().__init__(qualifiers or {})
        self.scopes: dict[str, ScopeMacro] = dict(scopes or {})
        self.blanks: frozenset[str] = frozenset(blanks)
        self._pattern: re.Pattern[bytes] | None = None

    def __bool__(self) -> bool:
        return bool(len(self) or self.scopes or self.blanks)

    def merged(self, other: MacroTable) -> MacroTable:
        """Both tables in one, ``other`` winning where a name is in both (``{**a, **b}`` would keep
        the qualifier macros only)."""
        return MacroTable({**self, **other}, {**self.scopes, **other.scopes}, self.blanks | other.blanks)

    def __reduce__(  # for worker processes: no compiled regex
        self,
    ) -> tuple[type[MacroTable], tuple[dict[str, tuple[str, ...]], dict[str, ScopeMacro], frozenset[str]]]:
        return (MacroTable, (dict(self), self.scopes, self.blanks))


# A definition's body as tokens: identifiers, and the scope marks `{`, `}` and NAMESPACE (a
# `namespace x {` or `extern "C" {` opener; NAMESPACE + "x" for a named, not inline, namespace);
# OPAQUE stands for a body of anything else.  A function-like macro's body starts with its
# parameter list, "(a,b)".
Body = tuple[str, ...]
NAMESPACE = "namespace{"
OPAQUE = "..."

# Starts at the `#` (a literal prefix the regex engine finds fast); the line start is checked after.
# Group 2: the parameter list of a function-like macro (only scope macros use those).
_DEFINE = re.compile(
    rb"#[ \t]*define[ \t]+([A-Za-z_]\w*)(?:(\([^()\n]*\))|(?![\w(]))((?:[^\n\\]|\\\r?\n|\\)*)"
)
# `namespace a {`, `namespace a::b {`, `inline namespace v1 {`, `namespace _SPLICE(a, b) {`,
# `extern "C" {`; group 1: `inline`, group 2: the name, group 3: a macro call after the name.
_OPENER = re.compile(
    r"(\binline\s+)?\bnamespace\b(?:\s*([\w:]+)(\s*\((?:[^()]|\([^()]*\))*\))?)?\s*\{"
    r'|\bextern\s*"C(?:\+\+)?"\s*\{'
)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# Parts of a qualifier macro that are not identifiers: attributes, launch bounds, linkage.
_DROP = re.compile(
    r"\b(?:__attribute__|__declspec|__launch_bounds__|__maxnreg__|__align__|alignas)\s*"
    r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
    r'|\bextern\s*"C(?:\+\+)?"'
)
_NOT_WORDS = re.compile(r"[^\w\s{}]")
_TOKEN = re.compile(r"namespace\{[\w:]*|[{}]|\w+")


# How porter reads code (as CUDA, compiled by nvcc): these macros are defined (True) or not (False) in
# every pass; one that is not listed, or defined in one pass only (__CUDA_ARCH__: the device pass), is
# unknown, and a conditional on it keeps both of its branches.
KNOWN_MACROS: dict[str, bool] = {
    "__CUDACC__": True,
    "__NVCC__": True,
    "__cplusplus": True,
    "__HIPCC__": False,
    "__HIP__": False,
    "__HIP_PLATFORM_AMD__": False,
    "__HIP_PLATFORM_HCC__": False,
    "__HIP_DEVICE_COMPILE__": False,
    "__OPENCL_VERSION__": False,
}
_DIRECTIVE = re.compile(
    rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif|define|undef)\b([^\n]*)", re.MULTILINE
)


def dead_ranges(
    source: bytes,
    known: Mapping[str, bool] | None = None,
    values: dict[int, bool | None] | None = None,
) -> list[tuple[int, int]]:
    """Byte ranges of ``source`` that a preprocessor reading it as CUDA never compiles: the branches of
    ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else`` whose condition is known to be false, given
    :data:`KNOWN_MACROS` and the macros the source itself ``#define``s / ``#undef``s above the
    conditional.  A condition naming anything else is unknown: both its branches stay.  ``values``,
    when given, gets each ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else`` line's start -> whether
    the branch it opens is taken (None: unknown), its enclosing conditionals aside."""
    if b"#" not in source:
        return []
    defined: dict[str, bool] = dict(KNOWN_MACROS if known is None else known)
    # each open conditional: (this branch live: True / False / None unknown, a branch already taken,
    # a branch possibly taken, where the current dead range started or -1)
    stack: list[list[object]] = []
    dead: list[tuple[int, int]] = []

    def live() -> bool:
        return all(frame[0] is not False for frame in stack)

    for m in _DIRECTIVE.finditer(source):
        kind = m.group(1).decode()
        rest = m.group(2).decode("utf-8", "surrogateescape")
        rest = _COMMENT.sub(" ", rest).strip()
        was_live = live()
        if kind in ("if", "ifdef", "ifndef"):
            if kind == "if":
                value = _condition(rest, defined)
            else:
                name = rest.split()[0] if rest.split() else ""
                value = defined.get(name)
                if kind == "ifndef" and value is not None:
                    value = not value
            stack.append([value, value is True, value is not False, -1])
            if values is not None:
                values[m.start()] = value
        elif kind in ("elif", "else") and stack:
            frame = stack[-1]
            if frame[1]:
                value = False  # an earlier branch was taken
            elif kind == "else":
                value = None if frame[2] else True  # an unknown earlier branch: this one may be taken
            else:
                value = _condition(rest, defined)
                if frame[2] and value is True:
                    value = None
            frame[0] = value
            if values is not None:
                values[m.start()] = value
            frame[1] = bool(frame[1]) or value is True
            frame[2] = bool(frame[2]) or value is not False
        elif kind == "endif" and stack:
            stack.pop()
        elif kind in ("define", "undef") and was_live:
            name = rest.split("(")[0].split()[0] if rest.split() else ""
            if name:
                certain = all(frame[0] is True for frame in stack)
                defined[name] = (kind == "define") if certain else defined.get(name)  # type: ignore[assignment]
                if not certain:
                    defined.pop(name, None)  # defined on some paths only: unknown from here on
        now_live = live()
        if was_live and not now_live:
            dead.append((m.end(), -1))
        elif not was_live and now_live and dead and dead[-1][1] == -1:
            dead[-1] = (dead[-1][0], m.start())
    if dead and dead[-1][1] == -1:
        dead[-1] = (dead[-1][0], len(source))
    return dead


def without_dead(source: bytes, command_line: CommandLine) -> bytes:
    """``source`` with the branches the command line's -D/-U decide against (dead given them, and not
    already dead without them) blanked: every byte but newlines a space, so that offsets and lines
    stay those of the file.  What the build does not compile is then not scanned."""
    if not command_line or b"#" not in source:
        return source
    before = dead_ranges(source)
    out = bytearray(source)
    blank = re.compile(rb"[^\n]")
    for start, end in dead_ranges(source, command_line.known()):
        for s, e in _minus((start, end), before):
            out[s:e] = blank.sub(b" ", source[s:e])
    return bytes(out)


def _minus(span: tuple[int, int], ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``span`` outside every one of ``ranges``."""
    parts = [span]
    for a, b in ranges:
        parts = [p for s, e in parts for p in ((s, min(e, a)), (max(s, b), e)) if p[0] < p[1]]
    return parts


_COND_TOKEN = re.compile(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)|\d+[uUlL]*|\w+|&&|\|\||==|!=|[()!]|\S")


def _condition(text: str, defined: Mapping[str, bool]) -> bool | None:
    """An ``#if`` condition, three-valued: True, False, or None (it depends on what porter does not
    know).  Understood: ``defined``, ``!``, ``&&``, ``||``, parentheses, integers and known macros
    (a known-undefined one is 0); anything else is unknown."""
    tokens: list[str | bool | None] = []
    for m in _COND_TOKEN.finditer(text):
        if m.group(1) or m.group(2):
            tokens.append(defined.get(m.group(1) or m.group(2)))
        else:
            tok = m.group(0)
            if tok[0].isdigit():
                tokens.append(
                    int(re.sub(r"[uUlL]+$", "", tok), 0) != 0 if re.fullmatch(r"\d+[uUlL]*", tok) else None
                )
            elif re.fullmatch(r"\w+", tok):
                tokens.append(False if defined.get(tok) is False else None)  # a value porter does not know
            elif tok in ("&&", "||", "!", "(", ")"):
                tokens.append(tok)
            else:
                return None  # comparisons, arithmetic: beyond this reader
    pos = 0

    def primary() -> bool | None:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError
        tok = tokens[pos]
        pos += 1
        if tok == "!":
            v = primary()
            return None if v is None else not v
        if tok == "(":
            v = disjunction()
            if pos >= len(tokens) or tokens[pos] != ")":
                raise ValueError
            pos += 1
            return v
        if isinstance(tok, str):
            raise ValueError
        return tok

    def conjunction() -> bool | None:
        nonlocal pos
        v = primary()
        while pos < len(tokens) and tokens[pos] == "&&":
            pos += 1
            w = primary()
            v = False if v is False or w is False else (None if v is None or w is None else True)
        return v

    def disjunction() -> bool | None:
        nonlocal pos
        v = conjunction()
        while pos < len(tokens) and tokens[pos] == "||":
            pos += 1
            w = conjunction()
            v = True if v is True or w is True else (None if v is None or w is None else False)
        return v

    try:
        value = disjunction()
    except ValueError:
        return None
    return value if pos == len(tokens) else None


def definitions(source: bytes, known: Mapping[str, bool] | None = None) -> dict[str, list[Body]]:
    """Every ``#define`` a preprocessor reading the source as CUDA may see (those in branches known to
    be dead, :func:`dead_ranges` given ``known``, left out): name -> the tokens of each definition (see
    :data:`Body`).

    Bodies made of identifiers and scope braces (after dropping attributes) are kept as their
    tokens, an empty body as ``()``; any other body (``256``, ``a + b``, a function-like macro
    that opens no scope) as ``(OPAQUE,)``, so that a macro that is a number in one configuration
    is never taken for one that stands for nothing."""
    if b"define" not in source:
        return {}
    out: dict[str, list[Body]] = {}
    dead = dead_ranges(source, known)
    starts = [d[0] for d in dead]
    for m in _DEFINE.finditer(source):
        if not at_line_start(source, m.start()):
            continue  # not a directive: `#` inside a line
        k = bisect_left(starts, m.start() + 1) - 1
        if k >= 0 and dead[k][0] <= m.start() < dead[k][1]:
            continue  # under a conditional known to be false (`#if !defined(__CUDACC__)`)
        raw = m.group(3)
        body = raw.decode("utf-8", "surrogateescape").replace("\\\r\n", " ").replace("\\\n", " ")
        body = _OPENER.sub(_opener_token, _COMMENT.sub(" ", body))
        body = _DROP.sub(" ", body)
        words: list[str] = [OPAQUE]
        if _NOT_WORDS.search(body) is None:
            found = _TOKEN.findall(body)
            if not any(w[0].isdigit() for w in found):  # numbers: `#define BLOCK 256`
                words = found
        if m.group(2) is not None:  # function-like: only a scope macro is of use
            if not any(w in ("{", "}") or w.startswith(NAMESPACE) for w in words):
                words = [OPAQUE]
            params = m.group(2).decode("ascii", "replace")
            words.insert(0, "(" + ",".join(x.strip() for x in params[1:-1].split(",") if x.strip()) + ")")
        out.setdefault(m.group(1).decode("ascii"), []).append(tuple(words))
    return out


def _opener_token(m: re.Match[str]) -> str:
    named = m.group(2) is not None and m.group(1) is None and m.group(3) is None
    return f" {NAMESPACE}{m.group(2) if named else ''} "


def _function_like(body: Body) -> bool:
    return bool(body) and body[0].startswith("(")


def resolve(defs: Mapping[str, list[Body]]) -> MacroTable:
    """The qualifier macros (name -> the qualifiers it expands to, for macros that expand to at
    least one), the scope macros and the macros that stand for nothing among ``defs``."""
    scopes, blanks = _structure(defs)
    return MacroTable(_qualifiers(defs), scopes, blanks)


def _qualifiers(defs: Mapping[str, list[Body]]) -> dict[str, tuple[str, ...]]:
    memo: dict[str, frozenset[str]] = {}

    def expand(name: str, active: frozenset[str]) -> frozenset[str]:
        if name in memo:
            return memo[name]
        found: set[str] = set()
        for body in defs.get(name, ()):
            if _function_like(body):
                continue  # a function-like macro never stands for a qualifier here
            for word in body:
                if word in QUALIFIERS:
                    found.add(word)
                elif word in defs and word not in active:
                    found |= expand(word, active | {word})
        result = frozenset(found)
        if not active - {name}:  # only results computed without a cycle cut are final
            memo[name] = result
        return result

    table = {}
    for name in defs:
        quals = expand(name, frozenset({name}))
        if quals:
            table[name] = tuple(sorted(quals))
    return table


def _structure(defs: Mapping[str, list[Body]]) -> tuple[dict[str, ScopeMacro], frozenset[str]]:
    """The scope macros: those that, in every definition and through the macros they name, only
    open scopes or only close them; and the blank ones, that stand for nothing in every
    definition (``#define CUB_NS_PREFIX``, an attribute such as ``_CCCL_VISIBILITY_HIDDEN``).
    Any other word (a type, a keyword, a macro that is not known) disqualifies: such a macro is
    left to the parser as written."""
    memo: dict[str, _Marks | None] = {}

    def marks(name: str, active: frozenset[str]) -> _Marks | None:
        """What every definition of ``name`` opens and closes; None if not a scope macro."""
        if name in memo:
            return memo[name]
        opens = closes = namespace = False
        paths: list[tuple[str, ...]] = []
        result: _Marks | None = None
        for body in defs.get(name, ()):
            path: tuple[str, ...] = ()
            for word in body[1:] if _function_like(body) else body:
                if word.startswith(NAMESPACE):
                    opens = namespace = True
                    if len(word) > len(NAMESPACE):
                        path += tuple(word[len(NAMESPACE) :].split("::"))
                elif word == "{":
                    opens = True
                elif word == "}":
                    closes = True
                elif word in defs and word not in active and word != OPAQUE:
                    inner = marks(word, active | {word})
                    if inner is None:
                        break
                    opens, closes = opens or inner.opens, closes or inner.closes
                    namespace = namespace or inner.namespace
                    path += inner.path
                else:
                    break  # an unknown word, or a cycle
            else:
                paths.append(path)
                continue
            break
        else:
            # of the configurations, the one that names the fewest namespaces: an optional outer
            # namespace (`CUB_NS_PREFIX`, empty unless the user asks for one) is usually absent
            result = _Marks(opens, closes, namespace, min(paths, key=len) if paths else ())
        if not active - {name}:
            memo[name] = result
        return result

    scopes = {}
    blanks = []
    for name, bodies in defs.items():
        if any(OPAQUE in body for body in bodies):
            continue
        found = marks(name, frozenset({name}))
        if found is None:
            continue
        params = next(
            (tuple(x for x in b[0][1:-1].split(",") if x) for b in bodies if _function_like(b)), None
        )
        if found.opens != found.closes:
            scopes[name] = ScopeMacro(
                opens=found.opens,
                namespace=found.namespace,
                function_like=params is not None,
                path=found.path if found.opens else (),
                params=params or (),
            )
        elif not (found.opens or params is not None):
            blanks.append(name)
    return scopes, frozenset(blanks)


@dataclass(frozen=True)
class _Marks:
    opens: bool
    closes: bool
    namespace: bool
    path: tuple[str, ...]


@dataclass(frozen=True)
class CommandLine:
    """The build's ``-D NAME[=VALUE]`` and ``-U NAME``, as a preprocessor starts with them: each -D
    defined (``NAME`` alone is ``1``) before any file is read, each -U not."""

    defines: tuple[str, ...] = ()
    undefines: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.defines or self.undefines)

    def known(self) -> dict[str, bool]:
        """:data:`KNOWN_MACROS` with the command line's macros decided: what :func:`dead_ranges` knows."""
        out = dict(KNOWN_MACROS)
        out.update({u.strip(): False for u in self.undefines})
        out.update({d.split("=", 1)[0].strip(): True for d in self.defines})
        return out

    def source(self) -> bytes:
        """The -D as the ``#define`` lines they stand for."""
        lines = []
        for d in self.defines:
            name, eq, value = d.partition("=")
            lines.append(f"#define {name.strip()} {value if eq else '1'}\n")
        return "".join(lines).encode("utf-8", "surrogateescape")


def collect(
    files: Iterable[tuple[str, bytes | None]],
    include_dirs: Iterable[str | Path] = (),
    *,
    strict: bool = False,
    command_line: CommandLine | None = None,
) -> MacroTable:
    """The qualifier and scope macros visible to ``files`` ((path, bytes or None to read it)) and
    their headers.  ``strict``: a header that is not a regular file (a FIFO, ``/dev/zero``) is a
    UsageError naming the ``#include`` (else it is skipped with a warning), see
    :func:`porter.includes.reachable`.  ``command_line``: the build's -D (macros of their own, a
    ``-DKERNEL=__global__`` a qualifier) and -U, which decide the conditionals that name them."""
    defs: dict[str, list[Body]] = {}
    known = command_line.known() if command_line else None
    if command_line:
        for name, bodies in definitions(command_line.source(), known).items():
            defs.setdefault(name, []).extend(bodies)
    for _, source in reachable(files, include_dirs, strict=strict):
        for name, bodies in definitions(source, known).items():
            defs.setdefault(name, []).extend(bodies)
    return resolve(defs)


def spelled_out(text: str, table: MacroTable) -> str:
    """``text`` with its macros written out as far as porter reads them, for a translator whose
    target has no use for them (OpenCL C): a qualifier macro becomes the qualifiers it stands for,
    a scope macro the namespace it opens (``namespace cub {``) or the brace that closes it, and a
    blank macro nothing.  Lines are kept; ``#define`` lines are left alone."""
    if not table:
        return text
    data = text.encode("utf-8", "surrogateescape")
    pieces: list[bytes] = []
    pos = 0
    for use in _uses(data, table):
        pieces.append(data[pos : use.start])
        if use.scope is None:
            pieces.append(" ".join(table.get(use.name, ())).encode())
        elif not use.scope.opens:
            pieces.append(b"}")
        elif use.scope.namespace:
            pieces.append(("namespace " + "::".join(_path_of(use.scope, use.args)) + " {").encode())
        else:
            pieces.append(b"{")
        pos = use.end
    if not pieces:
        return text
    pieces.append(data[pos:])
    return b"".join(pieces).decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Masked:
    """A source with its macros written for the parser: same length, same lines.

    ``spans`` holds (start, end, qualifiers) of each qualifier or blank macro blanked out (a blank
    one with no qualifiers), in order, so that the qualifiers of a declaration, and where it really
    starts, can be read back by position (:meth:`qualifiers_of`, :meth:`start_of`).
    """

    source: bytes
    spans: tuple[tuple[int, int, tuple[str, ...]], ...] = ()
    # offset of each scope macro written as `namespace{` -> the namespaces it opens (ScopeMacro.path)
    namespaces: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    def spans_in(self, start: int, end: int) -> list[tuple[int, int, tuple[str, ...]]]:
        """The blanked qualifier macros that lie within [start, end), in order."""
        i = bisect_left(self.spans, (start,))
        j = i
        while j < len(self.spans) and self.spans[j][1] <= end:
            j += 1
        return list(self.spans[i:j])

    def spans_of(self, node: Node) -> list[tuple[int, int, tuple[str, ...]]]:
        """The blanked qualifier macros that belong to a function definition or declaration
        ``node``: those between the end of what precedes it (the previous declaration, a comment,
        a template parameter list) and its declarator.  ``KERNEL void k()``,
        ``template <class T> HD T f()`` and ``static HD inline float g()`` all put them there."""
        if not self.spans:
            return []
        prev = node.prev_sibling
        if prev is not None:
            start = prev.end_byte
        else:  # first in its parent; the root's own range starts at its first token, not at 0
            parent = node.parent
            start = parent.start_byte if parent is not None and parent.parent is not None else 0
        declarator = node.child_by_field_name("declarator")
        return self.spans_in(start, declarator.start_byte if declarator is not None else node.end_byte)

    def qualifiers_of(self, node: Node) -> set[str]:
        """The qualifiers that the macros of :meth:`spans_of` stand for."""
        return {q for span in self.spans_of(node) for q in span[2]}

    def start_of(self, node: Node) -> int:
        """Where a declaration starts in the file: at its first blanked macro (`KERNEL void k()`
        starts at `KERNEL`), which tree-sitter no longer sees; so that cutting a declaration out
        takes its macros with it."""
        spans = self.spans_of(node)
        return min(node.start_byte, spans[0][0]) if spans else node.start_byte


def mask(source: bytes, table: Mapping[str, tuple[str, ...]]) -> Masked:
    """``source`` with the macros of ``table`` written so that tree-sitter parses around them.

    - A scope macro becomes the brace it stands for: ``CUB_NAMESPACE_BEGIN`` becomes
      ``namespace{`` (``{`` when the name is shorter than that, or the macro opens a bare block)
      and ``CUB_NAMESPACE_END`` becomes ``}``.  One brace per use whatever the macro's depth, so
      pairs stay balanced, and so does a macro-opened scope closed by a literal ``}``.
    - A qualifier macro is blanked and remembered (:class:`Masked`): ``_CCCL_HOST_DEVICE
      _CCCL_FORCEINLINE T f()`` then parses as ``T f()``, which two unknown words before the
      type would not.
    - A macro that stands for nothing (an attribute, ``CUB_NS_PREFIX``) is blanked, as the
      preprocessor would.

    Every replacement is padded with blanks to the length of the use, so offsets and lines stay
    those of the file.  Directive lines (``#define``, ``#ifdef`` ...) are left as written.
    """
    if not table:
        return Masked(source)
    out: bytearray | None = None
    spans: list[tuple[int, int, tuple[str, ...]]] = []
    namespaces: dict[int, tuple[str, ...]] = {}
    for use in _uses(source, table):
        start, end, scope = use.start, use.end, use.scope
        if scope is None:
            replacement = b""
            spans.append((start, end, table.get(use.name, ())))
        elif not scope.opens:
            replacement = b"}"
        elif scope.namespace and end - start >= len(NAMESPACE):
            replacement = NAMESPACE.encode()
            namespaces[start] = _path_of(scope, use.args)
        else:
            replacement = b"{"
        if out is None:
            out = bytearray(source)
        out[start:end] = replacement.ljust(end - start)
    return Masked(bytes(out) if out is not None else source, tuple(spans), namespaces)


@dataclass(frozen=True)
class _Use:
    start: int
    end: int  # after the argument list of a function-like macro
    name: str
    scope: ScopeMacro | None
    args: bytes  # the argument list, parentheses included ("" for an object-like macro)


def _uses(source: bytes, table: Mapping[str, tuple[str, ...]]) -> Iterator[_Use]:
    """Every use of a qualifier, scope or blank macro of ``table`` outside directive lines."""
    scopes: dict[str, ScopeMacro] = getattr(table, "scopes", {})
    blanks: frozenset[str] = getattr(table, "blanks", frozenset())
    pattern = table._pattern if isinstance(table, MacroTable) else None
    if pattern is None:
        pattern = _names_pattern([*table, *scopes, *blanks])
        if isinstance(table, MacroTable):
            table._pattern = pattern
    for m in pattern.finditer(source):
        name = m.group().decode("ascii")
        scope = scopes.get(name)
        if scope is None and name not in table and name not in blanks:
            continue  # a word of the same shape that is no macro of ours
        args = _ARGS.match(source, m.end()) if scope is not None and scope.function_like else None
        if scope is not None and scope.function_like and args is None:
            continue  # the name alone is not a use of a function-like macro
        if _in_directive(source, m.start()):
            continue
        if args is not None:
            yield _Use(m.start(), args.end(), name, scope, args.group())
        else:
            yield _Use(m.start(), m.end(), name, scope, b"")


def _path_of(scope: ScopeMacro, args: bytes) -> tuple[str, ...]:
    """A scope macro's namespace path for one use, its parameters replaced by the arguments."""
    if not scope.params:
        return scope.path
    values = [a.strip() for a in args.decode("utf-8", "surrogateescape").strip()[1:-1].split(",")]
    bound = dict(zip(scope.params, values, strict=False))
    return tuple(bound.get(name, name) for name in scope.path)


# A function-like macro's argument list: one level of nesting, on the same line.
_ARGS = re.compile(rb"[ \t]*\((?:[^()\n]|\([^()\n]*\))*\)")


def _names_pattern(names: Iterable[str]) -> re.Pattern[bytes]:
    """A regex for whole words shaped like ``names`` (same first characters; upper case, digits
    and `_` after that when all of them are written so, as macro names nearly always are).

    Candidates are then looked up by name: one pass over the source, where an alternation of
    the names would try each of them at every word (seconds on a library's headers).
    """
    names = list(names)
    first = sorted({n[0] for n in names})
    rest = rb"[A-Z0-9_]" if all(re.fullmatch(r"[A-Z0-9_]*", n[1:]) for n in names) else rb"\w"
    head = re.escape("".join(first)).encode()
    shortest = min(len(n) for n in names) - 1
    return re.compile(rb"\b[" + head + rb"]" + rest + b"{%d,}" % shortest + rb"\b")


def _in_directive(source: bytes, at: int) -> bool:
    """Whether ``at`` lies in a preprocessor directive (continuation lines included)."""
    start = source.rfind(b"\n", 0, at) + 1
    while start >= 2 and source[start - 2 : start] == b"\\\n":
        start = source.rfind(b"\n", 0, start - 1) + 1
    return source[start:at].lstrip(b" \t")[:1] == b"#"
