"""Python loop nests: per function, its ``for v in range(...)`` nests, the arrays they read and
write, and a dependence classification (map / reduction / stencil / sequential) with a reason.

Choices (the scanner's contract beyond :class:`porter.model.LoopNest`):

- One nest per outermost range loop of each function.  Functions are named like
  ``__qualname__``: ``f``, ``Class.method``, ``outer.<locals>.inner``.  Loops at module level or
  directly in a class body are not reported.
- ``while`` loops and ``for x in iterable`` loops are never nests: a range loop inside one is the
  root of its own nest, analysed for one execution of it.  Inside a nest they are ordinary
  statements.  Comprehensions are expressions, never nests.  ``prange`` counts as ``range``.
- Each range loop of the nest is analysed on its own (outer loop variables fixed, inner ones
  free); the nest is ``sequential`` when any loop carries a dependence, else ``reduction`` when
  any loop accumulates, else ``stencil`` when it reads another array at constant offsets of the
  loop variables, else ``map``.
- Assumptions: distinct names do not alias; plain function calls (``math.exp(x)``,
  ``np.sqrt(a[i])``, user functions) leave their arguments alone; a method call on a local name
  may change it (``out.append(v)``, ``rng.random()``); ``print``/``next``/``input`` follow call
  order.  A range step is not used (``range(0, n, 2)`` is analysed like ``range(n)``).  When the
  analysis cannot tell, the nest is ``sequential`` and the reason names what it could not prove.

Results are plain data (:mod:`porter.model`); no tree node leaves this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tree_sitter import Node

from porter import grammars
from porter.model import ArrayAccess, FileScan, LoopKind, LoopNest, ParseWarning

# --------------------------------------------------------------------------- entry point


def scan_python(path: str, source: bytes) -> FileScan:
    """Scan one Python file: every function's range-loop nests, classified, plus syntax warnings."""
    root = grammars.parse("python", source).root_node
    loops: list[LoopNest] = []
    for fn in _functions(root):
        loops.extend(_function_nests(fn))
    loops.sort(key=lambda nest: (nest.line, nest.function))
    return FileScan(path=path, language="python", loops=tuple(loops), warnings=tuple(_syntax_warnings(root)))


# --------------------------------------------------------------------------- syntax warnings


def _syntax_warnings(root: Node) -> list[ParseWarning]:
    """One warning per ERROR region (outermost only) and per MISSING token; 1-based line and column."""
    found: list[ParseWarning] = []
    if not root.has_error:
        return found
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            found.append(_warning(node, f"syntax error: missing {node.type!r}"))
        elif node.is_error:
            snippet = _one_line(node)[:40]
            found.append(_warning(node, f"syntax error: cannot parse {snippet!r}"))
            stack.extend(child for child in node.children if child.is_missing)
        elif node.has_error:
            stack.extend(reversed(node.children))
    found.sort(key=lambda w: (w.line, w.column))
    return found


def _warning(node: Node, message: str) -> ParseWarning:
    return ParseWarning(line=node.start_point.row + 1, column=node.start_point.column + 1, message=message)


# --------------------------------------------------------------------------- small text helpers


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def _field(node: Node, name: str) -> Node:
    """The child in field ``name``, one the grammar always gives this node type (a def's name)."""
    child = node.child_by_field_name(name)
    assert child is not None, f"a {node.type} without its {name}"
    return child


def _one_line(node: Node) -> str:
    """The node's source on one line, runs of whitespace collapsed."""
    return re.sub(r"\s+", " ", _text(node)).strip()


def _key(node: Node) -> str:
    """The node's source without whitespace, for comparing expressions."""
    return re.sub(r"\s+", "", _text(node))


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _end_line(node: Node) -> int:
    row, column = node.end_point.row, node.end_point.column
    return row if column == 0 and row > node.start_point.row else row + 1


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _chain(node: Node) -> str | None:
    """``x`` or ``self.a.b`` as text when the node is a plain name or attribute chain, else None."""
    if node.type == "identifier":
        return _text(node)
    if node.type == "attribute":
        obj = node.child_by_field_name("object")
        attr = node.child_by_field_name("attribute")
        head = _chain(obj) if obj is not None else None
        if head is not None and attr is not None:
            return f"{head}.{_text(attr)}"
    return None


def _root_name(chain: str) -> str:
    return chain.split(".", 1)[0]


def _unparen(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _mentions(node: Node, name: str) -> bool:
    """Whether a name chain equal to (or starting with) ``name`` occurs in the subtree."""
    stack = [node]
    while stack:
        cur = stack.pop()
        chain = _chain(cur)
        if chain is not None and (chain == name or chain.startswith(name + ".")):
            return True
        if cur.type == "attribute":
            obj = cur.child_by_field_name("object")
            if obj is not None:
                stack.append(obj)
            continue
        stack.extend(cur.named_children)
    return False


def _list(items: Iterable[str], limit: int = 6) -> str:
    unique = list(dict.fromkeys(items))
    if len(unique) > limit:
        return ", ".join(unique[:limit]) + ", ..."
    return ", ".join(unique)


# --------------------------------------------------------------------------- functions


_SCOPES = ("function_definition", "lambda", "class_definition")


@dataclass(frozen=True)
class _Function:
    node: Node
    name: str
    params: tuple[str, ...]
    body: Node


def _functions(root: Node) -> list[_Function]:
    out: list[_Function] = []
    for _, match in grammars.matches("python-functions", root):
        node = match["function"][0]
        out.append(
            _Function(
                node=node,
                name=_qualified_name(node),
                params=_param_names(match["function.params"][0]),
                body=match["function.body"][0],
            )
        )
    out.sort(key=lambda f: f.node.start_byte)
    return out


def _qualified_name(fn: Node) -> str:
    parts = [_text(_field(fn, "name"))]
    cur = fn.parent
    while cur is not None:
        if cur.type == "class_definition":
            parts.append(_text(_field(cur, "name")))
        elif cur.type == "function_definition":
            parts.append("<locals>")
            parts.append(_text(_field(cur, "name")))
        cur = cur.parent
    return ".".join(reversed(parts))


def _param_names(params: Node) -> tuple[str, ...]:
    names: list[str] = []
    for child in params.named_children:
        if child.type == "identifier":
            names.append(_text(child))
            continue
        named = child.child_by_field_name("name")
        if named is not None:
            names.append(_text(named))
            continue
        ident = next((c for c in child.named_children if c.type == "identifier"), None)
        if ident is not None:  # typed_parameter, *args, **kwargs
            names.append(_text(ident))
    return tuple(names)


def _owner(node: Node) -> Node | None:
    """The nearest enclosing function definition; None at module level or in a class body."""
    cur = node.parent
    while cur is not None:
        if cur.type == "function_definition":
            return cur
        if cur.type in ("class_definition", "lambda"):
            return None
        cur = cur.parent
    return None


# --------------------------------------------------------------------------- name flow


_COMPREHENSIONS = (
    "list_comprehension",
    "set_comprehension",
    "dictionary_comprehension",
    "generator_expression",
)
_PATTERNS = (
    "pattern_list",
    "tuple_pattern",
    "list_pattern",
    "tuple",
    "list",
    "parenthesized_expression",
    "list_splat_pattern",
    "list_splat",
    "as_pattern_target",
    "expression_list",
)


@dataclass
class _Flow:
    """Reads and bindings of names in a block, in execution order.

    ``exposed`` holds names read before any binding on some path from the block's start
    (their value comes from before the block: for a loop body, from the previous iteration).
    """

    reads: list[tuple[str, Node, str]] = field(default_factory=list)  # name, node, context
    writes: dict[str, list[Node]] = field(default_factory=dict)
    exposed: dict[str, Node] = field(default_factory=dict)
    defined_at_end: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, block: Node, defined: Iterable[str]) -> _Flow:
        flow = cls()
        flow.defined_at_end = flow.block(block, set(defined))
        return flow

    # statements -----------------------------------------------------------

    def block(self, node: Node, d: set[str]) -> set[str]:
        for stmt in node.named_children:
            d = self.stmt(stmt, d)
        return d

    def stmt(self, s: Node, d: set[str]) -> set[str]:
        kind = s.type
        if kind == "if_statement":
            return self._if(s, d)
        if kind in ("for_statement", "while_statement"):
            self._loop(s, d)
            return d
        if kind == "try_statement":
            for child in s.named_children:
                if child.type == "block":
                    self.block(child, set(d))
                elif child.type == "finally_clause":
                    self._clause(child, d)
                else:
                    self._clause(child, set(d))
            return d
        if kind == "with_statement":
            for child in s.named_children:
                if child.type == "block":
                    d = self.block(child, d)
                else:
                    self.expr(child, d)
            return d
        if kind in ("function_definition", "class_definition"):
            self.bind(s.child_by_field_name("name"), d)
            return d
        if kind == "decorated_definition":
            definition = s.child_by_field_name("definition")
            if definition is not None:
                self.bind(definition.child_by_field_name("name"), d)
            return d
        if kind == "delete_statement":
            for target in s.named_children:
                self.bind(target, d)
            return d
        if kind in (
            "import_statement",
            "import_from_statement",
            "future_import_statement",
            "global_statement",
            "nonlocal_statement",
            "comment",
            "pass_statement",
            "break_statement",
            "continue_statement",
        ):
            return d
        self.expr(s, d)
        return d

    def _if(self, s: Node, d: set[str]) -> set[str]:
        self.expr(s.child_by_field_name("condition"), d)
        ends = [self.block(_field(s, "consequence"), set(d))]
        has_else = False
        for alt in s.children_by_field_name("alternative"):
            if alt.type == "elif_clause":
                self.expr(alt.child_by_field_name("condition"), d)
                ends.append(self.block(_field(alt, "consequence"), set(d)))
            else:
                has_else = True
                ends.append(self.block(_field(alt, "body"), set(d)))
        if not has_else:
            ends.append(d)
        return set.intersection(*ends)

    def _loop(self, s: Node, d: set[str]) -> None:
        inner = set(d)
        if s.type == "for_statement":
            self.expr(s.child_by_field_name("right"), d)
            self.bind(s.child_by_field_name("left"), inner)
        else:
            self.expr(s.child_by_field_name("condition"), d)
        self.block(_field(s, "body"), inner)
        alternative = s.child_by_field_name("alternative")
        if alternative is not None:
            self._clause(alternative, set(d))

    def _clause(self, clause: Node, d: set[str]) -> None:
        for child in clause.named_children:
            if child.type == "block":
                self.block(child, d)
            else:
                self.expr(child, d)

    # expressions ----------------------------------------------------------

    def read(self, name: str, node: Node, context: str, d: set[str], local: frozenset[str]) -> None:
        if _root_name(name) in local:
            return
        self.reads.append((name, node, context))
        if name not in d and name not in self.exposed:
            self.exposed[name] = node

    def bind(self, target: Node | None, d: set[str], local: frozenset[str] = frozenset()) -> None:
        if target is None:
            return
        name = _chain(target)
        if name is not None:
            if _root_name(name) not in local:
                self.writes.setdefault(name, []).append(target)
                d.add(name)
            return
        if target.type in _PATTERNS:
            for child in target.named_children:
                self.bind(child, d, local)
            return
        self.expr(target, d, local)  # a subscript or attribute of an expression: reads only

    def expr(self, n: Node | None, d: set[str], local: frozenset[str] = frozenset()) -> None:
        if n is None:
            return
        kind = n.type
        name = _chain(n)
        if name is not None:
            self.read(name, n, "plain", d, local)
        elif kind == "attribute":
            self.expr(n.child_by_field_name("object"), d, local)
        elif kind == "subscript":
            value = n.child_by_field_name("value")
            base = _chain(value) if value is not None else None
            if base is not None and value is not None:
                self.read(base, value, "base", d, local)
            else:
                self.expr(value, d, local)
            for index in n.children_by_field_name("subscript"):
                self.expr(index, d, local)
        elif kind == "call":
            self._call(n, d, local)
        elif kind == "keyword_argument":
            self.expr(n.child_by_field_name("value"), d, local)
        elif kind in _COMPREHENSIONS:
            self._comprehension(n, d, local)
        elif kind == "named_expression":
            self.expr(n.child_by_field_name("value"), d, local)
            self.bind(n.child_by_field_name("name"), d, local)
        elif kind == "assignment":
            self.expr(n.child_by_field_name("right"), d, local)
            self.bind(n.child_by_field_name("left"), d, local)
        elif kind == "augmented_assignment":
            self.expr(n.child_by_field_name("right"), d, local)
            target = n.child_by_field_name("left")
            self.expr(target, d, local)
            if target is not None and _chain(target) is not None:
                self.bind(target, d, local)
        elif kind == "as_pattern":
            for child in n.named_children:
                if child.type == "as_pattern_target":
                    self.bind(child, d, local)
                else:
                    self.expr(child, d, local)
        elif kind in ("lambda", "type", "function_definition", "class_definition"):
            return
        else:
            for child in n.named_children:
                self.expr(child, d, local)

    def _call(self, n: Node, d: set[str], local: frozenset[str]) -> None:
        fn = n.child_by_field_name("function")
        is_len = fn is not None and fn.type == "identifier" and _text(fn) == "len"
        if fn is not None and fn.type == "attribute":
            obj = fn.child_by_field_name("object")
            receiver = _chain(obj) if obj is not None else None
            if receiver is not None and obj is not None:
                self.read(receiver, obj, "receiver", d, local)
            else:
                self.expr(obj, d, local)
        elif fn is not None and fn.type == "identifier":
            self.read(_text(fn), fn, "call", d, local)
        else:
            self.expr(fn, d, local)
        args = n.child_by_field_name("arguments")
        if args is None:
            return
        if args.type != "argument_list":
            self.expr(args, d, local)
            return
        for arg in args.named_children:
            arg_name = _chain(arg)
            if is_len and arg_name is not None:
                self.read(arg_name, arg, "len", d, local)
            else:
                self.expr(arg, d, local)

    def _comprehension(self, n: Node, d: set[str], local: frozenset[str]) -> None:
        bound: set[str] = set()
        for clause in n.named_children:
            if clause.type == "for_in_clause":
                for left in clause.children_by_field_name("left"):
                    bound |= _target_names(left)
        inner = local | bound
        for clause in n.named_children:
            if clause.type == "for_in_clause":
                for right in clause.children_by_field_name("right"):
                    self.expr(right, d, inner)
            else:
                self.expr(clause, d, inner)


def _target_names(node: Node) -> set[str]:
    name = _chain(node)
    if name is not None:
        return {name}
    names: set[str] = set()
    if node.type in _PATTERNS:
        for child in node.named_children:
            names |= _target_names(child)
    return names


# --------------------------------------------------------------------------- affine index forms
#
# An index expression as an affine function of the nest's loop variables:
# {loop index: coefficient, _CONST: invariant part}; coefficients are polynomials in
# loop-invariant symbols ({sorted symbol names: integer}).  `i*m + j - 1` is
# {0: {("m",): 1}, 1: {(): 1}, _CONST: {(): -1}}.

Poly = dict[tuple[str, ...], int]
Affine = dict[int, Poly]
_CONST = -1


def _poly_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for mono, coef in b.items():
        out[mono] = out.get(mono, 0) + sign * coef
    return {m: c for m, c in out.items() if c != 0}


def _poly_mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            mono = tuple(sorted(ma + mb))
            out[mono] = out.get(mono, 0) + ca * cb
    return {m: c for m, c in out.items() if c != 0}


def _aff_add(a: Affine, b: Affine, sign: int = 1) -> Affine:
    out = dict(a)
    for key, poly in b.items():
        out[key] = _poly_add(out.get(key, {}), poly, sign)
    return {k: p for k, p in out.items() if p}


def _aff_scale(a: Affine, poly: Poly) -> Affine:
    out = {k: _poly_mul(p, poly) for k, p in a.items()}
    return {k: p for k, p in out.items() if p}


def _degree(poly: Poly) -> int:
    return max((len(mono) for mono in poly), default=0)


def _symbol(text: str) -> Affine:
    return {_CONST: {(text,): 1}}


def _integer_offset(form: Affine) -> int:
    """The integer part of the invariant term (0 when it has none)."""
    return form.get(_CONST, {}).get((), 0)


def _has_symbolic_offset(form: Affine) -> bool:
    return any(mono for mono in form.get(_CONST, {}))


# --------------------------------------------------------------------------- nests


@dataclass
class _Loop:
    index: int
    node: Node
    var: str
    bounds: str
    body: Node

    def holds(self, node: Node) -> bool:
        return _inside(node, self.body)


@dataclass
class _Access:
    node: Node
    array: str
    index_nodes: tuple[Node, ...]
    index: tuple[str, ...]
    line: int
    read: bool
    write: bool
    loops: tuple[int, ...]
    called: bool = False  # a method is called on the element: it may change
    forms: tuple[Affine | None, ...] = ()

    @property
    def text(self) -> str:
        return f"{self.array}[{', '.join(self.index)}]"


@dataclass(frozen=True)
class _Accum:
    node: Node  # the whole statement (assignment, augmented assignment or if statement)
    target: str  # the accumulator's text, whitespace removed
    array: str | None  # the array for a cell accumulator, None for a scalar
    op: str
    display: str


@dataclass
class _Verdict:
    """What one loop of a nest allows."""

    sequential: str | None = None
    reductions: list[tuple[_Accum, str]] = field(default_factory=list)  # (statement, loop var)
    private: set[str] = field(default_factory=set)


def _function_nests(fn: _Function) -> list[LoopNest]:
    range_loops = [m for _, m in grammars.matches("python-loops", fn.body) if _owner(m["loop"][0]) == fn.node]
    range_loops.sort(key=lambda m: m["loop"][0].start_byte)
    nodes = [m["loop"][0] for m in range_loops]
    roots = [
        m for m in range_loops if not any(_inside(m["loop"][0], n.child_by_field_name("body")) for n in nodes)
    ]
    try:
        names: tuple[set[str], list[tuple[str, Node]]] | None = _function_names(fn)
    except RecursionError:
        names = None
    nests: list[LoopNest] = []
    for root in roots:
        members = [m for m in range_loops if _inside(m["loop"][0], root["loop"][0])]
        loops: list[_Loop] = []
        for i, m in enumerate(members):
            node = m["loop"][0]
            loops.append(
                _Loop(
                    index=i,
                    node=node,
                    var=_text(m["loop.var"][0]),
                    bounds=_one_line(m["loop.bounds"][0])[1:-1].strip(),
                    body=m["loop.body"][0],
                )
            )
        nest = None
        if names is not None:
            try:
                nest = _Nest(fn, loops, *names).result()
            except RecursionError:
                nest = None
        nests.append(nest or _unanalysed(fn, loops))
    return nests


def _unanalysed(fn: _Function, loops: list[_Loop]) -> LoopNest:
    """A nest whose expressions nest too deeply for the recursive analysis: sequential, said why."""
    root = loops[0].node
    return LoopNest(
        function=fn.name,
        line=_line(root),
        vars=tuple(lp.var for lp in loops),
        bounds=tuple(lp.bounds for lp in loops),
        reads=(),
        writes=(),
        kind=LoopKind.SEQUENTIAL,
        reason="expressions nest too deeply to analyse; not analysed",
        params=fn.params,
        end_line=_end_line(root),
    )


def _function_names(fn: _Function) -> tuple[set[str], list[tuple[str, Node]]]:
    """Names bound in the function (parameters included), and every read of a name with its node."""
    flow = _Flow.of(fn.body, fn.params)
    local = set(fn.params) | {_root_name(n) for n in flow.writes}
    return local, [(name, node) for name, node, _ in flow.reads]


class _Nest:
    """Dependence analysis of one nest of range loops."""

    def __init__(
        self, fn: _Function, loops: list[_Loop], local_names: set[str], refs: list[tuple[str, Node]]
    ):
        self.fn = fn
        self.loops = loops
        self.root = loops[0]
        self.local_names = local_names
        # names whose value may be read after an iteration of the nest ends: read after the nest,
        # or anywhere outside it when an enclosing loop runs the nest again
        repeated = _enclosing_loop(self.root.node, fn.node)
        self.read_later = {
            name
            for name, node in refs
            if not _inside(node, self.root.node) and (repeated or node.start_byte >= self.root.node.end_byte)
        }
        self.scopes = self._nested_scopes()
        self.root_flow = _Flow.of(self.root.body, [self.root.var])
        self.loop_vars = {lp.var for lp in loops}
        self.variant = set(self.root_flow.writes) | self.loop_vars
        self.accesses = self._accesses()
        self.accums = self._accums()
        self._substituting: set[str] = set()
        for access in self.accesses:
            access.forms = tuple(self._form(ix, access.node) for ix in access.index_nodes)

    # collection -----------------------------------------------------------

    def _nested_scopes(self) -> list[Node]:
        found: list[Node] = []
        stack = list(self.root.body.named_children)
        while stack:
            node = stack.pop()
            if node.type in _SCOPES:
                found.append(node)
            else:
                stack.extend(node.named_children)
        return found

    def in_scope(self, node: Node) -> bool:
        return _inside(node, self.root.body) and not any(_inside(node, s) for s in self.scopes)

    def loops_of(self, node: Node) -> tuple[int, ...]:
        return tuple(lp.index for lp in self.loops if lp.holds(node))

    def in_loop(self, node: Node, loop: _Loop) -> bool:
        return loop.holds(node) and self.in_scope(node)

    def _accesses(self) -> list[_Access]:
        out: list[_Access] = []
        for node in grammars.captures("python-subscripts", self.root.body).get("subscript", []):
            parent = node.parent
            if (
                parent is not None
                and parent.type == "subscript"
                and parent.child_by_field_name("value") == node
            ):
                continue  # inner part of a chain a[i][j]
            if not self.in_scope(node):
                continue
            indices: list[Node] = []
            base = node
            while base.type == "subscript":
                indices[:0] = base.children_by_field_name("subscript")
                base = base.child_by_field_name("value")
            read, write, called = _role(node)
            out.append(
                _Access(
                    node=node,
                    array=_one_line(base),
                    index_nodes=tuple(indices),
                    index=tuple(_one_line(ix) for ix in indices),
                    line=_line(node),
                    read=read,
                    write=write,
                    called=called,
                    loops=self.loops_of(node),
                )
            )
        return out

    def _accums(self) -> list[_Accum]:
        out: list[_Accum] = []
        for _, match in grammars.matches("python-reductions", self.root.body):
            node = next(match[name][0] for name in _REDUCE_STATEMENTS if name in match)
            if not self.in_scope(node):
                continue
            accum = _accumulation(node, match)
            if accum is not None:
                out.append(accum)
        return out

    # index forms ------------------------------------------------------------

    def _form(self, node: Node, site: Node) -> Affine | None:
        node = _unparen(node)
        kind = node.type
        if kind == "integer":
            try:
                value = int(_text(node), 0)
            except ValueError:
                return None
            return {_CONST: {(): value}} if value else {}
        if kind == "identifier":
            return self._name_form(_text(node), site)
        if kind == "unary_operator":
            operand = node.child_by_field_name("argument")
            op = _text(_field(node, "operator"))
            inner = self._form(operand, site) if operand is not None else None
            if inner is None or op not in "+-":
                return self._opaque(node, site)
            return inner if op == "+" else _aff_scale(inner, {(): -1})
        if kind == "binary_operator":
            left = node.child_by_field_name("left")
            right = node.child_by_field_name("right")
            op = _text(_field(node, "operator"))
            lf = self._form(left, site) if left is not None else None
            rf = self._form(right, site) if right is not None else None
            if lf is not None and rf is not None:
                if op in ("+", "-"):
                    return _aff_add(lf, rf, 1 if op == "+" else -1)
                if op == "*":
                    if set(lf) <= {_CONST}:
                        return _aff_scale(rf, lf.get(_CONST, {}))
                    if set(rf) <= {_CONST}:
                        return _aff_scale(lf, rf.get(_CONST, {}))
            return self._opaque(node, site)
        return self._opaque(node, site)

    def _name_form(self, name: str, site: Node) -> Affine | None:
        if _comprehension_binds(site, name, self.root.body):
            return None  # a comprehension's own variable: it varies inside one iteration
        for index in reversed(self.loops_of(site)):
            if self.loops[index].var == name:
                return {index: {(): 1}}
        if name not in self.variant:
            return _symbol(name)
        return self._substitute(name)

    def _substitute(self, name: str) -> Affine | None:
        """The form of a per-iteration temporary `t = <expr>` assigned once, before any use."""
        bindings = self.root_flow.writes.get(name, [])
        if len(bindings) != 1 or name in self.root_flow.exposed or name in self._substituting:
            return None
        target = bindings[0]
        assign = target.parent
        if assign is None or assign.type != "assignment" or assign.child_by_field_name("left") != target:
            return None
        value = assign.child_by_field_name("right")
        if value is None or value.type == "assignment":
            return None
        self._substituting.add(name)
        try:
            return self._form(value, assign)
        finally:
            self._substituting.discard(name)

    def _opaque(self, node: Node, site: Node) -> Affine | None:
        """An expression that is not affine: a symbol if it is loop-invariant, else None."""
        stack = [node]
        while stack:
            cur = stack.pop()
            name = _chain(cur)
            if name is not None and _root_name(name) in self.variant:
                return None
            if cur.type in _COMPREHENSIONS or cur.type in ("lambda", "slice", "named_expression"):
                return None
            if cur.type == "keyword_argument":
                value = cur.child_by_field_name("value")
                if value is not None:
                    stack.append(value)
                continue
            if cur.type == "attribute":
                obj = cur.child_by_field_name("object")
                if obj is not None:
                    stack.append(obj)
                continue
            stack.extend(cur.named_children)
        return _symbol(_key(node))

    # per-loop analysis ------------------------------------------------------

    def inner_keys(self, loop: _Loop) -> set[int]:
        return {lp.index for lp in self.loops if lp.index != loop.index and loop.holds(lp.node)}

    def separates(self, form: Affine | None, loop: _Loop) -> bool:
        """Whether this index dimension differs between any two iterations of `loop`."""
        if form is None or loop.index not in form:
            return False
        stride = _degree(form[loop.index])
        return all(_degree(form[k]) < stride for k in self.inner_keys(loop) if k in form)

    def conflict(self, x: _Access, y: _Access, loop: _Loop) -> bool:
        """Whether two iterations of `loop` may touch the same cell through x and y."""
        varying = self.inner_keys(loop) | {loop.index}
        for fx, fy in zip(x.forms, y.forms, strict=False):
            if fx is None or fy is None:
                continue
            if fx == fy and self.separates(fx, loop):
                return False
            diff = _aff_add(fx, fy, -1)
            fixed = not (set(fx) | set(fy)) & varying
            if fixed and set(diff) == {_CONST} and set(diff[_CONST]) == {()}:
                return False
        return True

    def analyse(self, loop: _Loop) -> _Verdict:
        verdict = _Verdict()
        flow = _Flow.of(loop.body, [loop.var])
        private = (
            {name for name in flow.writes if name not in flow.exposed}
            | {loop.var}
            | {lp.var for lp in self.loops}
        )
        verdict.private = {name for name in flow.writes if name not in flow.exposed}
        verdict.sequential = (
            self._receivers(loop, private)
            or self._scalars(loop, flow, verdict)
            or self._arrays(loop, flow, private, verdict)
        )
        return verdict

    def _of(self, loop: _Loop) -> str:
        return f" of {loop.var}" if len(self.loops) > 1 else ""

    def _receivers(self, loop: _Loop, private: set[str]) -> str | None:
        for _, match in grammars.matches("python-effects", loop.body):
            if "call.method_call" not in match:
                continue
            call = match["call.method_call"][0]
            receiver = _chain(match["call.receiver"][0])
            if receiver is None or not self.in_loop(call, loop):
                continue
            root = _root_name(receiver)
            if root not in self.local_names or root in private or receiver in private:
                continue
            method = _text(match["call.method"][0])
            return (
                f"calls {receiver}.{method}() at line {_line(call)}, which may change {receiver} "
                f"from one iteration{self._of(loop)} to the next"
            )
        return None

    def _scalars(self, loop: _Loop, flow: _Flow, verdict: _Verdict) -> str | None:
        for name, nodes in flow.writes.items():
            if name in flow.exposed:
                accums = [
                    a
                    for a in self.accums
                    if a.array is None and a.target == name and self.in_loop(a.node, loop)
                ]
                refs = [node for n, node, _ in flow.reads if n == name] + nodes
                outside = [r for r in refs if not any(_inside(r, a.node) for a in accums)]
                ops = {a.op for a in accums}
                if accums and not outside and len(ops) == 1:
                    verdict.reductions.extend((a, loop.var) for a in accums)
                    continue
                if accums and outside:
                    first = min(outside, key=lambda r: r.start_byte)
                    return (
                        f"uses {name} at line {_line(first)} besides accumulating it "
                        f"({accums[0].display}){self._across(loop)}"
                    )
                write = min(nodes, key=lambda r: r.start_byte)
                stmt = _statement(write)
                return f"carries {name} from one iteration{self._of(loop)} to the next ({_one_line(stmt)})"
            if name not in flow.defined_at_end and name in self.read_later and name not in self.loop_vars:
                return (
                    f"assigns {name} only in some iterations{self._of(loop)}; its value after the loop "
                    f"depends on which iteration assigned it last"
                )
        return None

    def _across(self, loop: _Loop) -> str:
        return f" across iterations of {loop.var}" if len(self.loops) > 1 else ""

    def _arrays(self, loop: _Loop, flow: _Flow, private: set[str], verdict: _Verdict) -> str | None:
        inside = [a for a in self.accesses if loop.index in a.loops]
        arrays = list(dict.fromkeys(a.array for a in inside if a.write or a.called))
        for array in arrays:
            if array in private or _root_name(array) in private:
                continue
            mine = [a for a in inside if a.array == array]
            writes = [a for a in mine if a.write or a.called]
            whole = [node for n, node, ctx in flow.reads if n == array and ctx == "plain"]
            if whole:
                return (
                    f"uses {array} as a whole at line {_line(whole[0])} while writing {writes[0].text}"
                    f"{self._across(loop)}"
                )
            conflicts = [(w, x) for w in writes for x in mine if self.conflict(w, x, loop)]
            if not conflicts:
                continue
            accums = [a for a in self.accums if a.array == array and self.in_loop(a.node, loop)]
            if (
                accums
                and len({a.op for a in accums}) == 1
                and all(any(_inside(x.node, a.node) for a in accums) for x in mine)
            ):
                verdict.reductions.extend((a, loop.var) for a in accums)
                continue
            return self._conflict_reason(conflicts, mine, loop)
        return None

    def _conflict_reason(
        self, conflicts: list[tuple[_Access, _Access]], mine: list[_Access], loop: _Loop
    ) -> str:
        of = self._of(loop)
        for w, _ in conflicts:
            if w.called and not w.write:
                return (
                    f"calls a method on {w.text} at line {w.line}, which may change cells that other "
                    f"iterations{of} also use"
                )
        for w, x in conflicts:
            if x is w or not x.read or x.write:
                continue
            distance = self._distance(w, x, loop)
            if distance is not None and distance < 0:
                which = "the previous iteration" if distance == -1 else "an earlier iteration"
                return f"reads {x.text} written by {which}{of} ({w.text})"
            if distance is not None and distance > 0:
                which = "the next iteration" if distance == 1 else "a later iteration"
                return f"reads {x.text} before {which}{of} overwrites it ({w.text})"
        for w, x in conflicts:
            if x is not w:
                continue
            if any(f is None for f in w.forms):
                if any(a.read for a in mine):
                    reads = _list(a.text for a in mine if a.read)
                    return (
                        f"writes {w.text} through an index not derivable from the loop variables "
                        f"and also reads {reads}"
                    )
                return f"writes {w.text}, a cell several iterations{of} may write (last write wins)"
            if not any(f and loop.index in f for f in w.forms):
                return f"writes {w.text} in every iteration{of} (last write wins)"
            return f"writes {w.text}, a cell other iterations{of} also write (last write wins)"
        w, x = conflicts[0]
        return f"reads {x.text} and writes {w.text}: iterations{of} may touch the same cells"

    def _distance(self, w: _Access, r: _Access, loop: _Loop) -> int | None:
        """Iterations from the write to the read of the same cell, when a dimension fixes it."""
        for fw, fr in zip(w.forms, r.forms, strict=False):
            if fw is None or fr is None or loop.index not in fw:
                continue
            diff = _aff_add(fr, fw, -1)
            coef = fw[loop.index]
            if set(diff) <= {_CONST} and set(diff.get(_CONST, {})) <= {()} and set(coef) == {()}:
                step = coef[()]
                delta = diff.get(_CONST, {}).get((), 0)
                if delta % step == 0 and self.separates(fw, loop):
                    return delta // step
        return None

    # nest-wide ----------------------------------------------------------------

    def _effects(self) -> str | None:
        nest_loops = {lp.node: lp for lp in self.loops}
        for _, match in grammars.matches("python-effects", self.root.body):
            for capture, nodes in match.items():
                node = nodes[0]
                if not capture.startswith(("exit.", "call.ordered")) or not self.in_scope(node):
                    continue
                if capture == "exit.break":
                    target = _breaks(node)
                    if target in nest_loops:
                        lp = nest_loops[target]
                        return f"break at line {_line(node)} ends the loop over {lp.var} early"
                elif capture == "exit.return":
                    return f"return at line {_line(node)} leaves the loop early"
                elif capture == "exit.raise":
                    return f"raise at line {_line(node)} can end the loop early"
                elif capture == "exit.yield":
                    return f"yield at line {_line(node)} hands out iterations in order"
                elif capture == "call.ordered":
                    fn = _text(match["call.builtin"][0])
                    return f"calls {fn}() at line {_line(node)}, whose effects follow iteration order"
        return None

    def _stencil_reads(self) -> list[_Access]:
        """Reads of arrays the nest never writes, at constant offsets of the loop variables."""
        written = {a.array for a in self.accesses if a.write}
        reads = [a for a in self.accesses if a.read and a.array not in written]
        return [a for a in reads if any(self._neighbour(a, d, reads) for d in range(len(a.forms)))]

    @staticmethod
    def _neighbour(access: _Access, dim: int, reads: list[_Access]) -> bool:
        form = access.forms[dim]
        if not form or not set(form) - {_CONST} or not _integer_offset(form):
            return False
        if not _has_symbolic_offset(form):
            return True  # a[i - 1], a[i + 1, j]
        for other in reads:  # a[m + i + 1] next to a[m + i]
            if (
                other.array == access.array
                and dim < len(other.forms)
                and (other_form := other.forms[dim]) is not None
            ):
                diff = _aff_add(form, other_form, -1)
                if set(diff) == {_CONST} and set(diff[_CONST]) == {()}:
                    return True
        return False

    def result(self) -> LoopNest:
        kind, reason, op = self._classify()
        reads: list[ArrayAccess] = []
        writes: list[ArrayAccess] = []
        seen: set[tuple[str, tuple[str, ...], int, bool]] = set()
        for a in self.accesses:
            for is_write in (False, True):
                if (a.write if is_write else a.read) and (a.array, a.index, a.line, is_write) not in seen:
                    seen.add((a.array, a.index, a.line, is_write))
                    (writes if is_write else reads).append(
                        ArrayAccess(array=a.array, index=a.index, line=a.line)
                    )
        return LoopNest(
            function=self.fn.name,
            line=_line(self.root.node),
            vars=tuple(lp.var for lp in self.loops),
            bounds=tuple(lp.bounds for lp in self.loops),
            reads=tuple(reads),
            writes=tuple(writes),
            kind=kind,
            reason=reason,
            params=self.fn.params,
            reduction_op=op,
            end_line=_end_line(self.root.node),
        )

    def _classify(self) -> tuple[LoopKind, str, str | None]:
        if self.root.node.has_error:
            bad = _syntax_warnings(self.root.node)
            line = bad[0].line if bad else _line(self.root.node)
            return LoopKind.SEQUENTIAL, f"line {line} inside the loop does not parse; not analysed", None
        effect = self._effects()
        if effect is not None:
            return LoopKind.SEQUENTIAL, effect, None
        reductions: dict[int, tuple[_Accum, list[str]]] = {}
        private: set[str] = set()
        for loop in self.loops:
            verdict = self.analyse(loop)
            if verdict.sequential is not None:
                return LoopKind.SEQUENTIAL, verdict.sequential, None
            private |= verdict.private
            for accum, var in verdict.reductions:
                entry = reductions.setdefault(accum.node.start_byte, (accum, []))
                if var not in entry[1]:
                    entry[1].append(var)
        if reductions:
            parts = []
            for accum, over in sorted(reductions.values(), key=lambda e: e[0].node.start_byte):
                where = f" over {', '.join(over)}" if len(self.loops) > 1 else ""
                parts.append(f"accumulates {accum.display}{where} (associative {accum.op})")
            first = min(reductions.values(), key=lambda e: e[0].node.start_byte)[0]
            return LoopKind.REDUCTION, "; ".join(parts), first.op
        writes = [a.text for a in self.accesses if a.write]
        stencil = self._stencil_reads()
        if stencil:
            return (
                LoopKind.STENCIL,
                f"reads {_list(a.text for a in stencil)} and writes {_list(writes)} (different array)",
                None,
            )
        reads = [a.text for a in self.accesses if a.read]
        parts = [f"writes {_list(writes)} only" if writes else "writes no array"]
        if reads:
            parts.append(f"reads {_list(reads)}")
        temporaries = sorted(private - {lp.var for lp in self.loops})
        if temporaries:
            parts.append(f"{_list(temporaries, 3)} private to each iteration")
        parts.append("no loop-carried state")
        return LoopKind.MAP, "; ".join(parts), None


# --------------------------------------------------------------------------- statement helpers


def _role(node: Node) -> tuple[bool, bool, bool]:
    """(read, write, called) for a subscript.

    Assignment and del targets write; augmented targets read and write; so does an element
    whose attribute or item is assigned (``a[i].x = v``).  ``called``: a method is called on the
    element (``rows[k].append(v)``), which may change it.
    """
    cur = node
    through = False
    while cur.parent is not None and cur.parent.type in ("attribute", "subscript"):
        slot = "object" if cur.parent.type == "attribute" else "value"
        if cur.parent.child_by_field_name(slot) != cur:
            break
        cur, through = cur.parent, True
    parent = cur.parent
    if through and cur.type == "attribute" and parent is not None and parent.type == "call":
        return True, False, parent.child_by_field_name("function") == cur
    while parent is not None and parent.type in _PATTERNS:
        cur, parent = parent, parent.parent
    if parent is None:
        return True, False, False
    if parent.type in ("assignment", "for_statement") and parent.child_by_field_name("left") == cur:
        return through, True, False
    if parent.type == "augmented_assignment" and parent.child_by_field_name("left") == cur:
        return True, True, False
    if parent.type == "delete_statement":
        return through, True, False
    return True, False, False


def _statement(node: Node) -> Node:
    """The smallest enclosing simple statement (for quoting in reasons)."""
    cur = node
    while cur.parent is not None and cur.type not in (
        "expression_statement",
        "for_statement",
        "with_statement",
    ):
        cur = cur.parent
    if cur.type == "expression_statement" and cur.named_child_count == 1:
        return cur.named_children[0]
    return cur


def _comprehension_binds(node: Node, name: str, stop: Node) -> bool:
    """Whether a comprehension between `node` and `stop` binds `name`."""
    cur: Node | None = node
    while cur is not None and cur != stop:
        if cur.type in _COMPREHENSIONS:
            for clause in cur.named_children:
                if clause.type == "for_in_clause" and any(
                    name in _target_names(left) for left in clause.children_by_field_name("left")
                ):
                    return True
        cur = cur.parent
    return False


def _enclosing_loop(node: Node, stop: Node) -> bool:
    """Whether a loop statement encloses the node below `stop`."""
    cur = node.parent
    while cur is not None and cur != stop:
        if cur.type in ("for_statement", "while_statement"):
            return True
        cur = cur.parent
    return False


def _breaks(node: Node) -> Node | None:
    """The loop a break statement leaves."""
    cur = node.parent
    while cur is not None:
        if cur.type in ("for_statement", "while_statement"):
            return cur
        if cur.type in _SCOPES:
            return None
        cur = cur.parent
    return None


_AUGMENTED = {"+=": "+", "*=": "*", "|=": "|", "&=": "&", "^=": "^"}
_REDUCE_STATEMENTS = ("reduce.augmented", "reduce.binary", "reduce.max", "reduce.min", "reduce.select")


def _accumulation(node: Node, match: dict[str, list[Node]]) -> _Accum | None:
    """Check a candidate accumulation statement; None when it is not one."""
    target = match["reduce.target"][0]
    value = match["reduce.value"][0]
    array: str | None = None
    if target.type == "subscript":
        base = target
        while base.type == "subscript":
            base = _field(base, "value")
        array = _chain(base)
        if array is None:
            return None
        name = array
    else:
        chain = _chain(target)
        if chain is None:
            return None
        name = chain
    key = _key(target)

    def clean(operands: list[Node]) -> bool:
        """Exactly one operand is the accumulator and no other operand reads it."""
        own = [o for o in operands if _key(_unparen(o)) == key]
        others = [o for o in operands if _key(_unparen(o)) != key]
        return len(own) == 1 and not any(_mentions(o, name) for o in others)

    if "reduce.augmented" in match:
        op = _AUGMENTED.get(_text(match["reduce.operator"][0]))
        if op is None or _mentions(value, name):
            return None
    elif "reduce.binary" in match:
        op = _text(match["reduce.operator"][0])
        if not clean(_flatten(value, op)):
            return None
    elif "reduce.max" in match or "reduce.min" in match:
        op = "max" if "reduce.max" in match else "min"
        args = value.child_by_field_name("arguments")
        if args is None or args.type != "argument_list":
            return None
        operands = list(args.named_children)
        if len(operands) < 2 or any(
            o.type in ("keyword_argument", "list_splat", "dictionary_splat") for o in operands
        ):
            return None
        if not clean(operands):
            return None
    else:
        op = _select_op(match["reduce.condition"][0], key, _key(value))
        if op is None or _mentions(value, name):
            return None
    return _Accum(
        node=node, target=key if array is None else _key(target), array=array, op=op, display=_display(node)
    )


def _flatten(node: Node, op: str) -> list[Node]:
    node = _unparen(node)
    if node.type == "binary_operator" and _text(_field(node, "operator")) == op:
        return _flatten(_field(node, "left"), op) + _flatten(_field(node, "right"), op)
    return [node]


def _select_op(condition: Node, target: str, value: str) -> str | None:
    """`value > acc` / `acc < value` select a max, the mirrored forms a min."""
    operands = [c for c in condition.named_children]
    operators = [_text(c) for c in condition.children if not c.is_named]
    if len(operands) != 2 or len(operators) != 1 or operators[0] not in ("<", "<=", ">", ">="):
        return None
    left, right = (_key(_unparen(o)) for o in operands)
    greater = operators[0] in (">", ">=")
    if left == value and right == target:
        return "max" if greater else "min"
    if left == target and right == value:
        return "min" if greater else "max"
    return None


def _display(node: Node) -> str:
    if node.type == "if_statement":
        consequence = node.child_by_field_name("consequence")
        body = _one_line(consequence) if consequence is not None else ""
        return f"if {_one_line(_field(node, 'condition'))}: {body}"
    return _one_line(node)
