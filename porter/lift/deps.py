"""Exact dependences of a loop nest, with isl (islpy): which loops carry them, which are parallel, which
transformations keep the program's meaning -- and the sentence that says why not.

A nest is read from Python's ``ast`` as :mod:`porter.lift.analyze` sees it: loops over ``range`` whose
bounds are affine in the loop variables around them and in integers the host knows (sizes, int
parameters, the variable of a sequential loop around the nest, each passed as an isl parameter), and
statements whose array subscripts are affine in the same.  Each statement instance gets

* its **iteration domain** (``S2[i, j] : 0 <= i < n and i < j < n``, triangular and parametric bounds
  included; a step other than 1 as a congruence),
* its **accesses** (``S2[i, j] -> A[i, j - 1]``: reads, then the write, of each statement),
* its place in the original order (the 2d+1 schedule ``[p0, i, p1, j, p2]``; a negative step runs its
  variable backwards),

and a dependence is a pair of instances touching one element, one of them writing, the first before the
second (flow: write then read; anti: read then write; output: write then write).  Distances are taken
on the loops the two statements share.  A loop **carries** a dependence when the dependence's distance
is zero on the loops outside it and positive on it; a loop that carries none runs in parallel.

What is not affine -- a subscript through another array (``h[keys[i]]``), a bound read from data, a
product of two loop variables, a subscript that may be negative (Python counts it from the end) --
raises :class:`NonAffine`; the caller then keeps :mod:`porter.lift.analyze`'s conservative rules and
says so.  Scalars (accumulators, temporaries private to an iteration) are left to those rules too: this
module judges array elements.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import islpy as isl

from porter.lift.emit import Unliftable, range_of

CONSERVATIVE = "(conservative rule)"


class NonAffine(Exception):
    """The nest is not affine where exactness needs it: the caller keeps its conservative rule."""

    def __init__(self, line: int, reason: str):
        super().__init__(reason)
        self.line, self.reason = line, reason


@dataclass(frozen=True)
class Loop:
    var: str
    line: int
    domain: str  # isl constraints on the variable (over the enclosing variables and the parameters)
    sign: int  # +1: the variable grows from one iteration to the next; -1: it falls
    node_id: int


@dataclass(frozen=True)
class Access:
    array: str
    text: str  # as written: ``A[i, j - 1]``
    subscript: tuple[str, ...]  # isl affine expressions
    write: bool
    line: int
    stmt: int  # index of the statement in the nest


@dataclass(frozen=True)
class Statement:
    index: int
    node: ast.stmt
    loops: tuple[Loop, ...]
    position: tuple[int, ...]  # textual position at each depth (len(loops) + 1)
    accesses: tuple[Access, ...]

    @property
    def name(self) -> str:
        return f"S{self.index}"

    @property
    def target(self) -> str:
        """What the statement writes, as written (its first array write, else its first target)."""
        for a in self.accesses:
            if a.write:
                return a.text
        n = self.node
        while isinstance(n, ast.If) and n.body:
            n = n.body[0]
        if isinstance(n, ast.Assign):
            return ast.unparse(n.targets[0])
        if isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            return ast.unparse(n.target)
        return ast.unparse(n).splitlines()[0][:40]


@dataclass(frozen=True)
class Dep:
    """One dependence between two accesses: kind, the access first in the original order (`source`)
    and the one after (`target`), the loops both statements share (outermost first), which of them carry
    it, whether part of it lies within one iteration of all of them, and the distances (an isl set)."""

    kind: str  # "flow" | "anti" | "output"
    source: Access
    target: Access
    loops: tuple[str, ...]
    carried: tuple[str, ...]
    independent: bool
    distance: isl.Set = field(compare=False, repr=False)
    unit: tuple[str, ...] = ()  # the carrying loops whose distance is exactly 1 ("the previous i iteration")

    @property
    def level(self) -> str | None:
        return self.carried[0] if self.carried else None


def _isl_name(name: str) -> str:
    return f"v_{name}"


def _const(e: ast.expr) -> int | None:
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        c = _const(e.operand)
        return None if c is None else -c
    if isinstance(e, ast.BinOp):
        a, b = _const(e.left), _const(e.right)
        if a is not None and b is not None:
            if isinstance(e.op, ast.Add):
                return a + b
            if isinstance(e.op, ast.Sub):
                return a - b
            if isinstance(e.op, ast.Mult):
                return a * b
    return None


class _Affine:
    """Python expressions as isl affine text over loop variables and parameters."""

    def __init__(self, params: Mapping[str, bool], arrays: Iterable[str]):
        self.params = dict(params)  # name -> known non-negative (a size)
        self.arrays = set(arrays)
        self.used: dict[str, bool] = {}  # parameters the nest uses -> non-negative

    def expr(self, e: ast.expr, loops: Sequence[str], line: int) -> str:
        c = _const(e)
        if c is not None:
            return str(c)
        if isinstance(e, ast.Name):
            if e.id in loops:
                return _isl_name(e.id)
            if e.id in self.params:
                self.used[_isl_name(e.id)] = self.params[e.id]
                return _isl_name(e.id)
            raise NonAffine(line, f"{e.id} is not a loop variable or an integer the host knows")
        size = self._size(e)
        if size is not None:
            self.used[size] = True
            return size
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            inner = self.expr(e.operand, loops, line)
            return f"-({inner})" if isinstance(e.op, ast.USub) else inner
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, (ast.Add, ast.Sub)):
                a, b = self.expr(e.left, loops, line), self.expr(e.right, loops, line)
                return f"({a}) {'+' if isinstance(e.op, ast.Add) else '-'} ({b})"
            if isinstance(e.op, ast.Mult):
                ca, cb = _const(e.left), _const(e.right)
                if ca is not None:
                    return f"{ca} * ({self.expr(e.right, loops, line)})"
                if cb is not None:
                    return f"{cb} * ({self.expr(e.left, loops, line)})"
            if isinstance(e.op, (ast.FloorDiv, ast.Mod)):
                cb = _const(e.right)
                if cb is not None and cb > 0:
                    a = self.expr(e.left, loops, line)
                    return f"floor(({a})/{cb})" if isinstance(e.op, ast.FloorDiv) else f"(({a}) mod {cb})"
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Name)
            and e.func.id in ("min", "max")
            and len(e.args) == 2
            and not e.keywords
        ):
            a, b = (self.expr(x, loops, line) for x in e.args)
            return f"{e.func.id}({a}, {b})"
        raise NonAffine(line, f"{ast.unparse(e)} is not affine in the loop variables")

    def _size(self, e: ast.expr) -> str | None:
        """``x.shape[k]``, ``len(x)``: a size, an isl parameter of its own."""
        if (
            isinstance(e, ast.Subscript)
            and isinstance(e.value, ast.Attribute)
            and e.value.attr == "shape"
            and isinstance(e.value.value, ast.Name)
            and isinstance(e.slice, ast.Constant)
            and isinstance(e.slice.value, int)
        ):
            return f"v_{e.value.value.id}_shape{e.slice.value}"
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Name)
            and e.func.id == "len"
            and len(e.args) == 1
            and isinstance(e.args[0], ast.Name)
        ):
            return f"v_{e.args[0].id}_shape0"
        return None


def subscript_parts(node: ast.Subscript) -> tuple[str | None, list[ast.expr]]:
    """The array a subscript chain indexes (None: not a plain name) and its indices, outermost first
    (``A[i][j]`` and ``A[i, j]`` alike)."""
    chain: list[ast.expr] = []
    base: ast.expr = node
    while isinstance(base, ast.Subscript):
        sl = base.slice
        chain[:0] = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        base = base.value
    return (base.id if isinstance(base, ast.Name) else None), chain


class Nest:
    """The polyhedral model of `body` (statements and the loops among them), with the loops around it
    fixed: `params` (name -> a size, known non-negative) are the integers the host knows, `context`
    isl constraints on them (``0 <= v_k < v_n``: a sequential loop's range), `arrays` the names whose
    elements are judged."""

    def __init__(
        self,
        body: Sequence[ast.stmt],
        arrays: Iterable[str],
        params: Mapping[str, bool],
        context: Sequence[str] = (),
        fixed: Sequence[ast.For] = (),
    ):
        self.aff = _Affine(params, arrays)
        self.arrays = set(arrays)
        self.context = list(context)
        for f in fixed:  # loops around the nest: their variables are parameters, in their ranges
            with contextlib.suppress(Unliftable):
                self.aff.params.setdefault(range_of(f)[0], False)
        for f in fixed:
            try:
                lp = self._loop(f, [])
            except NonAffine:
                continue
            self.context.append(lp.domain)
            self.aff.used[_isl_name(lp.var)] = False
        self.statements: list[Statement] = []
        self._walk(list(body), [], [])
        self.depth = max((len(s.loops) for s in self.statements), default=0)
        self._check_nonnegative()

    # ------------------------------------------------------------------ the model

    def _walk(self, body: list[ast.stmt], loops: list[Loop], position: list[int]) -> None:
        for k, s in enumerate(body):
            if isinstance(s, ast.For):
                self._walk(s.body, [*loops, self._loop(s, loops)], [*position, k])
                continue
            if any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(s)):
                raise NonAffine(s.lineno, "a loop inside a branch")
            index = len(self.statements)
            accesses = tuple(self._accesses(s, [lp.var for lp in loops], index))
            self.statements.append(Statement(index, s, tuple(loops), (*position, k), accesses))

    def _loop(self, s: ast.For, outer: list[Loop]) -> Loop:
        try:
            var, start, stop, step = range_of(s)
        except Unliftable as err:
            raise NonAffine(s.lineno, err.reason) from err
        names = [lp.var for lp in outer] + [var]
        c = _const(step)
        if c is None or c == 0:
            raise NonAffine(s.lineno, f"range() with the step {ast.unparse(step)}, not an integer constant")
        lo = self.aff.expr(start, names, s.lineno)
        hi = self.aff.expr(stop, names, s.lineno)
        v = _isl_name(var)
        dom = f"({lo}) <= {v} < ({hi})" if c > 0 else f"({hi}) < {v} <= ({lo})"
        if abs(c) != 1:
            dom += f" and ({v} - ({lo})) mod {abs(c)} = 0"
        return Loop(var, s.lineno, dom, 1 if c > 0 else -1, id(s))

    def _accesses(self, s: ast.stmt, loops: list[str], index: int) -> list[Access]:
        reads: list[Access] = []
        writes: list[Access] = []
        stores: set[int] = set()
        targets: list[ast.expr] = []
        if isinstance(s, ast.Assign):
            targets = list(s.targets)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
            targets = [s.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                    inner: ast.expr = n
                    while isinstance(inner, ast.Subscript):
                        stores.add(id(inner))
                        inner = inner.value
                    writes.append(self._access(n, loops, True, s.lineno, index))
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Subscript):
            reads.append(self._access(s.target, loops, False, s.lineno, index))
        inner_parts: set[int] = set()
        for n in ast.walk(s):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Subscript):
                inner_parts.add(id(n.value))
        for n in ast.walk(s):
            if not isinstance(n, ast.Subscript) or id(n) in stores or id(n) in inner_parts:
                continue
            array, _ = subscript_parts(n)
            if array in self.arrays:
                reads.append(self._access(n, loops, False, getattr(n, "lineno", s.lineno), index))
        return reads + writes  # an instance reads, then writes

    def _access(self, n: ast.Subscript, loops: list[str], write: bool, line: int, stmt: int) -> Access:
        array, index = subscript_parts(n)
        text = ast.unparse(n)
        if array is None:
            raise NonAffine(line, f"{text}: an element of something that is not a named array")
        if array not in self.arrays:
            return Access(array, text, (), write, line, stmt)
        subs = []
        for e in index:
            if isinstance(e, ast.Slice):
                raise NonAffine(line, f"{text} takes a slice {CONSERVATIVE}")
            try:
                subs.append(self.aff.expr(e, loops, line))
            except NonAffine as err:
                raise NonAffine(line, f"non-affine subscript {text} at line {line} {CONSERVATIVE}") from err
        return Access(array, text, tuple(subs), write, line, stmt)

    def _params(self) -> str:
        return "[" + ", ".join(sorted(self.aff.used)) + "]"

    def _ctx(self) -> str:
        parts = [f"{p} >= 0" for p, nonneg in sorted(self.aff.used.items()) if nonneg] + self.context
        return " and ".join(parts) if parts else "true"

    def domain_text(self, s: Statement) -> str:
        return " and ".join(f"({c})" for c in [self._ctx(), *(lp.domain for lp in s.loops)])

    def _domain(self, s: Statement) -> isl.Set:
        v = ", ".join(_isl_name(lp.var) for lp in s.loops)
        return isl.Set(f"{self._params()} -> {{ {s.name}[{v}] : {self.domain_text(s)} }}")

    def _access_map(self, a: Access) -> isl.Map:
        s = self.statements[a.stmt]
        v = ", ".join(_isl_name(lp.var) for lp in s.loops)
        return isl.Map(
            f"{self._params()} -> {{ {s.name}[{v}] -> {a.array}_[{', '.join(a.subscript)}] : {self.domain_text(s)} }}"
        )

    def _schedule(self, s: Statement) -> isl.Map:
        v = ", ".join(_isl_name(lp.var) for lp in s.loops)
        out: list[str] = []
        for k, lp in enumerate(s.loops):
            out += [str(s.position[k]), ("" if lp.sign > 0 else "-") + _isl_name(lp.var)]
        out.append(str(s.position[len(s.loops)]))
        out += ["0"] * (2 * self.depth + 1 - len(out))
        return isl.Map(
            f"{self._params()} -> {{ {s.name}[{v}] -> [{', '.join(out)}] : {self.domain_text(s)} }}"
        )

    def _check_nonnegative(self) -> None:
        """Python reads ``a[-1]`` from the end: a subscript that may be negative aliases far elements."""
        for s in self.statements:
            for a in s.accesses:
                if a.array not in self.arrays:
                    continue
                for sub in a.subscript:
                    neg = self._domain(s).intersect(
                        isl.Set(
                            f"{self._params()} -> {{ {s.name}[{', '.join(_isl_name(lp.var) for lp in s.loops)}] : {sub} < 0 }}"
                        )
                    )
                    if not neg.is_empty():
                        raise NonAffine(
                            a.line,
                            f"{a.text} at line {a.line} may be a negative index (Python counts it from the end) {CONSERVATIVE}",
                        )

    # ------------------------------------------------------------------ dependences

    @cached_property
    def dependences(self) -> list[Dep]:
        accesses = [a for s in self.statements for a in s.accesses if a.array in self.arrays]
        maps = {id(a): self._access_map(a) for a in accesses}
        scheds = {s.index: self._schedule(s) for s in self.statements}
        found: list[Dep] = []
        for a in accesses:
            for b in accesses:
                if a.array != b.array or not (a.write or b.write) or len(a.subscript) != len(b.subscript):
                    continue
                same = maps[id(a)].apply_range(maps[id(b)].reverse())
                rel = same.intersect(scheds[a.stmt].lex_lt_map(scheds[b.stmt]))
                if rel.is_empty():
                    continue
                kind = "flow" if a.write and not b.write else "anti" if b.write and not a.write else "output"
                found.append(self._dep(kind, a, b, rel))
        return found

    def _shared(self, a: Access, b: Access) -> list[Loop]:
        out = []
        for x, y in zip(self.statements[a.stmt].loops, self.statements[b.stmt].loops, strict=False):
            if x.node_id != y.node_id:
                break
            out.append(x)
        return out

    def _dep(self, kind: str, a: Access, b: Access, rel: isl.Map) -> Dep:
        shared = self._shared(a, b)
        sa, sb = self.statements[a.stmt], self.statements[b.stmt]

        def proj(s: Statement) -> isl.Map:
            v = ", ".join(_isl_name(lp.var) for lp in s.loops)
            d = ", ".join(("" if lp.sign > 0 else "-") + _isl_name(lp.var) for lp in shared)
            return isl.Map(f"{{ {s.name}[{v}] -> D[{d}] }}")

        dist = proj(sa).reverse().apply_range(rel).apply_range(proj(sb)).deltas()
        m = len(shared)
        carried: list[str] = []
        unit: list[str] = []
        for k in range(m):
            zero = " and ".join([f"d{x} = 0" for x in range(k)] + [f"d{k} > 0"])
            dims = ", ".join(f"d{x}" for x in range(m))
            level = dist.intersect(isl.Set(f"{{ D[{dims}] : {zero} }}"))
            if not level.is_empty():
                carried.append(shared[k].var)
                other = level.intersect(isl.Set(f"{{ D[{dims}] : d{k} > 1 }}"))
                if other.is_empty():
                    unit.append(shared[k].var)
        if m:
            dims = ", ".join(f"d{x}" for x in range(m))
            zero = " and ".join(f"d{x} = 0" for x in range(m))
            independent = not dist.intersect(isl.Set(f"{{ D[{dims}] : {zero} }}")).is_empty()
        else:
            independent = True
        return Dep(kind, a, b, tuple(lp.var for lp in shared), tuple(carried), independent, dist, tuple(unit))

    # ------------------------------------------------------------------ questions

    def loops(self) -> list[str]:
        """Every loop variable of the nest, outermost first, once."""
        seen: dict[int, str] = {}
        for s in self.statements:
            for lp in s.loops:
                seen.setdefault(lp.node_id, lp.var)
        return list(dict.fromkeys(seen.values()))

    def carried(self, var: str) -> list[Dep]:
        return [d for d in self.dependences if var in d.carried]

    def parallel(self, var: str) -> bool:
        return not self.carried(var)

    def band_violation(self, band: Sequence[str]) -> Dep | None:
        """The first dependence that running the loops `band` (the outermost loops of the nest, around
        every statement) all at once breaks: one with a nonzero distance on any of them."""
        found = [d for d in self.dependences if any(v in d.carried for v in band)]
        return min(found, key=_rank) if found else None

    def interchange_violation(self, stmt: int, order: Sequence[str]) -> Dep | None:
        """The first dependence of statement `stmt` on itself that running its loops in `order`
        (outermost first) reverses: a distance vector that becomes lexicographically negative."""
        s = self.statements[stmt]
        names = [lp.var for lp in s.loops]
        perm = [names.index(v) for v in order]
        m = len(names)
        dims = ", ".join(f"d{x}" for x in range(m))
        neg = " or ".join(
            "(" + " and ".join([f"d{perm[y]} = 0" for y in range(k)] + [f"d{perm[k]} < 0"]) + ")"
            for k in range(m)
        )
        bad = isl.Set(f"{{ D[{dims}] : {neg} }}") if m else None
        found = [
            d
            for d in self.dependences
            if d.source.stmt == stmt == d.target.stmt
            and bad is not None
            and not d.distance.intersect(bad).is_empty()
        ]
        return min(found, key=_rank) if found else None

    def skew_violation(self, outer: str, inner: str, factor: int) -> Dep | None:
        """The first dependence that running the nest's (`outer`, `inner`) iterations by anti-diagonals
        ``d = factor * outer + inner`` -- the diagonals in order, the cells of one diagonal all at once --
        breaks: one between two different iterations whose distance does not move it to a later
        diagonal (``factor * d_outer + d_inner <= 0``).  Each iteration's own statements stay in order."""
        dims = "d0, d1"
        bad = isl.Set(f"{{ D[{dims}] : {factor} * d0 + d1 <= 0 and (d0 > 0 or d0 < 0 or d1 > 0 or d1 < 0) }}")
        found = []
        for d in self.dependences:
            if d.loops[:2] != (outer, inner):
                if outer in d.loops or inner in d.loops:
                    found.append(d)  # a dependence that does not lie within the two loops: not judged here
                continue
            dist = d.distance
            if len(d.loops) > 2:  # the loops inside the two run within one cell: only (d0, d1) matters
                dist = dist.project_out(isl.dim_type.set, 2, len(d.loops) - 2)
            if not dist.intersect(bad).is_empty():
                found.append(d)
        return min(found, key=_rank) if found else None

    def wavefront(self, outer: str, inner: str, most: int = 4) -> tuple[int, Dep | None]:
        """The smallest factor k (at most `most`) whose diagonals ``d = k * outer + inner`` keep every
        dependence (:meth:`skew_violation`), with None; else `most` and the dependence that forbids it."""
        bad: Dep | None = None
        for k in range(1, most + 1):
            bad = self.skew_violation(outer, inner, k)
            if bad is None:
                return k, None
        return most, bad

    def distribution_violation(self) -> Dep | None:
        """The first dependence that running each statement's whole nest before the next statement's
        (full distribution, in textual order) breaks: one from a later statement to an earlier one."""
        found = [d for d in self.dependences if d.source.stmt > d.target.stmt]
        return min(found, key=_rank) if found else None

    # ------------------------------------------------------------------ words

    def explain(self, d: Dep) -> str:
        """``loop-carried dependence: A[i, j] at line 12 reads A[i, j - 1] written by the previous j
        iteration (line 12): sequential in j; parallel in i``."""
        tgt_stmt = self.statements[d.target.stmt]
        src_stmt = self.statements[d.source.stmt]
        v = d.level
        when_before = (
            "earlier in the same iteration"
            if v is None
            else f"the previous {v} iteration"
            if v in d.unit
            else f"an earlier {v} iteration"
        )
        when_after = (
            "later in the same iteration"
            if v is None
            else f"the next {v} iteration"
            if v in d.unit
            else f"a later {v} iteration"
        )
        if d.kind == "flow":
            what = f"{tgt_stmt.target} at line {d.target.line} reads {d.target.text} written by {when_before} (line {d.source.line})"
        elif d.kind == "anti":
            what = f"{src_stmt.target} at line {d.source.line} reads {d.source.text} before {when_after} overwrites it (line {d.target.line})"
        else:
            what = f"{d.source.text} is written at line {d.source.line} and again by {when_after} (line {d.target.line})"
        return (
            ("loop-carried dependence: " if v is not None else "dependence: ") + what + ": " + self.verdict()
        )

    def verdict(self) -> str:
        seq = [v for v in self.loops() if not self.parallel(v)]
        par = [v for v in self.loops() if self.parallel(v)]
        parts = []
        if seq:
            parts.append("sequential in " + ", ".join(seq))
        if par:
            parts.append("parallel in " + ", ".join(par))
        return "; ".join(parts) or "no loop"


def _rank(d: Dep) -> tuple[int, int, int]:
    """Which dependence a refusal names first: a flow (a value passed on) before an anti or an output
    dependence, then the earliest line."""
    return ({"flow": 0, "anti": 1, "output": 2}[d.kind], d.target.line, d.source.line)
