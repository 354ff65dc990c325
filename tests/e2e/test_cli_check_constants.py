"""`porter check` on kernels with `__constant__` inputs, and per-kernel device code (texture sample)."""

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
CONV = SAMPLES / "conv1d_constant.cu"
TEXTURE = SAMPLES / "legacy_texture.cu"


def porter(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("porter")
    cmd = [exe] if exe else [sys.executable, "-m", "porter"]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _verdicts(out: subprocess.CompletedProcess[str]) -> list[dict]:
    try:
        return json.loads(out.stdout)["verdicts"]
    except (ValueError, KeyError):
        pytest.fail(f"no JSON verdicts:\n{out.stdout}\n{out.stderr}")


def test_constant_memory_kernel_validates_on_the_emulator(emulator) -> None:
    out = porter("check", str(CONV), "--against", str(CONV), "--backend", "cpu", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    (v,) = _verdicts(out)
    assert v["status"] == "validated" and v["device"] == "cpu:cpu-emulator", v["reason"]


def test_wrong_coefficient_index_is_rejected(tmp_path: Path, emulator) -> None:
    text = CONV.read_text()
    assert text.count("return coeffs[k] *") == 1
    variant = tmp_path / "conv1d_bad.cu"
    # Reversed taps: invisible with the program's symmetric coefficients, caught with random ones.
    variant.write_text(text.replace("return coeffs[k] *", "return coeffs[KSIZE - 1 - k] *"))
    shutil.copy(SAMPLES / "common.cuh", tmp_path / "common.cuh")
    out = porter("check", str(variant), "--against", str(CONV), "--backend", "cpu", "--json")
    assert out.returncode == 1, out.stdout + out.stderr
    (v,) = _verdicts(out)
    assert v["status"] == "failed" and v["reason"].startswith("matches-reference"), v["reason"]


def test_plain_kernel_next_to_a_texture_kernel_validates(emulator) -> None:
    out = porter(
        "check",
        str(TEXTURE),
        "--against",
        str(TEXTURE),
        "--kernel",
        "saxpy_plain",
        "--backend",
        "cpu",
        "--json",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (v,) = _verdicts(out)
    assert v["status"] == "validated", v["reason"]


def test_texture_kernel_is_refused_before_anything_runs_it(emulator) -> None:
    """Texture references left CUDA in version 12: a GPU compiler refuses the variant, so it is never
    run (on a machine without one, the emulator would refuse it: it cannot emulate textures)."""
    out = porter(
        "check",
        str(TEXTURE),
        "--against",
        str(TEXTURE),
        "--kernel",
        "scale_tex",
        "--backend",
        "cpu",
        "--json",
    )
    assert out.returncode == 1, out.stdout + out.stderr
    (v,) = _verdicts(out)
    assert v["status"] != "validated" and not v["executed"], v
    gated = "does not build as device code" in v["reason"] and "texture" in v["reason"]
    assert gated or ("cannot emulate" in v["reason"] and "textures" in v["reason"]), v
