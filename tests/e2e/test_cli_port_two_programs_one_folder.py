"""`porter port DIR --to hip,opencl --run ./alpha --run ./beta` on a folder of two programs that each define a
kernel of the same name (Rodinia's cfd holds four such executables): each executable's OpenCL host stub
launches its own unit's kernel, and each definition is its own kernel row, judged by the launches of the
run that ran it.  Before: beta's stub launched alpha's kernel (its OpenCL program differed) and alpha's
launches were replayed with beta's kernel ("advance takes 3 arguments, 2 given")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.programs import run_porter

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "fixtures" / "programs" / "two_mains"


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_two_programs_in_one_folder_each_judge_their_own_kernel(tmp_path: Path) -> None:
    from porter.plan import run_devices

    targets = "hip,opencl" if run_devices("opencl") else "hip"
    out = tmp_path / "out"
    args = ["port", str(PROGRAM), "--to", targets, "--run", "./alpha", "--run", "./beta"]
    r = run_porter(
        tmp_path, *args, "--toolchains", "cpu-runtime,opencl", "--out", str(out), "--json", timeout=900
    )
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    verdicts = doc["program"]["verdicts"]
    assert all(verdicts[t]["status"] == "matches" for t in targets.split(",")), verdicts
    rows = {k["file"]: k for k in doc["kernels"] if k["name"] == "advance"}
    assert sorted(rows) == ["alpha.cu", "beta.cu"] and rows["alpha.cu"]["line"] == 5
    for file, kernel in rows.items():
        mine = {row["variant"]: row for row in kernel["replays"]}
        assert sorted(mine) == sorted(["original", *targets.split(",")]), (file, kernel["replays"])
        assert all(row["status"] == "validated" for row in kernel["replays"]), (file, kernel["replays"])
    for variant in ("original", *targets.split(",")):
        counts = doc["kernel_counts"][variant]
        assert (counts["instances"], counts["validated"]) == (2, 2), (variant, counts)
    if "opencl" in targets:
        for unit in ("alpha", "beta"):
            stub = (out / "opencl" / f"{unit}.cu").read_text()
            assert f'porter_launch("advance", "{unit}.cl")' in stub


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_definition_no_run_launched_still_has_its_row(tmp_path: Path) -> None:
    """Only alpha runs: beta's `advance` is still a kernel of the program, not replayable, with the reason."""
    out = tmp_path / "out"
    args = ["port", str(PROGRAM), "--to", "hip", "--run", "./alpha", "--toolchains", "cpu-runtime"]
    r = run_porter(tmp_path, *args, "--out", str(out), "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    rows = {k["file"]: k for k in json.loads(r.stdout)["kernels"] if k["name"] == "advance"}
    assert sorted(rows) == ["alpha.cu", "beta.cu"]
    assert all(row["status"] == "validated" for row in rows["alpha.cu"]["replays"])
    assert {row["status"] for row in rows["beta.cu"]["replays"]} == {"not-replayable"}
    assert all(
        "none of the program's runs launched it" in row["reason"] for row in rows["beta.cu"]["replays"]
    )
