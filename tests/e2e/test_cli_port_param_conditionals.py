"""`porter port DIR --to opencl --run ""` on a program whose kernel's parameter list and launch hold the
same ``#ifdef`` block (the flag defined in a header, as Rodinia's huffman does): the OpenCL program is
built, run on the CPU OpenCL devices and matches the original; the kernel is validated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.programs import opencl_program_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "fixtures" / "programs" / "param_conditionals"


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_conditional_parameter_list_ports_to_a_matching_opencl_program(tmp_path: Path) -> None:
    doc, out = opencl_program_port(tmp_path, PROGRAM)
    rows = [row for k in doc["kernels"] for row in k.get("replays", []) if row["variant"] == "opencl"]
    assert rows and all(row["status"] == "validated" for row in rows), rows
    mapping = json.loads((out / "opencl" / "main.launch.json").read_text())
    (kernel,) = mapping["kernels"]
    assert kernel["arg_map"] == [0, 1, 2, 3, 4, 5] and not kernel["untranslatable"]
    cl = (out / "opencl" / "main.cl").read_text()
    assert "#ifdef WITH_TRACE\n                              __global unsigned int* trace_in" in cl
    host = (out / "opencl" / "kernels.cuh").read_text()
    assert "#ifdef WITH_TRACE\n    porter_launch.arg(trace_in).arg(trace_code);\n#endif" in host
