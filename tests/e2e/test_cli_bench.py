"""`porter bench`: the JSON schema, exit codes, and a tiny end-to-end run on the CPU emulator."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cuda" / "vector_add.cu"


def _porter(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.fixture(scope="module")
def doc() -> dict:
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    out = _porter("bench", str(SAMPLE), "--backend", "cpu", "--size", "n=2048", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_json_schema(doc: dict) -> None:
    assert doc["schema"] == "porter.bench/1"
    assert doc["file"].endswith("vector_add.cu")
    assert set(doc) >= {"schema", "file", "devices", "notes", "kernels"}
    (k,) = doc["kernels"]
    assert set(k) >= {
        "kernel",
        "spec_source",
        "error",
        "benchmarked",
        "size",
        "cost",
        "predictions",
        "results",
    }
    assert k["kernel"] == "vector_add" and k["benchmarked"] is True and k["error"] == ""
    assert k["size"] == {"n": 2048}
    assert k["cost"]["bytes_read"] == 2 * 4 * 2048 and k["cost"]["bytes_written"] == 4 * 2048
    assert k["cost"]["flops"] == {"float32": 2048.0}


def test_predictions_cover_the_device_table(doc: dict) -> None:
    preds = {p["device"]: p for p in doc["kernels"][0]["predictions"]}
    for key in ("H100", "H200", "A100", "L40S", "RTX4090", "MI250X", "MI300X"):
        assert preds[key]["floor_ms"] > 0
        assert preds[key]["bound"] == "memory"
    # Same bytes, more bandwidth: a lower floor.
    assert preds["H200"]["floor_ms"] < preds["H100"]["floor_ms"]


def test_measured_result_fields(doc: dict) -> None:
    (r,) = doc["kernels"][0]["results"]
    expected = {
        "device",
        "device_name",
        "device_kind",
        "backend",
        "target",
        "provenance",
        "size",
        "ok",
        "reason",
        "median_ms",
        "iqr_ms",
        "runs",
        "floor_ms",
        "bound",
        "achieved_gb_s",
        "pct_bandwidth",
        "achieved_tflop_s",
        "pct_compute",
        "suspect",
        "representative",
        "revalidated",
        "revalidation",
        "occupancy",
        "speedup",
        "baseline_ms",
        "contended",
        "toolchain",
        "notes",
    }
    assert set(r) == expected
    assert r["ok"] is True and r["backend"] == "cpu" and r["device_kind"] == "emulator"
    assert r["median_ms"] > 0 and r["iqr_ms"] >= 0 and r["runs"] >= 1
    assert r["representative"] is False and r["suspect"] is False
    assert r["floor_ms"] is None  # no roofline for the emulator
    assert r["revalidated"] is True


def test_unknown_kernel_is_a_usage_error() -> None:
    out = _porter("bench", str(SAMPLE), "--kernel", "nope", "--backend", "cpu")
    assert out.returncode == 2
    assert "no kernel named 'nope'" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("size", ["n", "n=abc", "n=0", "m=64"])
def test_bad_size_is_a_usage_error(size: str) -> None:
    out = _porter("bench", str(SAMPLE), "--size", size, "--backend", "cpu")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--size" in out.stderr and "Traceback" not in out.stderr


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    out = _porter("bench", str(tmp_path / "absent.cu"))
    assert out.returncode == 2
    assert "absent.cu" in out.stderr and "Traceback" not in out.stderr


def test_kernel_that_cannot_be_benchmarked_exits_1(tmp_path: Path) -> None:
    src = tmp_path / "lonely.cu"
    src.write_text("__global__ void lonely(float* x, int n) { x[threadIdx.x] = 1.0f; }\n")
    out = _porter("bench", str(src), "--backend", "cpu", "--json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    (k,) = doc["kernels"]
    assert k["benchmarked"] is False and "cannot infer how to run lonely" in k["error"]


@pytest.mark.gpu
def test_bench_on_an_nvidia_gpu() -> None:
    out = _porter("bench", str(SAMPLE), "--backend", "cuda", "--size", "n=1<<24", "--json")
    assert out.returncode == 0, out.stderr
    (r,) = json.loads(out.stdout)["kernels"][0]["results"]
    assert r["ok"] is True and r["device_kind"] == "gpu" and r["representative"] is True
    assert r["median_ms"] > 0 and r["revalidated"] is True and r["suspect"] is False
    if r["floor_ms"] is not None:
        assert r["pct_bandwidth"] > 0


UNITY = ROOT / "tests" / "fixtures" / "programs" / "unity_types"


def test_a_unity_build_is_timed_at_its_captured_launch(tmp_path: Path) -> None:
    """kernel/step.cu uses pair_t and SHIFT from params.h without including it (wrapper.cu includes both,
    as Rodinia's lavaMD does): given the wrapper, bench builds the kernel as the program does and times
    it at the launch the program's run captured, on the CPU emulator and each OpenCL device."""
    cap = tmp_path / "cap"
    got = _porter(
        "capture", str(UNITY), "--run", "./prog", "--toolchain", "cpu-runtime", "--out", str(cap), timeout=240
    )
    assert got.returncode == 0, got.stderr
    got = _porter("bench", str(UNITY / "kernel" / "wrapper.cu"), "--capture", str(cap), "--json", timeout=240)
    assert got.returncode == 0, got.stderr
    (kernel,) = json.loads(got.stdout)["kernels"]
    assert kernel["kernel"] == "step" and kernel["size"]["gx"] == 16 and kernel["size"]["bx"] == 64
    assert {r["backend"] for r in kernel["results"]} >= {"cpu"}
    assert all(r["ok"] and r["median_ms"] > 0 for r in kernel["results"]), kernel["results"]
