"""porter.lift.deps: exact dependences with isl, the transformations they prove legal (or not), the
sentences of refusals -- and, through porter.lift.analyze, what the loop-nest collection becomes."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from porter.lift.analyze import analyze
from porter.lift.deps import CONSERVATIVE, Nest, NonAffine
from porter.lift.ir import Launch, Lifted, Repeat

ROOT = Path(__file__).resolve().parents[3]
COLLECTION = ROOT / "samples" / "python" / "loop_nests.py"


def _nest(src: str, arrays: str, params: dict[str, bool] | None = None, fixed: str = "") -> Nest:
    body = ast.parse(textwrap.dedent(src)).body
    around = [n for n in ast.parse(textwrap.dedent(fixed)).body if isinstance(n, ast.For)] if fixed else []
    return Nest(body, arrays.split(), params or {"n": True, "m": True}, fixed=around)


def _lift(source: str) -> tuple[dict[str, Lifted], dict[str, tuple[int, str]]]:
    a = analyze("t.py", textwrap.dedent(source))
    return {f.function: f for f in a.lifted}, {r.function: (r.line, r.reason) for r in a.refused}


# ----------------------------------------------------------------------------- the dependences


def test_a_flow_dependence_carried_by_j_is_named_with_its_lines_and_the_parallel_loops() -> None:
    n = _nest(
        """
        for i in range(n):
            for j in range(1, m):
                A[i, j] = A[i, j - 1] + B[i, j]
        """,
        "A B",
    )
    (d,) = n.dependences
    assert (d.kind, d.carried, d.unit, d.independent) == ("flow", ("j",), ("j",), False)
    assert n.parallel("i") and not n.parallel("j")
    assert n.explain(d) == (
        "loop-carried dependence: A[i, j] at line 4 reads A[i, j - 1] written by the previous j iteration "
        "(line 4): sequential in j; parallel in i"
    )


def test_triangular_and_parametric_bounds_are_exact() -> None:
    # at a fixed k, rows i > k never write row k: i is parallel (LU's update); x[i] with i > j likewise
    lu = _nest(
        """
        for i in range(k + 1, n):
            A[i, k] /= A[k, k]
            for j in range(k + 1, n):
                A[i, j] -= A[i, k] * A[k, j]
        """,
        "A",
        fixed="for k in range(n):\n    pass\n",
    )
    assert lu.band_violation(["i"]) is None and lu.parallel("j")
    # x[i] += x[j] over j < i: rows read what earlier rows wrote
    tri = _nest("for i in range(n):\n    for j in range(i):\n        x[i] += x[j]\n", "x")
    assert not tri.parallel("i")


def test_non_affine_subscripts_and_negative_indices_fall_back_to_the_conservative_rule() -> None:
    with pytest.raises(NonAffine) as err:
        _nest("for i in range(n):\n    h[keys[i]] += 1.0\n", "h keys")
    assert (
        "non-affine subscript h[keys[i]] at line 2" in err.value.reason and CONSERVATIVE in err.value.reason
    )
    with pytest.raises(NonAffine) as neg:  # x[i - 1] at i = 0 is x[-1], the last element
        _nest("for i in range(n):\n    y[i] = x[i - 1]\n", "x y")
    assert "may be a negative index" in neg.value.reason


# ----------------------------------------------------------------------------- transformations


GEMM = """
for i in range(n):
    for j in range(m):
        C[i, j] *= beta
    for k in range(p):
        for j in range(m):
            C[i, j] += A[i, k] * B[k, j]
"""


def test_interchange_moving_the_reduction_loop_inside_is_legal_and_a_skewed_one_is_not() -> None:
    g = _nest(GEMM, "A B C", {"n": True, "m": True, "p": True})
    assert g.distribution_violation() is None
    assert g.interchange_violation(1, ["i", "j", "k"]) is None
    skew = _nest(
        "for i in range(1, n):\n    for j in range(m - 1):\n        A[i, j] = A[i - 1, j + 1]\n", "A"
    )
    assert skew.interchange_violation(0, ["i", "j"]) is None
    bad = skew.interchange_violation(0, ["j", "i"])  # distance (1, -1) would become (-1, 1)
    assert bad is not None and bad.kind == "flow"


def test_distribution_is_illegal_when_a_later_statement_feeds_an_earlier_one() -> None:
    # LU: the update of step k writes A[k + 1, k + 1], which the next step's division reads
    lu = _nest(
        """
        for k in range(n):
            for i in range(k + 1, n):
                A[i, k] /= A[k, k]
                for j in range(k + 1, n):
                    A[i, j] -= A[i, k] * A[k, j]
        """,
        "A",
    )
    d = lu.distribution_violation()
    assert d is not None and d.source.stmt == 1 and d.target.stmt == 0 and "k" in d.carried


def test_gemm_with_the_scaling_before_the_k_loop_is_distributed_and_interchanged() -> None:
    lifted, refused = _lift(
        "import numpy as np\ndef gemm(alpha: float, beta: float, A: np.ndarray, B: np.ndarray, C: np.ndarray):\n"
        "    n, m = C.shape\n    p = A.shape[1]\n"
        + textwrap.indent(GEMM.replace("A[i, k] * B", "alpha * A[i, k] * B"), "    ")
    )
    assert not refused, refused
    f = lifted["gemm"]
    assert f.patterns == ("map", "row-reduction") and not any(isinstance(s, Repeat) for s in f.steps)
    assert any("distributed" in note for note in f.notes)


def test_each_nest_of_a_time_loop_is_judged_on_its_own() -> None:
    # FDTD-like: t indexes an array; each nest is parallel at a fixed t -> a kernel per nest per step
    lifted, refused = _lift(
        """
        import numpy as np
        def f(steps: int, ey: np.ndarray, hz: np.ndarray, fict: np.ndarray):
            n, m = ey.shape
            for t in range(steps):
                for j in range(m):
                    ey[0, j] = fict[t]
                for i in range(1, n):
                    for j in range(m):
                        ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])
                for i in range(n - 1):
                    for j in range(m):
                        hz[i, j] = hz[i, j] - 0.7 * (ey[i + 1, j] - ey[i, j])
        """
    )
    assert not refused, refused
    (rep,) = [s for s in lifted["f"].steps if isinstance(s, Repeat)]
    assert rep.var == "t" and len(rep.body) == 3


def test_a_nest_of_a_time_loop_with_its_own_carried_dependence_is_refused_with_it() -> None:
    _, refused = _lift(
        """
        import numpy as np
        def f(steps: int, a: np.ndarray):
            n = a.shape[0]
            for t in range(steps):
                for i in range(1, n - 1):
                    for j in range(1, n - 1):
                        a[i, j] = (a[i - 1, j] + a[i, j - 1] + a[i + 1, j] + a[i, j + 1]) / 4.0
        """
    )
    line, why = refused["f"]
    assert line == 8
    assert why.startswith(
        "t runs in order (sequential in t); at each t: loop-carried dependence: a[i, j] at line 8 reads"
    )
    assert "sequential in i, j" in why


def test_floyd_warshall_k_is_sequential_and_its_step_is_refused_with_the_row_and_column_it_writes() -> None:
    # at a fixed k the step writes row k and column k, which it reads: parallel only when
    # path[k, k] >= 0 -- a property of the data, not of the loops, so porter refuses it
    fw = _nest(
        "for i in range(n):\n    for j in range(n):\n        p[i, j] = min(p[i, j], p[i, k] + p[k, j])\n",
        "p",
        fixed="for k in range(n):\n    pass\n",
    )
    bad = fw.band_violation(["i", "j"])
    assert bad is not None and bad.kind == "flow" and bad.target.text in ("p[i, k]", "p[k, j]")
    _, refused = _lift(
        "def fw(path):\n    n = path.shape[0]\n    for k in range(n):\n        for i in range(n):\n"
        "            for j in range(n):\n                path[i, j] = min(path[i, j], path[i, k] + path[k, j])\n"
    )
    assert refused["fw"][1].startswith(
        "k runs in order (sequential in k); at each k: loop-carried dependence: path[i, j]"
    )


def test_a_real_carried_dependence_is_never_parallelised() -> None:
    # a[i, j] = a[i - 1, j] + 1: i carries the dependence; j is parallel -> i stays a host loop
    lifted, refused = _lift(
        """
        import numpy as np
        def f(a: np.ndarray):
            n, m = a.shape
            for i in range(1, n):
                for j in range(m):
                    a[i, j] = a[i - 1, j] + 1.0
        """
    )
    assert not refused
    (rep,) = [s for s in lifted["f"].steps if isinstance(s, Repeat)]
    assert rep.var == "i"
    # the same with the dependence along j is parallel in i only, never in j: a row kernel
    lifted, refused = _lift(
        """
        import numpy as np
        def g(a: np.ndarray):
            n, m = a.shape
            for i in range(n):
                for j in range(1, m):
                    a[i, j] = a[i, j - 1] + 1.0
        """
    )
    assert not refused, refused
    (k,) = lifted["g"].kernels
    assert lifted["g"].patterns == ("row-kernel",) and "for (long long v_j = 1; v_j < v_m;" in k.source
    (launch,) = lifted["g"].steps
    assert isinstance(launch, Launch) and len(launch.grid) == 1  # threads over i only


# ----------------------------------------------------------------------------- row kernels


def test_an_adi_sweep_is_a_row_kernel_per_step_its_threads_running_j_in_order() -> None:
    # i carries nothing (each column's sweep touches its own p[i, :], q[i, :], v[:, i]); both j loops
    # carry p[i, j - 1] / v[j + 1, i]: a thread per i runs them in order, one launch per step
    lifted, refused = _lift(
        """
        import numpy as np
        def adi(steps: int, u: np.ndarray, v: np.ndarray, p: np.ndarray):
            n = u.shape[0]
            for t in range(steps):
                for i in range(1, n - 1):
                    p[i, 0] = 0.0
                    for j in range(1, n - 1):
                        p[i, j] = 0.5 / (p[i, j - 1] + 2.0) + u[j, i]
                    v[n - 1, i] = 1.0
                    for j in range(n - 2, 0, -1):
                        v[j, i] = p[i, j] * v[j + 1, i]
        """
    )
    assert not refused, refused
    f = lifted["adi"]
    (rep,) = f.steps
    assert isinstance(rep, Repeat) and rep.var == "t" and len(rep.body) == 1
    (k,) = f.kernels
    assert k.pattern == "row-kernel" and "v_j > 0; v_j += (-1))" in k.source
    assert any("a thread per i, each running its j loop in order" in note for note in f.notes)
    # the model behind it: i parallel, j sequential
    model = _nest(
        "for i in range(1, n - 1):\n    for j in range(1, n - 1):\n        p[i, j] = p[i, j - 1] + u[j, i]\n",
        "p u",
    )
    assert model.band_violation(["i"]) is None and not model.parallel("j")


def test_a_row_kernel_is_refused_when_the_outer_loop_carries_a_dependence_too() -> None:
    # a[i, j] reads a[i - 1, j - 1]: a thread per i would read a row another thread is writing
    model = _nest(
        "for i in range(1, n):\n    for j in range(1, m):\n        a[i, j] = a[i, j - 1] + a[i - 1, j - 1]\n",
        "a",
    )
    bad = model.band_violation(["i"])
    assert bad is not None and bad.target.text == "a[i - 1, j - 1]" and bad.carried == ("i",)
    lifted, refused = _lift(
        """
        import numpy as np
        def f(steps: int, a: np.ndarray):
            n, m = a.shape
            for t in range(steps):
                for i in range(1, n):
                    for j in range(1, m):
                        a[i, j] = a[i, j - 1] + a[i - 1, j - 1]
        def g(p: np.ndarray):
            n, m = p.shape
            for i in range(1, n):
                p[i, 0] = 0.0
                for j in range(1, m):
                    p[i, j] = 0.5 * p[i, j - 1] + p[i - 1, j - 1]
        """
    )
    assert not lifted, lifted
    line, why = refused["f"]
    assert line == 8 and "loop-carried dependence: a[i, j] at line 8 reads a[i" in why
    assert "sequential in t" in why and "sequential in i, j" in why
    line, why = refused["g"]
    assert line == 14 and why.startswith("i runs in order (sequential in i); at each i: loop-carried")
    assert "p[i, j] at line 14 reads p[i, j - 1]" in why
    # with only the outer dependence the nest is still lifted -- i on the host, j parallel per step
    lifted, refused = _lift(
        """
        import numpy as np
        def h(a: np.ndarray):
            n, m = a.shape
            for i in range(1, n):
                for j in range(1, m):
                    a[i, j] = a[i - 1, j - 1] * 0.5
        """
    )
    assert not refused and "row-kernel" not in lifted["h"].patterns
    assert [s.var for s in lifted["h"].steps if isinstance(s, Repeat)] == ["i"]


def test_row_oriented_back_substitution_reduces_into_its_scalar_at_each_host_step() -> None:
    # x[i] reads x[j] (j > i) written by earlier i iterations: i runs on the host; at each i, s = x[i]
    # is one thread's write, the j loop a reduction into s, then x[i] = s / U[i, i] one thread's
    lifted, refused = _lift(
        """
        import numpy as np
        def back(U: np.ndarray, x: np.ndarray):
            n = U.shape[0]
            for i in range(n - 1, -1, -1):
                s = x[i]
                for j in range(i + 1, n):
                    s -= U[i, j] * x[j]
                x[i] = s / U[i, i]
        """
    )
    assert not refused, refused
    f = lifted["back"]
    (rep,) = f.steps
    assert isinstance(rep, Repeat) and rep.var == "i"
    assert [b.kernel for b in rep.body] == [
        "back_value1", "back_reduce2_blocks", "back_reduce2_final_0", "back_step3"
    ]  # fmt: skip
    assert "reduction" in f.patterns and "row-kernel" not in f.patterns
    assert [t.name for t in f.temporaries if t.shape == ("1",)] == ["__s_s"]
    # at a fixed i the j loop writes nothing: no dependence, a reduction of one element
    step = _nest(
        "for j in range(i + 1, n):\n    s -= U[i, j] * x[j]\n", "U x", fixed="for i in range(n):\n    pass\n"
    )
    assert step.dependences == []
    # the accumulator set from a size the host holds is not turned into device data
    _, refused = _lift(
        """
        import numpy as np
        def bad(U: np.ndarray, x: np.ndarray):
            n = U.shape[0]
            for i in range(n - 1, -1, -1):
                n = x[i]
                for j in range(i + 1, U.shape[0]):
                    n -= U[i, j] * x[j]
                x[i] = n
        """
    )
    assert "bad" in refused


# ----------------------------------------------------------------------------- the Python people write


def test_chained_assignment_dtype_aliases_and_module_constants_are_read() -> None:
    lifted, refused = _lift(
        """
        import numpy as np
        DATA_TYPE = np.float32
        SCALE = 2.5
        def f(x: np.ndarray, y: np.ndarray, z: np.ndarray):
            for i in range(x.shape[0]):
                y[i] = z[i] = DATA_TYPE(x[i]) * SCALE
        def g(x: np.ndarray):
            for i in range(x.shape[0]):
                x[i] = t = x[i] + 1.0
        """
    )
    assert "f" in lifted, refused
    assert "g" in refused  # the value is computed once and read by its targets: not split


# ----------------------------------------------------------------------------- the collection


def _expected() -> dict[str, str]:
    out = {}
    for node in ast.parse(COLLECTION.read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):  # (not its self-check)
            doc = " ".join((ast.get_docstring(node) or "").split())
            out[node.name] = doc.split("expect:", 1)[1].split()[0]
    return out


def test_the_collection_has_25_kernels_and_each_is_lifted_or_refused_as_it_says() -> None:
    expected = _expected()
    assert len(expected) >= 25
    a = analyze(str(COLLECTION), COLLECTION.read_text())
    got = {f.function: "lifted" for f in a.lifted} | {r.function: "refused" for r in a.refused}
    assert got == expected
    for r in a.refused:  # every refusal names a dependence, with its line
        assert "dependence: " in r.reason and " at line " in r.reason, r


def test_a_numpy_scalar_conversion_is_a_host_value() -> None:
    from porter.lift.hostexpr import evaluate

    v = evaluate("np.float64(0.1)", {})
    assert type(v).__name__ == "float64" and v == 0.1
