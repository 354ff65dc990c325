"""Multiply-adds a replay compares like with like: porter's CPU runtime fuses none (g++ -O1, plain x86-64), OpenCL C
fuses them by default (FP_CONTRACT is on; PoCL and Intel's runtime make FMAs on a CPU that has them).  A capture of the
CPU runtime asks every variant's replay for PORTER_NO_FP_CONTRACT, under which the OpenCL translation turns
contraction off -- cfd's flux, left near 5e-9 after cancellation, differed by that rounding on PoCL and Intel.  Our
fixture: tests/fixtures/programs/fma_residual (x*x minus the float nearest to it: zero unless fused)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes.programs import run_porter
from porter.backends import CompileOptions
from porter.backends.cpu.program import CpuProgramToolchain
from porter.backends.opencl.translate import translate_to_opencl

PROGRAM = Path(__file__).resolve().parents[2] / "fixtures" / "programs" / "fma_residual"
N = 256


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    x = (np.float32(10000.0) + np.float32(0.37) * np.arange(N, dtype=np.float32)).astype(np.float32)
    return x, (x * x).astype(np.float32)  # NumPy rounds each product: never fused


def test_the_translation_turns_contraction_off_where_the_capture_asks_for_it() -> None:
    text = translate_to_opencl((PROGRAM / "main.cu").read_text(encoding="utf-8"), "main.cu").text
    assert "#ifdef PORTER_NO_FP_CONTRACT\n#pragma OPENCL FP_CONTRACT OFF\n#endif" in text
    assert "PORTER_NO_FP_CONTRACT" in CpuProgramToolchain.replay_defines


def _cpu_devices() -> list[Any]:
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from porter.backends import get_backend

    devices = [d for d in get_backend("opencl").devices() if d.kind == "cpu"]
    if not devices:
        pytest.skip("no CPU OpenCL device (apt-get install pocl-opencl-icd)")
    return devices


@pytest.mark.integration
def test_on_a_cpu_opencl_device_the_macro_leaves_the_residual_exactly_zero() -> None:
    from porter.backends.isolate import Job, run_job

    source = translate_to_opencl((PROGRAM / "main.cu").read_text(encoding="utf-8"), "main.cu").text
    x, nearest = _inputs()
    fused_somewhere = False
    for device in _cpu_devices():
        outs = {}
        for defines in ((), ("PORTER_NO_FP_CONTRACT",)):
            job = Job(
                backend="opencl", source=source, entry="residual", options=CompileOptions(defines=defines),
                device=device, args=(x, nearest, np.zeros(N, np.float32), np.int32(N)), grid=(N // 64,),
                block=(64,), read_back=(2,),
            )  # fmt: skip
            res = run_job(job, 300)
            assert res.ok, f"{device.label}: {res.stage}: {res.error}\n{res.log}"
            outs[defines] = res.outputs[0][0]
        assert not np.any(outs[("PORTER_NO_FP_CONTRACT",)]), device.label  # not fused: exactly zero
        fused_somewhere = fused_somewhere or bool(np.any(outs[()]))  # fused: the rounding error of x*x
    if not fused_somewhere:
        pytest.skip("no CPU OpenCL device here fuses multiply-adds (no FMA on this CPU)")


@pytest.mark.integration
def test_the_kernel_captured_on_the_cpu_runtime_validates_on_every_cpu_opencl_device(tmp_path: Path) -> None:
    devices = _cpu_devices()
    out = tmp_path / "out"
    args = ["port", str(PROGRAM), "--to", "opencl", "--run", "", "--toolchains", "cpu-runtime,opencl"]
    r = run_porter(tmp_path, *args, "--out", str(out), "--json", timeout=900)
    doc = json.loads(r.stdout)
    rows = {x["device"]: x for k in doc["kernels"] for x in k["replays"] if x["variant"] == "opencl"}
    for device in devices:
        assert rows[device.label]["status"] == "validated", rows[device.label]
