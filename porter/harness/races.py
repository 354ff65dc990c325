"""A checker's data race in a port: said with both of its accesses, and traced back to the original.

Oclgrind reports a race with both sides: the line of each access and the work-item that made it.  A port
that translates a kernel statement for statement keeps the original's accesses and its synchronisation; a
race the checker finds between two of those accesses is then the original's own (hybridsort's histogram
and bucket counters update a tagged counter in shared memory and rely on a warp's lockstep, which CUDA has
not promised since Volta's independent thread scheduling).  :func:`originals_race` says so only with the
evidence in hand, and otherwise says nothing (the race stays the port's failure):

* both accesses lie in functions of the port that the kernel reaches (the kernel, the helpers it calls),
  each defined under the same name in the original's sources (the unit and the headers it includes);
* each of those functions synchronises as often in the port as in the original (:func:`barrier_calls`:
  CUDA's ``__syncthreads``/``__syncwarp``/group syncs from the scanner's CUDA API facts, OpenCL's
  ``barrier``/``sub_group_barrier`` from its dialect.toml), so the translation neither dropped nor moved a
  barrier out of one;
* the racing lines are the original's statements: they name no helper porter adds (``porter_``), and
  they name variables of the original function (a built-in's translation, ``get_local_id``, aside).

Functions porter adds (``porter_tex1Dfetch_float``) are its own code, not the original's: a race in one stays
the port's.

A port that dropped a barrier, or whose race is in code porter wrote, fails these and keeps its failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tree_sitter import Node

from porter.backends import CheckerFinding
from porter.grammars import parse
from porter.scan.nodes import function_name, node_text

GRAMMAR = "cuda"  # parses CUDA, HIP and OpenCL C alike: the qualifiers are words to it
PORTER_NAMES = re.compile(r"^(porter|PORTER)_")  # names of the helpers and macros porter's translations add
_WORD = re.compile(r"(?<!\w)[A-Za-z_]\w*")  # a name, never the x of 0x1F
_KEYWORDS = frozenset(
    [
        "if",
        "else",
        "for",
        "while",
        "do",
        "return",
        "break",
        "continue",
        "switch",
        "case",
        "default",
        "goto",
        "sizeof",
        "const",
        "volatile",
        "unsigned",
        "signed",
        "int",
        "long",
        "short",
        "char",
        "float",
        "double",
        "void",
        "bool",
        "struct",
        "union",
        "enum",
        "static",
        "inline",
        "true",
        "false",
    ]
)
# "Global(12,0,0) Local(12,0,0) Group(0,0,0)": the work-item's id in its work-group and the group's id
_LOCAL = re.compile(r"Local\((\d+),(\d+),(\d+)\)")
_GROUP = re.compile(r"Group\((\d+),(\d+),(\d+)\)")
_AT_LINES = re.compile(r" at lines (\d+) and (\d+)\b")
WARP = 32  # CUDA's warp: two work-items of one 1-D warp race in code written for a warp's lockstep


def barrier_calls(dialect: str) -> tuple[str, ...]:
    """The calls that synchronise in `dialect`'s device code: its dialect.toml's ``barrier_calls``, or where it
    names none (CUDA, HIP: CUDA's spelling) the barriers of the scanner's CUDA API facts (``__syncthreads``...,
    a cooperative group's ``g.sync()`` and ``cg::sync(g)`` by their last name)."""
    from porter.backends import get_dialect
    from porter.scan.cuda import api

    facts = get_dialect(dialect).facts
    if facts is not None and facts.barrier_calls:
        return facts.barrier_calls
    cuda = api()
    return tuple(sorted(cuda.barriers | cuda.barrier_methods | cuda.barrier_qualified))


def where(finding: CheckerFinding) -> str:
    """Where `finding` happened, for a verdict: `` at line N (code)``; a race with two sides `` at lines N
    and M (code / code) between work-items (12,0,0) and (9,0,0) of work-group (0,0,0)``; "" when the checker
    named no line."""
    if finding.line is None:
        return ""
    if finding.kind != "data-race" or finding.other_line is None:
        return f" at line {finding.line}" + (f" ({finding.code})" if finding.code else "")
    codes = " / ".join(c for c in (finding.code, finding.other_code) if c)
    said = f" at lines {finding.line} and {finding.other_line}" + (f" ({codes})" if codes else "")
    return said + _between(finding.entities)


def _between(entities: Sequence[str]) -> str:
    if len(entities) != 2:
        return ""
    ids = [(_LOCAL.search(e), _GROUP.search(e)) for e in entities]
    said = [(",".join(local.groups()), ",".join(group.groups())) for local, group in ids if local and group]
    if len(said) != 2:
        return f" between {entities[0]} and {entities[1]}"
    (a, ga), (b, gb) = said
    if ga == gb:
        return f" between work-items ({a}) and ({b}) of work-group ({ga})"
    return f" between work-item ({a}) of work-group ({ga}) and ({b}) of ({gb})"


def race_lines(reason: str) -> tuple[int, int] | None:
    """The two lines of a race :func:`where` put in a verdict's reason (None: not such a reason)."""
    m = _AT_LINES.search(reason)
    return (int(m.group(1)), int(m.group(2))) if m else None


def one_warp(reason: str) -> bool:
    """Whether the race in `reason` is between two work-items of one warp of a 1-D work-group (their
    ids' y and z are 0, so the id is the lane's position in the block)."""
    m = re.search(r"between work-items \((\d+),0,0\) and \((\d+),0,0\)", reason)
    return m is not None and int(m.group(1)) // WARP == int(m.group(2)) // WARP


@dataclass(frozen=True)
class _Function:
    name: str
    file: str
    line: int  # 1-based, of its definition
    end_line: int
    barriers: int
    calls: frozenset[str]
    words: frozenset[str]


def _call_name(call: Node) -> str:
    """The last name of a call's function expression (`cg::sync`, `block.sync`, `__syncthreads` -> its name)."""
    fn = call.child_by_field_name("function")
    words = _WORD.findall(node_text(fn)) if fn is not None else []
    return words[-1] if words else ""


def _functions(path: str, text: str, barrier_calls: frozenset[str]) -> dict[str, list[_Function]]:
    found: dict[str, list[_Function]] = {}
    stack = [parse(GRAMMAR, text).root_node]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            name = (function_name(node) or "").split("::")[-1]
            calls = []
            inner = [node]
            while inner:
                n = inner.pop()
                if n.type == "call_expression":
                    calls.append(_call_name(n))
                inner.extend(n.children)
            if name:
                body = node_text(node)
                found.setdefault(name, []).append(
                    _Function(
                        name,
                        path,
                        node.start_point[0] + 1,
                        node.end_point[0] + 1,
                        sum(c in barrier_calls for c in calls),
                        frozenset(calls),
                        frozenset(_WORD.findall(body)),
                    )
                )
            continue
        stack.extend(node.children)
    return found


def _reached(entry: str, port: Mapping[str, list[_Function]]) -> dict[str, _Function] | None:
    """The port's functions the kernel `entry` reaches (itself included), each name's only definition; None
    where a name of the original's it reaches is defined more than once (overloads that cannot be told
    apart, so their barriers cannot be compared).  Porter's own overloaded helpers are its code, not
    compared, and not followed."""
    out: dict[str, _Function] = {}
    todo = [entry]
    while todo:
        name = todo.pop()
        defs = port.get(name, [])
        if name in out or not defs:
            continue
        if len(defs) != 1:
            if PORTER_NAMES.match(name):
                continue
            return None
        out[name] = defs[0]
        todo.extend(c for c in defs[0].calls if c in port)
    return out


def _at(line: int, functions: Iterable[_Function]) -> _Function | None:
    return next((f for f in functions if f.line <= line <= f.end_line), None)


def originals_race(
    port_source: str,
    port_barriers: Iterable[str],
    entry: str,
    original_entry: str,
    lines: tuple[int, int],
    originals: Sequence[tuple[str, str]],
    original_barriers: Iterable[str],
) -> str | None:
    """Why a race a checker found at `lines` of the port (its device code `port_source`, kernel `entry`)
    is the original's own -- the original (`originals`: (path, text) of its unit and the headers it
    includes; its kernel `original_entry`) accesses the same memory the same way with the same
    synchronisation -- or None where that is not shown (see the module's words)."""
    port = _functions("", port_source, frozenset(port_barriers))
    reached = _reached(entry, port)
    if reached is None:
        return None
    sides = [_at(n, reached.values()) for n in lines]
    if not all(sides):
        return None
    original: dict[str, list[_Function]] = {}
    wanted = {*reached, original_entry}
    for path, text in originals:
        if not any(name in text for name in wanted):
            continue
        for name, defs in _functions(path, text, frozenset(original_barriers)).items():
            original.setdefault(name, []).extend(defs)
    source_lines = port_source.splitlines()
    matched: list[tuple[_Function, _Function]] = []
    for name, f in reached.items():
        if PORTER_NAMES.match(name):
            continue
        defs = original.get(original_entry if name == entry else name, [])
        if len(defs) != 1 or defs[0].barriers != f.barriers:
            return None
        matched.append((f, defs[0]))
    mine = {f.name: o for f, o in matched}
    for side, n in zip(sides, lines, strict=True):
        assert side is not None
        theirs = mine.get(side.name)
        text = source_lines[n - 1] if 0 < n <= len(source_lines) else ""
        names = [w for w in _WORD.findall(text) if w not in _KEYWORDS]
        if theirs is None or any(PORTER_NAMES.match(w) for w in names):
            return None
        if not any(w in theirs.words for w in names):
            return None
    a, b = (mine[s.name] for s in sides if s is not None)
    functions = sorted({a, b}, key=lambda f: (f.file, f.line))
    said = " and ".join(f"`{f.name}` ({f.file} line {f.line})" for f in functions)
    syncs = ", ".join(f"{f.name}: {f.barriers}" for f, _ in matched)
    return (
        f"the original's own race: the accesses at lines {lines[0]} and {lines[1]} of the port are statements of "
        f"{said}, which the port keeps with the original's synchronisation in every function the kernel reaches "
        f"(barriers {syncs}), so the original makes the same unsynchronised accesses"
    )
