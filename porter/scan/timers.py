"""The lines a program prints from a timer, found in its source.

A program that times itself prints what it measured (``printf("SEND ARRAY Y BACK: %lf\\n",
elapsed_time(arrayX_time, arrayY_time))``); the number is a duration, another on every run and on every
device, and the line need not say so in words.  This follows, in each function of the program's files
(parsed with the tree-sitter grammar porter already has), what a value is derived from:

* a call of a timer function (data: ``timers.toml``): its return value (``omp_get_wtime()``), or the
  argument it writes (``gettimeofday(&tv, 0)`` makes ``tv`` a time);
* a call of a function of the program whose return value is derived from one (``get_time()``, whose body
  calls ``gettimeofday``), or derived from the arguments it is given that are (``elapsed_time(a, b)``
  returning ``(b - a) / 1e6``);
* a variable assigned such a value, in source order: a later assignment of anything else makes it plain
  again; where branches join (``if``/``else``, a loop that may not run), it is a time only if it is one on
  every path;
* a parameter given such a value at every call of its function the program makes (a function whose
  address is taken keeps plain parameters: who else calls it is not known); a global assigned only such
  values.

Every ``printf`` / ``fprintf(stdout | stderr, ...)`` / ``std::cout << ...`` one of whose values is such a
value becomes a :class:`PrintedTimer`: the whole line its format prints, literal text kept and each
conversion a wildcard of its kind.  Nothing is marked that has no timer call in its derivation; what the
analysis cannot see (a time carried through a struct field between functions, a method of a timer class)
is simply not found, and the line is compared as any other.  A pattern that a line printed by another
``printf`` of the program could match too (the same format printing a result elsewhere), or that has no
letter of literal text (``"%f\\n"``), is dropped: it could not tell a time from a result.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from importlib import resources

from tree_sitter import Node

from porter.grammars import parse
from porter.scan.hostcalls import declared
from porter.scan.nodes import function_declarator, function_name, node_text, squash

_PRINTERS = {"printf": 0, "std::printf": 0, "fprintf": 1, "std::fprintf": 1}
_STREAMS = {"stdout": "stdout", "stderr": "stderr", "std::cout": "stdout", "cout": "stdout",
            "std::cerr": "stderr", "cerr": "stderr"}  # fmt: skip
_ENDL = {"std::endl", "endl"}
_MANIPULATORS = re.compile(
    r"^(?:std::)?(?:fixed|scientific|hexfloat|defaultfloat|left|right|internal|boolalpha|noboolalpha|showpoint|"
    r"noshowpoint|showpos|noshowpos|flush|setprecision\s*\(.*\)|setw\s*\(.*\)|setfill\s*\(.*\))$",
    re.S,
)
_CONVERSION = re.compile(r"%([-+ #0']*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|L|q|j|z|t)?([diouxXeEfFgGaAcspn%])")
_NUMBER = r"\s*[-+ ]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|0[xX][0-9a-fA-F.]+(?:[pP][-+]?\d+)?|(?i:nan|inf|infinity)(?:\([^)]*\))?)\s*"
_WILDCARDS = {
    "d": r"\s*[-+ ]?\d+\s*", "i": r"\s*[-+ ]?\d+\s*", "u": r"\s*\d+\s*", "o": r"\s*\d+\s*",
    "x": r"\s*(?:0[xX])?[0-9a-fA-F]+\s*", "X": r"\s*(?:0[xX])?[0-9a-fA-F]+\s*",
    "c": r"\s*.?\s*", "s": r".*?", "p": r"\s*(?:0[xX][0-9a-fA-F]+|\(nil\)|[0-9a-fA-F]+)\s*",
    **dict.fromkeys("eEfFgGaA", _NUMBER),
}  # fmt: skip
_SAMPLES = {
    **dict.fromkeys("diouxX", "7"),
    **dict.fromkeys("eEfFgGaA", "0.5"),
    "c": "x",
    "s": "x",
    "p": "0x1",
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\",
            "'": "'", '"': '"', "?": "?"}  # fmt: skip
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]+)|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.S)
_LINE_END = re.compile(r"\r\n|\r|\n")
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_NOT_VALUES = {"sizeof_expression", "alignof_expression", "string_literal", "concatenated_string", "raw_string_literal",
               "char_literal", "number_literal", "true", "false", "null", "nullptr", "type_descriptor",
               "template_argument_list", "lambda_expression", "primitive_type", "type_identifier"}  # fmt: skip
_ROUNDS = 6  # of the whole-program fixpoint (parameters and globals); each one only adds what it finds
_NESTED = {
    "function_definition",
    "lambda_expression",
    "class_specifier",
    "struct_specifier",
    "union_specifier",
}


@dataclass(frozen=True)
class TimerFunction:
    name: str  # the callee as written; `*` stands for any text
    returns: bool = False  # its return value is the time
    writes: tuple[int, ...] = ()  # the arguments it writes the time into (1: the first)


@functools.cache
def _table(name: str) -> tuple[TimerFunction, ...]:
    data = tomllib.loads(resources.files("porter.scan").joinpath("timers.toml").read_text(encoding="utf-8"))
    return tuple(
        TimerFunction(
            str(t["name"]), bool(t.get("returns", False)), tuple(int(w) for w in t.get("writes", ()))
        )
        for t in data[name]
    )


def timer_functions() -> tuple[TimerFunction, ...]:
    """The timer functions of ``timers.toml``."""
    return _table("timer_functions")


def device_functions() -> tuple[TimerFunction, ...]:
    """The functions of ``timers.toml`` that read a property of the device or its runtime (``device_functions``):
    a line printed from what they give is the device's, found as a timer's line is (:func:`printed_properties`)."""
    return _table("device_functions")


@dataclass(frozen=True)
class PrintedTimer:
    """One line a print statement writes with a value derived from a timer: ``pattern`` (a regular expression a
    whole printed line matches), ``what`` the value is (``elapsed_time(...)``), and where the statement is."""

    pattern: str
    what: str
    file: str
    line: int
    stream: str = "stdout"  # or "stderr"

    def where(self) -> str:
        return f"{self.what} at {self.file}:{self.line}"


# ----------------------------------------------------------------------------- formats


def unescape(literal: str) -> str | None:
    """The text of a C string literal as written (quotes included); None for a prefixed or raw one."""
    if len(literal) < 2 or not literal.startswith('"') or not literal.endswith('"'):
        return None

    def one(m: re.Match[str]) -> str:
        octal, hexa, u4, u8, other = m.groups()
        if octal is not None:
            return chr(int(octal, 8))
        if hexa is not None or u4 is not None or u8 is not None:
            return chr(min(int(hexa or u4 or u8, 16), 0x10FFFF))
        return _ESCAPES.get(other, other)

    return _ESCAPE.sub(one, literal[1:-1])


def string_value(node: Node | None) -> str | None:
    """The text a string literal, or adjacent literals, stand for; None for anything else (a macro between
    literals: ``"%" PRIu64``)."""
    if node is None:
        return None
    if node.type == "string_literal":
        return unescape(node_text(node))
    if node.type == "concatenated_string":
        parts = [string_value(c) for c in node.named_children]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    return None


@dataclass(frozen=True)
class _Piece:
    """A part of what a print statement writes: literal text, or a value (its wildcard, its sample, whether it
    is derived from a timer and what it is)."""

    text: str = ""
    wildcard: str = ""
    sample: str = ""
    timed: bool = False
    what: str = ""
    line: int = 0  # of the print statement writing it, where pieces of several are joined (0: the line's own)

    @property
    def literal(self) -> bool:
        return not self.wildcard


def format_pieces(fmt: str, values: Sequence[tuple[bool, str, str | None]]) -> list[_Piece] | None:
    """What ``printf(fmt, values...)`` writes: each value (timed, what it is, its text when a string literal)
    taken by the conversion that consumes it (``*`` widths included); None when a conversion is not one
    printf has, or the values are too few."""
    pieces: list[_Piece] = []
    pos, arg = 0, 0
    for m in _CONVERSION.finditer(fmt):
        if "%" in fmt[pos : m.start()]:
            return None  # a '%' no conversion starts with
        pieces.append(_Piece(text=fmt[pos : m.start()]))
        pos = m.end()
        _flags, width, precision, _length, conv = m.groups()
        if conv == "%":
            pieces.append(_Piece(text="%"))
            continue
        arg += (width == "*") + (precision == "*")
        if arg >= len(values):
            return None
        timed, what, literal = values[arg]
        arg += 1
        if conv == "n":
            continue
        if conv == "s" and literal is not None and not width and precision is None:
            pieces.append(_Piece(text=literal))
        else:
            pieces.append(_Piece(wildcard=_WILDCARDS[conv], sample=_SAMPLES[conv], timed=timed, what=what))
    if "%" in fmt[pos:]:
        return None
    pieces.append(_Piece(text=fmt[pos:]))
    return pieces


@dataclass(frozen=True)
class _Line:
    """One whole line a print statement writes."""

    pattern: str
    sample: str
    timed: str  # what the first timed value on it is ("" none)
    literal: str  # its literal text
    at: int = 0  # the line of the print statement writing that value (0: the statement's own)

    @property
    def lettered(self) -> bool:
        return any(ch.isalpha() for ch in self.literal)


def whole_lines(pieces: Sequence[_Piece]) -> list[_Line]:
    """The lines `pieces` write that end in a newline (one that does not may go on with what is printed next)."""
    out: list[_Line] = []
    pattern, sample, timed, literal, at = "", "", "", "", 0
    for p in pieces:
        if not p.literal:
            pattern, sample = pattern + p.wildcard, sample + p.sample
            if p.timed and not timed:
                timed, at = p.what, p.line
            continue
        parts = _LINE_END.split(p.text)
        for k, part in enumerate(parts):
            pattern, sample, literal = pattern + re.escape(part), sample + part, literal + part
            if k < len(parts) - 1:
                out.append(_Line(pattern, sample, timed, literal, at))
                pattern, sample, timed, literal, at = "", "", "", "", 0
    return out


# ----------------------------------------------------------------------------- the data flow


def _callee_name(fn: Node | None) -> str:
    """A callee as written, template arguments left out: ``std::chrono::duration_cast``."""
    return _plain_name(node_text(fn))


def _plain_name(text: str) -> str:
    text = squash(text)
    while True:
        stripped = _TEMPLATE_ARGS.sub("", text)
        if stripped == text:
            return text.replace(" ", "")
        text = stripped


def _param_names(fn: Node) -> list[str]:
    decl = function_declarator(fn)
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    names: list[str] = []
    for p in plist.named_children if plist is not None else []:
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        name = _declared_name(p.child_by_field_name("declarator"))
        if name is None and squash(node_text(p)) == "void":
            continue  # f(void): no parameter
        names.append(name or "")
    return names


def _declared_name(node: Node | None) -> str | None:
    return declared(node)[0]


def _path(node: Node | None) -> tuple[str, bool] | None:
    """(the variable an assignment to `node` writes, whether the whole of it): ``t.start`` whole, ``a[i]`` and
    ``*p`` not (a part of ``a``, of ``p``); None for anything else."""
    strong = True
    while node is not None and node.type in (
        "subscript_expression",
        "pointer_expression",
        "parenthesized_expression",
    ):
        strong = False
        node = node.child_by_field_name("argument") or (
            node.named_children[0] if node.named_children else None
        )
    if node is None or node.type not in ("identifier", "field_expression", "qualified_identifier"):
        return None
    return squash(node_text(node)).replace(" ", ""), strong


def _base(path: str) -> str:
    return re.split(r"\.|->", path, maxsplit=1)[0]


@dataclass
class _Print:
    """A print statement seen with its values' taint: where it is and what it writes."""

    file: str
    line: int
    stream: str
    pieces: list[_Piece]
    # the statement it is (its node's id) and the statement right after it in the same block: a line begun by
    # one print and ended by the next (`printf("\nCUDA ver - %d.%d", ...)` then `printf("\nClock ...")`)
    statement: int = 0
    then: int = 0


class _Program:
    """The whole program's functions, by name, and what the fixpoint has found so far."""

    def __init__(self, units: Sequence[tuple[str, Node]], timers: Sequence[TimerFunction]) -> None:
        self.units = units
        self.timers = timers
        self.defs: dict[str, list[tuple[str, Node]]] = {}
        self.globals: set[str] = set()  # variables declared at file scope
        self.escapes: set[str] = set()  # functions named other than as the callee of a call
        for file, root in units:
            self._collect(file, root)
        mentioned: set[str] = set()
        for _file, root in units:
            self._mentions(root, mentioned)
        self.escapes = mentioned & set(self.defs)
        self.tainted_globals: frozenset[str] = frozenset()
        self.entry: dict[str, frozenset[int]] = {}
        self._summaries: dict[tuple[str, int, frozenset[int]], bool] = {}
        self._busy: set[tuple[str, int, frozenset[int]]] = set()

    def _collect(self, file: str, root: Node) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            if node.type == "function_definition":
                name = function_name(node)
                if name:
                    self.defs.setdefault(_plain_name(name), []).append((file, node))
                continue
            if node.type == "declaration" and _at_file_scope(node):
                for d in node.children_by_field_name("declarator"):
                    name = _declared_name(d)
                    if name:
                        self.globals.add(name)
            stack.extend(node.named_children)

    def _mentions(self, root: Node, found: set[str]) -> None:
        """Names of identifiers used as values (not called): a function's address taken."""
        stack = [root]
        while stack:
            node = stack.pop()
            if node.type == "call_expression":
                fn = node.child_by_field_name("function")
                args = node.child_by_field_name("arguments")
                if fn is not None and fn.type not in (
                    "identifier",
                    "qualified_identifier",
                    "template_function",
                ):
                    stack.append(fn)
                if args is not None:
                    stack.append(args)
                continue
            if node.type == "function_declarator":
                params = node.child_by_field_name("parameters")
                if params is not None:
                    stack.append(params)
                continue
            if node.type == "identifier":
                found.add(node_text(node))
            stack.extend(node.named_children)

    def timer(self, name: str) -> TimerFunction | None:
        return next((t for t in self.timers if fnmatchcase(name, t.name)), None)

    def definitions(self, name: str, nargs: int) -> list[tuple[str, Node]]:
        found = self.defs.get(name)
        if not found and "::" in name:
            found = self.defs.get(name.rsplit("::", 1)[1])
        same = [(f, d) for f, d in found or () if len(_param_names(d)) == nargs]
        return same or list(found or ())  # default arguments, `...`: every definition of the name

    def returns_time(self, name: str, nargs: int, timed: frozenset[int]) -> bool | None:
        """Whether the program's function `name`, its arguments at `timed` derived from a timer, returns a
        value derived from one (every definition of that name does); None: the program does not define it."""
        defs = self.definitions(name, nargs)
        if not defs:
            return None
        return all(self._summary(file, fn, timed) for file, fn in defs)

    def _summary(self, file: str, fn: Node, timed: frozenset[int]) -> bool:
        key = (file, fn.start_byte, timed)
        if key in self._summaries:
            return self._summaries[key]
        if key in self._busy:  # recursion: not known yet, so not a time
            return False
        self._busy.add(key)
        try:
            body = _Body(self, file, fn, timed, record=False)
            body.run()
            self._summaries[key] = body.returns
        finally:
            self._busy.discard(key)
        return self._summaries[key]

    def solve(self) -> list[_Print]:
        """Every function analysed with the parameters and globals its callers make times, until that stops
        changing: the print statements of the last round."""
        prints: list[_Print] = []
        for _round in range(_ROUNDS):
            self._summaries.clear()
            prints = []
            calls: dict[str, list[frozenset[int]]] = {}
            writes: dict[str, list[bool]] = {}
            for name, defs in self.defs.items():
                for file, fn in defs:
                    body = _Body(self, file, fn, self.entry.get(name, frozenset()), record=True)
                    body.run()
                    prints += body.prints
                    for callee, timed in body.calls:
                        calls.setdefault(callee, []).append(timed)
                    for var, timed_write in body.global_writes:
                        writes.setdefault(var, []).append(timed_write)
            entry = {
                name: functools.reduce(frozenset.intersection, sites)
                for name, sites in calls.items()
                if name in self.defs and name not in self.escapes and name != "main" and sites
            }
            entry = {k: v for k, v in entry.items() if v}
            tainted = frozenset(v for v, ws in writes.items() if ws and all(ws))
            if entry == self.entry and tainted == self.tainted_globals:
                break
            self.entry, self.tainted_globals = entry, tainted
        return prints


def _at_file_scope(node: Node) -> bool:
    cur = node.parent
    while cur is not None:
        if cur.type in (
            "function_definition",
            "compound_statement",
            "field_declaration_list",
            "lambda_expression",
        ):
            return False
        cur = cur.parent
    return True


class _Body:
    """One function's body, walked in source order: which variables hold a time at each point."""

    def __init__(self, program: _Program, file: str, fn: Node, timed: frozenset[int], record: bool) -> None:
        self.program, self.file, self.fn, self.record = program, file, fn, record
        self.params = _param_names(fn)
        self.declared: set[str] = {p for p in self.params if p}
        self.start: set[str] = {self.params[i] for i in timed if i < len(self.params) and self.params[i]}
        self.start |= {g for g in program.tainted_globals if g not in self.declared}
        self.returns = False
        self.prints: list[_Print] = []
        self.calls: list[tuple[str, frozenset[int]]] = []
        self.global_writes: list[tuple[str, bool]] = []

    def run(self) -> None:
        body = self.fn.child_by_field_name("body")
        if body is not None:
            self.statement(body, set(self.start))

    # ------------------------------------------------------------------ statements

    def statement(self, node: Node, state: set[str]) -> set[str]:
        t = node.type
        if t in _NESTED:
            return state
        if t in ("compound_statement", "else_clause", "labeled_statement", "case_statement", "try_statement",
                 "catch_clause", "seh_try_statement"):  # fmt: skip
            for c in node.named_children:
                state = self.statement(c, state)
            return state
        if t == "if_statement":
            self.effects(node.child_by_field_name("condition"), state)
            then = self.statement(node.child_by_field_name("consequence") or node, set(state))
            other = node.child_by_field_name("alternative")
            return then & (self.statement(other, set(state)) if other is not None else state)
        if t in ("for_statement", "while_statement", "for_range_loop", "switch_statement"):
            init = node.child_by_field_name("initializer")
            if init is not None:
                state = self.statement(init, state)
            inner = set(state)
            if t == "for_range_loop":
                var = _declared_name(node.child_by_field_name("declarator"))
                right = node.child_by_field_name("right")
                self.effects(right, inner)
                if var:
                    self.declared.add(var)
                    self._set(inner, var, self.tainted(right, inner), True)
            else:
                self.effects(node.child_by_field_name("condition"), inner)
            body = node.child_by_field_name("body")
            inner = self.statement(body, inner) if body is not None else inner
            self.effects(node.child_by_field_name("update"), inner)
            return state & inner  # it may not run at all
        if t == "do_statement":
            body = node.child_by_field_name("body")
            state = self.statement(body, state) if body is not None else state
            self.effects(node.child_by_field_name("condition"), state)
            return state
        if t == "return_statement":
            value = node.named_children[0] if node.named_children else None
            self.effects(value, state)
            if value is not None and self.tainted(value, state):
                self.returns = True
            return state
        self.effects(node, state)
        return state

    def _set(self, state: set[str], path: str, timed: bool, strong: bool) -> None:
        if timed:
            state.add(path)
        elif strong:
            state.discard(path)
            prefix = (path + ".", path + "->")
            for p in [p for p in state if p.startswith(prefix)]:
                state.discard(p)
        base = _base(path)
        if self.record and base not in self.declared and base in self.program.globals:
            self.global_writes.append((base, timed))

    # ------------------------------------------------------------------ expressions

    def effects(self, node: Node | None, state: set[str]) -> None:
        """What evaluating `node` does to `state` (assignments, declarations, timers writing their
        arguments), and the print statements and calls it makes, in source order."""
        if node is None or node.type in _NESTED:
            return
        t = node.type
        if t == "declaration":
            for d in node.children_by_field_name("declarator"):
                value = d.child_by_field_name("value") if d.type == "init_declarator" else None
                self.effects(value, state)
                name = _declared_name(d)
                if name:
                    self.declared.add(name)
                    self._set(state, name, value is not None and self.tainted(value, state), True)
            return
        if t == "assignment_expression":
            right = node.child_by_field_name("right")
            self.effects(right, state)
            target = _path(node.child_by_field_name("left"))
            if target is not None:
                path, strong = target
                compound = node_text(node.child_by_field_name("operator")) != "="
                timed = self.tainted(right, state) or (
                    compound and self.tainted(node.child_by_field_name("left"), state)
                )
                self._set(state, path if strong else _base(path), timed, strong and not compound)
            return
        if t == "call_expression":
            args = node.child_by_field_name("arguments")
            values = list(args.named_children) if args is not None else []
            for a in values:
                self.effects(a, state)
            fn = node.child_by_field_name("function")
            if fn is not None and fn.type == "field_expression":
                self.effects(fn.child_by_field_name("argument"), state)
            self.called(node, _callee_name(fn), values, state)
            return
        if t == "binary_expression" and node_text(node.child_by_field_name("operator")) == "<<":
            chain = _chain(node)
            if chain is not None:
                for operand in chain[1:]:
                    self.effects(operand, state)
                self.streamed(node, chain, state)
                return
        for c in node.named_children:
            self.effects(c, state)

    def called(self, node: Node, name: str, values: list[Node], state: set[str]) -> None:
        timer = self.program.timer(name)
        if timer is not None:
            for w in timer.writes:
                if 0 < w <= len(values):
                    arg = values[w - 1]
                    inner = arg.child_by_field_name("argument") if arg.type == "pointer_expression" else arg
                    target = _path(inner)
                    if target is not None:
                        self._set(state, target[0], True, target[1])
            return
        if self.record and name in _PRINTERS:
            self.printed(node, name, values, state)
        if self.record and name in self.program.defs:
            self.calls.append((name, frozenset(i for i, v in enumerate(values) if self.tainted(v, state))))

    def printed(self, node: Node, name: str, values: list[Node], state: set[str]) -> None:
        at = _PRINTERS[name]
        stream = "stdout"
        if at == 1:
            stream = _STREAMS.get(squash(node_text(values[0])) if values else "", "")
            if stream not in ("stdout", "stderr"):
                return  # a file: its lines are not the run's output
        fmt = string_value(values[at]) if len(values) > at else None
        if fmt is None:
            return
        args = [(self.tainted(v, state), _what(v), string_value(v)) for v in values[at + 1 :]]
        pieces = format_pieces(fmt, args)
        if pieces is not None:
            self.prints.append(_Print(self.file, node.start_point[0] + 1, stream, pieces, *_statement(node)))

    def streamed(self, node: Node, chain: list[Node], state: set[str]) -> None:
        if not self.record:
            return
        pieces: list[_Piece] = []
        for operand in chain[1:]:
            text = squash(node_text(operand)).replace(" ", "")
            value = string_value(operand)
            if value is not None:
                pieces.append(_Piece(text=value))
            elif operand.type == "char_literal":
                pieces.append(_Piece(text=unescape('"' + node_text(operand)[1:-1] + '"') or ""))
            elif text in _ENDL:
                pieces.append(_Piece(text="\n"))
            elif _MANIPULATORS.match(text):
                continue
            elif self.tainted(operand, state):
                pieces.append(_Piece(wildcard=_NUMBER, sample="0.5", timed=True, what=_what(operand)))
            else:
                pieces.append(_Piece(wildcard=".*?", sample="x"))
        stream = _STREAMS.get(squash(node_text(chain[0])).replace(" ", ""), "stdout")
        self.prints.append(_Print(self.file, node.start_point[0] + 1, stream, pieces, *_statement(node)))

    def tainted(self, node: Node | None, state: set[str]) -> bool:
        """Whether the value of `node` is derived from a timer."""
        if node is None or node.type in _NOT_VALUES:
            return False
        t = node.type
        if t == "identifier":
            return node_text(node) in state
        if t in ("field_expression", "qualified_identifier"):
            if squash(node_text(node)).replace(" ", "") in state:
                return True
            return t == "field_expression" and self.tainted(node.child_by_field_name("argument"), state)
        if t == "assignment_expression":
            return self.tainted(node.child_by_field_name("right"), state)
        if t == "cast_expression":
            return self.tainted(node.child_by_field_name("value"), state)
        if t == "call_expression":
            fn = node.child_by_field_name("function")
            name = _callee_name(fn)
            timer = self.program.timer(name)
            if timer is not None:
                return timer.returns
            args = node.child_by_field_name("arguments")
            values = list(args.named_children) if args is not None else []
            timed = frozenset(i for i, v in enumerate(values) if self.tainted(v, state))
            if fn is not None and fn.type == "field_expression":  # a method: of a time (`(t1 - t0).count()`)
                return bool(timed) or self.tainted(fn.child_by_field_name("argument"), state)
            known = self.program.returns_time(name, len(values), timed)
            return bool(timed) if known is None else known
        return any(self.tainted(c, state) for c in node.named_children)


def _chain(node: Node) -> list[Node] | None:
    """The operands of ``std::cout << a << b``, the stream first; None when the leftmost is no stream."""
    operands: list[Node] = []
    cur: Node | None = node
    while (
        cur is not None
        and cur.type == "binary_expression"
        and node_text(cur.child_by_field_name("operator")) == "<<"
    ):
        right = cur.child_by_field_name("right")
        if right is not None:
            operands.append(right)
        cur = cur.child_by_field_name("left")
    if cur is None or squash(node_text(cur)).replace(" ", "") not in _STREAMS:
        return None
    return [cur, *reversed(operands)]


def _what(node: Node) -> str:
    """How a report names a value: ``elapsed_time(...)`` for a call, else its text (shortened)."""
    if node.type == "call_expression":
        return _callee_name(node.child_by_field_name("function")) + "(...)"
    text = squash(node_text(node))
    return text if len(text) <= 40 else text[:37] + "..."


# ----------------------------------------------------------------------------- the program


def printed_timers(
    files: Iterable[tuple[str, bytes]], timers: Sequence[TimerFunction] | None = None
) -> tuple[PrintedTimer, ...]:
    """The lines the program made of `files` ((its name in the report, its text)) prints from a timer.  A
    pattern another print statement of the program could print a line of too, or with no letter in its literal
    text, is left out (see the module docstring)."""
    return _printed(_units(files), timer_functions() if timers is None else timers)


def printed_properties(files: Iterable[tuple[str, bytes]]) -> tuple[PrintedTimer, ...]:
    """The lines the program prints from a property of its device (``prop.major`` after
    ``cudaGetDeviceProperties(&prop, dev)``; :func:`device_functions`), found as :func:`printed_timers` finds
    a timer's: the same derivation, the same care with patterns another print statement could match."""
    return _printed(_units(files), device_functions())


def printed_timers_and_properties(
    files: Iterable[tuple[str, bytes]],
) -> tuple[tuple[PrintedTimer, ...], tuple[PrintedTimer, ...]]:
    """:func:`printed_timers` and :func:`printed_properties` of `files`, each file parsed once."""
    units = _units(files)
    return _printed(units, timer_functions()), _printed(units, device_functions())


def _units(files: Iterable[tuple[str, bytes]]) -> list[tuple[str, Node]]:
    units = []
    for name, data in files:
        try:
            units.append((name, parse("cuda", data).root_node))
        except (ValueError, RecursionError):
            continue
    return units


def _statement(node: Node) -> tuple[int, int]:
    """(the id of the statement `node` makes, the id of the next statement of its block; 0 where none)."""
    stmt = node.parent if node.parent is not None and node.parent.type == "expression_statement" else None
    if stmt is None:
        return 0, 0
    after = stmt.next_named_sibling
    while after is not None and after.type == "comment":
        after = after.next_named_sibling
    return stmt.id, after.id if after is not None and after.type == "expression_statement" else 0


def _joined(prints: Sequence[_Print]) -> list[_Print]:
    """The print statements, those of one block that follow each other on one stream joined into one (the
    pieces of each marked with its line): a line that one begins and the next ends is then whole."""
    by_statement = {p.statement: p for p in prints if p.statement}  # (a statement seen twice: its last)
    continued = {
        q.then
        for q in by_statement.values()
        if q.then in by_statement and by_statement[q.then].stream == q.stream
    }
    out = [p for p in prints if not p.statement]
    for p in by_statement.values():
        if p.statement in continued:
            continue  # it goes on from the print before it: part of that one's run
        pieces: list[_Piece] = []
        at: _Print | None = p
        seen: set[int] = set()
        while at is not None and at.statement not in seen and at.stream == p.stream:
            seen.add(at.statement)
            pieces += [replace(piece, line=at.line) for piece in at.pieces]
            at = by_statement.get(at.then) if at.then else None
        out.append(replace(p, pieces=pieces))
    return out


def _printed(units: list[tuple[str, Node]], functions: Sequence[TimerFunction]) -> tuple[PrintedTimer, ...]:
    try:
        prints = _joined(_Program(units, functions).solve())
    except RecursionError:
        return ()
    timed: list[tuple[_Line, _Print]] = []
    plain: list[_Line] = []
    for p in prints:
        for line in whole_lines(p.pieces):
            if line.timed:
                timed.append((line, p))
            elif p.stream == "stdout":
                plain.append(line)
    found: dict[tuple[str, str], PrintedTimer] = {}
    for line, p in timed:
        if not line.lettered or any(_overlap(line, other) for other in plain):
            continue
        key = (line.pattern, p.stream)
        if key not in found:
            found[key] = PrintedTimer(line.pattern, line.timed, p.file, line.at or p.line, p.stream)
    return tuple(found.values())


def _overlap(timed: _Line, plain: _Line) -> bool:
    """Whether a line `plain` prints could be taken for one `timed` prints, or the other way round.  A plain
    line with no literal text at all (``"%s\\n"``) prints a message of its own; it is not counted."""
    if re.fullmatch(timed.pattern, plain.sample, re.S):
        return True
    return bool(plain.literal.strip()) and re.fullmatch(plain.pattern, timed.sample, re.S) is not None


__all__ = ["PrintedTimer", "TimerFunction", "format_pieces", "printed_timers", "timer_functions", "unescape"]
