"""HIP programs at 64 lanes (issue #35): the HIP port of a program also runs on the CPU runtime with
64-lane warps (``cpu-runtime-wave64``: warpSize, the device properties, ballots and shuffles), as a
program of its own, compared with the original; the program verdict names both widths."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from porter.backends import get_backend

from porter.workflows.program import port_program
from porter.workflows.program_run import ProgramRuns

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++"),
]

PROGRAMS = Path(__file__).resolve().parents[2] / "fixtures" / "programs"
WAVE64 = "cpu:cpu-emulator-wave64"


def _port(name: str, tmp_path: Path, toolchains: tuple[str, ...] = ("cpu-runtime",)) -> object:
    shutil.copytree(PROGRAMS / name, tmp_path / name)
    return port_program(
        [str(tmp_path / name)], ["hip"], out_dir=str(tmp_path / "out"),
        run=ProgramRuns(runs=("",), toolchains=toolchains),
    )  # fmt: skip


def _runs(report: object) -> dict[str, str]:
    return {v.device: v.status for r in report.runs for v in r.variants}  # type: ignore[attr-defined]


def test_the_cpu_runtime_builds_hip_programs_at_64_lanes_too_and_cuda_only_at_its_own() -> None:
    chains = {c.name: c for c in get_backend("cpu").program_toolchains()}
    wide = chains["cpu-runtime-wave64"]
    assert wide.languages() == ("hip",) and not wide.captures  # the original is captured at its own width
    assert wide.device() is not None and wide.device().label == WAVE64
    assert "-DPORTER_WARP_SIZE=64" in wide.flags("hip") and "-D__AMDGCN_WAVEFRONT_SIZE__=64" in wide.flags(
        "hip"
    )
    assert "-DPORTER_WARP_SIZE=32" in chains["cpu-runtime"].flags("hip")


def test_a_width_neutral_program_matches_at_both_widths(tmp_path: Path) -> None:
    report = _port("warp_sum", tmp_path)
    assert _runs(report) == {"cpu:cpu-emulator": "matches", WAVE64: "matches"}
    verdict = report.verdicts()["hip"]  # type: ignore[attr-defined]
    assert verdict == {"status": "matches", "detail": f"cpu:cpu-emulator, {WAVE64}"}


def test_a_32_lane_assumption_differs_at_64_and_the_verdict_says_at_which_width(tmp_path: Path) -> None:
    report = _port("warp_vote", tmp_path)
    assert _runs(report) == {"cpu:cpu-emulator": "matches", WAVE64: "differs"}
    verdict = report.verdicts()["hip"]  # type: ignore[attr-defined]
    assert verdict["status"] == "differs" and verdict["detail"].startswith(f"on {WAVE64}: "), verdict


def test_a_host_branch_on_the_warp_size_is_taken_at_64_lanes(tmp_path: Path) -> None:
    """`if (prop.warpSize == 32) k32<<<>>>() else k64<<<>>>()`: only the 64-lane run takes k64."""
    report = _port("host_warp_branch", tmp_path)
    assert _runs(report) == {"cpu:cpu-emulator": "matches", WAVE64: "differs"}
    assert report.verdicts()["hip"]["detail"] == (  # type: ignore[attr-defined]
        f"on {WAVE64}: stdout line 1: original 'sum = 65408.00', port 'sum = 98112.00'"
    )


def test_toolchains_by_name_selects_one_width(tmp_path: Path) -> None:
    """--toolchains cpu-runtime-wave64 builds the HIP port at 64 lanes only (and no original there)."""
    report = _port("warp_sum", tmp_path, ("cpu-runtime", "cpu-runtime-wave64"))
    assert set(_runs(report)) == {"cpu:cpu-emulator", WAVE64}
    only = _port("warp_vote", tmp_path / "b", ("cpu-runtime-wave64",))
    assert {b.toolchain for b in only.builds} == {"cpu-runtime-wave64"}  # type: ignore[attr-defined]


def test_a_line_that_only_reports_the_warp_width_is_the_devices_property_not_a_difference(
    tmp_path: Path,
) -> None:
    """`Warp size in threads: 32` against `... 64` at 64 lanes is not compared, and said; every other line
    still is (the warp_vote and host_warp_branch programs above still differ at 64)."""
    report = _port("prints_device", tmp_path)
    assert _runs(report) == {"cpu:cpu-emulator": "matches", WAVE64: "matches"}
    wide = next(v for r in report.runs for v in r.variants if v.device == WAVE64)  # type: ignore[attr-defined]
    assert (
        wide.reason == "stdout line 1 reports the warp width (32 on cpu:cpu-emulator, 64 here): not compared"
    )
