"""Launches anywhere (#29): porter's own programs launching kernels inside macro bodies, through
pointers and the runtime's launch calls (cudaLaunchKernel with a void* kernel, a cooperative launch),
in host templates and lambdas -- each ported with `porter port DIR --run` on the CPU runtime, and every
kernel validated from the program's own run, the original and the HIP port."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"

KERNELS = {
    "launch_macros": {"add_one", "scale", "square", "halve", "negate<float>", "offset"},
    "launch_pointers": {"add", "mul", "sub", "twice", "axpy", "fill", "rowsum", "cooperative_copy"},
    "launch_templates": {"axpb<float>", "axpb<double>", "block_sum<64>", "clamp_to<float>", "iota", "plus"},
}


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_is_validated_wherever_it_is_launched(name: str, tmp_path: Path) -> None:
    args = ["port", str(PROGRAMS / name), "--to", "hip", "--run", "", "--toolchains", "cpu-runtime"]
    r = subprocess.run(
        [sys.executable, "-m", "porter", *args, "--out", str(tmp_path / "out"), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    rows = [row for k in doc["kernels"] for row in k.get("replays", [])]
    bad = [
        (row.get("instance"), row["variant"], row["status"], row["reason"])
        for row in rows
        if row["status"] != "validated"
    ]
    assert not bad, bad
    assert {"".join(row["instance"].split()) for row in rows} == KERNELS[name]
    assert {row["variant"] for row in rows} == {"original", "hip"}


@pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("make") is None,
    reason="the CPU runtime needs g++, --build make",
)
def test_macro_launches_build_through_the_users_own_makefile_too(tmp_path: Path) -> None:
    """`--build make`: the Makefile's $(NVCC) is porter's compiler driver, which expands the macros of a
    unit whose launches the text rewrite could not see and rewrites them, as the CPU runtime's own build."""
    prog = tmp_path / "launch_macros"
    shutil.copytree(PROGRAMS / "launch_macros", prog)
    (prog / "Makefile").write_text("main: main.cu\n\t$(NVCC) -O2 -o main main.cu\n", encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "porter", "port", str(prog), "--to", "hip", "--build", "make", "--run", "./main",
         "--toolchains", "cpu-runtime", "--out", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["program"]["verdicts"]["hip"]["status"] == "matches"
    rows = [row for k in doc["kernels"] for row in k.get("replays", [])]
    assert {"".join(row["instance"].split()) for row in rows} == KERNELS["launch_macros"]
    assert {row["status"] for row in rows} == {"validated"}
