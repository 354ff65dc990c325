"""`porter port DIR --run` on a program that passes NULL for a kernel's optional array (issue #29,
"every kernel judged"): every captured launch is replayed -- the NULL one with a null pointer, on the
CPU emulator and the OpenCL CPU devices -- and every kernel validated, the original and both ports; the
programs themselves (HIP on the CPU runtime, OpenCL through porter's host runtime) match."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "fixtures" / "programs" / "null_arguments"


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_null_and_array_launches_are_both_validated_on_every_cpu_device(tmp_path: Path) -> None:
    from porter.plan import run_devices

    if not run_devices("opencl"):
        pytest.skip("no OpenCL device here")
    args = ["port", str(PROGRAM), "--to", "hip,opencl", "--run", "", "--toolchains", "cpu-runtime,opencl"]
    r = subprocess.run(
        [sys.executable, "-m", "porter", *args, "--out", str(tmp_path / "out"), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    rows = [row for k in doc["kernels"] for row in k.get("replays", [])]
    bad = [(row.get("instance"), row["variant"], row["status"], row["reason"]) for row in rows if row["status"] != "validated"]  # fmt: skip
    assert not bad, bad
    assert {row["instance"] for row in rows} == {"scale_count", "accumulate"}
    assert {row["variant"] for row in rows} == {"original", "hip", "opencl"}
    devices = {row["device"] for row in rows}
    assert any(d.startswith("cpu:") for d in devices) and any(d.startswith("opencl:") for d in devices)
    for row in rows:
        if row["instance"] == "scale_count":  # judged on both launches: with counts NULL, and with an array
            assert row["reason"].count("matches what the original's run left at 1 captured launch") == 2, row
            assert "with arg2 a null pointer" in row["reason"], row
            assert row["launches"] == 2, row  # the row counts both sets of launches
        else:  # accumulate: its `unused` is NULL in its only launch
            assert "at 1 captured launch(es) with arg2 a null pointer" in row["reason"], row
    verdicts = doc["program"]["verdicts"]
    assert {t: v["status"] for t, v in verdicts.items()} == {"hip": "matches", "opencl": "matches"}
