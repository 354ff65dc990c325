"""`-D NAME[=VALUE]` on the commands that build one CUDA file (port, check, bench, optimize's autotuner):
a kernel sized by a macro only the build defines is inferred, compiled and judged with it; and on scan,
which reads the file as that build compiles it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SIZED = ROOT / "tests" / "fixtures" / "cuda" / "sized_by_define.cu"


def porter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=900
    )


@pytest.fixture
def sized(tmp_path: Path) -> Path:
    from porter.backends import get_backend

    if not get_backend("cpu").devices():
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    shutil.copy(SIZED, tmp_path / "sized.cu")
    return tmp_path / "sized.cu"


def test_port_with_a_define_validates_every_variant_and_without_it_says_why(sized: Path) -> None:
    out = sized.parent / "out"
    r = porter("port", str(sized), "-D", "N=5000", "--to", "hip,opencl", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    rows = [v for k in json.loads(r.stdout)["kernels"] for v in k["variants"]]
    ran = [v for v in rows if v["status"] != "compiled"]  # compiled: no device here runs it
    assert ran and all(v["status"] == "validated" for v in ran), rows
    assert {v["target"] for v in ran} >= {"hip", "opencl"}
    r = porter("port", str(sized), "--to", "hip", "--out", str(sized.parent / "out2"), "--json")
    assert r.returncode == 1
    reasons = {v["reason"] for k in json.loads(r.stdout)["kernels"] for v in k["variants"]}
    assert any("no host value for N" in why for why in reasons), reasons


def test_check_and_bench_take_the_define(sized: Path) -> None:
    variant = sized.parent / "variant.cu"
    variant.write_text(
        "__global__ void saxpy_n(const float* x, float* y, float a) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < N) y[i] = a * x[i] + y[i];\n}\n"
    )
    r = porter("check", str(variant), "--against", str(sized), "-D", "N=3000", "--backend", "cpu", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    verdicts = json.loads(r.stdout)["verdicts"]
    assert verdicts and all(v["status"] == "validated" for v in verdicts), verdicts
    r = porter("bench", str(sized), "-D", "N=3000", "--backend", "cpu", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    assert '"N": 3000' in r.stdout and "16777216" not in r.stdout  # timed at the size the kernel holds


def test_a_bad_define_and_an_undefine_without_a_database_are_usage_errors(sized: Path) -> None:
    r = porter("port", str(sized), "-D", "N-1=3", "--out", str(sized.parent / "o"))
    assert r.returncode == 2 and "is not a macro name" in r.stderr and "Traceback" not in r.stderr
    r = porter("port", str(sized), "-D", "N=5", "-U", "N", "--out", str(sized.parent / "o"))
    assert r.returncode == 2 and "-U drops a macro a compile_commands.json defines" in r.stderr


def test_scan_decides_conditionals_macros_and_sizes_with_the_defines() -> None:
    chosen = ROOT / "tests" / "fixtures" / "cuda" / "chosen_by_define.cu"
    r = porter("scan", str(chosen), "--json")
    assert r.returncode == 0, r.stderr
    plain = json.loads(r.stdout)["files"][0]
    # without the build's macros both branches are read, and KERNEL declares nothing
    assert [k["name"] for k in plain["kernels"]] == ["scale_d", "scale_f"]
    assert [(d["name"], d["value"]) for d in plain["defines"]] == [("BLOCK", "128")]
    r = porter("scan", str(chosen), "-D", "USE_DOUBLE", "-D", "KERNEL=__global__", "-DBLOCK=256", "--json")
    assert r.returncode == 0, r.stderr
    built = json.loads(r.stdout)["files"][0]
    assert [k["name"] for k in built["kernels"]] == ["scale_d", "fill"]
    # the command line's macros are the file's: BLOCK is 256 (line 0), its #ifndef default is not compiled
    assert [(d["name"], d["value"], d["line"]) for d in built["defines"]] == [
        ("USE_DOUBLE", "1", 0), ("KERNEL", "__global__", 0), ("BLOCK", "256", 0)
    ]  # fmt: skip
    r = porter("scan", str(chosen), "-U", "USE_DOUBLE", "--json")
    assert [k["name"] for k in json.loads(r.stdout)["files"][0]["kernels"]] == ["scale_f"]
    r = porter("scan", str(chosen), "-D", "2X=1")
    assert r.returncode == 2 and "is not a macro name" in r.stderr and "Traceback" not in r.stderr
