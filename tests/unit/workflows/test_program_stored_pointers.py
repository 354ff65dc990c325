"""A kernel that reaches its arrays through device pointers the program stored in a __constant__ struct (Rodinia
heartwall): its launches are passed no array, so the capture changes none -- and the replay says why: the
variable holding device pointers, named, which porter does not follow (issue #29: a kernel not judged says
exactly why).  Its OpenCL port is refused up front with the variable and line (issue #30)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from porter.workflows.program import port_program
from porter.workflows.program_run import ProgramRuns

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++"),
]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "programs" / "stored_pointers"


def test_a_kernel_writing_through_pointers_stored_in_a_constant_struct_is_not_replayable_and_says_why(
    tmp_path: Path,
) -> None:
    src = tmp_path / "stored_pointers"
    shutil.copytree(FIXTURE, src)
    report = port_program(
        [str(src)], ["hip", "opencl"], out_dir=str(tmp_path / "out"),
        run=ProgramRuns(runs=("",), toolchains=("cpu-runtime", "opencl")),
    )  # fmt: skip
    assert report.verdicts()["hip"]["status"] == "matches"
    rows = [r for k in report.kernels if k.name == "doubled" for r in k.replays]
    assert rows and {r.status for r in rows} == {"not-replayable"}, rows
    assert rows[0].reason.startswith(
        "not replayable: no captured launch changed any array it was passed; the program's variable(s) d_work hold device "
        "pointers, through which it may read and write memory porter does not follow (not replayed yet)"
    ), rows[0].reason
    opencl = report.verdicts()["opencl"]
    assert opencl["status"] == "not-run", opencl
    assert "reads the __constant__ d_work, whose Work holds device pointers (in, out)" in opencl["detail"], (
        opencl
    )
    assert "main.cu line 15" in opencl["detail"], opencl
