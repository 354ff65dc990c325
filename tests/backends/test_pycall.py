"""porter.backends.pycall: a user's module imported once in a sandboxed child and its functions called in
turn, each stage limited on its own.  A module that hangs at import is stopped once at the limit, with
the line it hung on (the child's stack dump); a call that hangs stops the calls after it; results come
back as arrays; positional calls and warnings are the user's view."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from porter.backends.pycall import Call, _frame, run_calls

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "python"
AT_IMPORT = str(FIXTURES / "hang_at_import.py")
IN_CALL = str(FIXTURES / "hang_in_call.py")

DUMP = f"""some output
Timeout (0:00:02)!
Thread 0x00007f6a516a0b80 (most recent call first):
  File "/usr/lib/python3.11/site-packages/numpy/core/numeric.py", line 40 in helper
  File "{AT_IMPORT}", line 8 in <module>
  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed
  File "/work/main/backends/_child.py", line 482 in _import_file
"""


def test_the_hang_is_placed_on_the_modules_own_innermost_line() -> None:
    assert _frame(DUMP, AT_IMPORT) == (AT_IMPORT, 8)
    assert _frame("no dump here", AT_IMPORT) == ("", None)


def _args(n: int = 16) -> dict[str, np.ndarray]:
    return {"x": np.arange(n, dtype=np.float64), "out": np.zeros(n)}


@pytest.mark.integration
def test_a_module_that_hangs_at_import_is_stopped_once_with_its_line() -> None:
    said: list[tuple[str, float]] = []
    start = time.monotonic()
    got = run_calls(AT_IMPORT, [Call(f, _args()) for f in ("scale", "shift", "square")], 3.0,
                    progress=lambda what, s: said.append((what, s)), progress_every=1.0)  # fmt: skip
    elapsed = time.monotonic() - start
    assert got.hang is not None and got.hang.stage == "import", got.log[-2000:]
    assert got.hang.line in (7, 8) and "hang_at_import.py hangs at import (at line" in got.hang.describe()
    assert all(not r.ok and "hangs at import" in r.error for r in got.results)
    assert elapsed < 3.0 + 6.0, elapsed  # one wait, not one per call
    assert any(what == "importing hang_at_import.py" for what, _ in said), said


@pytest.mark.integration
def test_a_call_that_hangs_stops_there_and_the_calls_before_it_keep_their_results() -> None:
    calls = [Call("shift", _args()), Call("scale", _args()), Call("shift", _args())]
    got = run_calls(IN_CALL, calls, 3.0)
    first, hung, after = got.results
    assert first.ok and np.array_equal(first.arrays["out"], np.arange(16.0) + 1.0)
    assert got.hang is not None and got.hang.stage == "call" and got.hang.function == "scale"
    assert got.hang.line in (9, 10) and "scale of hang_in_call.py hangs (at line" in hung.error
    assert not after.ok and after.error.startswith("not run: scale of hang_in_call.py hangs")


@pytest.mark.integration
def test_calls_are_positional_as_a_user_makes_them_and_their_warnings_come_back(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import warnings\n"
        "def f(b, first, out):\n"
        "    warnings.warn('careful')\n"
        "    out[:] = b - first\n"
        "    return float(out.sum())\n"
    )
    got = run_calls(
        str(module), [Call("f", {"b": 5.0, "first": 2.0, "out": np.zeros(3)}, positional=True)], 30.0
    )
    (r,) = got.results
    assert r.ok and np.array_equal(r.arrays["out"], [3.0, 3.0, 3.0]) and float(r.returned) == 9.0
    assert got.warnings == [["UserWarning: careful"]] and got.hang is None


@pytest.mark.integration
def test_a_users_module_keeps_its_blas_threads_while_porters_own_code_has_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's run is the baseline a port is timed against: porter's one BLAS thread is not imposed on it."""
    from porter.sandbox.environment import ONE_BLAS_THREAD, one_blas_thread

    for name in ONE_BLAS_THREAD:
        monkeypatch.delenv(name, raising=False)
    one_blas_thread()  # as porter's command line does for its own process
    module = tmp_path / "blas.py"
    module.write_text(
        "import os\ndef threads():\n    return os.environ.get('OPENBLAS_NUM_THREADS', 'unset')\n"
    )
    (r,) = run_calls(str(module), [Call("threads", {})], 30.0).results
    assert r.ok and r.returned == "unset", r


@pytest.mark.integration
def test_the_modules_child_gets_a_scrubbed_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ant-api03-PYCALL0000secret1111value"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.setenv("SOME_SERVICE_TOKEN", secret)
    module = tmp_path / "env.py"
    module.write_text(
        "import os\ndef leaked():\n    return sum(v.count('PYCALL0000') for v in os.environ.values())\n"
    )
    (r,) = run_calls(str(module), [Call("leaked", {})], 30.0).results
    assert r.ok and r.returned is not None and int(r.returned) == 0
