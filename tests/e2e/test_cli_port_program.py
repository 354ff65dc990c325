"""`porter port DIR` and `porter port FILE` whose kernels live in a header: programs from the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SMOOTH = ROOT / "samples" / "programs" / "smooth"


def porter(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=900, cwd=cwd
    )


def test_port_a_folder_prints_the_program_document_and_the_hip_tree_builds(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    out = tmp_path / "out"
    r = porter("port", str(src), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["schema"] == "porter-program-report/1"
    statuses = {f["path"]: {t: v["status"] for t, v in f["targets"].items()} for f in doc["program"]["files"]}
    assert statuses["src/main.cu"]["hip"] in ("compiled", "translated")
    assert (out / "report.md").is_file() and (out / "diagnostics.txt").is_file()
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        pytest.skip("hipcc not installed: the HIP tree is not built as a program here")
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    built = subprocess.run(
        [hipcc, "--offload-arch=gfx90a", "-O2", "-Iinclude", "-o", "smooth", "src/main.cu", "src/util.cpp"],
        cwd=out / "hip", capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr  # the mirrored tree builds as it is, host code and all


def test_a_file_whose_kernels_live_in_a_header_is_ported_as_a_program(tmp_path: Path) -> None:
    src = tmp_path / "smooth"
    shutil.copytree(SMOOTH, src)
    r = porter("port", str(src / "src" / "main.cu"), "-I", str(src / "include"), "--translate-only")
    assert r.returncode == 0, r.stderr + r.stdout
    out = src / "src" / "main.ported"  # <stem>.ported beside the file, as for any single file
    assert (out / "hip" / "src" / "main.cu").is_file() or (out / "hip" / "main.cu").is_file()
    assert any(p.name == "smooth_kernels.cuh" for p in (out / "hip").rglob("*"))
    assert "no __global__ kernel found" not in r.stderr
    doc = json.loads((out / "report.json").read_text())
    assert {k["name"] for k in doc["kernels"]} == {"box_smooth", "affine"}


def test_model_with_a_program_is_refused_clearly(tmp_path: Path) -> None:
    r = porter("port", str(SMOOTH), "--model", "openai:gpt-x", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--model takes one CUDA file" in r.stderr and "Traceback" not in r.stderr
