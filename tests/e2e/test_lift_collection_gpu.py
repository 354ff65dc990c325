"""`bench/lift_collection_gpu.py --check-cpu`: every reference expression of the GPU benchmark agrees with
the collection's Python at the small sizes, and porter's plan is made for every lifted function (no GPU,
no CuPy; a few seconds)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_references_agree_with_the_python() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "lift_collection_gpu.py"), "--check-cpu"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all references agree" in proc.stdout
    tree = ast.parse((ROOT / "samples" / "python" / "loop_nests.py").read_text())
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == names, proc.stdout
