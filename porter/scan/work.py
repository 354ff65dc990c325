"""Work counting on a kernel's syntax tree: the floating-point operations one thread performs.

Counted on the tree (tree-sitter, through :mod:`porter.grammars`): every ``+ - * /`` and compound
assignment whose operands are floating point (declared float variables, float arrays, float literals,
float-returning math calls), math functions by the weights of ``work.toml`` (an FMA is 2),
``__device__`` helpers inlined at their call sites.  The count is multiplied by the trip count of each
enclosing ``for`` loop whose bounds evaluate from the values the caller binds (sizes, scalar
arguments, launch geometry as thread 0 sees it) and the file's ``#define``s; an ``if`` counts its
heavier branch.  Integer arithmetic (index computations) is not counted.  Loops whose trip count
cannot be evaluated count once and leave a note.  :mod:`porter.harness.cost` binds the values and
turns the per-thread count into a launch's cost.
"""

from __future__ import annotations

import contextlib
import math
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from porter.model import FileScan
from porter.scan import cexpr

MAX_SIMULATED_TRIPS = 4096
MAX_INLINE_DEPTH = 8
_BUILTIN = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*([xyz])\b")


@cache
def data() -> dict[str, Any]:
    """``work.toml``: the float types, their rank, math-function weights and tensor-core markers."""
    text = resources.files("porter.scan").joinpath("work.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "surrogateescape") if node is not None else ""


def _children(node: Any) -> Iterator[Any]:
    yield from node.named_children


def _declared_name(node: Any) -> str | None:
    """The identifier a (possibly pointer / array / init) declarator declares."""
    while node is not None and node.type not in ("identifier", "field_identifier"):
        inner = node.child_by_field_name("declarator")
        if inner is None:
            named = [c for c in node.named_children if c.type in ("identifier",)]
            return _text(named[0]) if named else None
        node = inner
    return _text(node) if node is not None else None


def _is_pointerish(node: Any) -> bool:
    while node is not None and node.type not in ("identifier",):
        if node.type in ("pointer_declarator", "array_declarator", "abstract_pointer_declarator"):
            return True
        node = node.child_by_field_name("declarator")
    return False


@dataclass
class _Scope:
    scalars: dict[str, str] = field(default_factory=dict)  # float variable -> dtype
    arrays: dict[str, str] = field(default_factory=dict)  # float pointer / array -> element dtype
    env: dict[str, int | float] = field(default_factory=dict)  # integer values for loop bounds
    types: dict[str, str] = field(default_factory=dict)  # template type parameter -> C type

    def child(self) -> _Scope:
        return _Scope(dict(self.scalars), dict(self.arrays), dict(self.env), self.types)


class _Counter:
    def __init__(self, functions: Mapping[str, Any], notes: list[str]):
        self.functions = functions
        self.notes = notes
        self.float_types: dict[str, str] = data()["float_types"]
        self.rank: dict[str, int] = data()["rank"]
        self.weights: dict[str, int] = data()["functions"]
        self.depth = 0

    # ----------------------------------------------------------------- types

    def type_dtype(self, type_text: str, scope: _Scope) -> str | None:
        words = re.findall(r"[A-Za-z_]\w*", type_text)
        for w in words:
            w = scope.types.get(w, w)
            for part in w.split():
                if part in self.float_types:
                    return self.float_types[part]
        return None

    def declare(self, decl: Any, scope: _Scope) -> None:
        """Record the variables a declaration (or parameter) introduces."""
        type_node = decl.child_by_field_name("type")
        dtype = self.type_dtype(_text(type_node), scope) if type_node is not None else None
        for d in decl.children_by_field_name("declarator"):
            name = _declared_name(d)
            if not name:
                continue
            if dtype is not None:
                (scope.arrays if _is_pointerish(d) else scope.scalars)[name] = dtype
            else:
                scope.scalars.pop(name, None)
                scope.arrays.pop(name, None)
                value = d.child_by_field_name("value") if d.type == "init_declarator" else None
                if value is not None and not _is_pointerish(d):
                    v = self.evaluate(value, scope)
                    if v is not None:
                        scope.env[name] = v
                    else:
                        scope.env.pop(name, None)

    def dtype(self, node: Any, scope: _Scope) -> str | None:
        """The floating dtype of an expression, "literal" for an unsuffixed float literal, or None."""
        t = node.type
        if t == "number_literal":
            text = _text(node).lower()
            if text.startswith("0x"):
                return None
            if text.endswith("f") or re.search(r"[.e]", text):
                return "float32" if text.endswith("f") else "literal"
            return None
        if t == "identifier":
            return scope.scalars.get(_text(node))
        if t == "subscript_expression":
            base = node.child_by_field_name("argument") or node.named_children[0]
            while base.type == "subscript_expression":
                base = base.child_by_field_name("argument") or base.named_children[0]
            return scope.arrays.get(_text(base)) if base.type == "identifier" else self.dtype(base, scope)
        if t == "pointer_expression":
            arg = node.child_by_field_name("argument")
            return scope.arrays.get(_text(arg)) if arg is not None else None
        if t == "field_expression":
            arg = node.child_by_field_name("argument")
            return self.dtype(arg, scope) if arg is not None else None
        if t in ("parenthesized_expression", "unary_expression", "update_expression"):
            inner = node.child_by_field_name("argument") or (
                node.named_children[0] if node.named_children else None
            )
            return self.dtype(inner, scope) if inner is not None else None
        if t == "cast_expression":
            return self.type_dtype(_text(node.child_by_field_name("type")), scope)
        if t == "call_expression":
            name = _text(node.child_by_field_name("function"))
            if name in self.weights:
                args = node.child_by_field_name("arguments")
                found = [self.dtype(a, scope) for a in (args.named_children if args is not None else [])]
                return self.wider(*found) or ("float64" if not name.endswith("f") else "float32")
            fn = self.functions.get(name)
            if fn is not None:
                return self.type_dtype(_text(fn.child_by_field_name("type")), scope)
            return None
        if t == "binary_expression":
            op = _text(node.child_by_field_name("operator"))
            if op not in ("+", "-", "*", "/"):
                return None
            return self.wider(
                self.dtype(node.child_by_field_name("left"), scope),
                self.dtype(node.child_by_field_name("right"), scope),
            )
        if t == "conditional_expression":
            return self.wider(
                self.dtype(node.child_by_field_name("consequence"), scope),
                self.dtype(node.child_by_field_name("alternative"), scope),
            )
        if t == "assignment_expression":
            return self.dtype(node.child_by_field_name("left"), scope)
        return None

    def wider(self, *found: str | None) -> str | None:
        real = [f for f in found if f is not None and f != "literal"]
        if real:
            return max(real, key=lambda d: self.rank.get(d, 0))
        return "literal" if any(f == "literal" for f in found) else None

    # ----------------------------------------------------------------- evaluation

    def evaluate(self, node: Any, scope: _Scope) -> int | float | None:
        text = _BUILTIN.sub(lambda m: f"{m.group(1)}_{m.group(2)}", _text(node))
        try:
            return cexpr.eval_text(text, scope.env)
        except (cexpr.ExprError, ZeroDivisionError, ValueError, TypeError, OverflowError):
            return None

    def trip_count(self, node: Any, scope: _Scope) -> tuple[float | None, _Scope]:
        """Iterations of a `for` loop (thread 0's view) and the scope of its body."""
        inner = scope.child()
        init = node.child_by_field_name("initializer")
        cond = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        var = start = None
        if init is not None and init.type == "declaration":
            self.declare(init, inner)
            decls = init.children_by_field_name("declarator")
            if decls and decls[0].type == "init_declarator":
                var = _declared_name(decls[0])
                start = inner.env.get(var) if var else None
        elif init is not None and init.type == "assignment_expression":
            var = _text(init.child_by_field_name("left"))
            start = self.evaluate(init.child_by_field_name("right"), inner)
        if var is None or start is None or cond is None or update is None:
            return None, inner
        inner.env.pop(var, None)
        if cond.type != "binary_expression":
            return None, inner
        op = _text(cond.child_by_field_name("operator"))
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "!=": "!="}
        if _text(left) == var:
            bound = self.evaluate(right, inner)
        elif _text(right) == var and op in flip:
            bound, op = self.evaluate(left, inner), flip[op]
        else:
            return None, inner
        step = self._step(update, var, inner)
        if bound is None or step is None:
            return None, inner
        kind, amount = step
        return self._iterations(float(start), float(bound), op, kind, float(amount)), inner

    def _step(self, update: Any, var: str, scope: _Scope) -> tuple[str, float] | None:
        t = update.type
        if t == "update_expression":
            if _text(update.child_by_field_name("argument")) != var:
                return None
            return ("add", 1.0) if "++" in _text(update) else ("add", -1.0)
        if t != "assignment_expression" or _text(update.child_by_field_name("left")) != var:
            return None
        op = _text(update.child_by_field_name("operator"))
        right = update.child_by_field_name("right")
        if op == "=" and right is not None and right.type == "binary_expression":
            a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
            inner_op = _text(right.child_by_field_name("operator"))
            if _text(a) == var:
                op, right = inner_op + "=", b
            elif _text(b) == var and inner_op in ("+", "*"):
                op, right = inner_op + "=", a
        amount = self.evaluate(right, scope) if right is not None else None
        if amount is None:
            return None
        if op in ("+=", "-="):
            return ("add", amount if op == "+=" else -amount)
        if op in ("*=", "/="):
            return ("mul" if op == "*=" else "div", amount)
        if op in ("<<=", ">>=") and isinstance(amount, int) and 0 <= amount < 63:
            return ("mul" if op == "<<=" else "div", float(2**amount))
        return None

    @staticmethod
    def _iterations(start: float, bound: float, op: str, kind: str, amount: float) -> float | None:
        def holds(v: float) -> bool:
            return {"<": v < bound, "<=": v <= bound, ">": v > bound, ">=": v >= bound, "!=": v != bound}[op]

        if kind == "add":
            if amount == 0:
                return None
            if op in ("<", "<=", "!=") and amount > 0 or op in (">", ">=", "!=") and amount < 0:
                span = (bound - start) / amount
                if op in ("<=", ">="):
                    return float(max(0, math.floor(span) + 1))
                return float(max(0, math.ceil(span)))
            return 0.0 if not holds(start) else None
        v, n = start, 0
        while holds(v) and n < MAX_SIMULATED_TRIPS:
            v = v * amount if kind == "mul" else math.trunc(v / amount)
            n += 1
            if (kind == "mul" and amount <= 1) or (kind == "div" and amount <= 1):
                return None
        return float(n) if n < MAX_SIMULATED_TRIPS else None

    # ----------------------------------------------------------------- counting

    def count(self, node: Any, scope: _Scope) -> dict[str, float]:
        """Floating-point operations per thread in `node`, by dtype."""
        out: dict[str, float] = {}
        self._count(node, scope, out, 1.0)
        return out

    def _add(self, out: dict[str, float], dtype: str | None, n: float) -> None:
        if dtype is None or n == 0:
            return
        d = "float64" if dtype == "literal" else dtype
        out[d] = out.get(d, 0.0) + n

    def _count(self, node: Any, scope: _Scope, out: dict[str, float], mult: float) -> None:
        t = node.type
        if t in ("declaration", "parameter_declaration"):
            for d in node.children_by_field_name("declarator"):
                value = d.child_by_field_name("value") if d.type == "init_declarator" else None
                if value is not None:
                    self._count(value, scope, out, mult)
            self.declare(node, scope)
            return
        if t == "compound_statement":
            inner = scope.child()
            for c in _children(node):
                self._count(c, inner, out, mult)
            return
        if t == "for_statement":
            trips, inner = self.trip_count(node, scope)
            if trips is None:
                self.notes.append(f"loop at line {node.start_point[0] + 1}: trip count unknown, counted once")
                trips = 1.0
            body = node.child_by_field_name("body")
            for part in (node.child_by_field_name("condition"), node.child_by_field_name("update"), body):
                if part is not None:
                    self._count(part, inner, out, mult * trips)
            return
        if t in ("while_statement", "do_statement"):
            self.notes.append(
                f"{t.split('_')[0]} loop at line {node.start_point[0] + 1}: trip count unknown, counted once"
            )
            for c in _children(node):
                self._count(c, scope.child(), out, mult)
            return
        if t == "if_statement":
            cond = node.child_by_field_name("condition")
            if cond is not None:
                self._count(cond, scope, out, mult)
            self._heavier(
                [node.child_by_field_name("consequence"), node.child_by_field_name("alternative")],
                scope,
                out,
                mult,
            )
            return
        if t == "conditional_expression":
            self._count(node.child_by_field_name("condition"), scope, out, mult)
            self._heavier(
                [node.child_by_field_name("consequence"), node.child_by_field_name("alternative")],
                scope,
                out,
                mult,
            )
            return
        if t == "binary_expression":
            op = _text(node.child_by_field_name("operator"))
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op in ("+", "-", "*", "/"):
                dl, dr = self.dtype(left, scope), self.dtype(right, scope)
                if not (dl == "literal" and dr == "literal"):  # constant folded
                    self._add(out, self.wider(dl, dr), mult)
            self._count(left, scope, out, mult)
            self._count(right, scope, out, mult)
            return
        if t == "assignment_expression":
            op = _text(node.child_by_field_name("operator"))
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op in ("+=", "-=", "*=", "/="):
                self._add(out, self.wider(self.dtype(left, scope), self.dtype(right, scope)), mult)
            if left is not None and left.type != "identifier":
                self._count(left, scope, out, mult)
            if right is not None:
                self._count(right, scope, out, mult)
            return
        if t == "call_expression":
            self._call(node, scope, out, mult)
            return
        if t in ("function_definition", "template_declaration", "lambda_expression"):
            return
        for c in _children(node):
            self._count(c, scope, out, mult)

    def _heavier(self, branches: Sequence[Any], scope: _Scope, out: dict[str, float], mult: float) -> None:
        counted = []
        for b in branches:
            if b is None:
                continue
            part: dict[str, float] = {}
            self._count(b, scope.child(), part, mult)
            counted.append(part)
        if counted:
            for d, n in max(counted, key=lambda p: sum(p.values())).items():
                out[d] = out.get(d, 0.0) + n

    def _call(self, node: Any, scope: _Scope, out: dict[str, float], mult: float) -> None:
        name = _text(node.child_by_field_name("function"))
        args = node.child_by_field_name("arguments")
        arg_nodes = list(args.named_children) if args is not None else []
        for a in arg_nodes:
            self._count(a, scope, out, mult)
        if name in self.weights:
            self._add(out, self.dtype(node, scope), self.weights[name] * mult)
            return
        fn = self.functions.get(name)
        if fn is None or self.depth >= MAX_INLINE_DEPTH:
            return
        inner = _Scope(types=scope.types)
        inner.env = {
            k: v
            for k, v in scope.env.items()
            if k.startswith(("blockDim_", "gridDim_", "threadIdx_", "blockIdx_", "warpSize"))
        }
        inner.env.update({k: v for k, v in scope.env.items() if k.isupper()})
        declarator = fn.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        params = declarator.child_by_field_name("parameters") if declarator is not None else None
        plist = [
            p
            for p in (params.named_children if params is not None else [])
            if p.type == "parameter_declaration"
        ]
        for p, a in zip(plist, arg_nodes, strict=False):
            self.declare(p, inner)
            pname = _declared_name(p.child_by_field_name("declarator"))
            value = self.evaluate(a, scope)
            if pname and value is not None and pname not in inner.scalars:
                inner.env[pname] = value
        body = fn.child_by_field_name("body")
        if body is None:
            return
        self.depth += 1
        try:
            self._count(body, inner, out, mult)
        finally:
            self.depth -= 1


def _functions(root: Any) -> dict[str, Any]:
    """Every function definition of the file by name (templates included)."""
    found: dict[str, Any] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            d = node.child_by_field_name("declarator")
            while d is not None and d.type != "function_declarator":
                d = d.child_by_field_name("declarator")
            name_node = d.child_by_field_name("declarator") if d is not None else None
            if name_node is not None:
                found.setdefault(_text(name_node).split("::")[-1], node)
            continue
        stack.extend(node.named_children)
    return found


def _defines(scan: FileScan | None, env: dict[str, int | float]) -> None:
    if scan is None:
        return
    pending = [d for d in scan.defines if d.params is None]
    for _ in range(len(pending) + 1):
        progress = False
        for d in list(pending):
            try:
                env[d.name] = cexpr.eval_text(
                    _BUILTIN.sub(lambda m: f"{m.group(1)}_{m.group(2)}", d.value), env
                )
            except (cexpr.ExprError, ZeroDivisionError, ValueError, TypeError):
                continue
            pending.remove(d)
            progress = True
        if not progress:
            break


def count_flops(
    source: str,
    kernel: str,
    scan: FileScan | None,
    *,
    env: Mapping[str, int | float],
    template: Sequence[tuple[str, str]] = (),
    scalar_args: Sequence[tuple[str, Callable[[], int | float]] | None] = (),
) -> tuple[dict[str, float], list[str]]:
    """Floating-point operations per thread by dtype, and notes, for `kernel` in `source`.

    ``env``: the integer values bound before the walk (sizes, ``gridDim_x``/``blockDim_x``…,
    ``threadIdx_x``…, ``warpSize``), on top of the file's ``#define``s; ``template``: (template
    parameter declaration, argument) pairs of the instance; ``scalar_args``: per kernel parameter,
    the name of a scalar argument and how to compute its value (asked only for an integer
    parameter; a value that cannot be computed stays unbound), or None."""
    from porter.grammars import parse

    notes: list[str] = []
    tree = parse("cuda", source.encode("utf-8", "surrogateescape"))
    functions = _functions(tree.root_node)
    fn = functions.get(kernel)
    if fn is None:
        return {}, [f"kernel {kernel} not found in the source: no FLOP count"]
    counter = _Counter(functions, notes)
    scope = _Scope()
    _defines(scan, scope.env)
    scope.env.update(env)
    for tp, ta in template:
        pname = tp.split()[-1]
        if tp.startswith(("typename", "class")):
            scope.types[pname] = ta
        else:
            with contextlib.suppress(cexpr.ExprError, ZeroDivisionError, ValueError, TypeError):
                scope.env[pname] = cexpr.eval_text(ta, scope.env)
    declarator = fn.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    params = declarator.child_by_field_name("parameters") if declarator is not None else None
    plist = [
        p for p in (params.named_children if params is not None else []) if p.type == "parameter_declaration"
    ]
    for p, arg in zip(plist, scalar_args, strict=False):
        counter.declare(p, scope)
        if arg is not None and arg[0] not in scope.scalars:
            with contextlib.suppress(cexpr.ExprError, ValueError):
                scope.env[arg[0]] = arg[1]()
    body = fn.child_by_field_name("body")
    flops = counter.count(body, scope) if body is not None else {}
    return flops, list(dict.fromkeys(notes))
