"""porter.lift.deps: exact dependences with isl, the transformations they prove legal (or not), the
sentences of refusals -- and, through porter.lift.analyze, what the loop-nest collection becomes."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import numpy as np
import pytest

from porter.lift import inputs
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
    # each row reads the previous row mirrored (x[i - 1, m - 1 - j]): a distance along j of any sign and
    # size, so neither loop is parallel and no diagonal sweep puts the dependence on a later diagonal
    _, refused = _lift(
        """
        import numpy as np
        def f(steps: int, a: np.ndarray):
            n, m = a.shape
            for t in range(steps):
                for i in range(1, n):
                    for j in range(1, m):
                        a[i, j] = 0.5 * (a[i - 1, m - 1 - j] + a[i, j - 1])
        """
    )
    line, why = refused["f"]
    assert line == 8
    assert why == (
        "t runs in order (sequential in t); at each t: loop-carried dependence: a[i, j] at line 8 reads "
        "a[i - 1, m - 1 - j] written by the previous i iteration (line 8): sequential in i, j; no wavefront "
        "either: no diagonal sweep d = k * i + j (k from 1 to 4) puts it on a later diagonal"
    )


# ----------------------------------------------------------------------------- wavefronts


def _cells(f: Lifted, args: dict[str, object]) -> list[list[tuple[int, int]]]:
    """The (i, j) cells each wavefront launch of `f`'s plan runs, in launch order (from its arguments:
    the thread range p_s0 + [0, p_c0) of i, and j = p_w - k * i)."""
    from porter.lift.hostexpr import plan

    run = plan(f, args)
    out = []
    for launch in run.launches:
        kernel = f.kernels[launch.kernel]
        if kernel.pattern != "wavefront":
            continue
        named = dict(zip([p for p, _ in kernel.params], launch.args, strict=True))
        k = int(kernel.source.split("p_w - ")[1].split("LL")[0])
        start, count, w = int(named["p_s0"]), int(named["p_c0"]), int(named["p_w"])
        out.append([(i, w - k * i) for i in range(start, start + count)])
    return out


ALIGNMENT = """
import numpy as np
def align(a: np.ndarray, b: np.ndarray, H: np.ndarray):
    n = a.shape[0]
    m = b.shape[0]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            s = 1.0 if abs(a[i - 1] - b[j - 1]) < 0.5 else -1.0
            H[i, j] = max(H[i - 1, j - 1] + s, H[i - 1, j] - 1.0, H[i, j - 1] - 1.0)
"""


def test_a_dynamic_programming_table_is_a_wavefront_over_its_anti_diagonals() -> None:
    # H[i - 1, j - 1], H[i - 1, j], H[i, j - 1]: distances (1, 1), (1, 0), (0, 1) -- every one to a later
    # diagonal i + j; the cells of one diagonal are independent
    model = _nest(
        "for i in range(1, n):\n    for j in range(1, m):\n"
        "        H[i, j] = max(H[i - 1, j - 1], H[i - 1, j], H[i, j - 1])\n",
        "H",
    )
    assert not model.parallel("i") and not model.parallel("j")
    assert model.wavefront("i", "j") == (1, None)
    lifted, refused = _lift(ALIGNMENT)
    assert not refused, refused
    f = lifted["align"]
    assert f.patterns == ("wavefront",)
    (rep,) = f.steps
    assert isinstance(rep, Repeat) and rep.kind == "diagonal" and len(rep.body) == 1
    assert any("the diagonals d = i + j run in order" in note for note in f.notes)
    # H is (n + 1) x (m + 1): its dimensions are sizes plus one, not the sizes
    assert [p.shape for p in f.params] == [("n",), ("m",), ("n + 1", "m + 1")]
    assert inputs.size_names(f) == ["n", "m"]
    drawn = inputs.draw(f, {"n": 4, "m": 6}, seed=0)
    assert drawn["H"].shape == (5, 7) and inputs.sizes_of_args(f, drawn) == {"n": 4, "m": 6}
    n, m = 5, 7
    rng = np.random.default_rng(1)
    args = {"a": rng.integers(0, 3, n).astype(float), "b": rng.integers(0, 3, m).astype(float),
            "H": np.zeros((n + 1, m + 1))}  # fmt: skip
    cells = _cells(f, args)
    assert [c for launch in cells for c in launch] == sorted(
        ((i, j) for i in range(1, n + 1) for j in range(1, m + 1)), key=lambda c: (c[0] + c[1], c[0])
    )  # every cell once, diagonal by diagonal; the triangular ends have no idle threads
    assert all(len({i + j for i, j in launch}) == 1 for launch in cells)


def test_an_in_place_nine_point_sweep_needs_the_diagonals_2i_plus_j_and_gets_them() -> None:
    # a[i - 1, j + 1] (read, written by the previous i) and a[i + 1, j - 1] (read before the next i writes
    # it): distance (1, -1) lies on one diagonal i + j, so k = 1 is illegal and k = 2 the sweep
    sweep = (
        "for i in range(1, n - 1):\n    for j in range(1, n - 1):\n        a[i, j] = ("
        "a[i - 1, j - 1] + a[i - 1, j] + a[i - 1, j + 1] + a[i, j - 1] + a[i, j] + a[i, j + 1]"
        " + a[i + 1, j - 1] + a[i + 1, j] + a[i + 1, j + 1]) / 9.0\n"
    )
    model = _nest(sweep, "a")
    bad = model.skew_violation("i", "j", 1)
    assert bad is not None and {bad.source.text, bad.target.text} & {"a[i - 1, j + 1]", "a[i + 1, j - 1]"}
    assert model.skew_violation("i", "j", 2) is None
    assert model.wavefront("i", "j") == (2, None)
    src = "import numpy as np\ndef seidel(steps: int, a: np.ndarray):\n    n = a.shape[0]\n    for t in range(steps):\n"
    src += textwrap.indent(sweep, "        ")
    lifted, refused = _lift(src)
    assert not refused, refused
    f = lifted["seidel"]
    (rep,) = f.steps
    assert isinstance(rep, Repeat) and rep.var == "t"
    (inner,) = rep.body
    assert isinstance(inner, Repeat) and inner.kind == "diagonal"
    # the plan's order, run in Python with each diagonal's cells backwards, gives the Python's result
    n = 9
    a0 = np.random.default_rng(2).random((n, n))
    cells = _cells(f, {"steps": 2, "a": a0.copy()})
    assert len(cells) == 2 * (2 * (n - 3) + (n - 2))
    want, got = a0.copy(), a0.copy()
    for _ in range(2):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                want[i, j] = want[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    for launch in cells:
        for i, j in reversed(launch):
            got[i, j] = got[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    assert np.allclose(got, want, rtol=0, atol=1e-12)


def test_floyd_warshall_at_each_k_is_parallel_behind_a_check_of_the_diagonal() -> None:
    # at a fixed k the step writes row k and column k, which it reads: the exact dependences make i and j
    # sequential through them; but there it writes min(x, x + path[k, k]), which is x when
    # path[k, k] >= 0 -- checked by one thread before each step, which runs the step itself otherwise
    fw = _nest(
        "for i in range(n):\n    for j in range(n):\n        p[i, j] = min(p[i, j], p[i, k] + p[k, j])\n",
        "p",
        fixed="for k in range(n):\n    pass\n",
    )
    bad = fw.band_violation(["i", "j"])
    assert bad is not None and bad.kind == "flow" and bad.target.text in ("p[i, k]", "p[k, j]")
    text = (
        "import numpy as np\nimport numpy.typing as npt\n"
        "def fw(path: npt.NDArray[np.DTYPE]):\n    n = path.shape[0]\n    for k in range(n):\n        for i in range(n):\n"
        "            for j in range(n):\n                path[i, j] = min(path[i, j], path[i, k] + path[k, j])\n"
    )
    lifted, refused = _lift(text.replace("DTYPE", "float64"))
    assert not refused, refused
    f = lifted["fw"]
    assert f.patterns == ("guarded-step", "time-stepping")
    (rep,) = f.steps
    assert isinstance(rep, Repeat) and rep.var == "k" and len(rep.body) == 2
    check, step = f.kernels
    assert "< ((double)(0))" in check.source and "for (long long v_i = 0;" in check.source  # the fallback
    assert "(v_i != v_k)" in step.source and "(v_j != v_k)" in step.source  # row and column k untouched
    assert any("path[k, k] >= 0" in note for note in f.notes)
    # integers may wrap (x + d < x): no guard; the exact dependences still allow the diagonals i + j
    lifted, refused = _lift(text.replace("DTYPE", "int64"))
    assert not refused, refused
    assert lifted["fw"].patterns == ("wavefront", "time-stepping")


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
    # f: no row kernel, but both distances, (0, 1) and (1, 1), go to a later diagonal i + j: a wavefront
    assert set(lifted) == {"f"} and lifted["f"].patterns == ("wavefront", "time-stepping")
    line, why = refused["g"]  # g's nest is not a perfect one (p[i, 0] between the loops): no wavefront
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


# ----------------------------------------------------------------------------- partial lifts


def test_a_partly_parallel_function_is_lifted_partly_and_says_which_nest_stays_in_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from porter.lift import dropin

    text = textwrap.dedent(
        """
        import numpy as np
        def smooth_recur(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
            n = x.shape[0]
            for i in range(n):
                y[i] = 2.0 * x[i]
            for i in range(1, n):
                y[i] = 0.5 * y[i - 1] * y[i]
            for i in range(n):
                out[i] = y[i] * y[i] + 1.0
        """
    )
    a = analyze("t.py", text)
    assert [r.function for r in a.refused] == ["smooth_recur"]
    (part,) = a.partial
    assert part.sentence == (
        "lifted partly: nests at lines 5, 9 as kernels; the nest at line 7 stays in Python: loop-carried "
        "dependence: y[i] at line 8 reads y[i - 1] written by the previous i iteration (line 8): sequential in i"
    )
    first, kept, last = part.parts
    assert kept.lifted is None and first.lifted is not None and last.lifted is not None
    # each lifted nest is a function of the names it uses, its size bound again from its array
    assert (
        first.lifted.source
        == "def smooth_recur_nest5(x, y):\n    n = x.shape[0]\n    for i in range(n):\n        y[i] = 2.0 * x[i]"
    )
    assert [p.name for p in last.lifted.params] == ["x", "y", "out"]
    # the drop-in runs the Python nest and calls the others' kernels
    assert part.shell.python.splitlines()[1:] == [
        "    n = x.shape[0]",
        "    smooth_recur_nest5(x, y)",
        "    for i in range(1, n):",
        "        y[i] = 0.5 * y[i - 1] * y[i]",
        "    smooth_recur_nest9(x, y, out)",
    ]
    fs = (first.lifted, last.lifted, part.shell)
    srcs = {f.function: {"opencl": ("/* */", {k.name: (k.name, None) for k in f.kernels})} for f in fs}
    module = dropin.module("t.py", fs, srcs, ())
    ns: dict[str, object] = {}
    exec(compile(module, "t_gpu.py", "exec"), ns)  # noqa: S102 - porter's own generated module
    x, y, out = np.arange(6.0), np.zeros(6), np.zeros(6)
    ref_y, ref_out = y.copy(), out.copy()
    exec(compile(text, "t.py", "exec"), ref := {})  # noqa: S102
    ref["smooth_recur"](x, ref_y, ref_out)
    monkeypatch.setenv("PORTER_LIFT_BACKEND", "python")  # the nests' original Python: no GPU here
    with pytest.warns(RuntimeWarning):
        ns["smooth_recur"](x, y, out)  # type: ignore[operator]
    assert np.array_equal(y, ref_y) and np.array_equal(out, ref_out)
    # Gauss-Seidel's one nest is its sequential time loop: nothing in it lifts on its own
    assert not analyze(str(COLLECTION), COLLECTION.read_text(), only="gauss_seidel").partial
