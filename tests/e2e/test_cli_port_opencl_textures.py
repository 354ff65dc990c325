"""`porter port DIR --to opencl --run` of a program reading two texture references over linear memory (a
float one and a float4 one, one bound at an offset into its allocation, one read in a __device__ helper):
the port is built and run on every OpenCL device here and matches the original run on the CPU runtime,
each texture-reading kernel is replayed from the capture (the bound memory recorded with the launch), and
the port launching a kernel whose texture is unbound says so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "programs" / "texture_linear"


def _opencl_devices() -> list[str]:
    from porter.backends import get_backend

    return [d.label for d in get_backend("opencl").devices() if d.role == "runs"]


@pytest.mark.skipif(not shutil.which("g++"), reason="g++ is not installed")
def test_texture_references_port_to_opencl_and_match_the_original(tmp_path: Path) -> None:
    devices = _opencl_devices()
    if not devices:
        pytest.skip("no OpenCL device here (apt-get install pocl-opencl-icd)")
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "porter", "port", str(FIXTURE), "--to", "opencl", "--out", str(out),
         "--run", "", "--toolchains", "cpu-runtime,opencl", "--json"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    runs = [v for run in doc["program"]["runs"] for v in run["variants"] if v["target"] == "opencl"]
    assert {v["device"] for v in runs} == set(devices), runs
    assert all(v["status"] == "matches" for v in runs), runs
    original = doc["program"]["runs"][0]["original"]
    assert original["exit"] == 0 and "PASS" in original["stdout_tail"], original  # the program's own check
    for kernel in doc["kernels"]:
        rows = [row for row in kernel["replays"] if row["variant"] == "opencl"]
        assert rows and all(row["status"] == "validated" for row in rows), (kernel["name"], rows)
    host = (out / "opencl" / "main.cu").read_text()
    assert '.texref(texPoints, "texPoints").texref_size(texPoints)' in host
    # the same executable, run with the float texture unbound: the launch fails, saying which texture
    built = next((out / "build" / "opencl").glob("*/bin/main"))
    r = subprocess.run([str(built), "unbound"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "scale_points reads the texture reference texScale, which is not bound at this launch" in r.stderr
