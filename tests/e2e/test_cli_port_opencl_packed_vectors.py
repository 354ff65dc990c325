"""`porter port DIR --to opencl --run ""` on our program of float3 / int3 arrays in global memory
(tests/fixtures/programs/packed_vectors): the OpenCL port keeps CUDA's 12-byte layout (vload3 / vstore3 on a
scalar pointer, a by-value float3 argument as a struct of three floats), so the program prints what the
original prints on every CPU OpenCL device, and each kernel's replay of the captured launch (arrays passed as
the captured bytes) validates there and on Oclgrind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.programs import opencl_program_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "fixtures" / "programs" / "packed_vectors"


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_program_on_three_component_vectors_ports_to_a_matching_opencl_program(tmp_path: Path) -> None:
    doc, out = opencl_program_port(tmp_path, PROGRAM)
    (run,) = doc["program"]["runs"]
    printed = run["original"]["stdout_tail"]
    assert "v[299] = " in printed
    variants = [v for v in run["variants"] if v["target"] == "opencl"]
    assert variants and all(v["status"] == "matches" and v["stdout_tail"] == printed for v in variants), (
        variants
    )
    replays = {
        (k["name"], row["device"]): row["status"]
        for k in doc["kernels"]
        for row in k.get("replays", [])
        if row["variant"] == "opencl"
    }
    assert {name for name, _ in replays} == {"bump", "combine"}, replays
    assert set(replays.values()) == {"validated"}, replays
    mapping = json.loads((out / "opencl" / "main.launch.json").read_text())
    assert all(not k["untranslatable"] for k in mapping["kernels"]), mapping
    cl = (out / "opencl" / "main.cl").read_text()
    assert (
        "__kernel void bump(__global float* v, __global const float* w, porter_packed_float3 d_packed, int n)"
        in cl
    )
    assert "vstore3(vload3(i, v) + d, i, v);" in cl and "float3*" not in cl
