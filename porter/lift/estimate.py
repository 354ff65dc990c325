"""The static cost of a Python function's loops at given arguments: the bytes its arrays move and the
floating-point operations its loop bodies do -- what the performance model's roofline needs to put a
floor under any kernel that computes the same thing, before one is run.

* bytes: every array argument is read once; the arrays the function changes (as its reference run shows)
  are written once: the compulsory traffic;
* FLOPs: each loop's own statements (not its inner loops') count their arithmetic outside subscripts
  (+ - * / **, and one per math call) times the loop's trip count times the trip counts of the loops around it, each
  evaluated on the host from the arguments (an inner loop whose bounds depend on an outer variable
  counts at its outer bound: an upper estimate).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import numpy as np

from porter.lift.hostexpr import HostError, evaluate, sizes_of
from porter.lift.ir import Lifted
from porter.results import KernelCost

_MATH = ("math", "np", "numpy")


def cost(lifted: Lifted, args: Mapping[str, Any], changed: set[str], text: str) -> KernelCost:
    env = sizes_of(lifted, dict(args))
    arrays = {
        p.name: env[p.name]
        for p in lifted.params
        if p.kind == "array" and isinstance(env.get(p.name), np.ndarray)
    }
    read = sum(int(a.nbytes) for a in arrays.values())
    written = sum(int(a.nbytes) for n, a in arrays.items() if n in changed)
    floats = [a.dtype.name for a in arrays.values() if a.dtype.kind == "f"]
    dtype = "float32" if floats and all(d == "float32" for d in floats) else "float64"
    module = ast.parse(text)
    fn = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == lifted.function), None)
    flops = float(_body_flops(fn.body, env, 1.0)) if fn is not None else 0.0
    largest = max((int(a.size) for a in arrays.values()), default=1)
    notes = (
        "estimated from the Python function's loops (inner loops with variable bounds at their outer bound)",
    )
    return KernelCost(
        kernel=lifted.function, size={k: int(v) for k, v in env.items() if isinstance(v, int) and not isinstance(v, bool)},
        threads=largest, bytes_read=read, bytes_written=written, flops={dtype: flops} if flops else {},
        flops_per_thread={dtype: flops / largest} if flops and largest else {}, notes=notes,
    )  # fmt: skip


def _body_flops(body: list[ast.stmt], env: Mapping[str, Any], times: float) -> float:
    total = 0.0
    for s in body:
        if isinstance(s, ast.For):
            trips = _trips(s, env)
            total += _body_flops(s.body, env, times * trips)
        elif isinstance(s, (ast.If, ast.While)):
            total += (
                times * _ops(s.test) + _body_flops(s.body, env, times) + _body_flops(s.orelse, env, times)
            )
        else:
            total += times * _ops(s)
    return total


def _trips(s: ast.For, env: Mapping[str, Any]) -> float:
    it = s.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("range", "prange"):
        try:
            return float(evaluate(f"len({ast.unparse(it)})", env))
        except HostError:
            # bounds that name an outer loop's variable: the stop's largest value, when the host knows it
            for a in reversed(it.args[:2]):
                try:
                    return float(max(0, evaluate(ast.unparse(a), env)))
                except HostError:
                    continue
    return 1.0


def _ops(node: ast.AST) -> int:
    """Arithmetic operations and math calls in `node`, index arithmetic (inside subscripts) excluded: a
    floor must stay a lower bound, and ``x[i - 1]`` costs a GPU no floating-point operation."""
    if isinstance(node, ast.Subscript):
        return _ops(node.value)
    n = 0
    arith = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, arith):
        n += 1
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        n += 1 if isinstance(node.func.value, ast.Name) and node.func.value.id in _MATH else 0
    return n + sum(_ops(child) for child in ast.iter_child_nodes(node))
