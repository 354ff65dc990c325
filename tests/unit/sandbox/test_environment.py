"""One BLAS thread where porter's own code runs NumPy (porter.sandbox.environment.ONE_BLAS_THREAD)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from porter.sandbox.environment import ONE_BLAS_THREAD, one_blas_thread

# porter's console entry point, with what its process's environment holds when it exits printed last
SHOW = """import atexit, os, sys
atexit.register(lambda: print("BLAS", os.environ.get("OPENBLAS_NUM_THREADS"), "numpy" in sys.modules))
sys.argv = ["porter", "--version"]
from porter.cli import main
main()
"""


def test_porters_own_process_gets_one_blas_thread_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ONE_BLAS_THREAD:
        monkeypatch.delenv(name, raising=False)
    one_blas_thread()
    assert {name: os.environ[name] for name in ONE_BLAS_THREAD} == {
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "8"


@pytest.mark.parametrize(("mine", "seen"), [(None, "1"), ("8", "8")])
def test_the_cli_sets_it_before_numpy_loads(mine: str | None, seen: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ONE_BLAS_THREAD}
    if mine is not None:
        env["OPENBLAS_NUM_THREADS"] = mine
    out = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"BLAS {seen} False", (
        out.stdout
    )  # NumPy not loaded before: it reads it then
