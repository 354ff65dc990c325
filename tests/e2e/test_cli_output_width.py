"""Output into a pipe (a file, `| grep`, CI logs): kernel names and table cells printed whole, where rich
cut them at 80 columns; COLUMNS, when set, is the width."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
NAME = "vector_add_of_two_arrays_of_one_million_floats_with_a_bounds_check_for_the_tail_block"


@pytest.fixture
def long_name(tmp_path: Path) -> Path:
    """samples/cuda/vector_add.cu with its kernel renamed to NAME."""
    src = tmp_path / "long.cu"
    src.write_text((SAMPLES / "vector_add.cu").read_text().replace("vector_add", NAME))
    (tmp_path / "common.cuh").write_text((SAMPLES / "common.cuh").read_text())
    return src


def porter(tmp_path: Path, *args: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PORTER_CACHE_DIR"] = str(tmp_path / "cache")
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(  # stdout and stderr are pipes
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=300, env=env
    )


def _rows_naming(text: str, name: str) -> list[str]:
    return [ln for ln in text.splitlines() if name in ln]


def test_piped_scan_prints_whole_names(tmp_path: Path, long_name: Path) -> None:
    res = porter(tmp_path, "scan", str(long_name))
    assert res.returncode == 0, res.stderr
    rows = _rows_naming(res.stdout, NAME)
    assert len(rows) == 2, res.stdout  # the kernels table and the launches table, one line each
    assert "…" not in res.stdout
    assert max(len(ln) for ln in res.stdout.splitlines()) < 400  # nothing spans an unbounded width


def test_piped_port_table_prints_whole_names(tmp_path: Path, long_name: Path) -> None:
    out = tmp_path / "out"
    res = porter(
        tmp_path, "port", str(long_name), "--to", "hip,opencl", "--translate-only", "--out", str(out)
    )
    assert res.returncode == 0, res.stderr
    rows = _rows_naming(res.stdout, NAME)
    assert {r.split("│")[2].strip() for r in rows} == {"hip", "opencl"}, res.stdout
    assert all("translated" in r for r in rows) and "…" not in res.stdout


def test_columns_is_the_width(tmp_path: Path, long_name: Path) -> None:
    res = porter(tmp_path, "scan", str(long_name), columns="200")
    assert res.returncode == 0, res.stderr
    assert len(_rows_naming(res.stdout, NAME)) == 2
    assert max(len(ln) for ln in res.stdout.splitlines()) <= 200
    narrow = porter(tmp_path, "scan", str(long_name), columns="60")
    assert NAME not in narrow.stdout and max(len(ln) for ln in narrow.stdout.splitlines()) <= 60
