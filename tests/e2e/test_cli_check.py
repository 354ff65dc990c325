"""`porter check VARIANT --against ORIGINAL`: exit codes, JSON, inference from the original's host code."""

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
SAMPLES = ROOT / "samples" / "cuda"
ADVERSARIAL = ROOT / "tests" / "adversarial" / "kernels"


def porter(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("porter")
    cmd = [exe] if exe else [sys.executable, "-m", "porter"]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _have(backend: str) -> bool:
    from porter.backends import get_backend

    try:
        return bool(get_backend(backend).devices())
    except Exception:  # noqa: BLE001
        return False


@pytest.fixture(scope="module")
def emulator():
    if not _have("cpu"):
        pytest.skip("the CPU emulator is unavailable (g++ missing)")


def test_cuda_variant_validated_against_a_program_without_spec_file(tmp_path, emulator):
    variant = tmp_path / "vector_add_v2.cu"
    variant.write_text(
        "__global__ void vector_add(const float* a, const float* b, float* c, int n)\n"
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = b[i] + a[i];\n}\n"
    )
    out = porter(
        "check", str(variant), "--against", str(SAMPLES / "vector_add.cu"), "--backend", "cpu", "--json"
    )
    assert out.returncode == 0, out.stderr + out.stdout
    doc = json.loads(out.stdout)
    assert doc["kernel"] == "vector_add" and doc["spec"]["source"] == "inferred"
    (v,) = doc["verdicts"]
    assert v["status"] == "validated" and v["device"] == "cpu:cpu-emulator"
    assert {"reason", "trials", "sizes", "max_abs_err", "max_rel_err", "checks"} <= set(v)


@pytest.mark.parametrize(("opening", "closing"), [("namespace lib {\n", "}\n"), ("", "")])
def test_variant_of_a_kernel_in_a_namespace(tmp_path, emulator, opening, closing):
    """The original keeps `square_in_place` in a macro-opened namespace `lib`; a variant is run by
    the name its own file gives it, inside a namespace or not."""
    variant = tmp_path / "square_v2.cu"
    variant.write_text(
        opening + "__global__ void square_in_place(float* data, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) data[i] *= data[i];\n}\n"
        + closing
    )
    original = ROOT / "tests" / "fixtures" / "cuda" / "macros" / "scoped.cu"
    out = porter(
        "check", str(variant), "--against", str(original), "--kernel", "square_in_place", "--backend", "cpu"
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert "validated" in out.stdout


def test_defective_variant_is_rejected_with_exit_1(emulator):
    out = porter(
        "check",
        str(ADVERSARIAL / "vector_add.partial_write.cu"),
        "--against",
        str(ADVERSARIAL / "vector_add.cu"),
        "--backend",
        "cpu",
        "--json",
    )
    assert out.returncode == 1, out.stderr
    (v,) = json.loads(out.stdout)["verdicts"]
    assert v["status"] == "failed" and v["reason"].startswith("all-written")


def test_opencl_variant_table_output(emulator):
    if not _have("opencl"):
        pytest.skip("no OpenCL device")
    out = porter("check", str(ADVERSARIAL / "vector_add.cl"), "--against", str(ADVERSARIAL / "vector_add.cu"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "validated" in out.stdout and "opencl:" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x.txt", "--against", str(SAMPLES / "vector_add.cu")], "extension"),
        ([str(ADVERSARIAL / "vector_add.cl"), "--against", "/nonexistent/prog.cu"], "no such file"),
        (
            [
                str(ADVERSARIAL / "vector_add.cl"),
                "--against",
                str(SAMPLES / "vector_add.cu"),
                "--kernel",
                "nope",
            ],
            "no kernel named",
        ),
        (
            [
                str(ADVERSARIAL / "vector_add.cl"),
                "--against",
                str(SAMPLES / "vector_add.cu"),
                "--backend",
                "cpu",
            ],
            "runs on opencl",
        ),
        ([str(ADVERSARIAL / "vector_add.cl")], "against"),
    ],
)
def test_bad_usage_exits_2_with_one_line(args, message):
    out = porter("check", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


def test_inference_that_falls_short_prints_the_spec_to_write(tmp_path):
    original = ROOT / "tests" / "fixtures" / "cuda" / "spec_helpers" / "unresolved.cu"
    variant = tmp_path / "fill.cu"
    variant.write_text("__global__ void fill(float* out, float v, int n) {}\n")
    out = porter("check", str(variant), "--against", str(original), "--kernel", "fill")
    assert out.returncode == 1
    assert "unresolved.cu:" in out.stderr and "[kernels.fill]" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("inst", ["axpby<float>", "axpby<double>"])
def test_templated_instantiation_launched_by_a_host_helper_validates(inst, emulator):
    src = str(SAMPLES / "templated.cu")
    out = porter("check", src, "--against", src, "--kernel", inst)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cpu:cpu-emulator" in out.stdout and f"{inst}: validated" in out.stdout
