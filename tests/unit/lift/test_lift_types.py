"""porter.lift.types: the dtype of each operation is NumPy's own (NEP 50), checked against NumPy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from porter.lift.hostexpr import HostError, evaluate
from porter.lift.types import PY_FLOAT, PY_INT, T, math_result, promote, true_divide

STRONG = [T("float32"), T("float64"), T("int32"), T("int64")]
WEAK = [PY_INT, PY_FLOAT]


def _value(t: T):  # a value of the type, as the Python function would hold it
    if t.weak:
        return 3 if t.dtype == "int64" else 1.5
    return np.dtype(t.dtype).type(3)


@pytest.mark.parametrize(("a", "b"), list(itertools.product(STRONG + WEAK, repeat=2)))
def test_promotion_matches_numpy(a: T, b: T) -> None:
    got = promote(a, b)
    real = _value(a) * _value(b)
    if a.weak and b.weak:
        assert got.weak and got.dtype == ("float64" if isinstance(real, float) else "int64")
    else:
        assert got.dtype == np.asarray(real).dtype.name, (a, b)
    div = _value(a) / _value(b)
    assert true_divide(a, b).dtype == (np.asarray(div).dtype.name if not (a.weak and b.weak) else "float64")


def test_math_functions_return_python_floats_and_numpy_keeps_float32() -> None:
    assert math_result(T("float32"), "math") == PY_FLOAT
    assert type(math.sqrt(np.float32(2))) is float
    assert math_result(T("float32"), "numpy").dtype == np.sqrt(np.float32(2)).dtype.name
    assert math_result(T("int32"), "numpy").dtype == np.sqrt(np.int32(2)).dtype.name


def test_host_expressions_are_evaluated_without_eval() -> None:
    x = np.zeros((5, 7))
    env = {"x": x, "n": 10}
    assert evaluate("len(range(1, n - 1, 1))", env) == 8
    assert evaluate("max(1, min(1024, (x.shape[1] + 255) // 256))", env) == 1
    assert evaluate("-float('inf')", env) == -math.inf
    assert evaluate("x.size * 2", env) == 70
    for bad in ("__import__('os')", "x.__class__", "open('f')", "[1, 2]", "n ** 1000"):
        with pytest.raises(HostError):
            evaluate(bad, env)
