"""NumPy's promotion rules for the scalars a loop body computes with, and their C spellings.

A loop body's arithmetic must round as the Python function's does: ``a[i] * 2.0`` with ``a`` float32 is
float32 arithmetic (NumPy 2, NEP 50: a Python float is a *weak* scalar), ``math.sqrt(a[i])`` is a
Python float (float64), ``x[i] / 2`` of an int array is float64.  Each expression gets a :class:`T`
(dtype, weak) and the translator casts operands to the result's C type, so the kernel computes in the
same precision as the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

C_TYPES = {
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "int64": "long long",
    "bool": "unsigned char",  # NumPy's bool is one byte
    "uint8": "unsigned char",
}


@dataclass(frozen=True)
class T:
    """A scalar's dtype, and whether it is a weak Python scalar (an ``int``/``float`` literal or value)."""

    dtype: str
    weak: bool = False

    @property
    def is_float(self) -> bool:
        return self.dtype in ("float32", "float64")

    @property
    def is_int(self) -> bool:
        return self.dtype in ("int32", "int64", "bool", "uint8")

    @property
    def c(self) -> str:
        return C_TYPES[self.dtype]


PY_INT = T("int64", weak=True)
PY_FLOAT = T("float64", weak=True)
BOOL = T("bool")


def promote(a: T, b: T) -> T:
    """The type of ``a op b`` for + - * (NEP 50): two strong types promote as NumPy arrays do; a weak
    Python scalar takes the strong operand's type unless it is a float meeting an integer (float64)."""
    if a.weak and b.weak:
        return PY_FLOAT if (a.is_float or b.is_float) else PY_INT
    if a.weak or b.weak:
        weak, strong = (a, b) if a.weak else (b, a)
        if weak.is_float and not strong.is_float:
            return T("float64")
        return T(_arith(strong.dtype))
    return T(str(np.result_type(_arith(a.dtype), _arith(b.dtype))))


def true_divide(a: T, b: T) -> T:
    """``a / b``: integers divide to float64."""
    t = promote(a, b)
    if t.is_float:
        return t
    return PY_FLOAT if t.weak else T("float64")


def _arith(dtype: str) -> str:
    """bool arithmetic is integer arithmetic in C (NumPy's bool + bool is bool; porter computes an int)."""
    return "int64" if dtype == "bool" else dtype


def math_result(arg: T, module: str) -> T:
    """``math.sqrt(x)`` is a Python float whatever x is; ``np.sqrt(x)`` keeps a float32 argument float32
    (and turns an integer into float64)."""
    if module == "math":
        return PY_FLOAT
    if arg.is_float:
        return arg
    return T("float64", weak=arg.weak)


def identity(op: str, dtype: str) -> str:
    """The C literal that leaves `op`'s accumulation unchanged."""
    if op == "+":
        return "0"
    if op == "*":
        return "1"
    floats = dtype in ("float32", "float64")
    limits = {
        "int32": ("(-2147483647 - 1)", "2147483647"),
        "int64": ("(-9223372036854775807LL - 1)", "9223372036854775807LL"),
    }
    if op == "max":
        return "(-INFINITY)" if floats else limits.get(dtype, ("0", "1"))[0]
    if op == "min":
        return "INFINITY" if floats else limits.get(dtype, ("0", "1"))[1]
    raise ValueError(op)


def combine(op: str, a: str, b: str, dtype: str) -> str:
    """C for ``a op b`` of one accumulation (max/min of floats as NumPy's NaN-propagating fmax is not:
    Python's ``max(s, x)`` keeps ``s`` when the comparison is false, which a ternary reproduces)."""
    if op in ("+", "*"):
        return f"({a} {op} {b})"
    if op == "max":
        return f"(({b}) > ({a}) ? ({b}) : ({a}))"
    if op == "min":
        return f"(({b}) < ({a}) ? ({b}) : ({a}))"
    raise ValueError(op)
