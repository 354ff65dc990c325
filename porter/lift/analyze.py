"""A Python function's loops, made exact: which are parallel, what they compute, and how to run them as
kernels -- or why not, with the line.

Read with Python's own parser (``ast``: lifting needs the language's exact meaning, where the scanner's
tree-sitter pass tolerates broken files), one function at a time, statement by statement:

* sizes and host values: ``n = x.shape[0]``, ``rows, cols = a.shape``, ``n = len(x)``, ``h = 1.0 / n``;
* arrays it allocates: ``np.zeros``/``empty``/``ones``/``full`` (a shape and a dtype), ``*_like``,
  ``x.copy()``;
* loop nests over ``range``: a **map** (each iteration writes its own elements; reads of other arrays at
  offsets make it a **stencil**), a **histogram** (``h[k] += v`` at a data-dependent ``k``), a
  **reduction** into scalars (``s += ...``, ``s *= ...``, ``s = max(s, ...)``), a **row reduction** (a
  map over outer loops whose inner loops reduce, ``y[i] += A[i, j] * x[j]`` included), a **scan** (``out[i]
  = out[i - 1] + x[i]``, or a running accumulator written each iteration) with ``+``, ``*``, ``max`` or
  ``min``, **time stepping** (a sequential loop around parallel nests, ``a, b = b, a`` between steps), and
  a **row kernel** (a thread per iteration of the outer loops the exact dependences leave parallel, each
  running the inner loops that carry one in order: ``for i: for j: p[i, j] = f(p[i, j - 1])``);
* statements outside loops that write elements (``out[0] = x[0]``) and values computed from reduction
  results (``mean = s / n``), run by one thread;
* ``return`` of an array, of a reduction's value, or of an expression of them.

Refused, with the reason and the line: a dependence carried between iterations that is not an
associative scan (``y[i] = a * y[i - 1] + x[i]``, in-place Gauss-Seidel updates), a call with side effects
or on Python objects (``print``, ``warnings.warn``, a callback), Python objects (lists, dicts,
attributes), ``while`` loops, branches around loops, several iterations writing one element without an
accumulation.
"""

from __future__ import annotations

import ast
import contextlib
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from porter.lift import deps
from porter.lift import kernels as K
from porter.lift.emit import (
    DTYPE_NAMES,
    NUMPY,
    Array,
    Body,
    Scope,
    Unliftable,
    _callee,
    range_of,
)
from porter.lift.ir import Analysis, Lifted, Local, Param, Part, Partial, Refusal, Repeat, Step
from porter.lift.types import PY_FLOAT, PY_INT, T, promote

REDUCE_OPS = {ast.Add: "+", ast.Sub: "+", ast.Mult: "*"}
ALLOCATORS = ("zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like", "copy")


def analyze(
    path: str, text: str, only: str | None = None, example: Mapping[str, Any] | None = None
) -> Analysis:
    """Every top-level function of the file (or the one named `only`): lifted, or refused with why.
    `example`: a call's arguments by parameter name (``--example``), whose dtypes and shapes win."""
    try:
        module = ast.parse(text, filename=path)
    except SyntaxError as err:
        return Analysis(path, refused=(Refusal("", err.lineno or 1, f"not valid Python: {err.msg}"),))
    functions = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    if only is not None:
        functions = [f for f in functions if f.name == only]
        if not functions:
            names = ", ".join(n.name for n in module.body if isinstance(n, ast.FunctionDef)) or "none"
            return Analysis(
                path, refused=(Refusal(only, 1, f"no top-level function named {only} (functions: {names})"),)
            )
    imports = tuple(
        ast.get_source_segment(text, n) or ast.unparse(n)
        for n in module.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
    )
    constants = _module_constants(module)
    lifted: list[Lifted] = []
    refused: list[Refusal] = []
    partial: list[Partial] = []
    taken = {n.name for n in module.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for fn in functions:
        fn = _plain(fn, constants)
        if fn.name.startswith("_") and only is None:
            continue  # a helper (_check, __main__ logic): not a function the file offers
        try:
            got = _Function(fn, text, example or {}).lift()
        except Unliftable as err:
            refused.append(Refusal(fn.name, err.line or fn.lineno, err.reason))
            with contextlib.suppress(Unliftable):
                part = _partial(fn, text, example or {}, imports, taken)
                if part is not None:
                    partial.append(part)
            continue
        lifted.append(Lifted(**{**got.__dict__, "imports": imports}))
    return Analysis(path, tuple(lifted), tuple(refused), partial=tuple(partial))


def _partial(
    fn: ast.FunctionDef, text: str, example: Mapping[str, Any], imports: tuple[str, ...], taken: set[str]
) -> Partial | None:
    """A refused function lifted partly: each loop nest of its body, on its own, as a function of the names
    it uses (the sizes and host values it needs bound again from its arrays), lifted by the same rules;
    None unless at least one nest lifts and something stays in Python."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    nests = [s for s in body if isinstance(s, ast.For)]
    if not nests:
        return None
    parent = _Function(fn, text, example)
    parent._params()
    parent._infer_dtypes(body)
    binds: dict[str, ast.stmt] = {}  # a size or host value -> the statement that binds it
    for s in body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and not parent._element_statement(s):
            try:
                parent._assign(s.targets[0], s.value, s)
            except Unliftable:
                continue
            for n in ast.walk(s.targets[0]):
                if isinstance(n, ast.Name) and (n.id in parent.host_expr or n.id in parent.arrays):
                    binds.setdefault(n.id, s)
    signed = signature(text, fn.name, example)
    if isinstance(signed, str):
        return None
    params, sizes = signed
    kinds = {p.name: p for p in params}
    parts: list[Part] = []
    for nest in nests:
        name = f"{fn.name}_nest{nest.lineno}"
        if name in taken:
            parts.append(Part(nest.lineno, None, f"{name} is a name of the file already"))
            continue
        part = _nest_function(fn, body, nest, name, parent, binds, kinds)
        if isinstance(part, str):
            parts.append(Part(nest.lineno, None, part))
            continue
        synth, dummy = part
        try:
            got = _Function(synth, text, dummy).lift()
        except Unliftable as err:
            parts.append(Part(nest.lineno, None, err.reason))
            continue
        source = ast.unparse(synth)
        parts.append(Part(nest.lineno, Lifted(**{**got.__dict__, "imports": imports, "source": source})))
    done = {p.line: p.lifted for p in parts if p.lifted is not None}
    if not done or len(done) == len(body):
        return None
    wrapper = copy.deepcopy(fn)
    wrapper.decorator_list, wrapper.returns = [], None
    for a in wrapper.args.args:
        a.annotation = None
    wrapper.body = [
        ast.Expr(
            ast.Call(ast.Name(lf.function, ast.Load()), [ast.Name(p.name, ast.Load()) for p in lf.params], [])
        )
        if isinstance(s, ast.For) and (lf := done.get(s.lineno)) is not None
        else s
        for s in wrapper.body
    ]
    python = ast.unparse(ast.fix_missing_locations(wrapper))
    probe = _Function(fn, text, example)
    probe._params()
    probe._infer_dtypes(body)
    lifted_parts = [lf for lf in done.values() if lf is not None]
    shell = Lifted(
        function=fn.name,
        line=fn.lineno,
        patterns=("lifted partly",),
        params=params,
        sizes=sizes,
        locals=(),
        kernels=(),
        steps=(),
        writes=tuple(probe._written()),
        reorders=tuple(dict.fromkeys(r for lf in lifted_parts for r in lf.reorders)),
        source=ast.get_source_segment(text, fn) or ast.unparse(fn),
        imports=imports,
        python=python,
    )
    return Partial(shell, tuple(parts))


def _nest_function(
    fn: ast.FunctionDef,
    body: list[ast.stmt],
    nest: ast.For,
    name: str,
    parent: _Function,
    binds: Mapping[str, ast.stmt],
    kinds: Mapping[str, Param],
) -> tuple[ast.FunctionDef, dict[str, Any]] | str:
    """`nest` as a function of its own (its parameters the arrays and scalars it uses, the sizes and host
    values it needs bound as the function binds them) and an example of its parameters' dtypes; or why it
    cannot be one."""
    loaded = {n.id for n in ast.walk(nest) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    stored = {n.id for n in ast.walk(nest) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    counters = {
        n.target.id for n in ast.walk(nest) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
    }
    outside = {n.id for s in body if s is not nest for n in ast.walk(s) if isinstance(n, ast.Name)} | set(
        kinds
    )
    escaping = sorted((stored - counters) & outside)
    if escaping:
        return f"it assigns {', '.join(escaping)}, which the Python around it uses too"
    need: list[str] = []
    stmts: list[ast.stmt] = []
    todo = sorted(loaded - stored)
    while todo:
        n = todo.pop(0)
        if n in need:
            continue
        if n in binds and n not in kinds:
            s = binds[n]
            if s not in stmts:
                stmts.append(s)
                todo += sorted(
                    {m.id for m in ast.walk(s.value) if isinstance(m, ast.Name)}
                    if isinstance(s, ast.Assign)
                    else set()
                )
            continue
        if n in kinds or n in parent.arrays:
            need.append(n)
            continue
        if n in parent.device or any(
            isinstance(t, ast.Name) and t.id == n
            for s in body
            for t in ast.walk(s)
            if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
        ):
            return f"it reads {n}, which the Python before it computes"
    order = [p for p in kinds if p in need] + [a for a in need if a not in kinds]
    dummy: dict[str, Any] = {}
    for n in order:
        p = kinds.get(n)
        if p is not None and p.kind == "scalar":
            dummy[n] = (
                {"float64": 1.0, "int64": 1, "bool": True}.get(p.dtype, 1.0)
                if p.weak
                else np.dtype(p.dtype).type(1)
            )
            continue
        a = parent.arrays[n]
        dummy[n] = np.zeros((1,) * a.ndim, a.dtype)
    stmts.sort(key=lambda s: body.index(s) if s in body else 0)
    made = ast.parse(f"def {name}({', '.join(order)}):\n    pass\n").body[0]
    assert isinstance(made, ast.FunctionDef)
    made.body = [*stmts, nest]
    ast.copy_location(made, nest)
    ast.fix_missing_locations(made)
    return made, dummy


def signature(
    text: str, function: str, example: Mapping[str, Any] | None = None
) -> tuple[tuple[Param, ...], tuple[tuple[str, str], ...]] | str:
    """A function's parameters (dtypes, dimensions, the sizes that name them) and the sizes it binds,
    whatever its loops are -- what a model's kernel for a refused function is held to -- or why not."""
    module = ast.parse(text)
    fn = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if fn is None:
        return f"no top-level function named {function}"
    f = _Function(fn, text, example or {})
    try:
        f._params()
        body = list(fn.body)
        f._infer_dtypes(body)
        for s in body:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and not f._element_statement(s):
                with contextlib.suppress(Unliftable):
                    if f._size_expr(s.value) is not None or isinstance(s.targets[0], ast.Tuple):
                        f._assign(s.targets[0], s.value, s)
        labels = f._dims()
    except Unliftable as err:
        return err.reason
    params = tuple(
        Param(p.name, p.kind, p.dtype, p.ndim,
              tuple(labels.get(f"{p.name}.shape[{k}]", f"{p.name}.shape[{k}]") for k in range(p.ndim)),
              p.dtype_from, p.weak, f._index_bound(p.name, labels))
        for p in f.params
    )  # fmt: skip
    return params, tuple(f.host_expr.items())


# --------------------------------------------------------------------------- types of parameters


def _annotation(node: ast.expr | None) -> tuple[str, str | None, bool]:
    """(kind, dtype, weak) an annotation says: ("array", "float32" | None, False), ("scalar", ...), or
    ("", None, False) when it says nothing porter reads."""
    if node is None:
        return "", None, False
    text = ast.unparse(node).replace(" ", "")
    if text in ("float",):
        return "scalar", "float64", True
    if text in ("int",):
        return "scalar", "int64", True
    if text in ("bool",):
        return "scalar", "bool", True
    tail = text.split(".")[-1]
    if tail in DTYPE_NAMES and "[" not in text:
        return "scalar", DTYPE_NAMES[tail], False
    if text.split("[")[0].split(".")[-1] in ("ndarray", "NDArray", "ArrayLike"):
        dtype = None
        if "[" in text:
            inner = text[text.index("[") + 1 : text.rindex("]")].split(",")[-1]
            inner = inner.split("[")[-1].rstrip("]").split(".")[-1]
            dtype = DTYPE_NAMES.get(inner)
            if inner in ("float",):
                dtype = "float64"
            elif inner in ("int",):
                dtype = "int64"
        return "array", dtype, False
    return "", None, False


def _dtype_of(node: ast.expr | None, arrays: Mapping[str, Array]) -> str | None:
    """A dtype= argument: np.float32, "float32", float, int, bool, or another array's x.dtype."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return DTYPE_NAMES.get(node.value)
    if isinstance(node, ast.Name):
        return {"float": "float64", "int": "int64", "bool": "bool"}.get(node.id)
    if isinstance(node, ast.Attribute):
        if node.attr == "dtype" and isinstance(node.value, ast.Name) and node.value.id in arrays:
            return arrays[node.value.id].dtype
        return DTYPE_NAMES.get(node.attr)
    return None


# --------------------------------------------------------------------------- the function


@dataclass
class _Out:
    steps: list[Step] = field(default_factory=list)
    kernels: list[Any] = field(default_factory=list)
    temporaries: list[Local] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    reorders: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Function:
    def __init__(self, fn: ast.FunctionDef, text: str, example: Mapping[str, Any]):
        self.fn, self.text, self.example = fn, text, example
        self.name = fn.name
        self.arrays: dict[str, Array] = {}
        self.shapes: dict[str, list[str]] = {}  # array -> host expression per dimension
        self.host: dict[str, T] = {}
        self.host_expr: dict[str, str] = {}  # size / host value -> its expression (sizes, in order)
        self.device: dict[str, tuple[str, T]] = {}
        self.params: list[Param] = []
        self.locals: list[Local] = []
        self.out = _Out()
        self.count = 0
        self.returns = ""
        self.index_bounds: dict[str, str] = {}
        self.fixed: list[ast.For] = []  # sequential loops run on the host around the nest being lifted
        self.transforming = False  # lifting a nest a transformation made: no further transformation

    # ------------------------------------------------------------------ entry

    def lift(self) -> Lifted:
        self._params()
        body = list(self.fn.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        self._infer_dtypes(body)
        pending: list[ast.stmt] = []  # consecutive element statements outside loops: one kernel
        for s in body:
            if self._element_statement(s):
                pending.append(s)
                continue
            self._flush(pending)
            pending = []
            self._statement(s)
        self._flush(pending)
        if not self.out.kernels:
            raise Unliftable(self.fn.lineno, "no loop over range() to lift")
        labels = self._dims()
        params = tuple(
            Param(p.name, p.kind, p.dtype, p.ndim, tuple(labels.get(f"{p.name}.shape[{k}]", f"{p.name}.shape[{k}]") for k in range(p.ndim)),
                  p.dtype_from, p.weak, self._index_bound(p.name, labels))
            for p in self.params
        )  # fmt: skip
        return Lifted(
            function=self.name,
            line=self.fn.lineno,
            patterns=tuple(dict.fromkeys(self.out.patterns)),
            params=params,
            sizes=tuple(self.host_expr.items()),
            locals=tuple(self.locals),
            kernels=tuple(self.out.kernels),
            steps=tuple(self.out.steps),
            returns=self.returns,
            temporaries=tuple(self.out.temporaries),
            notes=tuple(self.out.notes),
            reorders=tuple(dict.fromkeys(self.out.reorders)),
            writes=tuple(self._written()),
            source=ast.get_source_segment(self.text, self.fn) or ast.unparse(self.fn),
        )

    def _params(self) -> None:
        a = self.fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise Unliftable(self.fn.lineno, "*args, **kwargs and keyword-only parameters are Python objects")
        for arg in a.args:
            if arg.arg == "self":
                raise Unliftable(self.fn.lineno, "a method: its object is a Python object")
            kind, dtype, weak = _annotation(arg.annotation)
            source = "annotation"
            given = self.example.get(arg.arg)
            if given is not None:
                if isinstance(given, np.ndarray):
                    kind, dtype, weak, source = "array", given.dtype.name, False, "example"
                elif isinstance(given, (bool, int, float, np.generic)):
                    kind = "scalar"
                    if isinstance(given, np.generic):
                        dtype, weak = given.dtype.name, False
                    else:
                        dtype, weak = (
                            (
                                "bool"
                                if isinstance(given, bool)
                                else "int64"
                                if isinstance(given, int)
                                else "float64"
                            ),
                            True,
                        )
                    source = "example"
                else:
                    raise Unliftable(
                        self.fn.lineno,
                        f"the example's {arg.arg} is a {type(given).__name__}, not an array or a number",
                    )
            if not kind:
                kind = "array" if self._subscripted(arg.arg) else "scalar"
                source = "inferred"
            if dtype is not None and dtype not in ("float32", "float64", "int32", "int64", "bool"):
                raise Unliftable(
                    self.fn.lineno, f"{arg.arg} has dtype {dtype}: porter lifts float32/64, int32/64 and bool"
                )
            if kind == "array":
                ndim = given.ndim if isinstance(given, np.ndarray) else self._ndim(arg.arg)
                self.params.append(Param(arg.arg, "array", dtype or "", ndim, (), source))
            else:
                if dtype is None:
                    dtype, weak = ("int64", True) if self._used_as_int(arg.arg) else ("float64", True)
                    source = "inferred"
                self.params.append(Param(arg.arg, "scalar", dtype, 0, (), source, weak))

    def _written(self) -> list[str]:
        """Arrays whose elements the function writes, and those that trade places with them."""
        found: list[str] = []
        for array, _, _, _ in _writes(self.fn.body):
            if array in self.arrays and array not in found:
                found.append(array)
        for n in ast.walk(self.fn):
            if isinstance(n, ast.Assign) and _is_swap(n):
                tgt = n.targets[0]
                assert isinstance(tgt, ast.Tuple)
                for e in tgt.elts:
                    if isinstance(e, ast.Name) and e.id not in found:
                        found.append(e.id)
        return found

    def _dims(self) -> dict[str, str]:
        """Which array dimensions are one size: ``A.shape[k]`` -> its label (a size name the function
        binds, else the first dimension of its group).  Dimensions meet through ``n = x.shape[0]``,
        locals allocated with a size, and loops: ``a[i]`` with ``i in range(1, n - 1)`` makes ``a``'s
        first dimension ``n``."""
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            parent.setdefault(x, x)
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra

        def norm(e: ast.expr) -> str | None:
            return shifted(e)[0]

        def shifted(e: ast.expr) -> tuple[str | None, int]:
            """A bound as (the size it names, the constant added to it): ``n + 1`` -> (n, 1)."""
            offset = 0
            while (
                isinstance(e, ast.BinOp)
                and isinstance(e.op, (ast.Add, ast.Sub))
                and isinstance(e.right, ast.Constant)
            ):
                c = e.right.value
                offset += (c if isinstance(e.op, ast.Add) else -c) if isinstance(c, int) else 0
                e = e.left
            if isinstance(e, ast.Name) and e.id in self.host_expr:
                return e.id, offset
            size = self._size_expr(e)
            return (size.replace(".size", ".shape[0]") if size else None), offset

        names = list(self.host_expr)
        for n in names:
            expr = self.host_expr[n]
            if ".shape[" in expr or expr.endswith(".size"):
                union(n, expr.replace(".size", ".shape[0]"))
        for arr, dims in self.shapes.items():
            for k, d in enumerate(dims):
                key = f"{arr}.shape[{k}]"
                find(key)
                try:
                    parsed = ast.parse(d, mode="eval").body
                except SyntaxError:
                    continue
                other = norm(parsed) if not isinstance(parsed, ast.BinOp) else None
                if other is not None and other != key:
                    union(other, key)
        stops: dict[str, ast.expr] = {}
        for loop in (n for n in ast.walk(self.fn) if isinstance(n, ast.For)):
            try:
                var, start, stop, step = range_of(loop)
            except Unliftable:
                continue
            by = deps._const(step)
            stops[var] = start if by is not None and by < 0 else stop  # range(n - 2, 0, -1): below n
        # an extent a size plus a constant (``H[i, j]`` over ``range(n + 1)``): n + 1, unless the array's
        # dimension meets a size otherwise
        beyond: dict[str, tuple[str, int]] = {}
        for node in ast.walk(self.fn):
            if not isinstance(node, ast.Subscript) or isinstance(node.value, ast.Subscript):
                continue
            array, index = deps.subscript_parts(node)
            if array not in self.arrays:
                continue
            for k, e in enumerate(index):
                vars_in = [m.id for m in ast.walk(e) if isinstance(m, ast.Name) and m.id in stops]
                if len(vars_in) == 1 and _unit_offset(e, vars_in[0]):
                    bound, offset = shifted(stops[vars_in[0]])
                    if bound is not None and offset > 0:
                        beyond.setdefault(f"{array}.shape[{k}]", (bound, offset))
                    elif bound is not None:
                        union(f"{array}.shape[{k}]", bound)
        labels: dict[str, str] = {}
        groups: dict[str, list[str]] = {}
        for key in list(parent):
            groups.setdefault(find(key), []).append(key)
        for members in groups.values():
            named = [m for m in names if m in members]
            label = named[0] if named else sorted(members, key=lambda m: (m not in parent, m))[0]
            for m in members:
                labels[m] = label
        for key, (bound, offset) in beyond.items():
            if len(groups.get(find(key), [key])) == 1 and labels.get(key, key) == key:
                labels[key] = f"{labels.get(bound, bound)} + {offset}"
        return labels

    def _index_bound(self, name: str, labels: Mapping[str, str]) -> str | None:
        """The size an int array's values index (``hist[x[i]]``: x's values lie in [0, len(hist)))."""
        for n in ast.walk(self.fn):
            if isinstance(n, ast.Subscript) and not isinstance(n.value, ast.Subscript):
                array, index = deps.subscript_parts(n)
                for k, e in enumerate(index):
                    if any(
                        isinstance(m, ast.Subscript) and deps.subscript_parts(m)[0] == name
                        for m in ast.walk(e)
                    ):
                        key = f"{array}.shape[{k}]"
                        return labels.get(key, key)
        return None

    def _subscripted(self, name: str) -> bool:
        return any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name
                   for n in ast.walk(self.fn))  # fmt: skip

    def _used_as_int(self, name: str) -> bool:
        for n in ast.walk(self.fn):
            if (
                isinstance(n, ast.Call)
                and _callee(n.func)[1] in ("range", "prange")
                and any(isinstance(x, ast.Name) and x.id == name for a in n.args for x in ast.walk(a))
            ):
                return True
        return False

    def _ndim(self, name: str) -> int:
        """Dimensions of an array parameter, from ``n, m = x.shape`` or how it is indexed."""
        for n in ast.walk(self.fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Tuple):
                v = n.value
                if (
                    isinstance(v, ast.Attribute)
                    and v.attr == "shape"
                    and isinstance(v.value, ast.Name)
                    and v.value.id == name
                ):
                    return len(n.targets[0].elts)
        for n in ast.walk(self.fn):
            if isinstance(n, ast.Subscript) and not isinstance(getattr(n, "ctx", None), ast.Del):
                chain: list[ast.expr] = []
                base: ast.expr = n
                while isinstance(base, ast.Subscript):
                    sl = base.slice
                    chain[:0] = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
                    base = base.value
                if (
                    isinstance(base, ast.Name)
                    and base.id == name
                    and base is n.value
                    or (isinstance(base, ast.Name) and base.id == name and isinstance(n.value, ast.Subscript))
                ):
                    return len(chain)
        return 1

    def _infer_dtypes(self, body: list[ast.stmt]) -> None:
        """Arrays whose dtype nothing said: an int array when its elements index another array (its
        values then drawn as valid indices), else float64 (NumPy's default), each noted."""
        index_of: dict[str, str] = {}
        for n in ast.walk(self.fn):
            if isinstance(n, ast.Subscript):
                sl = n.slice
                parts = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
                target = n.value.id if isinstance(n.value, ast.Name) else None
                for part in parts:
                    for m in ast.walk(part):
                        if isinstance(m, ast.Subscript) and isinstance(m.value, ast.Name) and target:
                            index_of.setdefault(m.value.id, target)
        fixed = []
        for p in self.params:
            if p.kind == "array" and not p.dtype:
                if p.name in index_of:
                    p = Param(p.name, p.kind, "int64", p.ndim, p.shape, "inferred")
                    self.out.notes.append(
                        f"{p.name}: no dtype given; int64, as its values index {index_of[p.name]}"
                    )
                else:
                    p = Param(p.name, p.kind, "float64", p.ndim, p.shape, "assumed")
                    self.out.notes.append(
                        f"{p.name}: no dtype given (annotate NDArray[np.float32] or use --example); float64 assumed"
                    )
            if p.kind == "array" and p.name in index_of:
                self.index_bounds[p.name] = index_of[p.name]
            fixed.append(p)
            if p.kind == "array":
                self.arrays[p.name] = Array(p.name, p.dtype, p.ndim)
                self.shapes[p.name] = [f"{p.name}.shape[{k}]" for k in range(p.ndim)]
            else:
                self.host[p.name] = T(p.dtype, p.weak)
        self.params = fixed

    # ------------------------------------------------------------------ statements

    def _statement(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Pass):
            return
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            self._assign(s.targets[0], s.value, s)
            return
        if isinstance(s, ast.AnnAssign) and s.value is not None:
            self._assign(s.target, s.value, s)
            return
        if isinstance(s, ast.For):
            self._for(s)
            return
        if isinstance(s, ast.Return):
            self._return(s)
            return
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and s.target.id in self.device:
            self._device_value(
                s.target.id, ast.BinOp(left=ast.Name(s.target.id, ast.Load()), op=s.op, right=s.value), s
            )
            return
        if isinstance(s, ast.While):
            raise Unliftable(
                s.lineno, "a while loop: how often it runs depends on data, so it stays sequential"
            )
        if isinstance(s, ast.If):
            raise Unliftable(s.lineno, "a branch around the function's loops runs on the host: not lifted")
        if isinstance(s, ast.Expr):
            Body(self._scope(), self.name).expr(s.value)
            raise Unliftable(s.lineno, f"{ast.unparse(s)[:50]} computes a value and drops it")
        raise Unliftable(s.lineno, f"{type(s).__name__} statements are not lifted ({ast.unparse(s)[:50]})")

    def _element_statement(self, s: ast.stmt) -> bool:
        """An assignment to an array element outside any loop (``out[0] = x[0]``)."""
        target = (
            s.targets[0]
            if isinstance(s, ast.Assign) and len(s.targets) == 1
            else (s.target if isinstance(s, ast.AugAssign) else None)
        )
        return isinstance(target, ast.Subscript)

    def _flush(self, stmts: list[ast.stmt]) -> None:
        if not stmts:
            return
        built = K.single(
            self._kname("first" if not self.out.kernels else "step"),
            stmts,
            self._scope(),
            self.name,
            stmts[0].lineno,
        )
        self._add(built, "statements")

    def _assign(self, target: ast.expr, value: ast.expr, s: ast.stmt) -> None:
        line = s.lineno
        if isinstance(target, ast.Tuple):
            self._tuple_assign(target, value, line)
            return
        if not isinstance(target, ast.Name):
            raise Unliftable(
                line, f"assignment to {ast.unparse(target)} (an attribute) touches a Python object"
            )
        name = target.id
        if name in self.arrays or name in self.host or name in self.device:
            if name in self.device:
                self._device_value(name, value, s)
                return
            raise Unliftable(
                line,
                f"{name} is assigned again: porter lifts functions whose sizes, values and arrays are set once",
            )
        size = self._size_expr(value)
        if size is not None:
            self.host[name], self.host_expr[name] = PY_INT, size
            return
        alloc = self._allocation(name, value, line)
        if alloc is not None:
            self.locals.append(alloc)
            self.arrays[name] = Array(name, alloc.dtype, len(alloc.shape))
            self.shapes[name] = list(alloc.shape)
            return
        t = self._host_type(value)
        if t is not None:
            self.host[name], self.host_expr[name] = t, ast.unparse(value)
            return
        self._device_value(name, value, s)

    def _tuple_assign(self, target: ast.Tuple, value: ast.expr, line: int) -> None:
        names = [e.id for e in target.elts if isinstance(e, ast.Name)]
        if len(names) != len(target.elts):
            raise Unliftable(line, "unpacking into something that is not a name")
        v = value
        if (
            isinstance(v, ast.Attribute)
            and v.attr == "shape"
            and isinstance(v.value, ast.Name)
            and v.value.id in self.arrays
        ):
            array = v.value.id
            if len(names) != self.arrays[array].ndim:
                raise Unliftable(line, f"{array} has {self.arrays[array].ndim} dimensions, not {len(names)}")
            for k, n in enumerate(names):
                self.host[n], self.host_expr[n] = PY_INT, f"{array}.shape[{k}]"
                self.shapes[array][k] = n
            return
        raise Unliftable(
            line,
            f"{ast.unparse(target)} = {ast.unparse(value)[:40]}: only `a, b = b, a` between time steps and `n, m = x.shape` are lifted",
        )

    def _size_expr(self, value: ast.expr) -> str | None:
        v = value
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute) and v.value.attr == "shape":
            base = v.value.value
            if isinstance(base, ast.Name) and base.id in self.arrays and isinstance(v.slice, ast.Constant):
                k = v.slice.value
                if isinstance(k, int) and -self.arrays[base.id].ndim <= k < self.arrays[base.id].ndim:
                    return f"{base.id}.shape[{k % self.arrays[base.id].ndim}]"
        if isinstance(v, ast.Call) and _callee(v.func) == (None, "len") and len(v.args) == 1:
            a = v.args[0]
            if isinstance(a, ast.Name) and a.id in self.arrays:
                return f"{a.id}.shape[0]"
        if (
            isinstance(v, ast.Attribute)
            and v.attr == "size"
            and isinstance(v.value, ast.Name)
            and v.value.id in self.arrays
        ):
            return f"{v.value.id}.size"
        return None

    def _host_type(self, value: ast.expr) -> T | None:
        """The type of a value the host can compute (constants, sizes, scalar parameters, host values,
        math of them), or None when it needs the device (a reduction's result, an array element)."""
        for n in ast.walk(value):
            if isinstance(n, ast.Name) and n.id in self.device:
                return None
            if isinstance(n, ast.Subscript) and self._size_expr(n) is None:
                return None
            if isinstance(n, ast.Name) and n.id in self.arrays and not self._in_size(value, n):
                return None
        try:
            scope = Scope(dict(self.arrays), dict(self.host), {})
            _, t = Body(scope, self.name).expr(value)
        except Unliftable:
            if _is_float_inf(value):
                return PY_FLOAT
            return None
        return t

    def _in_size(self, value: ast.expr, name: ast.Name) -> bool:
        """`name` (an array) appears in `value` only as ``x.shape[k]``, ``len(x)`` or ``x.size``."""
        for n in ast.walk(value):
            sized = isinstance(n, (ast.Subscript, ast.Call, ast.Attribute)) and self._size_expr(n) is not None
            if sized and any(m is name for m in ast.walk(n)):
                return True
        return False

    def _allocation(self, name: str, value: ast.expr, line: int) -> Local | None:
        if not isinstance(value, ast.Call):
            return None
        module, fn = _callee(value.func)
        kw = {k.arg: k.value for k in value.keywords if k.arg}
        if (
            module is not None
            and module not in NUMPY
            and fn == "copy"
            and module in self.arrays
            and not value.args
        ):
            src = module
            return Local(name, self.arrays[src].dtype, tuple(self.shapes[src]), f"copy:{src}", line)
        if module not in NUMPY or fn not in ALLOCATORS:
            return None
        if fn.endswith("_like") or fn == "copy":
            if (
                not value.args
                or not isinstance(value.args[0], ast.Name)
                or value.args[0].id not in self.arrays
            ):
                raise Unliftable(line, f"np.{fn}() of something that is not an array of the function")
            src = value.args[0].id
            dtype = _dtype_of(kw.get("dtype"), self.arrays) or self.arrays[src].dtype
            fill = {
                "zeros_like": "zeros",
                "empty_like": "empty",
                "ones_like": "ones",
                "copy": f"copy:{src}",
            }.get(fn)
            if fn == "full_like":
                fill = f"full:{ast.unparse(value.args[1])}" if len(value.args) > 1 else None
            if fill is None:
                raise Unliftable(line, f"np.{fn}() without its fill value")
            return Local(name, dtype, tuple(self.shapes[src]), fill, line)
        if not value.args:
            raise Unliftable(line, f"np.{fn}() without a shape")
        shape_node = value.args[0]
        dims = list(shape_node.elts) if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
        shape = []
        for d in dims:
            t = self._host_type(d)
            if t is None or not t.is_int:
                raise Unliftable(line, f"the shape {ast.unparse(shape_node)} is not sizes the host knows")
            shape.append(ast.unparse(d))
        dtype_node = kw.get("dtype") or (
            value.args[2]
            if fn == "full" and len(value.args) > 2
            else value.args[1]
            if fn != "full" and len(value.args) > 1
            else None
        )
        dtype = _dtype_of(dtype_node, self.arrays) or "float64"
        if dtype not in ("float32", "float64", "int32", "int64", "bool"):
            raise Unliftable(line, f"an array of dtype {dtype}")
        fill = fn if fn != "full" else f"full:{ast.unparse(value.args[1])}"
        return Local(name, dtype, tuple(shape), fill, line)

    def _device_value(self, name: str, value: ast.expr, s: ast.stmt) -> None:
        """A scalar computed from device data (a reduction's result, an element): one thread writes it
        into its one-element buffer."""
        scope = self._scope()
        _, t = Body(scope, self.name).expr(value)
        if name in self.device:
            buffer, have = self.device[name]
            t = have
        else:
            buffer = f"__s_{name}"
            self.out.temporaries.append(Local(buffer, t.dtype, ("1",), "zeros", s.lineno))
            self.device[name] = (buffer, T(t.dtype))
        store = ast.Assign(
            targets=[ast.Subscript(ast.Name(buffer, ast.Load()), ast.Constant(0), ast.Store())], value=value
        )
        ast.copy_location(store, s)
        for n in ast.walk(store):
            ast.copy_location(n, s)
        scope = self._scope()
        scope.arrays[buffer] = Array(buffer, t.dtype, 1)
        built = K.single(self._kname("value"), [store], scope, self.name, s.lineno)
        self.shapes[buffer] = ["1"]
        self._add(built, "statements")

    def _return(self, s: ast.Return) -> None:
        v = s.value
        if v is None:
            return
        if isinstance(v, ast.Name) and v.id in self.arrays:
            self.returns = v.id
            return
        if isinstance(v, ast.Name) and v.id in self.device:
            self.returns = f"scalar:{self.device[v.id][0]}"
            return
        if isinstance(v, ast.Tuple):
            raise Unliftable(s.lineno, "it returns several values (a tuple): porter lifts one result")
        if self._host_type(v) is not None:
            raise Unliftable(s.lineno, "it returns a value the loops do not compute")
        self._device_value("__result", v, s)
        self.returns = f"scalar:{self.device['__result'][0]}"

    # ------------------------------------------------------------------ loops

    def _for(self, s: ast.For) -> None:
        """A loop nest: as it is written when its pattern allows; else, where the exact dependences
        prove it legal, distributed (a nest per statement, a reduction loop moved inside), or run as a
        sequential loop on the host around the parallel nests of its body (a kernel per nest per step)."""
        saved = self._save()
        try:
            self._nest_as_written(s)
            return
        except Unliftable as err:
            if self.transforming:
                raise
            first = err
        tried: list[Unliftable] = []
        for strategy in (
            self._distributed,
            self._sequential,
            self._row_kernel,
            self._guarded,
            self._wavefront,
        ):
            self._load(saved)
            try:
                strategy(s)
                return
            except Unliftable as err:
                tried.append(err)
        self._load(saved)
        if getattr(tried[4], "skew", False):
            raise tried[4]  # a 2-D nest no loop of which is parallel, and no diagonal sweep either: why
        sequential = tried[1]
        try:
            model = self._nest([s])
        except deps.NonAffine:
            raise first from None
        var = range_of(s)[0]
        exact = sequential.reason.startswith(("loop-carried dependence: ", "dependence: "))
        if not model.parallel(var) and getattr(sequential, "step", False) and exact:
            raise Unliftable(
                sequential.line,
                f"{var} runs in order (sequential in {var}); at each {var}: {sequential.reason}",
            ) from None
        raise first

    def _save(self) -> tuple[Any, ...]:
        return copy.copy(
            (dict(self.arrays), {k: list(v) for k, v in self.shapes.items()}, dict(self.host),
             dict(self.host_expr), dict(self.device), list(self.params), list(self.locals),
             _Out(*(list(getattr(self.out, f)) for f in ("steps", "kernels", "temporaries", "patterns", "reorders", "notes"))),
             self.count, self.returns, dict(self.index_bounds))
        )  # fmt: skip

    def _load(self, state: tuple[Any, ...]) -> None:
        (arrays, shapes, host, host_expr, device, params, locals_, out, count, returns, bounds) = state
        self.arrays, self.shapes, self.host, self.host_expr = (
            dict(arrays),
            copy.deepcopy(shapes),
            dict(host),
            dict(host_expr),
        )
        self.device, self.params, self.locals = dict(device), list(params), list(locals_)
        self.out = _Out(
            *(
                list(getattr(out, f))
                for f in ("steps", "kernels", "temporaries", "patterns", "reorders", "notes")
            )
        )
        self.count, self.returns, self.index_bounds = count, returns, dict(bounds)  # fmt: skip

    def _nest(self, body: Sequence[ast.stmt], around: Sequence[ast.For] = ()) -> deps.Nest:
        """The exact model of `body`, the host's integers as parameters (`around`: loops of an enclosing
        kernel, their variables fixed there, in their ranges); raises deps.NonAffine."""
        params: dict[str, bool] = {}
        for name, t in self.host.items():
            if t.is_int:
                expr = self.host_expr.get(name, "")
                params[name] = ".shape[" in expr or expr.endswith(".size")
        return deps.Nest(body, self.arrays, params, fixed=[*self.fixed, *around])

    def _distributed(self, s: ast.For) -> None:
        """Each statement of the nest in a nest of its own, in order, the loops its written element
        names outside the others (a reduction loop moved inside) -- when the dependences allow both."""
        try:
            model = self._nest([s])
        except deps.NonAffine as err:
            raise Unliftable(err.line, err.reason) from None
        if len(model.statements) < 2 and all(
            [lp.var for lp in st.loops] == self._write_first(st) for st in model.statements
        ):
            raise Unliftable(s.lineno, "nothing to distribute or interchange")
        bad = model.distribution_violation()
        if bad is not None:
            raise Unliftable(bad.target.line, "not distributable: " + model.explain(bad))
        for st in model.statements:
            if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) for n in ast.walk(st.node)):
                raise Unliftable(
                    st.node.lineno, f"{st.target}: a scalar carries a value between the nest's statements"
                )
        nodes = {id(n): n for n in ast.walk(s) if isinstance(n, ast.For)}
        nests: list[ast.For] = []
        for st in model.statements:
            loops = [nodes[lp.node_id] for lp in st.loops]
            order = self._write_first(st)
            if order != [lp.var for lp in st.loops] and self._interchangeable(model, st, loops, order):
                byvar = {range_of(x)[0]: x for x in loops}
                loops = [byvar[v] for v in order]
            nests.append(_wrap(loops, [_copy(st.node)])[0])  # type: ignore[arg-type]
        self.transforming = True
        try:
            for nest in nests:
                self._for(nest)
        finally:
            self.transforming = False
        self.out.notes.append(
            f"line {s.lineno}: the nest is distributed into {len(nests)} nests (legal by its exact dependences)"
        )

    def _write_first(self, st: deps.Statement) -> list[str]:
        """The statement's loops, those its written element names first (in their order), then the rest."""
        names = [lp.var for lp in st.loops]
        written = next((a for a in st.accesses if a.write), None)
        if written is None:
            return names
        node = st.node
        index: list[ast.expr] = []
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []  # fmt: skip
        for tg in targets:
            if isinstance(tg, ast.Subscript):
                index = deps.subscript_parts(tg)[1]
                break
        inside = {n.id for e in index for n in ast.walk(e) if isinstance(n, ast.Name)}
        return [v for v in names if v in inside] + [v for v in names if v not in inside]

    def _interchangeable(
        self, model: deps.Nest, st: deps.Statement, loops: list[ast.For], order: list[str]
    ) -> bool:
        """Loops of one statement reordered: its own dependences stay forward, and no loop's bounds name a
        loop that would run inside it."""
        if model.interchange_violation(st.index, order) is not None:
            return False
        byvar = {range_of(x)[0]: x for x in loops}
        for k, v in enumerate(order):
            inner = set(order[k + 1 :])
            if any(isinstance(n, ast.Name) and n.id in inner for n in ast.walk(byvar[v].iter)):
                return False
        return True

    def _sequential(self, s: ast.For) -> None:
        """The loop runs on the host, in order, around the nests of its body: each nest judged (and
        launched) at each of its steps, with the loop's variable a parameter."""
        if not any(isinstance(x, ast.For) for x in s.body):
            raise Unliftable(s.lineno, "no nest inside the loop to run per step")
        if self.fixed:
            raise Unliftable(s.lineno, "a sequential loop inside a sequential loop")
        if not self._time_steps(s, indexed=True):
            raise Unliftable(s.lineno, "the loop's body holds statements that do not run as kernels per step")
        self.fixed.append(s)
        try:
            self._repeat(s)
        except Unliftable as err:
            err.step = True  # type: ignore[attr-defined]
            raise
        finally:
            self.fixed.pop()
        self.out.notes.append(
            f"line {s.lineno}: {range_of(s)[0]} runs on the host, a launch per nest per step"
        )

    def _row_kernel(self, s: ast.For) -> None:
        """A thread per iteration of the outermost loops the exact dependences leave parallel (at most
        three, bounds the host knows), each running the rest of the nest in order -- inner loops that
        carry a dependence included (an ADI sweep: ``for i: for j: p[i, j] = f(p[i, j - 1])``).  Legal when
        no dependence has a nonzero distance on those loops: each thread's work is then one iteration's,
        in its original order."""
        chain = [s]
        while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], ast.For):
            chain.append(chain[-1].body[0])
        body = chain[-1].body
        if len(chain) < 2 and not any(isinstance(n, ast.For) for x in body for n in ast.walk(x)):
            raise Unliftable(s.lineno, "no inner loop to run in order inside a thread")
        try:
            model = self._nest([s])
        except deps.NonAffine as err:
            raise Unliftable(err.line, err.reason) from None
        vars_ = [range_of(x)[0] for x in chain]
        rect = self._rectangular(chain)
        n_par = next((k for k in range(min(rect, 3), 0, -1) if model.band_violation(vars_[:k]) is None), 0)
        if n_par == 0:
            bad = model.band_violation(vars_[:1])
            if bad is not None:
                raise Unliftable(bad.target.line, model.explain(bad))
            raise Unliftable(s.lineno, "the outer loop's bounds depend on values the host does not know")
        par, serial = chain[:n_par], chain[n_par:]
        kbody = _wrap(serial, list(body))
        inner = [range_of(n)[0] for x in kbody for n in ast.walk(x) if isinstance(n, ast.For)]
        if not inner:
            raise Unliftable(s.lineno, "no loop left to run in order inside a thread")
        if set(inner) & set(vars_[:n_par]):
            raise Unliftable(s.lineno, "an inner loop reuses the variable of a loop around it")
        outside = set(self.host) | set(self.device) | {p.name for p in self.params}
        for target, _, line in _all_assignments(kbody):
            if isinstance(target, ast.Name) and target.id in outside:
                raise Unliftable(line, f"{target.id} is assigned in the nest, but it lives outside it")
        self._carried_scalars(kbody, vars_[:n_par])
        loops = [K.ploop(x) for x in par]
        order = self._coalescing_order(loops, body)
        built = K.parallel(
            self._kname("rowk"), "row-kernel", order, kbody, self._scope(), self.name, s.lineno
        )
        self._add(built, "row-kernel")
        self.out.notes.append(
            f"line {s.lineno}: a thread per {', '.join(vars_[:n_par])}, each running its "
            f"{', '.join(dict.fromkeys(inner))} loop{'s' if len(set(inner)) > 1 else ''} in order "
            "(legal by its exact dependences)"
        )

    def _guarded(self, s: ast.For) -> None:
        """A step of a min-plus closure (Floyd-Warshall at pivot p: ``T[i, j] = min(T[i, j], T[i, p] +
        T[p, j])``, p the variable of a loop the host runs): the exact dependences make i and j sequential
        only through T[i, p] and T[p, j], which the step writes when j == p or i == p -- and there it
        writes ``min(x, x + T[p, p])``, which is x whenever T[p, p] is not negative (x + d >= x for
        d >= 0 in floating point; a NaN d leaves x too).  So each step is two kernels: one thread checks
        T[p, p] and, when it is negative (a negative cycle), runs the step itself in the Python's order;
        otherwise a thread per (i, j) off row and column p updates its element, in parallel."""
        chain = [s]
        while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], ast.For):
            chain.append(chain[-1].body[0])
        if len(chain) != 2 or len(chain[-1].body) != 1 or self._rectangular(chain) < 2:
            raise Unliftable(s.lineno, "not a min-plus step over two loops")
        stmt = chain[-1].body[0]
        (r, _, _, _), (c, _, _, _) = range_of(chain[0]), range_of(chain[1])
        form = _min_plus(stmt, {r, c})
        if form is None:
            raise Unliftable(stmt.lineno, "not a min-plus step over two loops")
        array, row, col, pivot = form
        if array not in self.arrays or self.arrays[array].dtype not in ("float32", "float64"):
            raise Unliftable(stmt.lineno, f"{array} is not a float array (integer sums may wrap)")
        if pivot not in self.host or not self.host[pivot].is_int or pivot in (r, c):
            raise Unliftable(stmt.lineno, f"{pivot} is not an integer the host knows during the step")
        try:
            model = self._nest([s])
        except deps.NonAffine as err:
            raise Unliftable(err.line, err.reason) from None
        through = {f"{array}[{row}, {pivot}]", f"{array}[{pivot}, {col}]", f"{array}[{row}, {col}]"}
        for d in model.dependences:
            if d.carried and not {d.source.text, d.target.text} <= through:
                raise Unliftable(d.target.line, model.explain(d))
        self.count += 1
        flag = f"__guard{self.count}_{array}"
        self.out.temporaries.append(Local(flag, "int32", ("1",), "zeros", s.lineno))
        tp, tr, tc = f"{array}[{pivot}, {pivot}]", range_of(chain[0]), range_of(chain[1])
        nonempty = f"({ast.unparse(tr[1])}) < ({ast.unparse(tr[2])}) and ({ast.unparse(tc[1])}) < ({ast.unparse(tc[2])})"
        check = ast.parse(f"if {nonempty} and {tp} < 0:\n    {flag}[0] = 1\nelse:\n    {flag}[0] = 0\n").body[
            0
        ]
        assert isinstance(check, ast.If)
        check.body.append(_copy(s))
        guard = ast.parse(f"if {flag}[0] == 0 and {row} != {pivot} and {col} != {pivot}:\n    pass\n").body[0]
        assert isinstance(guard, ast.If)
        guard.body = [_copy(stmt)]
        for made in (check, guard):
            for n in ast.walk(made):
                if not hasattr(n, "lineno") or n.lineno < s.lineno:
                    ast.copy_location(n, s)
        scope = self._scope()
        scope.arrays[flag] = Array(flag, "int32", 1)
        built = K.single(self._kname("check"), [check], scope, self.name, s.lineno)
        self._add(built, "guarded-step")
        scope = self._scope()
        scope.arrays[flag] = Array(flag, "int32", 1)
        loops = [K.ploop(x) for x in chain]
        order = self._coalescing_order(loops, [stmt])
        built = K.parallel(self._kname("step"), "map", order, [guard], scope, self.name, s.lineno)
        self._add(built, "guarded-step")
        self.out.notes.append(
            f"line {s.lineno}: {r} and {c} parallel at each {pivot}, off row and column {pivot}: those "
            f"elements keep their values in the step when {tp} >= 0 (min(x, x + {tp}) is x), which one "
            f"thread checks before each step; when it is negative (a negative cycle) that thread runs the "
            "step in the Python's order"
        )

    def _wavefront(self, s: ast.For) -> None:
        """A 2-D nest neither of whose loops runs in parallel, by anti-diagonals: the host runs the
        diagonals ``d = k * i + j`` in order, a launch each, a thread per cell of the diagonal (its range of
        i computed on the host, so the triangular ends have no idle threads).  Legal when every dependence
        between two iterations goes to a later diagonal (deps.Nest.wavefront: k = 1 for ``H[i - 1, j]``,
        ``H[i, j - 1]``; k = 2 when a cell also reads ``a[i - 1, j + 1]`` or ``a[i + 1, j - 1]``, as an
        in-place nine-point sweep does)."""
        if len(s.body) != 1 or not isinstance(s.body[0], ast.For):
            raise Unliftable(s.lineno, "a wavefront runs a perfect nest of two loops")
        inner_loop = s.body[0]
        body = inner_loop.body
        if any(isinstance(n, (ast.For, ast.While)) for x in body for n in ast.walk(x)):
            raise Unliftable(s.lineno, "a wavefront runs a perfect nest of two loops")
        chain = [s, inner_loop]
        if self._rectangular(chain) < 2:
            raise Unliftable(s.lineno, "a wavefront needs loop bounds the host knows")
        for loop in chain:
            if loop.orelse:
                raise Unliftable(loop.lineno, "for ... else")
            step = range_of(loop)[3]
            if not (isinstance(step, ast.Constant) and step.value == 1):
                raise Unliftable(loop.lineno, "a wavefront over a loop whose step is not 1")
        try:
            model = self._nest([s])
        except deps.NonAffine as err:
            raise Unliftable(err.line, err.reason) from None
        (i, i0, i1, _), (j, j0, j1, _) = range_of(s), range_of(inner_loop)
        if i == j:
            raise Unliftable(inner_loop.lineno, "an inner loop reuses the variable of a loop around it")
        k, bad = model.wavefront(i, j)
        if bad is not None:
            refusal = Unliftable(
                bad.target.line,
                f"{model.explain(bad)}; no wavefront either: no diagonal sweep d = k * {i} + {j} (k from 1 "
                f"to {k}) puts it on a later diagonal",
            )
            refusal.skew = True  # type: ignore[attr-defined]
            raise refusal
        outside = set(self.host) | set(self.device) | {p.name for p in self.params}
        for target, _, line in _all_assignments(body):
            if isinstance(target, ast.Name) and target.id in outside:
                raise Unliftable(line, f"{target.id} is assigned in the nest, but it lives outside it")
        self._carried_scalars(body, [i, j])
        a0, a1, b0, b1 = (f"({ast.unparse(e)})" for e in (i0, i1, j0, j1))
        self.count += 1
        d = f"_porter_d{self.count}"
        ni, nj = f"len(range({a0}, {a1}))", f"len(range({b0}, {b1}))"
        count = f"min(1, {ni}) * min(1, {nj}) * ({k} * ({ni} - 1) + {nj})"
        first = f"{k} * {a0} + {b0}" if k != 1 else f"{a0} + {b0}"
        # the cells of diagonal d: i from ceil((d - (j1 - 1)) / k) to floor((d - j0) / k), within [i0, i1)
        lo = f"max({a0}, -(({b1} - 1 - {d}) // {k}))"
        hi = f"min({a1}, ({d} - {b0}) // {k} + 1)"
        cells = K.PLoop(i, lo, "1", f"max(0, {hi} - {lo})", K.ploop(s).nonneg)
        j_nonneg = isinstance(j0, ast.Constant) and isinstance(j0.value, int) and j0.value >= 0
        skew = K.Skew(j, i, k, d, j_nonneg)
        built = K.parallel(
            self._kname("wavefront"),
            "wavefront",
            [cells],
            list(body),
            self._scope(),
            self.name,
            s.lineno,
            skew,
        )
        self.out.kernels += built.kernels
        self.out.temporaries += built.temporaries
        self.out.steps.append(Repeat(d, count, tuple(built.launches), (), first, "1", "diagonal"))
        self.out.patterns.append("wavefront")
        self.out.notes.append(
            f"line {s.lineno}: a wavefront: the diagonals d = {'' if k == 1 else f'{k} * '}{i} + {j} run in order "
            f"on the host, a launch each, a thread per cell (legal by its exact dependences: each goes to a "
            "later diagonal)"
        )

    def _nest_as_written(self, s: ast.For) -> None:
        chain = [s]
        while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], ast.For):
            chain.append(chain[-1].body[0])
        for loop in chain:
            if loop.orelse:
                raise Unliftable(loop.lineno, "for ... else")
            range_of(loop)
        inner = chain[-1].body
        if len(chain) == 1 and self._time_steps(s):
            self._repeat(s)
            return
        if any(isinstance(x, ast.For) for x in inner):
            self._rows(chain, inner)
            return
        self._flat(chain, inner)

    def _time_steps(self, s: ast.For, indexed: bool = False) -> bool:
        """A sequential loop around parallel nests: its body is loops (and swaps, and resets of
        accumulators), and its variable indexes nothing (`indexed`: it may)."""
        var = range_of(s)[0]
        if not any(isinstance(x, ast.For) for x in s.body):
            return False
        for x in s.body:
            if isinstance(x, ast.For) or _is_swap(x) or isinstance(x, ast.Pass) or self._element_statement(x):
                continue
            if isinstance(x, ast.Assign) and len(x.targets) == 1 and isinstance(x.targets[0], ast.Name):
                continue
            return False
        if indexed:
            return True
        for n in ast.walk(s):
            if isinstance(n, ast.Subscript):
                sl = n.slice
                for part in list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]:
                    if any(isinstance(m, ast.Name) and m.id == var for m in ast.walk(part)):
                        return False
        return True

    def _repeat(self, s: ast.For) -> None:
        var, start, stop, step = range_of(s)
        for e in (start, stop, step):
            if self._host_type(e) is None:
                raise Unliftable(s.lineno, "a time loop whose count is not known on the host")
        before = len(self.out.steps)
        self.host[var] = PY_INT
        swaps: list[tuple[str, str]] = []
        pending: list[ast.stmt] = []
        for x in s.body:
            if self._element_statement(x):
                pending.append(x)
                continue
            self._flush(pending)
            pending = []
            if isinstance(x, ast.For):
                self._for(x)
            elif _is_swap(x):
                assert isinstance(x, ast.Assign)
                tgt = x.targets[0]
                assert isinstance(tgt, ast.Tuple)
                a, b = (e.id for e in tgt.elts if isinstance(e, ast.Name))
                if a not in self.arrays or b not in self.arrays:
                    raise Unliftable(x.lineno, f"{a}, {b} = {b}, {a} swaps something that is not two arrays")
                if self.arrays[a] != Array(a, self.arrays[b].dtype, self.arrays[b].ndim):
                    raise Unliftable(
                        x.lineno, f"{a} and {b} differ in dtype or dimensions: they cannot trade places"
                    )
                swaps.append((a, b))
            elif isinstance(x, ast.Assign):
                name = x.targets[0].id if isinstance(x.targets[0], ast.Name) else ""
                if name not in self.device:  # an accumulator's reset each step: it must be one already
                    if self._host_type(x.value) is None:
                        if not name or name in self.host or name in self.arrays:
                            raise Unliftable(x.lineno, f"{name} is set each step from device data")
                        # ``s = x[i]`` before a reduction into s: one thread writes its buffer each step
                        self._device_value(name, x.value, x)
                        continue
                    self._accumulator_reset(name, x)
                else:
                    self._device_value(name, x.value, x)
        self._flush(pending)
        body = self.out.steps[before:]
        del self.out.steps[before:]
        if any(isinstance(b, Repeat) and b.kind != "diagonal" for b in body):
            raise Unliftable(s.lineno, "a time loop inside a time loop")
        launches = tuple(body)
        self.out.steps.append(Repeat(var, f"len(range({ast.unparse(start)}, {ast.unparse(stop)}, {ast.unparse(step)}))",
                                     launches, tuple(swaps), ast.unparse(start), ast.unparse(step)))  # fmt: skip
        self.out.patterns.append("time-stepping")
        del self.host[var]

    def _accumulator_reset(self, name: str, x: ast.Assign) -> None:
        t = self._host_type(x.value)
        assert t is not None
        buffer = f"__s_{name}"
        self.out.temporaries.append(Local(buffer, t.dtype, ("1",), "zeros", x.lineno))
        self.device[name] = (buffer, T(t.dtype))
        self._device_value(name, x.value, x)

    def _flat(self, chain: list[ast.For], body: list[ast.stmt]) -> None:
        """A nest whose innermost body has no loop: map, stencil, histogram, reduction or scan."""
        loops = [K.ploop(x) for x in chain]
        rect = self._rectangular(chain)
        accs = self._accumulators(chain, body)
        writes = _writes(body)
        vars_ = [lp.var for lp in loops]
        scan = self._scan_form(chain, body, accs, writes)
        if scan is not None:
            self._scan(chain, *scan)
            return
        if accs:
            if writes:
                raise Unliftable(
                    writes[0][2], "the nest both accumulates a scalar and writes arrays (and is not a scan)"
                )
            self._reduction(chain, rect, body, accs)
            return
        atomic: set[str] = set()
        reduce_into: list[tuple[str, int]] = []
        for array, index, line, aug in writes:
            form = _affine(index, vars_)
            present = {v for f in form if f is not None for v in f[0]}
            if all(f is not None for f in form) and present == set(vars_) and _injective(form):
                continue
            if (
                aug
                and all(f is not None for f in form)
                and present < set(vars_)
                and self._outer_prefix(present, vars_)
            ):
                reduce_into.append((array, line))
                continue
            if aug:
                atomic.add(array)
                continue
            raise Unliftable(
                line,
                f"several iterations write the same element of {array} ({array}[{', '.join(ast.unparse(i) for i in index)}]) without accumulating",
            )
        if reduce_into:
            self._reduce_into(chain, body, reduce_into)
            return
        self._dependences(body, writes, vars_, atomic, chain, min(rect, 3))
        self._parallel(chain, rect, body, atomic)

    def _outer_prefix(self, present: set[str], vars_: list[str]) -> bool:
        """The written index holds exactly the outermost loops' variables (a reduction over the rest)."""
        return bool(present) and vars_[: len(present)] == [v for v in vars_ if v in present]

    def _rectangular(self, chain: list[ast.For]) -> int:
        """How many leading loops of the nest have bounds the host knows (no other loop's variable)."""
        n = 0
        for loop in chain:
            _, start, stop, step = range_of(loop)
            if any(self._host_type(e) is None for e in (start, stop, step)):
                break
            n += 1
        return n

    def _scope(self) -> Scope:
        return Scope(dict(self.arrays), dict(self.host), dict(self.device))

    def _kname(self, what: str) -> str:
        self.count += 1
        return f"{self.name}_{what}{self.count}"

    def _add(self, built: K.Built, pattern: str) -> None:
        self.out.kernels += built.kernels
        self.out.steps += built.launches
        self.out.temporaries += built.temporaries
        self.out.patterns.append(pattern)

    # ------------------------------------------------------------------ dependences

    def _exact(
        self, chain: Sequence[ast.For], body: list[ast.stmt], band: Sequence[str]
    ) -> deps.NonAffine | None:
        """Judge the `band` loops of the nest by its exact dependences: raise the first one they carry;
        None when none; the reason when the nest is not affine (the caller's conservative rule decides)."""
        try:
            model = self._nest(_wrap(chain, body))
            bad = model.band_violation(band)
        except deps.NonAffine as err:
            return err
        if bad is not None:
            raise Unliftable(bad.target.line, model.explain(bad))
        return None

    def _dependences(self, body: list[ast.stmt], writes: list[tuple[str, list[ast.expr], int, bool]],
                     vars_: list[str], atomic: set[str], chain: Sequence[ast.For] = (), n_band: int = 0) -> None:  # fmt: skip
        """Reads of an array the nest writes: exact, by the dependences the parallel loops carry, when the
        nest is affine; else they must be of the element the same iteration writes (the conservative rule)."""
        if n_band and not atomic:
            why = self._exact(chain, body, [range_of(x)[0] for x in chain[:n_band]])
            if why is None:
                self._carried_scalars(body, vars_)
                return
            try:
                self._dependences(body, writes, vars_, atomic)
            except Unliftable as err:
                raise Unliftable(err.line, f"{err.reason} -- {why.reason}") from None
            return
        written: dict[str, tuple[tuple[str, ...], int]] = {}
        for array, index, line, _ in writes:
            key = tuple(ast.unparse(i) for i in index)
            if array in written and written[array][0] != key and array not in atomic:
                raise Unliftable(line, f"{array} is written at two different indices in one iteration")
            written.setdefault(array, (key, line))
        for array, index, line in _reads(body):
            if array not in written:
                continue
            if array in atomic:
                if not _only_in_augassign(body, array):
                    raise Unliftable(
                        line, f"{array} is accumulated atomically and also read: the read would race"
                    )
                continue
            key = tuple(ast.unparse(i) for i in index)
            if key != written[array][0]:
                raise Unliftable(
                    line,
                    f"loop-carried dependence: {array}[{', '.join(key)}] reads an element another iteration writes "
                    f"({array}[{', '.join(written[array][0])}], line {written[array][1]}); not an associative scan",
                )
        self._carried_scalars(body, vars_)

    def _carried_scalars(self, body: list[ast.stmt], vars_: list[str]) -> None:
        assigned = {t.id for t, _, _ in _all_assignments(body) if isinstance(t, ast.Name)}
        seen: set[str] = set()
        for s in body:
            for name, line in _reads_before_writes(s, seen):
                if name in assigned:
                    raise Unliftable(
                        line,
                        f"loop-carried dependence through {name}: an iteration reads the value the previous one left",
                    )

    # ------------------------------------------------------------------ patterns

    def _parallel(self, chain: list[ast.For], rect: int, body: list[ast.stmt], atomic: set[str]) -> None:
        n_par = min(rect, 3)
        if n_par == 0:
            raise Unliftable(
                chain[0].lineno, "the outer loop's bounds depend on values the host does not know"
            )
        par = chain[:n_par]
        inner_serial = chain[n_par:]
        kbody = list(body)
        for loop in reversed(inner_serial):
            copy = ast.For(target=loop.target, iter=loop.iter, body=kbody, orelse=[], type_comment=None)
            ast.copy_location(copy, loop)
            kbody = [copy]
        loops = [K.ploop(x) for x in par]
        order = self._coalescing_order(loops, body)
        scope = self._scope()
        scope_atomic(scope, atomic)
        pattern = (
            "histogram" if atomic else ("stencil" if _offset_reads(body, [lp.var for lp in loops]) else "map")
        )
        built = K.parallel(self._kname(pattern), pattern, order, kbody, scope, self.name, chain[0].lineno)
        if atomic and any(self.arrays[a].dtype in ("float32", "float64") for a in atomic):
            self.out.reorders += [a for a in atomic if self.arrays[a].dtype in ("float32", "float64")]
        self._add(built, pattern)

    def _coalescing_order(self, loops: list[K.PLoop], body: list[ast.stmt]) -> list[K.PLoop]:
        """The loops, the one whose variable is the last index of the first array written first (on x),
        then from the innermost out."""
        rest = list(reversed(loops))
        writes = _writes(body)
        if writes:
            last = writes[0][1][-1]
            names = {n.id for n in ast.walk(last) if isinstance(n, ast.Name)}
            fast = next((lp for lp in rest if lp.var in names), None)
            if fast is not None:
                rest.remove(fast)
                rest.insert(0, fast)
        return rest

    def _accumulators(self, chain: list[ast.For], body: list[ast.stmt]) -> list[tuple[str, str]]:
        """Scalars defined before the nest and accumulated in it: (name, operator)."""
        found: dict[str, str] = {}
        for target, value, line in _all_assignments(body):
            if not isinstance(target, ast.Name):
                continue
            name = target.id
            if name not in self.host and name not in self.device:
                continue
            if name in self.host_expr and name not in self._initialisable():
                raise Unliftable(line, f"{name} is assigned inside the loop, but it is a size")
            if any(p.name == name for p in self.params):
                raise Unliftable(
                    line,
                    f"the parameter {name} is accumulated: porter lifts functions that leave scalar parameters as they are",
                )
            op = _reduction_op(name, value)
            if op is None:
                raise Unliftable(
                    line,
                    f"loop-carried dependence through {name}: {ast.unparse(value)[:50]} is not an accumulation (+, *, max, min)",
                )
            if found.get(name, op) != op:
                raise Unliftable(line, f"{name} is accumulated with two operators")
            found[name] = op
        return list(found.items())

    def _initialisable(self) -> set[str]:
        return {n for n in self.host_expr if n not in {p.name for p in self.params}}

    def _device_accumulator(
        self, name: str, op: str, contributions: list[ast.expr], line: int
    ) -> tuple[str, T]:
        """The buffer of accumulator `name` (holding its initial value) and its dtype."""
        if name in self.device:
            return self.device[name]
        init_t = self.host[name]
        scope = self._scope()
        t = init_t
        em = Body(scope, self.name)
        for c in contributions:
            try:
                _, tc = em.expr(c)
            except Unliftable:
                continue
            t = promote(t, tc)
        dtype = T(t.dtype)
        buffer = f"__s_{name}"
        self.out.temporaries.append(Local(buffer, dtype.dtype, ("1",), f"full:{self.host_expr[name]}", line))
        del self.host[name]
        del self.host_expr[name]
        self.device[name] = (buffer, dtype)
        return buffer, dtype

    def _reduction(
        self, chain: list[ast.For], rect: int, body: list[ast.stmt], accs: list[tuple[str, str]]
    ) -> None:
        if rect == 0:
            raise Unliftable(
                chain[0].lineno, "the outer loop's bounds depend on values the host does not know"
            )
        par = chain[:rect]
        kbody = list(body)
        for loop in reversed(chain[rect:]):
            copy = ast.For(target=loop.target, iter=loop.iter, body=kbody, orelse=[], type_comment=None)
            ast.copy_location(copy, loop)
            kbody = [copy]
        self._carried_scalars_except(kbody, [a for a, _ in accs])
        out = []
        for name, op in accs:
            contributions = [
                v for t, v, _ in _all_assignments(body) if isinstance(t, ast.Name) and t.id == name
            ]
            buffer, t = self._device_accumulator(name, op, contributions, chain[0].lineno)
            out.append(K.Acc(name, op, t.dtype, buffer))
            if t.is_float and op == "+":
                self.out.reorders.append(name)
        scope = self._scope()
        for a in out:
            scope.device.pop(a.name, None)
        loops = list(reversed([K.ploop(x) for x in par]))  # innermost fastest in the flattened index
        built = K.reduction(self._kname("reduce"), loops, kbody, out, scope, self.name, chain[0].lineno)
        self._add(built, "reduction")

    def _carried_scalars_except(self, body: list[ast.stmt], accs: list[str]) -> None:
        assigned = {t.id for t, _, _ in _all_assignments(body) if isinstance(t, ast.Name)} - set(accs)
        seen: set[str] = set(accs)
        for s in body:
            for name, line in _reads_before_writes(s, seen):
                if name in assigned:
                    raise Unliftable(line, f"loop-carried dependence through {name}")

    def _reduce_into(
        self, chain: list[ast.For], body: list[ast.stmt], targets: list[tuple[str, int]]
    ) -> None:
        """``y[i] += A[i, j] * x[j]`` over j: a row reduction with a local accumulator per element."""
        names = {t for t, _ in targets}
        writes = _writes(body)
        vars_ = [range_of(x)[0] for x in chain]
        first = None
        for array, index, line, _aug in writes:
            if array not in names:
                raise Unliftable(line, f"{array} is written beside a reduction into {', '.join(names)}")
            if first is None:
                first = (array, index)
            elif (array, [ast.unparse(i) for i in index]) != (first[0], [ast.unparse(i) for i in first[1]]):
                raise Unliftable(line, "a nest reducing into two different elements")
        assert first is not None
        array, index = first
        present = {n.id for i in index for n in ast.walk(i) if isinstance(n, ast.Name) and n.id in vars_}
        n_outer = len(present)
        acc = f"__r_{array}"
        element = ast.Subscript(
            ast.Name(array, ast.Load()),
            ast.Tuple(list(index), ast.Load()) if len(index) > 1 else index[0],
            ast.Load(),
        )
        load = ast.Assign(targets=[ast.Name(acc, ast.Store())], value=element)
        store = ast.Assign(
            targets=[ast.Subscript(ast.Name(array, ast.Load()), element.slice, ast.Store())],
            value=ast.Name(acc, ast.Load()),
        )
        replaced = [_ReplaceTarget(array, acc).visit(_copy(s)) for s in body]
        inner = replaced
        for loop in reversed(chain[n_outer + 1 :]):
            copy = ast.For(target=loop.target, iter=loop.iter, body=inner, orelse=[], type_comment=None)
            ast.copy_location(copy, loop)
            inner = [copy]
        reducing = chain[n_outer]
        loop = ast.For(target=reducing.target, iter=reducing.iter, body=inner, orelse=[], type_comment=None)
        ast.copy_location(loop, reducing)
        for made in (load, store, element, *ast.walk(load), *ast.walk(store)):
            ast.copy_location(made, reducing)
        ast.fix_missing_locations(loop)
        why = self._exact(chain, body, vars_[:n_outer])
        rows: list[ast.stmt] = [load, loop, store]
        n_rect = self._rectangular(chain[:n_outer])
        if 0 < n_rect < n_outer:
            # a triangular element loop (``for j in range(i + 1)``): its threads stride over it inside
            # the block of each rectangular outer iteration, each reducing its own element in order
            rows = _wrap(chain[n_rect:n_outer], rows)
            self.out.notes.append(
                f"line {chain[n_rect].lineno}: a triangular loop, strided by the threads of each row"
            )
            n_outer = n_rect
        self._rows(chain[:n_outer], rows, synthetic=True, judged=(why,))

    def _rows(
        self,
        chain: list[ast.For],
        body: list[ast.stmt],
        synthetic: bool = False,
        judged: tuple[deps.NonAffine | None] | None = None,
    ) -> None:
        """A map over `chain` whose body holds inner loops: a block per outer iteration.  `judged`: the
        caller judged the outer loops by the exact dependences of the nest as written (the result)."""
        rect = self._rectangular(chain)
        if rect < len(chain):
            raise Unliftable(
                chain[rect].lineno,
                "an outer loop whose bounds depend on another loop's variable, around inner loops",
            )
        outer_vars = [range_of(x)[0] for x in chain]
        segments: list[K.Segment] = []
        defined: list[str] = []
        straight: list[ast.stmt] = []
        for s in body:
            if isinstance(s, ast.For):
                if straight:
                    segments.append(K.Segment(tuple(straight)))
                    straight = []
                accs = []
                for target, value, line in _all_assignments(s.body):
                    if isinstance(target, ast.Name) and target.id in defined:
                        op = _reduction_op(target.id, value)
                        if op is None:
                            raise Unliftable(
                                line, f"loop-carried dependence through {target.id} in the inner loop"
                            )
                        accs.append((target.id, op))
                accs = list(dict.fromkeys(accs))
                if len({a for a, _ in accs}) != len(accs):
                    raise Unliftable(s.lineno, "an accumulator with two operators")
                inner_var = range_of(s)[0]
                self._inner_independent(s, outer_vars + [inner_var], [a for a, _ in accs], chain)
                segments.append(K.Segment((), s, tuple(accs)))
                for target, _, _ in _all_assignments(s.body):
                    if (
                        isinstance(target, ast.Name)
                        and target.id not in defined
                        and target.id not in dict(accs)
                    ):
                        pass  # private to an iteration of the inner loop
                continue
            if any(isinstance(n, ast.For) for n in ast.walk(s)):
                raise Unliftable(s.lineno, "an inner loop inside a branch")
            straight.append(s)
            for target, _, _ in _all_assignments([s]):
                if isinstance(target, ast.Name):
                    defined.append(target.id)
        if straight:
            segments.append(K.Segment(tuple(straight)))
        for array, index, line, _ in _writes([x for seg in segments for x in seg.stmts]):
            form = _affine(index, outer_vars)
            present = {v for f in form if f is not None for v in f[0]}
            if not (all(f is not None for f in form) and present == set(outer_vars)):
                raise Unliftable(
                    line,
                    f"{array}[{', '.join(ast.unparse(i) for i in index)}] is not an element of its own outer iteration",
                )
        why = judged[0] if judged is not None else self._exact(chain, body, outer_vars) if chain else None
        if why is not None or not chain:
            try:
                self._row_dependences(body)
            except Unliftable as err:
                raise Unliftable(err.line, f"{err.reason} -- {why.reason}" if why else err.reason) from None
        loops = list(reversed([K.ploop(x) for x in chain]))
        scope = self._scope()
        built = K.rows(
            self._kname("rows"),
            loops,
            segments,
            scope,
            self.name,
            chain[0].lineno if chain else body[0].lineno,
        )
        if any(seg.accs for seg in segments):
            for seg in segments:
                for a, op in seg.accs:
                    if op == "+" and scope.locals.get(a, PY_INT).is_float:
                        self.out.reorders.append(a)
        self._add(built, "row-reduction")

    def _row_dependences(self, body: list[ast.stmt]) -> None:
        """An array a row writes may be read only at the elements that row writes: ``x[i] += x[j]`` over
        ``j < i`` reads what earlier rows left (a dependence between rows, not a reduction)."""
        written: dict[str, set[tuple[str, ...]]] = {}
        for array, index, _, _ in _writes(body):
            written.setdefault(array, set()).add(tuple(ast.unparse(i) for i in index))
        for array, index, line in _reads(body):
            if array in written and tuple(ast.unparse(i) for i in index) not in written[array]:
                mine = ", ".join(f"{array}[{', '.join(k)}]" for k in sorted(written[array]))
                raise Unliftable(
                    line,
                    f"loop-carried dependence: {array}[{', '.join(ast.unparse(i) for i in index)}] reads an element "
                    f"other iterations write ({mine}); not a reduction within one iteration",
                )

    def _inner_independent(
        self, loop: ast.For, vars_: list[str], accs: list[str], around: Sequence[ast.For] = ()
    ) -> None:
        writes = _writes(loop.body)
        inner = vars_[-1]
        for array, index, line, _ in writes:
            form = _affine(index, vars_)
            present = {v for f in form if f is not None for v in f[0]}
            if not (all(f is not None for f in form) and inner in present and _injective(form)):
                raise Unliftable(
                    line,
                    f"{array}[{', '.join(ast.unparse(i) for i in index)}] is written by several iterations of the inner loop",
                )
        try:
            model = self._nest([loop], around)
            bad = next((d for d in model.dependences if inner in d.carried), None)
        except deps.NonAffine as err:
            try:
                self._dependences_inner(loop.body, writes)
            except Unliftable as e:
                raise Unliftable(e.line, f"{e.reason} -- {err.reason}") from None
            bad = None
        else:
            if bad is not None:
                raise Unliftable(bad.target.line, model.explain(bad))
        self._carried_scalars_except(loop.body, accs)

    def _dependences_inner(
        self, body: list[ast.stmt], writes: list[tuple[str, list[ast.expr], int, bool]]
    ) -> None:
        written = {a: tuple(ast.unparse(i) for i in idx) for a, idx, _, _ in writes}
        for array, index, line in _reads(body):
            if array in written and tuple(ast.unparse(i) for i in index) != written[array]:
                raise Unliftable(line, f"loop-carried dependence on {array} in the inner loop")

    # ------------------------------------------------------------------ scans

    def _scan_form(
        self, chain: list[ast.For], body: list[ast.stmt], accs: Any, writes: Any
    ) -> tuple[Any, ...] | None:
        """(out array, term, op, seed, accumulator or None) of a one-loop scan, else None."""
        if len(chain) != 1:
            return None
        var, start, stop, step = range_of(chain[0])
        # out[i] = out[i - 1] op term
        if len(body) == 1 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1:
            s = body[0]
            tgt = s.targets[0]
            if isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name) and _is_var(tgt.slice, var):
                array = tgt.value.id
                prev = f"{array}[{var} - 1]"
                split = _split_op(s.value, prev)
                if split is not None:
                    op, term = split
                    if any(
                        isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == array
                        for n in ast.walk(term)
                    ):
                        return None
                    return (array, term, op, ("element", f"({ast.unparse(start)}) - 1"), None)
        # acc = acc op term; out[i] = acc
        if len(body) == 2 and isinstance(body[1], ast.Assign) and len(accs) == 1:
            acc, op = accs[0]
            s0, s1 = body
            assert isinstance(s1, ast.Assign)
            tgt = s1.targets[0]
            if (isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name) and _is_var(tgt.slice, var)
                    and isinstance(s1.value, ast.Name) and s1.value.id == acc):  # fmt: skip
                value = (
                    s0.value
                    if isinstance(s0, ast.Assign)
                    else ast.BinOp(ast.Name(acc, ast.Load()), s0.op, s0.value)
                    if isinstance(s0, ast.AugAssign)
                    else None
                )
                if value is None:
                    return None
                split = _split_op(value, acc)
                if split is None:
                    return None
                op2, term = split
                return (tgt.value.id, term, op2, ("value", acc), acc)
        return None

    def _scan(
        self,
        chain: list[ast.For],
        array: str,
        term: ast.expr,
        op: str,
        seed: tuple[str, str],
        acc: str | None,
    ) -> None:
        loop = chain[0]
        if self._rectangular(chain) != 1:
            raise Unliftable(loop.lineno, "a scan whose bounds the host does not know")
        step = range_of(loop)[3]
        if not (isinstance(step, ast.Constant) and step.value == 1):
            raise Unliftable(loop.lineno, "a scan with a step other than 1")
        dtype = self.arrays[array].dtype
        final = None
        if acc is not None:
            init = self.host_expr.get(acc)
            if init is None:
                raise Unliftable(loop.lineno, f"the running value {acc} has no initial value the host knows")
            seed = ("value", init)
            buffer = f"__s_{acc}"
            self.out.temporaries.append(Local(buffer, dtype, ("1",), "zeros", loop.lineno))
            del self.host[acc]
            del self.host_expr[acc]
            self.device[acc] = (buffer, T(dtype))
            final = buffer
        scope = self._scope()
        rec = K.Recurrence(array, term, op, dtype, seed, final)
        built = K.scan(self._kname("scan"), K.ploop(loop), rec, scope, self.name, loop.lineno)
        if dtype in ("float32", "float64") and op == "+":
            self.out.reorders.append(array)
        self._add(built, "scan")


# --------------------------------------------------------------------------- helpers


def _module_constants(module: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound once to a number (``SHIFT = 4.0``) or to a NumPy scalar type
    (``DATA_TYPE = np.float64``): what a function's use of them means."""
    found: dict[str, ast.expr] = {}
    bound: dict[str, int] = {}
    for s in module.body:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                bound[n.id] = bound.get(n.id, 0) + 1
    for s in module.body:
        if not (isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None):
            continue
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name) or bound.get(targets[0].id) != 1:
            continue
        v = s.value
        number = isinstance(v, ast.Constant) and type(v.value) in (int, float)
        number = number or (
            isinstance(v, ast.UnaryOp)
            and isinstance(v.op, ast.USub)
            and isinstance(v.operand, ast.Constant)
            and type(v.operand.value) in (int, float)
        )
        dtype = (
            isinstance(v, ast.Attribute)
            and isinstance(v.value, ast.Name)
            and v.value.id in NUMPY
            and v.attr in DTYPE_NAMES
        )
        if number or dtype:
            found[targets[0].id] = v
    return found


class _Plain(ast.NodeTransformer):
    """The Python people write, in the forms the analysis reads: a module constant or dtype alias by its
    value, and a chained assignment ``a = b = v`` (whose value reads none of its targets) as one
    assignment per target."""

    def __init__(self, constants: Mapping[str, ast.expr]):
        self.constants = constants

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.constants:
            made = copy.deepcopy(self.constants[node.id])
            for m in ast.walk(made):
                ast.copy_location(m, node)
            return made
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list[ast.AST]:
        self.generic_visit(node)
        if len(node.targets) < 2:
            return node
        names = {tg.id for tg in node.targets if isinstance(tg, ast.Name)}
        names |= {deps.subscript_parts(tg)[0] or "" for tg in node.targets if isinstance(tg, ast.Subscript)}
        if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node.value)):
            return node  # the value reads a target: left for the translator to refuse
        if any(isinstance(n, ast.Call) for n in ast.walk(node.value)) and not all(
            _callee(c.func)[0] in ("math", *NUMPY)
            or _callee(c.func) in ((None, "abs"), (None, "min"), (None, "max"))
            for c in ast.walk(node.value)
            if isinstance(c, ast.Call)
        ):
            return node  # a call evaluated once, not once per target
        out: list[ast.AST] = []
        for tg in node.targets:
            made = ast.Assign(targets=[tg], value=copy.deepcopy(node.value))
            ast.copy_location(made, node)
            out.append(made)
        return out


def _plain(fn: ast.FunctionDef, constants: Mapping[str, ast.expr]) -> ast.FunctionDef:
    local = {a.arg for a in fn.args.args} | {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    made = _Plain({k: v for k, v in constants.items() if k not in local}).visit(copy.deepcopy(fn))
    assert isinstance(made, ast.FunctionDef)
    return made


def _wrap(chain: Sequence[ast.For], body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` inside copies of the loops of `chain` (outermost first), each at its loop's line."""
    inner = list(body)
    for loop in reversed(chain):
        made = ast.For(target=loop.target, iter=loop.iter, body=inner, orelse=[], type_comment=None)
        ast.copy_location(made, loop)
        inner = [made]
    return inner


def scope_atomic(scope: Scope, arrays: set[str]) -> None:
    scope.atomic = set(arrays)


def _is_swap(s: ast.stmt) -> bool:
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Tuple)):
        return False
    t, v = s.targets[0], s.value
    if not isinstance(v, ast.Tuple) or len(t.elts) != 2 or len(v.elts) != 2:
        return False
    names = [e.id if isinstance(e, ast.Name) else None for e in (*t.elts, *v.elts)]
    return None not in names and names[0] == names[3] and names[1] == names[2]


def _is_float_inf(node: ast.expr) -> bool:
    text = ast.unparse(node).replace(" ", "")
    return text in (
        "float('inf')",
        "-float('inf')",
        'float("inf")',
        '-float("inf")',
        "math.inf",
        "-math.inf",
        "np.inf",
        "-np.inf",
    )


def _is_var(node: ast.expr, var: str) -> bool:
    return isinstance(node, ast.Name) and node.id == var


def _split_op(value: ast.expr, prev: str) -> tuple[str, ast.expr] | None:
    """`value` as ``prev op term`` (or ``term op prev`` for + and *, ``max(prev, term)``): (op, term)."""
    if isinstance(value, ast.BinOp) and type(value.op) in (ast.Add, ast.Mult):
        op = "+" if isinstance(value.op, ast.Add) else "*"
        if ast.unparse(value.left) == prev:
            return op, value.right
        if ast.unparse(value.right) == prev:
            return op, value.left
    if (
        isinstance(value, ast.Call)
        and _callee(value.func) in ((None, "max"), (None, "min"))
        and len(value.args) == 2
    ):
        a, b = value.args
        op = _callee(value.func)[1]
        if ast.unparse(a) == prev:
            return op, b
        if ast.unparse(b) == prev:
            return op, a
    return None


def _reduction_op(name: str, value: ast.expr) -> str | None:
    """The operator of ``name = name op e`` (or ``max(name, e)``), with ``-`` counted as ``+``."""
    if isinstance(value, ast.BinOp) and type(value.op) in REDUCE_OPS:
        left = isinstance(value.left, ast.Name) and value.left.id == name and not _mentions(value.right, name)
        right = (
            isinstance(value.right, ast.Name)
            and value.right.id == name
            and type(value.op) in (ast.Add, ast.Mult)
            and not _mentions(value.left, name)
        )
        if left or right:
            return REDUCE_OPS[type(value.op)]
    if (
        isinstance(value, ast.Call)
        and _callee(value.func) in ((None, "max"), (None, "min"))
        and len(value.args) == 2
    ):
        a, b = value.args
        if (isinstance(a, ast.Name) and a.id == name and not _mentions(b, name)) or (
            isinstance(b, ast.Name) and b.id == name and not _mentions(a, name)
        ):
            return _callee(value.func)[1]
    return None


def _min_plus(stmt: ast.stmt, loops: set[str]) -> tuple[str, str, str, str] | None:
    """(T, i, j, p) of ``T[i, j] = min(T[i, j], T[i, p] + T[p, j])`` (the sum either way round), i and j
    the two loop variables, p a name; else None."""
    if not (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)
    ):
        return None
    array, index = deps.subscript_parts(stmt.targets[0])
    if array is None or len(index) != 2 or not all(isinstance(e, ast.Name) for e in index):
        return None
    row, col = (e.id for e in index if isinstance(e, ast.Name))
    if {row, col} != loops or row == col:
        return None
    v = stmt.value
    if not (
        isinstance(v, ast.Call) and _callee(v.func) == (None, "min") and len(v.args) == 2 and not v.keywords
    ):
        return None
    first, second = v.args
    if ast.unparse(first) != f"{array}[{row}, {col}]" or not (
        isinstance(second, ast.BinOp) and isinstance(second.op, ast.Add)
    ):
        return None
    terms = sorted([ast.unparse(second.left), ast.unparse(second.right)])
    for pivot in {n.id for n in ast.walk(second) if isinstance(n, ast.Name)} - {array, row, col}:
        if terms == sorted([f"{array}[{row}, {pivot}]", f"{array}[{pivot}, {col}]"]):
            return array, row, col, pivot
    return None


def _mentions(node: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _all_assignments(body: Sequence[ast.stmt]) -> list[tuple[ast.expr, ast.expr, int]]:
    found: list[tuple[ast.expr, ast.expr, int]] = []
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    found.append((t, n.value, n.lineno))
            elif isinstance(n, ast.AugAssign):
                v = ast.BinOp(left=_load(n.target), op=n.op, right=n.value)
                ast.copy_location(v, n)
                found.append((n.target, v, n.lineno))
            elif isinstance(n, ast.AnnAssign) and n.value is not None:
                found.append((n.target, n.value, n.lineno))
    return found


def _load(target: ast.expr) -> ast.expr:
    copy = ast.parse(ast.unparse(target), mode="eval").body
    for n in ast.walk(copy):
        ast.copy_location(n, target)
    return copy


def _copy(node: ast.stmt) -> ast.stmt:
    copy = ast.parse(ast.unparse(node)).body[0]
    for a, b in zip(ast.walk(copy), ast.walk(node), strict=False):
        ast.copy_location(a, b)
    return copy


def _writes(body: Sequence[ast.stmt]) -> list[tuple[str, list[ast.expr], int, bool]]:
    """(array, index, line, augmented) of every element assignment."""
    found = []
    for s in body:
        for n in ast.walk(s):
            targets: list[ast.expr] = []
            aug = False
            if isinstance(n, ast.Assign):
                targets = list(n.targets)
            elif isinstance(n, ast.AugAssign):
                targets, aug = [n.target], True
            elif isinstance(n, ast.AnnAssign):
                targets = [n.target]
            else:
                continue
            for t in targets:
                if isinstance(t, ast.Subscript):
                    array, index = deps.subscript_parts(t)
                    if array is not None:
                        if isinstance(n, ast.Assign) and _reads_itself(t, n.value):
                            aug = True
                        found.append((array, index, n.lineno, aug))
    return found


def _reads_itself(target: ast.Subscript, value: ast.expr) -> bool:
    """``h[k] = h[k] + v``: an accumulation written out."""
    return (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, (ast.Add, ast.Sub))
        and ast.unparse(value.left) == ast.unparse(target)
    )


def _reads(body: Sequence[ast.stmt]) -> list[tuple[str, list[ast.expr], int]]:
    found = []
    stores = set()
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                stores.add(id(n))
                inner = n.value
                while isinstance(inner, ast.Subscript):
                    stores.add(id(inner))
                    inner = inner.value
    for s in body:
        for n in ast.walk(s):
            if (
                isinstance(n, ast.Subscript)
                and id(n) not in stores
                and not isinstance(getattr(n, "_parent_sub", None), ast.Subscript)
            ):
                if isinstance(n.value, ast.Subscript):
                    continue  # the outer subscript of a[i][j] holds the whole index
                array, index = deps.subscript_parts(n)
                if array is not None:
                    found.append((array, index, n.lineno))
        for n in ast.walk(s):
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript):
                array, index = deps.subscript_parts(n.target)
                if array is not None:
                    found.append((array, index, n.lineno))
    # a[i][j]: ast.walk also yields the inner a[i]; keep only the outermost chains
    return [r for r in found if not _is_partial(r, found)]


def _is_partial(r: tuple[str, list[ast.expr], int], found: list[tuple[str, list[ast.expr], int]]) -> bool:
    return False


def _only_in_augassign(body: Sequence[ast.stmt], array: str) -> bool:
    for s in body:
        for n in ast.walk(s):
            mine = isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == array
            if mine and not isinstance(getattr(n, "ctx", None), ast.Store):
                return False
    return True


def _affine(index: Sequence[ast.expr], vars_: Sequence[str]) -> list[tuple[frozenset[str], str] | None]:
    """Per subscript: (the loop variables in it, its text) when it is ``v``, ``v + c``, ``v - c`` or free
    of loop variables; None when a loop variable is scaled or hidden (``2 * i``, ``x[i]``)."""
    out: list[tuple[frozenset[str], str] | None] = []
    for e in index:
        names = {n.id for n in ast.walk(e) if isinstance(n, ast.Name) and n.id in vars_}
        if any(isinstance(n, ast.Subscript) for n in ast.walk(e)) and names:
            out.append(None)
            continue
        if not names:
            out.append((frozenset(), ast.unparse(e)))
            continue
        if len(names) == 1 and _unit_offset(e, next(iter(names))):
            out.append((frozenset(names), ast.unparse(e)))
            continue
        out.append(None)
    return out


def _unit_offset(e: ast.expr, var: str) -> bool:
    if isinstance(e, ast.Name):
        return e.id == var
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        left_var = _unit_offset(e.left, var) and not _mentions(e.right, var)
        right_var = isinstance(e.op, ast.Add) and _unit_offset(e.right, var) and not _mentions(e.left, var)
        return left_var or right_var
    return False


def _injective(form: list[tuple[frozenset[str], str] | None]) -> bool:
    seen: set[str] = set()
    for f in form:
        if f is None:
            return False
        for v in f[0]:
            if v in seen:
                return False
            seen.add(v)
    return True


def _offset_reads(body: Sequence[ast.stmt], vars_: Sequence[str]) -> bool:
    """Reads at a constant offset from the loop variables (``a[i - 1]``): a stencil."""
    for _, index, _ in _reads(body):
        for e in index:
            if isinstance(e, ast.BinOp) and any(
                isinstance(n, ast.Name) and n.id in vars_ for n in ast.walk(e)
            ):
                return True
    return False


def _reads_before_writes(s: ast.stmt, seen: set[str]) -> list[tuple[str, int]]:
    """Names `s` reads before any statement so far assigned them (`seen` grows with its assignments)."""
    found: list[tuple[str, int]] = []
    if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        value = s.value
        if value is not None:
            found += [
                (n.id, s.lineno) for n in ast.walk(value) if isinstance(n, ast.Name) and n.id not in seen
            ]
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and s.target.id not in seen:
            found.append((s.target.id, s.lineno))
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in seen:
                    found.append((n.id, s.lineno))
            if isinstance(t, ast.Name):
                seen.add(t.id)
        return found
    if isinstance(s, ast.If):
        found += [(n.id, s.lineno) for n in ast.walk(s.test) if isinstance(n, ast.Name) and n.id not in seen]
        a, b = set(seen), set(seen)
        for x in s.body:
            found += _reads_before_writes(x, a)
        for x in s.orelse:
            found += _reads_before_writes(x, b)
        seen |= a & b
        return found
    if isinstance(s, ast.For):
        inner = set(seen) | {range_of(s)[0]}
        found += [(n.id, s.lineno) for n in ast.walk(s.iter) if isinstance(n, ast.Name) and n.id not in seen]
        for x in s.body:
            found += _reads_before_writes(x, inner)
        return found
    for n in ast.walk(s):
        if isinstance(n, ast.Name) and n.id not in seen:
            found.append((n.id, getattr(s, "lineno", 0)))
    return found


class _ReplaceTarget(ast.NodeTransformer):
    """``y[i] += e`` -> ``acc += e`` (the element's running value in a local)."""

    def __init__(self, array: str, acc: str):
        self.array, self.acc = array, acc

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        if isinstance(node.target, ast.Subscript) and deps.subscript_parts(node.target)[0] == self.array:
            new = ast.AugAssign(target=ast.Name(self.acc, ast.Store()), op=node.op, value=node.value)
            return ast.copy_location(new, node)
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        t = node.targets[0]
        if (
            isinstance(t, ast.Subscript)
            and deps.subscript_parts(t)[0] == self.array
            and _reads_itself(t, node.value)
        ):
            assert isinstance(node.value, ast.BinOp)
            new = ast.AugAssign(
                target=ast.Name(self.acc, ast.Store()), op=node.value.op, value=node.value.right
            )
            return ast.copy_location(new, node)
        return node
