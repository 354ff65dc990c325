"""`porter generate`'s parts that need no device: the cost the roofline floors come from, the
reduced-precision screen and what the model is told about it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from porter.lift import model as lm
from porter.lift.analyze import analyze
from porter.lift.estimate import cost
from porter.lift.inputs import draw

PATTERNS = Path(__file__).resolve().parents[3] / "samples" / "python" / "lift_patterns.py"
TEXT = PATTERNS.read_text()


def _lifted(name: str):
    (f,) = analyze(str(PATTERNS), TEXT, only=name).lifted
    return f


def test_saxpy_moves_three_arrays_and_does_two_flops_an_element() -> None:
    f = _lifted("saxpy")
    args = draw(f, {"n": 1000}, seed=1)
    c = cost(f, args, {"y"}, TEXT)
    assert c.bytes_read == 2 * 1000 * 4 and c.bytes_written == 1000 * 4
    assert c.flops == {"float32": 2000.0}  # a * x[i] + y[i]; the loop's index arithmetic is no flop
    assert c.threads == 1000


def test_matvec_counts_the_inner_loop_times_the_outer() -> None:
    f = _lifted("matvec")
    args = draw(f, {"n": 30, "m": 20}, seed=1)
    c = cost(f, args, {"y"}, TEXT)
    assert c.flops == {"float64": 2.0 * 30 * 20}
    assert c.bytes_read == (30 * 20 + 20 + 30) * 8 and c.bytes_written == 30 * 8


def test_index_arithmetic_is_not_counted() -> None:
    text = "def f(x, y):\n    for i in range(1, x.shape[0]):\n        y[i - 1] = x[i + 1 - 1] * 2.0\n"
    fn = analyze("f.py", text, only="f")
    (f,) = fn.lifted
    args = {"x": np.ones(50), "y": np.zeros(50)}
    assert cost(f, args, {"y"}, text).flops == {"float64": 49.0}


def test_reduced_precision_is_found_and_only_allowed_when_asked() -> None:
    assert lm.reduced_precision("__half h = __float2half(x[i]);") == "float16"
    assert lm.reduced_precision("__nv_bfloat16 b = __float2bfloat16(v);") == "bfloat16"
    assert lm.reduced_precision("float halfway = 0.5f; // no half here") == ""
    # intrinsics alone give it away (no __half declared)
    assert (
        lm.reduced_precision("c[i] = __half2float(__hadd(__float2half(a[i]), __float2half(b[i])));")
        == "float16"
    )
    assert lm.reduced_precision("y[i] = __bfloat162float(__hadd(__float2bfloat16(x), b));") == "bfloat16"
    assert lm.reduced_precision("x = __hadd_sat(a, b);") == "float16"
    assert lm.reduced_precision("half h = x; half2* p = q;") == "float16"
    assert lm.reduced_precision("int half = blockDim.x / 2; if (t < half) s[t] += s[t + half];") == ""
    assert lm.allowed("FP16 is fine for this") and lm.allowed("bf16 ok") and lm.allowed("mixed precision")
    assert not lm.allowed("as fast as possible, least memory") and not lm.allowed("")


def test_the_model_is_told_whether_half_precision_is_allowed() -> None:
    from porter.lift.analyze import signature

    params, bound = signature(TEXT, "sum_of_squares")  # type: ignore[misc]
    c = lm.contract("sum_of_squares", params, bound, "float64", "def sum_of_squares(x): ...", ())
    assert not isinstance(c, str)
    strict, loose = lm.constraints(c, {}), lm.constraints(c, {}, reduced=True)
    assert "result[0]" in strict and "precision NumPy uses" in strict and "cuda_fp16.h" not in strict
    assert "cuda_fp16.h" in loose and "precision NumPy uses" not in loose
    assert "sum_of_squares_model(double* x, long long d_x_0, double* result)" in c.stub()


def test_gpus_time_where_the_largest_array_fills_the_memory_system_step_counts_kept() -> None:
    from porter.lift.inputs import timing_sizes
    from porter.lift.ir import Lifted, Param

    params = (Param("a", "array", "float32", 2, ("rows", "cols")), Param("v", "array", "float32", 1, ("cols",)),
              Param("steps", "scalar", "int64"))  # fmt: skip
    fn = Lifted("f", 1, (), params, (), (), (), ())
    sized = timing_sizes(fn, {"rows": 600, "cols": 70, "steps": 5}, 1 << 24)
    assert sized["steps"] == 5  # not a dimension: a step count means the same work at any size
    assert abs(sized["rows"] * sized["cols"] / (1 << 24) - 1) < 0.01  # the 2-D array scaled on both axes
    assert abs(sized["rows"] / sized["cols"] - 600 / 70) < 0.01
    assert (
        timing_sizes(fn, {"rows": 8192, "cols": 4096, "steps": 5}, 1 << 24)["rows"] == 8192
    )  # never smaller
