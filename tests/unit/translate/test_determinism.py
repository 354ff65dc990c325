"""Translations do not depend on Python's hash seed: the same input gives the same bytes every run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = (
    Path(__file__).resolve().parents[2] / "fixtures" / "cuda" / "determinism" / "helpers_by_reference.cu"
)
TRANSLATE = """
import sys
from porter.backends import get_dialect
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
tr = get_dialect(sys.argv[2]).translate(text, path)
sys.stdout.write(tr.text)
for k in tr.kernels:
    sys.stdout.write(repr((k.name, k.untranslatable, k.notes if hasattr(k, "notes") else ())))
"""


@pytest.mark.integration
@pytest.mark.parametrize("dialect", ["opencl", "hip"])
def test_the_same_bytes_under_every_hash_seed(dialect: str) -> None:
    outputs = set()
    for seed in ("1", "2", "3", "4"):
        proc = subprocess.run(
            [sys.executable, "-c", TRANSLATE, str(FIXTURE), dialect],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert proc.returncode == 0, proc.stderr
        outputs.add(proc.stdout)
    assert len(outputs) == 1, f"{len(outputs)} different {dialect} translations under four hash seeds"
    assert "reference" in next(iter(outputs)) or dialect == "hip"
