"""`porter port DIR --to opencl --run ""` on a program whose template kernel (defined in kernels.cuh) is
launched, as two instances, only from a .cu file the main file includes (helpers.cu), as Rodinia's huffman
launches prescan<true, false> from scan.cu: both instances are in the main unit's OpenCL program, the
program matches the original on the CPU OpenCL devices and both instances are validated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.programs import opencl_program_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "fixtures" / "programs" / "included_launches"


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_instances_launched_from_an_included_file_port_to_a_matching_opencl_program(tmp_path: Path) -> None:
    doc, out = opencl_program_port(tmp_path, PROGRAM)
    rows = [row for k in doc["kernels"] for row in k.get("replays", []) if row["variant"] == "opencl"]
    assert {row["instance"] for row in rows} == {"transform<true>", "transform<false>"}, rows
    assert all(row["status"] == "validated" for row in rows), rows
    mapping = json.loads((out / "opencl" / "main.launch.json").read_text())
    assert [(k["name"], k["entry"]) for k in mapping["kernels"]] == [
        ("transform<true>", "transform_true"),
        ("transform<false>", "transform_false"),
    ]
    assert not any(k["untranslatable"] for k in mapping["kernels"])
    host = (out / "opencl" / "kernels.cuh").read_text()
    assert 'porter_launch("transform_true", "main.cl")' in host
    assert 'porter_launch("transform_false", "main.cl")' in host
    assert "no_instances(" not in host
