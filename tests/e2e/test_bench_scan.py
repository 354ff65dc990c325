"""`bench/bench_scan.py` still runs (a smoke run on a tiny corpus; it asserts no timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_scan.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_generated_corpus_with_workers() -> None:
    out = _run("--mb", "0.05", "--files", "2", "--repeat", "1", "--jobs", "2")
    for label in ("corpus", "parse", "scan", "scan+json", "parallel"):
        assert any(line.startswith(label + " ") for line in out.splitlines()), out
    assert " kernels" in out and "MB/s" in out


def test_real_code_folder() -> None:
    out = _run("--real", str(ROOT / "tests" / "fixtures" / "cuda"), "--repeat", "1")
    assert "real code:" in out and "parallel" not in out
