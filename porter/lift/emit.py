"""Python loop bodies as CUDA C: expressions with NumPy's types, statements, array indexing.

:class:`Body` translates the statements of one loop body (Python's ``ast``) into C lines for a kernel,
typing every value as NumPy would (:mod:`porter.lift.types`) and casting operands so the kernel rounds as
the reference does.  What it cannot translate raises :class:`Unliftable` with the line and why: a call
that is not arithmetic (``print``, ``warnings.warn``, a callback), a Python object (a list, a dict, an
attribute of something that is not an array), a row of a 2-D array used as a value.

Names in C are prefixed (``v_x``) so a Python name never meets a C keyword or a CUDA builtin; an array
``a`` of n dimensions passes its extents as ``d_a_0`` ... ``d_a_{n-1}``; row-major (C order) indexing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from porter.lift.types import BOOL, C_TYPES, PY_FLOAT, PY_INT, T, math_result, promote, true_divide


class Unliftable(Exception):
    """This code cannot become a kernel: why, and where."""

    def __init__(self, line: int, reason: str):
        super().__init__(reason)
        self.line, self.reason = line, reason


@dataclass(frozen=True)
class Array:
    name: str
    dtype: str
    ndim: int


# math / NumPy functions of one or two scalars, by name: (C name for float, C name for double)
UNARY = {
    "sqrt": ("sqrtf", "sqrt"), "exp": ("expf", "exp"), "log": ("logf", "log"), "log2": ("log2f", "log2"),
    "log10": ("log10f", "log10"), "log1p": ("log1pf", "log1p"), "expm1": ("expm1f", "expm1"),
    "sin": ("sinf", "sin"), "cos": ("cosf", "cos"), "tan": ("tanf", "tan"), "asin": ("asinf", "asin"),
    "acos": ("acosf", "acos"), "atan": ("atanf", "atan"), "sinh": ("sinhf", "sinh"), "cosh": ("coshf", "cosh"),
    "tanh": ("tanhf", "tanh"), "fabs": ("fabsf", "fabs"), "erf": ("erff", "erf"), "erfc": ("erfcf", "erfc"),
    "cbrt": ("cbrtf", "cbrt"), "arcsin": ("asinf", "asin"), "arccos": ("acosf", "acos"),
    "arctan": ("atanf", "atan"), "exp2": ("exp2f", "exp2"),
}  # fmt: skip
BINARY = {"pow": ("powf", "pow"), "atan2": ("atan2f", "atan2"), "arctan2": ("atan2f", "atan2"),
          "hypot": ("hypotf", "hypot"), "fmod": ("fmodf", "fmod"), "power": ("powf", "pow"),
          "copysign": ("copysignf", "copysign")}  # fmt: skip
ROUNDING = {"floor": ("floorf", "floor"), "ceil": ("ceilf", "ceil"), "trunc": ("truncf", "trunc")}
CONSTANTS = {"pi": "3.141592653589793", "e": "2.718281828459045", "inf": "INFINITY", "nan": "NAN"}
NUMPY = ("np", "numpy")
DTYPE_NAMES = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64",
               "float_": "float64", "double": "float64", "single": "float32", "intc": "int32", "bool_": "bool"}  # fmt: skip


def cname(name: str) -> str:
    return f"v_{name}"


def dim(array: str, k: int) -> str:
    return f"d_{array}_{k}"


def cast(code: str, have: T, want: T) -> str:
    """`code` (of type `have`) as `want`'s C type."""
    if have.dtype == want.dtype:
        return code
    return f"(({C_TYPES[want.dtype]})({code}))"


@dataclass
class Scope:
    """What names mean inside one kernel."""

    arrays: dict[str, Array]
    host: dict[str, T]  # scalars the host passes (sizes, scalar parameters, host values, loop bounds)
    device: dict[str, tuple[str, T]]  # scalars living in a device buffer (a reduction's result): buffer
    loop_vars: set[str] = field(default_factory=set)
    locals: dict[str, T] = field(default_factory=dict)
    nonneg: set[str] = field(default_factory=set)  # loop variables that are never negative
    atomic: set[str] = field(default_factory=set)  # arrays accumulated at data-dependent indices
    private: str = ""  # the atomic array whose bins each block keeps in shared memory (porter_bins)
    # what the kernel uses, in first-use order: arrays, host scalars, device scalars
    used_arrays: list[str] = field(default_factory=list)
    used_host: list[str] = field(default_factory=list)
    used_device: list[str] = field(default_factory=list)

    def use(self, kind: list[str], name: str) -> None:
        if name not in kind:
            kind.append(name)


class Body:
    """Statements and expressions of one loop body, in C."""

    def __init__(self, scope: Scope, function: str):
        self.scope, self.function = scope, function

    # ------------------------------------------------------------------ expressions

    def expr(self, node: ast.expr) -> tuple[str, T]:
        method: Callable[[ast.expr], tuple[str, T]] | None = getattr(self, f"_e_{type(node).__name__}", None)
        if method is None:
            raise Unliftable(node.lineno, f"{_kind_of(node)} is not arithmetic porter can run on a GPU")
        return method(node)

    def _e_Constant(self, node: ast.Constant) -> tuple[str, T]:
        v = node.value
        if isinstance(v, bool):
            return ("1" if v else "0"), BOOL
        if isinstance(v, int):
            if abs(v) >= 2**63:
                raise Unliftable(node.lineno, f"the integer {v} does not fit in 64 bits")
            return (f"{v}LL" if abs(v) > 2**31 - 1 else str(v)), PY_INT
        if isinstance(v, float):
            if v != v:
                return "NAN", PY_FLOAT
            if v in (float("inf"), float("-inf")):
                return ("INFINITY" if v > 0 else "(-INFINITY)"), PY_FLOAT
            return repr(v) if ("e" in repr(v) or "." in repr(v)) else repr(v) + ".0", PY_FLOAT
        raise Unliftable(node.lineno, f"the constant {v!r} is a Python object, not a number")

    def _e_Name(self, node: ast.Name) -> tuple[str, T]:
        name, s = node.id, self.scope
        if name in s.locals:
            return cname(name), s.locals[name]
        if name in s.loop_vars:
            return cname(name), PY_INT
        if name in s.device:
            buffer, t = s.device[name]
            s.use(s.used_device, name)
            return f"{cname(buffer)}[0]", t
        if name in s.host:
            s.use(s.used_host, name)
            return cname(name), s.host[name]
        if name in s.arrays:
            raise Unliftable(node.lineno, f"the array {name} is used whole; only its elements can be")
        if name in ("True", "False"):
            return ("1" if name == "True" else "0"), BOOL
        raise Unliftable(node.lineno, f"{name} is not a parameter, a size, a loop variable or a local value")

    def _e_BinOp(self, node: ast.BinOp) -> tuple[str, T]:
        a, ta = self.expr(node.left)
        b, tb = self.expr(node.right)
        op = type(node.op)
        if op is ast.Div:
            t = true_divide(ta, tb)
            return f"({cast(a, ta, t)} / {cast(b, tb, t)})", t
        if op is ast.Pow:
            return self._pow(node, a, ta, b, tb)
        t = promote(ta, tb)
        if op is ast.FloorDiv:
            if t.is_float:
                f = "floorf" if t.dtype == "float32" else "floor"
                return f"{f}({cast(a, ta, t)} / {cast(b, tb, t)})", t
            return f"porter_floordiv({cast(a, ta, t)}, {cast(b, tb, t)})", t
        if op is ast.Mod:
            helper = "porter_fmod" if t.is_float else "porter_mod"
            return f"(({t.c}){helper}({cast(a, ta, t)}, {cast(b, tb, t)}))", t
        symbol = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
                  ast.LShift: "<<", ast.RShift: ">>"}.get(op)  # fmt: skip
        if symbol is None:
            raise Unliftable(node.lineno, f"the operator {type(node.op).__name__} is not supported on a GPU")
        if symbol in "&|^<<>>" and t.is_float:
            raise Unliftable(node.lineno, f"{symbol} of floats is not arithmetic")
        return f"({cast(a, ta, t)} {symbol} {cast(b, tb, t)})", t

    def _pow(self, node: ast.BinOp, a: str, ta: T, b: str, tb: T) -> tuple[str, T]:
        t = promote(ta, tb)
        exponent = node.right
        if isinstance(exponent, ast.Constant) and type(exponent.value) is int and exponent.value in (2, 3):
            x = cast(a, ta, t)
            return ("(" + " * ".join([x] * int(exponent.value)) + ")"), t
        if t.is_int:
            if isinstance(exponent, ast.Constant) and isinstance(exponent.value, int) and exponent.value >= 0:
                return f"porter_ipow({cast(a, ta, t)}, {exponent.value})", t
            raise Unliftable(node.lineno, "an integer power with a variable or negative exponent")
        f = "powf" if t.dtype == "float32" else "pow"
        return f"{f}({cast(a, ta, t)}, {cast(b, tb, t)})", t

    def _e_UnaryOp(self, node: ast.UnaryOp) -> tuple[str, T]:
        a, t = self.expr(node.operand)
        if isinstance(node.op, ast.USub):
            return f"(-{a})", t if t.dtype != "bool" else PY_INT
        if isinstance(node.op, ast.UAdd):
            return a, t
        if isinstance(node.op, ast.Not):
            return f"(!({a}))", BOOL
        if isinstance(node.op, ast.Invert):
            if t.dtype == "bool":
                return f"(!({a}))", BOOL
            if t.is_float:
                raise Unliftable(node.lineno, "~ of a float")
            return f"(~{a})", t
        raise Unliftable(node.lineno, "an operator porter does not translate")

    def _e_BoolOp(self, node: ast.BoolOp) -> tuple[str, T]:
        joiner = " && " if isinstance(node.op, ast.And) else " || "
        return "(" + joiner.join(f"({self.expr(v)[0]})" for v in node.values) + ")", BOOL

    def _e_Compare(self, node: ast.Compare) -> tuple[str, T]:
        parts = []
        left, tl = self.expr(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right, tr = self.expr(right_node)
            symbol = {
                ast.Lt: "<",
                ast.LtE: "<=",
                ast.Gt: ">",
                ast.GtE: ">=",
                ast.Eq: "==",
                ast.NotEq: "!=",
            }.get(type(op))
            if symbol is None:
                raise Unliftable(node.lineno, f"the comparison {type(op).__name__} is about Python objects")
            t = promote(tl, tr)
            parts.append(f"({cast(left, tl, t)} {symbol} {cast(right, tr, t)})")
            left, tl = right, tr
        return "(" + " && ".join(parts) + ")", BOOL

    def _e_IfExp(self, node: ast.IfExp) -> tuple[str, T]:
        c, _ = self.expr(node.test)
        a, ta = self.expr(node.body)
        b, tb = self.expr(node.orelse)
        t = promote(ta, tb)
        return f"(({c}) ? {cast(a, ta, t)} : {cast(b, tb, t)})", t

    def _e_Subscript(self, node: ast.Subscript) -> tuple[str, T]:
        v = node.value
        if isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name):
            name = v.value.id
            k = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if (
                name in self.scope.arrays
                and isinstance(k, int)
                and -self.scope.arrays[name].ndim <= k < self.scope.arrays[name].ndim
            ):
                self.scope.use(self.scope.used_arrays, name)
                return dim(name, k % self.scope.arrays[name].ndim), PY_INT
            raise Unliftable(
                node.lineno, f"{ast.unparse(node)} is not a dimension of an array of the function"
            )
        array, index = self.element(node)
        return f"{cname(array.name)}[{index}]", T(array.dtype)

    def _e_Attribute(self, node: ast.Attribute) -> tuple[str, T]:
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("math", *NUMPY) and node.attr in CONSTANTS:
            return CONSTANTS[node.attr], PY_FLOAT
        if isinstance(base, ast.Name) and base.id in self.scope.arrays and node.attr in ("size",):
            return self._size_of(base.id, node.lineno), PY_INT
        raise Unliftable(
            node.lineno, f"{ast.unparse(node)} touches a Python object (attribute {node.attr!r})"
        )

    def _size_of(self, array: str, line: int) -> str:
        a = self.scope.arrays[array]
        self.scope.use(self.scope.used_arrays, array)
        return "(" + " * ".join(dim(array, k) for k in range(a.ndim)) + ")"

    def _e_Call(self, node: ast.Call) -> tuple[str, T]:
        func, line = node.func, node.lineno
        if node.keywords:
            raise Unliftable(line, f"{ast.unparse(func)}() with keyword arguments")
        module, name = _callee(func)
        if not _known_call(module, name):
            who = f"{module}.{name}" if module else name
            raise Unliftable(
                line,
                f"calls {who}(): porter runs arithmetic and math functions on a GPU; a call with side effects "
                "or on Python objects stays in Python",
            )
        first = node.args[0] if len(node.args) == 1 else None
        if module is None and name == "len" and isinstance(first, ast.Name) and first.id in self.scope.arrays:
            self.scope.use(self.scope.used_arrays, first.id)
            return dim(first.id, 0), PY_INT
        args = [self.expr(a) for a in node.args]
        if module is None and name in ("abs",) and len(args) == 1:
            a, t = args[0]
            return (f"fabs{'f' if t.dtype == 'float32' else ''}({a})" if t.is_float else f"llabs({a})"), t
        if module is None and name in ("min", "max") and len(args) >= 2:
            return self._minmax(name, args)
        if module is None and name in ("int", "float", "bool") and len(args) == 1:
            a, t = args[0]
            want = {"int": PY_INT, "float": PY_FLOAT, "bool": BOOL}[name]
            return (f"(({a}) != 0)" if name == "bool" else cast(a, t, want)), want
        if module is None and name == "round" and len(args) == 1:
            a, t = args[0]  # Python rounds half to even: rint does too
            return f"((long long)rint((double)({a})))", PY_INT
        if module in NUMPY and name in DTYPE_NAMES and len(args) == 1:
            a, t = args[0]
            want = T(DTYPE_NAMES[name])
            return cast(a, t, want), want
        if module in ("math", *NUMPY) and name in UNARY and len(args) == 1:
            a, t = args[0]
            rt = math_result(t, "math" if module == "math" else "numpy")
            fs, fd = UNARY[name]
            return f"{fs if rt.dtype == 'float32' else fd}({cast(a, t, rt)})", rt
        if module in ("math", *NUMPY) and name in ROUNDING and len(args) == 1:
            a, t = args[0]
            if t.is_int:
                return a, t
            rt = PY_INT if module == "math" else t  # math.floor gives an int, np.floor a float
            fs, fd = ROUNDING[name]
            inner = f"{fs if t.dtype == 'float32' else fd}({a})"
            return (cast(inner, t, rt) if module == "math" else inner), rt
        if module in ("math", *NUMPY) and name in BINARY and len(args) == 2:
            (a, ta), (b, tb) = args
            rt = promote(ta, tb)
            rt = math_result(rt, "math" if module == "math" else "numpy")
            fs, fd = BINARY[name]
            return f"{fs if rt.dtype == 'float32' else fd}({cast(a, ta, rt)}, {cast(b, tb, rt)})", rt
        if module in NUMPY and name in ("minimum", "maximum", "fmin", "fmax") and len(args) == 2:
            return self._minmax("min" if name in ("minimum", "fmin") else "max", args)
        if module in NUMPY and name in ("abs", "absolute") and len(args) == 1:
            a, t = args[0]
            return (f"fabs{'f' if t.dtype == 'float32' else ''}({a})" if t.is_float else f"llabs({a})"), t
        if module in ("math", *NUMPY) and name in ("isnan", "isinf", "isfinite") and len(args) == 1:
            a, t = args[0]
            return f"({name}((double)({a})))", BOOL
        who = f"{module}.{name}" if module else name
        raise Unliftable(
            line,
            f"calls {who}(): porter runs arithmetic and math functions on a GPU; a call with side effects "
            "or on Python objects stays in Python",
        )

    def _minmax(self, name: str, args: list[tuple[str, T]]) -> tuple[str, T]:
        code, t = args[0]
        for b, tb in args[1:]:
            rt = promote(t, tb)
            x, y = cast(code, t, rt), cast(b, tb, rt)
            # Python's max(a, b) returns a unless b > a (min: unless b < a)
            code = f"(({y}) {'>' if name == 'max' else '<'} ({x}) ? ({y}) : ({x}))"
            t = rt
        return code, t

    # ------------------------------------------------------------------ arrays

    def element(self, node: ast.Subscript) -> tuple[Array, str]:
        """The array and C index of ``a[i]`` / ``a[i, j]`` / ``a[i][j]``."""
        chain: list[ast.expr] = []
        base: ast.expr = node
        while isinstance(base, ast.Subscript):
            sl = base.slice
            chain[:0] = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
            base = base.value
        if not isinstance(base, ast.Name):
            raise Unliftable(node.lineno, f"{ast.unparse(node)} indexes {_kind_of(base)}, a Python object")
        if base.id not in self.scope.arrays:
            raise Unliftable(
                node.lineno, f"{ast.unparse(node)} indexes {base.id}, which is not an array of the function"
            )
        array = self.scope.arrays[base.id]
        if any(isinstance(c, ast.Slice) for c in chain):
            raise Unliftable(node.lineno, f"{ast.unparse(node)} is a slice (an array value), not an element")
        if len(chain) != array.ndim:
            raise Unliftable(
                node.lineno,
                f"{ast.unparse(node)} takes {len(chain)} of the {array.ndim} indices of {array.name}: a row is "
                "a Python object, not a number",
            )
        self.scope.use(self.scope.used_arrays, array.name)
        parts = []
        for k, c in enumerate(chain):
            code, t = self.expr(c)
            if t.is_float:
                raise Unliftable(node.lineno, f"{ast.unparse(c)} indexes {array.name} with a float")
            if not (isinstance(c, ast.Name) and c.id in self.scope.nonneg) and not _nonneg_constant(c):
                code = f"porter_wrap((long long)({code}), {dim(array.name, k)})"  # Python's a[-1]
            parts.append(code)
        index = parts[0]
        for k in range(1, len(parts)):
            index = f"({index}) * {dim(array.name, k)} + ({parts[k]})"
        return array, index

    # ------------------------------------------------------------------ statements

    def stmts(self, nodes: Sequence[ast.stmt], indent: str) -> list[str]:
        out: list[str] = []
        for s in nodes:
            out += self.stmt(s, indent)
        return out

    def stmt(self, s: ast.stmt, indent: str) -> list[str]:
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return []  # a docstring or a string as a comment
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise Unliftable(s.lineno, "chained assignment (a = b = ...)")
            return self.assign(s.targets[0], s.value, indent, s.lineno)
        if isinstance(s, ast.AnnAssign) and s.value is not None:
            return self.assign(s.target, s.value, indent, s.lineno)
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Subscript) and self._atomic(s.target):
            return self.atomic_add(s.target, s.value, isinstance(s.op, ast.Sub), indent, s.lineno)
        if (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Subscript)
            and self._atomic(s.targets[0])
            and isinstance(s.value, ast.BinOp)
            and isinstance(s.value.op, (ast.Add, ast.Sub))
            and ast.unparse(s.value.left) == ast.unparse(s.targets[0])
        ):
            return self.atomic_add(
                s.targets[0], s.value.right, isinstance(s.value.op, ast.Sub), indent, s.lineno
            )
        if isinstance(s, ast.AugAssign):
            target = s.target
            value = ast.BinOp(left=_load(target), op=s.op, right=s.value)
            ast.copy_location(value, s)
            return self.assign(target, value, indent, s.lineno)
        if isinstance(s, ast.If):
            c, _ = self.expr(s.test)
            out = [f"{indent}if ({c}) {{", *self.stmts(s.body, indent + "    "), f"{indent}}}"]
            if s.orelse:
                out[-1] += " else {"
                out += [*self.stmts(s.orelse, indent + "    "), f"{indent}}}"]
            return out
        if isinstance(s, ast.For):
            return self.serial_for(s, indent)
        if isinstance(s, (ast.Continue, ast.Break)):
            raise Unliftable(s.lineno, f"{type(s).__name__.lower()} leaves a parallel loop's iteration early")
        if isinstance(s, ast.Expr):
            self.expr(s.value)  # a call: refused there with its name
            raise Unliftable(s.lineno, f"the statement {ast.unparse(s)} computes a value and drops it")
        raise Unliftable(
            s.lineno, f"{type(s).__name__} statements are not translated ({ast.unparse(s)[:40]})"
        )

    def _atomic(self, target: ast.Subscript) -> bool:
        base: ast.expr = target
        while isinstance(base, ast.Subscript):
            base = base.value
        return isinstance(base, ast.Name) and base.id in self.scope.atomic

    def atomic_add(
        self, target: ast.Subscript, value: ast.expr, negate: bool, indent: str, line: int
    ) -> list[str]:
        """``h[k] += v`` at a data-dependent ``k``: an atomic add of v in h's type."""
        array, index = self.element(target)
        code, t = self.expr(value)
        want = T(array.dtype)
        v = cast(code, t, want)
        if negate:
            v = f"(-{v})"
        where = f"&{cname(array.name)}[{index}]"
        if array.name == self.scope.private:  # the block's own bins when they fit (porter_priv)
            return [
                f"{indent}if (porter_priv) atomicAdd(&porter_bins[{index}], {v});",
                f"{indent}else atomicAdd({where}, {v});",
            ]
        if array.dtype == "int64":
            return [f"{indent}atomicAdd((unsigned long long*){where}, (unsigned long long)({v}));"]
        if array.dtype in ("int32", "float32", "float64"):
            return [f"{indent}atomicAdd({where}, {v});"]
        raise Unliftable(line, f"an atomic accumulation into {array.name}, an array of {array.dtype}")

    def assign(self, target: ast.expr, value: ast.expr, indent: str, line: int) -> list[str]:
        code, t = self.expr(value)
        if isinstance(target, ast.Subscript):
            array, index = self.element(target)
            return [f"{indent}{cname(array.name)}[{index}] = {cast(code, t, T(array.dtype))};"]
        if isinstance(target, ast.Name):
            name = target.id
            s = self.scope
            if name in s.arrays or name in s.host or name in s.device or name in s.loop_vars:
                raise Unliftable(
                    line, f"{name} is assigned inside the loop, but it is not a value local to it"
                )
            have = s.locals.get(name)
            if have is None:
                raise Unliftable(line, f"internal: {name} was not declared")  # declare() runs first
            return [f"{indent}{cname(name)} = {cast(code, t, have)};"]
        raise Unliftable(
            line, f"assignment to {ast.unparse(target)} (a tuple or an attribute) is not translated"
        )

    def serial_for(self, s: ast.For, indent: str) -> list[str]:
        """A loop run by each thread (a serial inner loop, or one whose bounds depend on a parallel
        variable)."""
        var, start, stop, step = range_of(s)
        if s.orelse:
            raise Unliftable(s.lineno, "for ... else")
        code_start, _ = self.expr(start)
        code_stop, _ = self.expr(stop)
        code_step, ts = self.expr(step)
        by = step.value if isinstance(step, ast.Constant) else None
        if (
            isinstance(step, ast.UnaryOp)
            and isinstance(step.op, ast.USub)
            and isinstance(step.operand, ast.Constant)
        ):
            by = step.operand.value if isinstance(step.operand.value, int) else None
            by = -by if by is not None else None  # ``range(n - 2, 0, -1)``
        if not (isinstance(by, int) and not isinstance(by, bool) and by != 0):
            raise Unliftable(s.lineno, "a loop step that is not a nonzero integer constant")
        self.scope.loop_vars.add(var)
        if isinstance(start, ast.Constant) and isinstance(start.value, int) and start.value >= 0 and by > 0:
            self.scope.nonneg.add(var)
        cmp = "<" if by > 0 else ">"
        v = cname(var)
        head = f"{indent}for (long long {v} = {code_start}; {v} {cmp} {code_stop}; {v} += {code_step}) {{"
        body = self.stmts(s.body, indent + "    ")
        return [head, *body, f"{indent}}}"]

    def declare(self, nodes: Iterable[ast.stmt]) -> list[str]:
        """Every local scalar the statements assign, typed from its first assignment (re-walked until
        the types settle), declared before the statements as C's block scoping needs."""
        before = dict(self.scope.locals)
        for _ in range(4):
            changed = False
            for target, value, line in _assignments(nodes):
                if not isinstance(target, ast.Name):
                    continue
                name = target.id
                if name in self.scope.arrays or name in self.scope.host or name in self.scope.loop_vars:
                    continue
                if name in self.scope.device:
                    raise Unliftable(
                        line, f"{name} is assigned inside the loop, but it is not a value local to it"
                    )
                try:
                    _, t = self.expr(value)
                except Unliftable as err:
                    if name not in self.scope.locals and f"{name} is not" in err.reason:
                        continue  # depends on a local not typed yet
                    if name in self.scope.locals:
                        continue
                    raise
                t = T(t.dtype)  # a local holds a NumPy scalar of that dtype
                if name not in self.scope.locals:
                    self.scope.locals[name] = t
                    changed = True
            if not changed:
                break
        new = [n for n in self.scope.locals if n not in before]
        for target, _, line in _assignments(nodes):
            if (
                isinstance(target, ast.Name)
                and target.id not in self.scope.locals
                and target.id not in (*self.scope.arrays, *self.scope.host, *self.scope.loop_vars)
            ):
                raise Unliftable(line, f"cannot tell the type of {target.id}")
        return [f"{self.scope.locals[n].c} {cname(n)} = 0;" for n in new]


def range_of(s: ast.For) -> tuple[str, ast.expr, ast.expr, ast.expr]:
    """(variable, start, stop, step) of ``for v in range(...)`` (``prange`` too)."""
    it = s.iter
    if not isinstance(s.target, ast.Name):
        raise Unliftable(s.lineno, "a loop over several names at once (unpacking)")
    if not (isinstance(it, ast.Call) and _callee(it.func)[1] in ("range", "prange") and not it.keywords):
        raise Unliftable(s.lineno, f"a loop over {ast.unparse(it)[:40]}, not over range(...)")
    args = list(it.args)
    if not 1 <= len(args) <= 3:
        raise Unliftable(s.lineno, "range() with no arguments")
    zero, one = ast.Constant(0), ast.Constant(1)
    for c in (zero, one):
        ast.copy_location(c, s)
    start, stop, step = (
        (zero, args[0], one) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else one)
    )
    return s.target.id, start, stop, step


def _assignments(nodes: Iterable[ast.stmt]) -> list[tuple[ast.expr, ast.expr, int]]:
    found: list[tuple[ast.expr, ast.expr, int]] = []
    for s in nodes:
        for n in ast.walk(s):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                found.append((n.targets[0], n.value, n.lineno))
            elif isinstance(n, ast.AnnAssign) and n.value is not None:
                found.append((n.target, n.value, n.lineno))
            elif isinstance(n, ast.AugAssign):
                value = ast.BinOp(left=_load(n.target), op=n.op, right=n.value)
                ast.copy_location(value, n)
                found.append((n.target, value, n.lineno))
    return found


def _load(target: ast.expr) -> ast.expr:
    copy = ast.parse(ast.unparse(target), mode="eval").body
    for n in ast.walk(copy):
        ast.copy_location(n, target)
    return copy


def _callee(func: ast.expr) -> tuple[str | None, str]:
    if isinstance(func, ast.Name):
        return None, func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id, func.attr
    if isinstance(func, ast.Attribute):
        return ast.unparse(func.value), func.attr
    return None, ast.unparse(func)


def _known_call(module: str | None, name: str) -> bool:
    """A function the translator knows (its arguments are checked when translated)."""
    if module is None:
        return name in ("len", "abs", "min", "max", "int", "float", "bool", "round")
    if module == "math":
        return name in UNARY or name in BINARY or name in ROUNDING or name in ("isnan", "isinf", "isfinite")
    if module in NUMPY:
        return (
            name in UNARY or name in BINARY or name in ROUNDING or name in DTYPE_NAMES
            or name in ("minimum", "maximum", "fmin", "fmax", "abs", "absolute", "isnan", "isinf", "isfinite")
        )  # fmt: skip
    return False


def _nonneg_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value >= 0


def _kind_of(node: ast.expr) -> str:
    kinds = {ast.List: "a list", ast.Dict: "a dict", ast.Set: "a set", ast.Tuple: "a tuple",
             ast.ListComp: "a list comprehension", ast.Lambda: "a lambda", ast.JoinedStr: "an f-string",
             ast.GeneratorExp: "a generator"}  # fmt: skip
    return kinds.get(type(node), f"{ast.unparse(node)[:40]}")


PRELUDE = """// generated by porter lift: helpers for Python's semantics, then the function's kernels
#ifndef INFINITY
#define INFINITY (__int_as_float(0x7f800000))
#endif
#ifndef NAN
#define NAN (__int_as_float(0x7fffffff))
#endif
__device__ __forceinline__ long long porter_floordiv(long long a, long long b) {
    long long q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long porter_mod(long long a, long long b) {
    long long r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ double porter_fmod(double a, double b) {
    double r = fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ long long porter_wrap(long long i, long long n) { return i < 0 ? i + n : i; }
__device__ __forceinline__ long long porter_ipow(long long x, int e) {
    long long r = 1;
    for (int k = 0; k < e; ++k) r *= x;
    return r;
}
"""
