"""porter.lift.dropin: the module's own names can never be the user's.  The wrapper of a function whose
parameters are named `b` (once the wrapper's buffer dict: `saxpby(2.0, x, 3.0, x, out)` raised
TypeError), `rt`, `src`, `entries`, `first`, `_np`, `max`, `len`, `int` binds none of them and reaches
builtins and math through its own names; the fallback keeps the signature without the file's other
globals; a name with the module's prefix, or a default that is not a literal, is refused."""

from __future__ import annotations

import ast
import builtins
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from porter.lift import dropin
from porter.lift.analyze import analyze
from porter.lift.ir import Lifted, Repeat

ROOT = Path(__file__).resolve().parents[3]
NAMES = ROOT / "tests" / "fixtures" / "python" / "dropin_names.py"


@pytest.fixture(scope="module")
def lifted() -> dict[str, Lifted]:
    a = analyze(str(NAMES), NAMES.read_text())
    assert not a.refused, a.refused
    return {f.function: f for f in a.lifted}


def _module(fs: list[Lifted]) -> str:
    sources = {
        f.function: {"opencl": ("/* kernels */", {k.name: (k.name, None) for k in f.kernels})} for f in fs
    }
    return dropin.module("dropin_names.py", tuple(fs), sources, fs[0].imports)


def _wrapper(text: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)


def _users_names(f: Lifted) -> set[str]:
    """What the wrapper may bind or read besides its own names: the parameters, the sizes, the locals and
    the loop variables of the user's code."""
    names = {p.name for p in f.params} | {n for n, _ in f.sizes} | {x.name for x in f.locals}
    steps = list(f.steps)
    while steps:
        s = steps.pop()
        if isinstance(s, Repeat):
            names.add(s.var)
            steps += list(s.body)
    return names


@pytest.mark.parametrize("function", ["saxpby", "mix", "total", "step"])
def test_the_wrapper_binds_no_parameter_and_reads_nothing_but_its_own_and_the_users_names(
    lifted: dict[str, Lifted], function: str
) -> None:
    f = lifted[function]
    text = _module(list(lifted.values()))
    fn = _wrapper(text, function)
    module_level = {t.id for n in ast.parse(text).body if isinstance(n, ast.Assign) for t in n.targets
                    if isinstance(t, ast.Name)} | {n.name for n in ast.parse(text).body
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef))}  # fmt: skip
    params = {p.name for p in f.params}
    mine = _users_names(f)
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    generated = {n for n in stored | loaded if n.startswith(dropin.PREFIX)}
    assert not (stored & params) - {s.var for s in f.steps if isinstance(s, Repeat)}, stored & params
    assert not generated & params
    assert not stored & module_level, stored & module_level  # a local never hides the module's own
    assert (stored | loaded) - generated <= mine, (stored | loaded) - generated - mine  # no bare builtin


def test_the_runtime_reads_no_builtin_by_a_name_a_function_or_an_import_could_take() -> None:
    tree = ast.parse(dropin.RUNTIME)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert not {n for n in loaded if hasattr(builtins, n)}


def test_the_module_runs_each_function_as_the_original_does_through_its_fallback(
    lifted: dict[str, Lifted], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _module(list(lifted.values()))
    monkeypatch.setenv("PORTER_LIFT_BACKEND", "python")
    made: dict[str, Any] = {"__name__": "dropin_names_gpu"}
    exec(compile(text, "dropin_names_gpu.py", "exec"), made)  # noqa: S102 - porter's own generated text
    original: dict[str, Any] = {"__name__": "dropin_names"}
    exec(compile(NAMES.read_text(), str(NAMES), "exec"), original)  # noqa: S102 - the test's fixture
    x = np.linspace(-1.0, 1.0, 37)
    out, want = np.zeros(37), np.zeros(37)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made["saxpby"](2.0, x, 3.0, x, out)
        total = made["total"](x, 2.0, 3)
    original["saxpby"](2.0, x, 3.0, x, want)
    assert np.array_equal(out, want) and any(dropin.FALLBACK in str(w.message) for w in caught)
    assert total == original["total"](x, 2.0, 3)
    # arrays unlike those the kernels were validated for: the original runs, with the reason
    assert made["_porter_unlike"]({"x": (x.astype(np.float32), "float64", 1)}) == (
        "x is float32 with 1 dimension(s), the kernels take float64 with 1"
    )


def test_the_signature_keeps_defaults_and_the_fallback_drops_annotations() -> None:
    source = textwrap.dedent(
        """
        import numpy as np
        import numpy.typing as npt
        F64 = npt.NDArray[np.float64]
        def scale(x: F64, out: F64, k: float = 2.0) -> None:
            for i in range(x.shape[0]):
                out[i] = k * x[i]
        """
    )
    (f,) = analyze("s.py", source).lifted
    text = _module([f])
    assert "def scale(x, out, k=2.0):" in text
    original = _wrapper(text, f"{dropin.PREFIX}original_scale")
    assert all(a.annotation is None for a in original.args.args) and original.returns is None
    compile(text, "s_gpu.py", "exec")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("def f(x: F, _porter_rt: float) -> None:\n    for i in range(x.shape[0]):\n        x[i] = _porter_rt\n",
         "_porter_rt"),
        ("def f(x: F, a: float = A) -> None:\n    for i in range(x.shape[0]):\n        x[i] = a\n",
         "not a literal"),
    ],
)  # fmt: skip
def test_a_name_with_the_modules_prefix_or_a_default_naming_a_global_is_refused(body: str, why: str) -> None:
    source = "import numpy as np\nimport numpy.typing as npt\nA = 1.0\nF = npt.NDArray[np.float64]\n" + body
    (f,) = analyze("c.py", source).lifted
    assert why in dropin.clash(f)
    with pytest.raises(ValueError, match=why):
        _module([f])


def test_the_modules_own_fallback_warning_is_recognised() -> None:
    assert dropin.fell_back(["RuntimeWarning: f: no GPU runtime found (x); running the original Python"])
    assert not dropin.fell_back(["UserWarning: something else"])


def test_device_only_buffers_and_a_wavefronts_diagonals_have_no_user_visible_name() -> None:
    # a scalar set from device data each step (s = x[t]) lives in a buffer the module keeps in its dict
    # only: its extent argument is the buffer's own shape, never a name the wrapper does not have (the
    # written module once raised NameError on ``__s_s``); a wavefront's diagonal is the module's own name
    a = analyze(
        "t.py",
        textwrap.dedent(
            """
            import numpy as np
            def step(x: np.ndarray, y: np.ndarray):
                n = x.shape[0]
                for t in range(3):
                    s = x[t]
                    for i in range(n):
                        y[i] = y[i] + s
            def table(H: np.ndarray):
                n, m = H.shape
                for i in range(1, n):
                    for j in range(1, m):
                        H[i, j] = max(H[i - 1, j], H[i, j - 1]) + 1.0
            """
        ),
    )
    assert not a.refused, a.refused
    text = _module(list(a.lifted))
    for f in a.lifted:
        fn = _wrapper(text, f.function)
        names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        assert {n for n in names if not n.startswith(dropin.PREFIX)} <= _users_names(f) | {"np"}, names
    assert "_porter_d" in text and "__s_s'" in text and "__s_s." not in text
