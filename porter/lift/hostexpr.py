"""The host side of a lifted function: its size expressions evaluated (never with ``eval``), and its
launches resolved into a concrete plan for given arguments.

Host expressions are the user's own Python (``x.shape[0]``, ``len(range(1, n - 1, 1))``, ``1.0 / n``,
``-float("inf")``); :func:`evaluate` walks their ``ast`` with numbers, names bound to arguments and
sizes, ``+ - * / // % **``, comparisons, ``len``/``range``/``min``/``max``/``abs``/``int``/``float``,
``math`` functions and constants, and an array's ``.shape``, ``.size`` and ``len``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from porter.harness.inputs import poison_value
from porter.lift.ir import Launch, Lifted, Local, Repeat


class HostError(ValueError):
    """A host expression porter cannot evaluate, or that fails for these arguments."""


_BIN: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}  # fmt: skip
_FUNCS: dict[str, Callable[..., Any]] = {
    "len": len, "range": range, "min": min, "max": max, "abs": abs, "int": int, "float": float,
    "bool": bool, "round": round,
}  # fmt: skip
_MATH = {"sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "floor", "ceil", "pow", "hypot", "fabs"}
_CONSTANTS = ("pi", "e", "inf", "nan")
_DTYPES = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64", "float_": "float64",
           "double": "float64", "single": "float32", "intc": "int32", "bool_": "bool_"}  # fmt: skip
# what a host expression's names mean whatever the function's own names are (the drop-in module calls
# them through its own names too): these calls are Python's builtins, these attributes the math module's
BUILTINS = frozenset(_FUNCS)
MATH_MODULES = ("math", "np", "numpy")
MATH_NAMES = frozenset(_MATH) | frozenset(_CONSTANTS)


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    """The value of host expression `text` with `env`'s names (arrays, scalars, sizes)."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as err:
        raise HostError(f"not an expression: {text!r}") from err
    try:
        return _eval(tree, env)
    except HostError:
        raise
    except (ArithmeticError, TypeError, ValueError, IndexError, OverflowError) as err:
        raise HostError(f"{text}: {err}") from None


def _eval(n: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, str)):
        return n.value
    if isinstance(n, ast.Name):
        if n.id not in env:
            raise HostError(f"{n.id} has no value here")
        return env[n.id]
    if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
        a, b = _eval(n.left, env), _eval(n.right, env)
        if isinstance(n.op, ast.Pow) and isinstance(b, int) and b > 64:
            raise HostError("an exponent over 64")
        return _BIN[type(n.op)](a, b)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd, ast.Not)):
        v = _eval(n.operand, env)
        return -v if isinstance(n.op, ast.USub) else (+v if isinstance(n.op, ast.UAdd) else not v)
    if isinstance(n, ast.Compare):
        left = _eval(n.left, env)
        for op, right_node in zip(n.ops, n.comparators, strict=True):
            right = _eval(right_node, env)
            if type(op) not in _CMP or not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(n, ast.IfExp):
        return _eval(n.body, env) if _eval(n.test, env) else _eval(n.orelse, env)
    if isinstance(n, ast.Attribute):
        if isinstance(n.value, ast.Name) and n.value.id in MATH_MODULES and n.attr in _CONSTANTS:
            return getattr(math, n.attr)
        base = _eval(n.value, env)
        if isinstance(base, np.ndarray) and n.attr in ("shape", "size", "ndim"):
            return getattr(base, n.attr)
        raise HostError(f"{ast.unparse(n)} is not a size")
    if isinstance(n, ast.Subscript):
        base = _eval(n.value, env)
        k = _eval(n.slice, env)
        if isinstance(base, tuple) and isinstance(k, int):
            return base[k]
        raise HostError(f"{ast.unparse(n)} is not a size")
    if isinstance(n, ast.Call) and not n.keywords:
        args = [_eval(a, env) for a in n.args]
        f = n.func
        if isinstance(f, ast.Name) and f.id in _FUNCS:
            if (
                f.id == "float"
                and args
                and isinstance(args[0], str)
                and args[0].strip().lower() not in ("inf", "-inf", "nan")
            ):
                raise HostError("float() of a string")
            return _FUNCS[f.id](*args)
        if (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in MATH_MODULES
            and f.attr in _MATH
        ):
            return getattr(math, f.attr)(*args)
        if (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in ("np", "numpy")
            and f.attr in _DTYPES
            and len(args) == 1
        ):
            return getattr(np, _DTYPES[f.attr])(args[0])  # a NumPy scalar conversion: np.float64(0.1)
    raise HostError(f"{ast.unparse(n)[:60]} is not a host expression porter evaluates")


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class PlanLaunch:
    """One launch with everything known: the kernel (an index into the plan's kernels), its geometry,
    and its arguments -- a buffer by key, or a NumPy scalar."""

    kernel: int
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple[str | np.generic, ...]
    shared: int = 0


@dataclass(frozen=True)
class Plan:
    """A lifted function's run for one set of arguments: device buffers (inputs as given, locals and
    temporaries as allocated), the launches in order (time loops unrolled, swaps resolved), and the
    buffers that hold its results."""

    kernels: tuple[str, ...]  # entry names, in Lifted.kernels order
    buffers: dict[str, np.ndarray]
    launches: tuple[PlanLaunch, ...]
    results: tuple[str, ...]  # buffers whose contents the function leaves: written arrays, the result
    returns: str = ""  # the buffer (or "scalar:<buffer>") the function returns, after swaps


POISONED = ("float32", "float64")  # what an ``np.empty`` local holds on the device: the harness's poison


def sizes_of(lifted: Lifted, args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments, then every size and host value the function binds, by name."""
    env: dict[str, Any] = dict(args)
    for name, expr in lifted.sizes:
        env[name] = evaluate(expr, env)
    return env


def _allocate(local: Local, env: Mapping[str, Any], poison: bool) -> np.ndarray:
    shape = tuple(int(evaluate(s, env)) for s in local.shape)
    if any(d < 0 for d in shape):
        raise HostError(f"{local.name} would have a negative dimension {shape}")
    if local.fill == "zeros":
        return np.zeros(shape, local.dtype)
    if local.fill == "ones":
        return np.ones(shape, local.dtype)
    if local.fill == "empty":
        if poison and local.dtype in POISONED:
            return np.full(shape, poison_value(local.dtype), local.dtype)
        return np.zeros(shape, local.dtype)
    if local.fill.startswith("full:"):
        return np.full(shape, evaluate(local.fill[5:], env), local.dtype)
    if local.fill.startswith("copy:"):
        return np.array(env[local.fill[5:]], dtype=local.dtype, copy=True).reshape(shape)
    raise HostError(f"{local.name}: unknown fill {local.fill}")


def plan(lifted: Lifted, args: Mapping[str, Any], poison: bool = True) -> Plan:
    """The concrete run of `lifted` on `args` (arrays by parameter name are copied; scalars as given)."""
    env = sizes_of(
        lifted, {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    )
    buffers: dict[str, np.ndarray] = {}
    for p in lifted.params:
        if p.kind == "array":
            a = env[p.name]
            if not isinstance(a, np.ndarray):
                raise HostError(f"{p.name} is not an array")
            buffers[p.name] = np.ascontiguousarray(a)
    for local in lifted.locals:
        buffers[local.name] = _allocate(local, env, poison)
        env[local.name] = buffers[local.name]
    for t in lifted.temporaries:
        buffers[t.name] = _allocate(t, env, poison=False)
        env[t.name] = buffers[t.name]
    index = {k.name: i for i, k in enumerate(lifted.kernels)}
    names = {n: n for n in buffers}  # a name -> the buffer it refers to now (swaps move them)
    launches: list[PlanLaunch] = []

    def resolve(step: Launch, local_env: Mapping[str, Any]) -> PlanLaunch:
        values: list[str | np.generic] = []
        for a in step.args:
            if a.kind == "array":
                values.append(names[a.value])
            else:
                v = evaluate(a.value, local_env)
                values.append(np.dtype(a.dtype).type(v))
        grid = tuple(max(1, int(evaluate(g, local_env))) for g in step.grid)
        shared = int(evaluate(step.shared, local_env)) if step.shared != "0" else 0
        return PlanLaunch(index[step.kernel], grid, tuple(step.block), tuple(values), shared)

    def run(step: Launch | Repeat, outer_env: Mapping[str, Any]) -> None:
        if not isinstance(step, Repeat):
            launches.append(resolve(step, outer_env))
            return
        start, stride = int(evaluate(step.start, outer_env)), int(evaluate(step.step, outer_env))
        for k in range(int(evaluate(step.count, outer_env))):
            local_env = {**outer_env, step.var: start + k * stride}
            # arrays by their current names: a swap changes which buffer a name is
            for name in names:
                local_env[name] = buffers[names[name]]
            for inner in step.body:
                run(inner, local_env)
            for a, b in step.swaps:
                names[a], names[b] = names[b], names[a]

    for step in lifted.steps:
        run(step, env)
    written = _written(lifted)
    results = tuple(n for n in buffers if n in written)
    returns = lifted.returns
    if returns and not returns.startswith("scalar:"):
        returns = names.get(returns, returns)
    elif returns.startswith("scalar:"):
        results = (*results, returns[7:])
    if returns and not returns.startswith("scalar:") and returns not in results:
        results = (*results, returns)
    return Plan(tuple(k.name for k in lifted.kernels), buffers, tuple(launches), results, returns)


def _written(lifted: Lifted) -> set[str]:
    """The parameters and locals the function writes (or that a swap can leave holding results)."""
    return set(lifted.writes)
