"""porter.lift.analyze: which loop nests become which kernels, and what is refused with which line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from porter.lift.analyze import analyze
from porter.lift.ir import Lifted, Repeat
from porter.lift.kernels import unit

ROOT = Path(__file__).resolve().parents[3]
PATTERNS = ROOT / "samples" / "python" / "lift_patterns.py"


def _lift(source: str, only: str | None = None) -> tuple[dict[str, Lifted], dict[str, tuple[int, str]]]:
    a = analyze("t.py", textwrap.dedent(source), only)
    return {f.function: f for f in a.lifted}, {r.function: (r.line, r.reason) for r in a.refused}


@pytest.fixture(scope="module")
def samples() -> tuple[dict[str, Lifted], dict[str, tuple[int, str]]]:
    a = analyze(str(PATTERNS), PATTERNS.read_text())
    return {f.function: f for f in a.lifted}, {r.function: (r.line, r.reason) for r in a.refused}


@pytest.mark.parametrize(
    ("function", "patterns"),
    [
        ("saxpy", ("map",)),
        ("blend_2d", ("map",)),
        ("gaussian_3d", ("map",)),
        ("sum_of_squares", ("reduction",)),
        ("peak", ("reduction",)),
        ("matvec", ("row-reduction",)),
        ("softmax_rows", ("row-reduction",)),
        ("heat_step", ("stencil",)),
        ("byte_histogram", ("histogram",)),
        ("running_total", ("statements", "scan")),
    ],
)
def test_every_pattern_of_the_samples_is_lifted(samples, function: str, patterns: tuple[str, ...]) -> None:
    lifted, _ = samples
    assert lifted[function].patterns == patterns


def test_a_time_loop_becomes_a_repeat_of_its_parallel_nests_with_the_swap(samples) -> None:
    lifted, _ = samples
    f = lifted["diffuse"]
    assert "time-stepping" in f.patterns
    (rep,) = [s for s in f.steps if isinstance(s, Repeat)]
    assert rep.var == "t" and rep.swaps == (("u", "tmp"),) and len(rep.body) == 3
    assert set(f.writes) == {"u", "tmp"}


def test_refusals_name_the_line_and_the_reason(samples) -> None:
    _, refused = samples
    line, why = refused["decay"]
    assert line == 125 and "loop-carried dependence" in why and "y[i - 1]" in why
    line, why = refused["noisy_scale"]
    assert line == 132 and "calls print()" in why
    line, why = refused["collect_positive"]
    assert line == 140 and "found.append()" in why


def test_a_map_over_the_outer_index_with_a_reduction_inside_is_not_a_reduction() -> None:
    lifted, _ = _lift(
        """
        import numpy as np
        def rowsum(a: np.ndarray, out: np.ndarray) -> None:
            n, m = a.shape
            for i in range(n):
                s = 0.0
                for j in range(m):
                    s += a[i, j]
                out[i] = s
        """
    )
    assert lifted["rowsum"].patterns == ("row-reduction",)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("for i in range(1, n):\n        x[i] = x[i - 1] * 0.5 + 1.0", "loop-carried dependence"),
        ("for i in range(n):\n        warnings.warn('x')", "calls warnings.warn()"),
        ("for i in range(n):\n        x[i] = cb(x[i])", "calls cb()"),
        ("k = 0\n    while k < n:\n        k += 1", "while loop"),
        ("for i in range(n):\n        x[i] = obj.scale * x[i]", "touches a Python object"),
        ("for i in range(n):\n        x[0] = x[i]", "several iterations write the same element"),
        ("t = 0.0\n    for i in range(n):\n        t = t * 0.5 + x[i]", "not an accumulation"),
        ("for i in range(n):\n        x[i] = [1, 2][0]", "a list"),
        # a row that reads what other rows write is a dependence, not a reduction within the row
        (
            "for i in range(n):\n        for j in range(i):\n            x[i] += x[j]",
            "x[i] at line 7 reads x[j] written by an earlier i iteration",
        ),
    ],
)
def test_what_is_not_parallel_is_refused(body: str, reason: str) -> None:
    src = f"import warnings\nimport numpy as np\ndef f(x: np.ndarray, cb, obj):\n    n = x.shape[0]\n    {body}\n"
    _, refused = _lift(src)
    assert "f" in refused and reason in refused["f"][1], refused


def test_shapes_meet_through_loop_bounds_and_int_arrays_that_index_are_bounded() -> None:
    lifted, _ = _lift(
        """
        import numpy as np
        def f(a: np.ndarray, b: np.ndarray, keys: np.ndarray, h: np.ndarray):
            n = a.shape[0]
            for i in range(1, n - 1):
                b[i] = a[i - 1] + a[i + 1]
            for i in range(keys.shape[0]):
                h[keys[i]] += 1.0
        """
    )
    p = {x.name: x for x in lifted["f"].params}
    assert p["a"].shape == ("n",) and p["b"].shape == ("n",)  # b[i] with i < n - 1: b has n elements
    assert p["keys"].dtype == "int64" and p["keys"].index_bound == "h.shape[0]"
    assert any("float64 assumed" in note for note in lifted["f"].notes)


def test_kernels_compute_in_numpys_types() -> None:
    # a Python float with a float32 array stays float32 (NEP 50); math.sqrt gives a Python float
    lifted, _ = _lift(
        """
        import math
        import numpy as np
        import numpy.typing as npt
        def f(a: float, x: npt.NDArray[np.float32], y: npt.NDArray[np.float32]) -> None:
            for i in range(x.shape[0]):
                y[i] = a * x[i] + math.sqrt(abs(x[i]))
        """
    )
    text = unit(lifted["f"].kernels)
    assert "((float)(v_a)) * v_x[" in text
    assert "sqrt(((double)(fabsf(v_x[" in text


def test_a_histogram_accumulates_atomically_and_a_reduction_in_two_passes() -> None:
    lifted, _ = _lift(
        """
        import numpy as np
        import numpy.typing as npt
        def hist(d: npt.NDArray[np.int32], h: npt.NDArray[np.int64]) -> None:
            for i in range(d.shape[0]):
                h[d[i]] += 1
        def total(x: npt.NDArray[np.float32]) -> float:
            s = 0.0
            for i in range(x.shape[0]):
                s += x[i]
            return s
        """
    )
    assert "atomicAdd((unsigned long long*)&v_h[" in unit(lifted["hist"].kernels)
    names = [k.name for k in lifted["total"].kernels]
    assert names == ["total_reduce1_blocks", "total_reduce1_final_0"]
    assert lifted["total"].returns == "scalar:__s_s" and "s" in lifted["total"].reorders


def test_a_syntax_error_and_an_unknown_function_are_refusals_with_lines() -> None:
    a = analyze("bad.py", "def f(:\n  pass\n")
    assert a.refused and a.refused[0].reason.startswith("not valid Python") and a.refused[0].line == 1
    b = analyze("ok.py", "def g():\n    pass\n", only="h")
    assert "no top-level function named h" in b.refused[0].reason
