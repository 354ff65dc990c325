"""`porter port` of a program whose kernel reads warp-shuffle lanes CUDA leaves undefined (issue #29): the
original's replay names the undefined read and shows that its result depends on it; each port is then judged
as a function of what those lanes return -- reading 0 it must leave what the capture recorded, reading a poison
pattern what the original left with the same poison -- on the devices that can read them so (porter's CPU
emulator; an OpenCL device through porter's lane helpers), and is not replayable elsewhere.  A port that computes anything else from those lanes fails.  A
kernel whose undefined reads are discarded is replayed and judged as any other."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++"),
]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "programs" / "undefined_lanes"


def test_an_original_that_depends_on_undefined_shuffle_lanes_is_named_and_its_ports_judged_by_both_readings(
    tmp_path: Path,
) -> None:
    src = tmp_path / "undefined_lanes"
    shutil.copytree(FIXTURE, src)
    r = subprocess.run(
        [sys.executable, "-m", "porter", "port", str(src), "--to", "hip,opencl", "--toolchains",
         "cpu-runtime,opencl", "--run", "", "--out", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    rows = {k["name"]: k["replays"] for k in doc["kernels"]}

    flagged = rows["lanes_sum_unguarded"]
    (original,) = [x for x in flagged if x["variant"] == "original"]
    assert original["status"] == "validated", original
    reason = original["reason"]
    assert (
        "with the shuffle lanes CUDA leaves undefined reading 0 and a poison pattern, as the original did (the "
        "original's defect: reads shuffle lanes CUDA leaves undefined (lane 0 of warp 0 in block (" in reason
    ), reason
    assert (
        "reads lane 16 through __shfl_down_sync with mask 0xf: outside its mask and beyond the block's last "
        "thread, source line 21" in reason
    ), reason
    assert "its result depends on what the device returns there: arg1[" in reason, reason
    assert "when they read 0 and" in reason and "when they read a poison pattern" in reason, reason
    assert "compared:undefined-lanes" in original["checks"] and "undefined-lanes" in original["checks"]
    hip = {x["device"]: x for x in flagged if x["variant"] == "hip"}
    assert hip["cpu:cpu-emulator"]["status"] == "validated", hip
    assert "undefined-lanes" in hip["cpu:cpu-emulator"]["checks"], hip
    # AMD's 64-lane wavefronts read an inactive lane as 0: nothing undefined there, compared as 0
    assert hip["cpu:cpu-emulator-wave64"]["status"] == "validated", hip
    assert "it reads no shuffle lane left undefined here" in hip["cpu:cpu-emulator-wave64"]["reason"], hip
    # the OpenCL port reads the lanes outside its mask through porter's helpers: 0, or the poison pattern when
    # built to (cuda2opencl.toml [warp_helpers.porter_undefined_lane]), so a device with 32-wide sub-groups
    # (Intel's CPU runtime) judges it by both readings; the others lack them
    opencl = [x for x in flagged if x["variant"] == "opencl"]
    judged = [x for x in opencl if x["status"] == "validated"]
    assert all(
        x["status"] == "not-replayable" and "has none of them" in x["reason"]
        for x in opencl
        if x not in judged
    )
    if any(x["device"].startswith("opencl:Intel") for x in opencl):
        assert judged, opencl
    for x in judged:
        assert (
            "with the shuffle lanes CUDA leaves undefined reading 0 and a poison pattern, as the original did"
            in (x["reason"])
        ), x
        assert "undefined-lanes" in x["checks"], x

    # its undefined reads are discarded (lanes 2 and 3 read past the block; only lane 0 stores): judged
    guarded = rows["lanes_sum_guarded"]
    assert [x["status"] for x in guarded if x["variant"] == "original"] == ["validated"], guarded
    assert any(x["variant"] == "hip" and x["status"] == "validated" for x in guarded), guarded
    assert all(x["status"] in ("validated", "not-replayable") for x in guarded), guarded
    # the program itself: lanes past the block read 0 on the CPU runtime, as on NVIDIA GPUs, so it passes; and its
    # OpenCL program reads them as 0 through porter's helpers wherever it runs
    assert doc["program"]["verdicts"]["hip"]["status"] == "matches", doc["program"]["verdicts"]
    if judged:
        assert doc["program"]["verdicts"]["opencl"]["status"] == "matches", doc["program"]["verdicts"]


def test_a_port_that_computes_otherwise_from_the_undefined_lanes_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the HIP port masks each shuffled value to 16 bits: the same sums when the undefined lanes read 0 (as
    # captured), another when they read the poison pattern -- it does not compute what the original computes
    shuffled = "v += __shfl_down(v, offset);"
    rows = _unguarded_rows_of_a_planted_port(
        tmp_path, monkeypatch, "hip", shuffled, shuffled.replace(";", " & 0xFFFF;"), ("cpu-runtime",)
    )
    assert [r.status for r in rows if r.variant == "original"] == ["validated"], rows
    (wrong,) = [r for r in rows if r.variant == "hip" and r.device == "cpu:cpu-emulator"]
    assert wrong.status == "failed", wrong
    assert wrong.reason.startswith("undefined: with the shuffle lanes CUDA leaves undefined"), wrong.reason
    assert "its outputs differ from the original's: arg1[" in wrong.reason, wrong.reason


def test_an_opencl_port_that_reads_the_undefined_lanes_otherwise_is_not_validated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same planted change in the OpenCL port: its reads are not counted there, so a port that matches the
    original with the undefined lanes read as 0 but not poisoned is not replayable on that device (never validated),
    both said."""
    from porter.harness.validate import READ_ELSEWHERE

    shuffled = "v += porter_shfl_down_sync((uint)(mask), v, (uint)(offset));"
    rows = _unguarded_rows_of_a_planted_port(
        tmp_path,
        monkeypatch,
        "opencl",
        shuffled,
        shuffled.replace("v += ", "v += 0xFFFF & "),
        ("cpu-runtime", "opencl"),
    )
    rows = [r for r in rows if r.variant == "opencl"]
    ran = [r for r in rows if "has none of them" not in r.reason]
    if not ran:
        pytest.skip(f"no OpenCL device here has 32-wide sub-groups: {[r.reason for r in rows]}")
    assert all(r.status == "not-replayable" and READ_ELSEWHERE in r.reason for r in ran), ran


def _unguarded_rows_of_a_planted_port(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    was: str,
    planted: str,
    toolchains: tuple[str, ...],
) -> list:
    """The fixture ported to `target` alone, its `lanes_sum_unguarded` port with `was` made `planted`: that
    kernel's replay rows."""
    from fakes.programs import plant_port

    from porter.workflows.program import port_program
    from porter.workflows.program_run import ProgramRuns

    plant_port(monkeypatch, target, lambda text: text.replace(was, planted, 1), "lanes_sum_unguarded")
    src = tmp_path / "undefined_lanes"
    shutil.copytree(FIXTURE, src)
    report = port_program(
        [str(src)], [target], out_dir=str(tmp_path / "out"), run=ProgramRuns(("",), toolchains=toolchains)
    )
    return [r for k in report.kernels if k.name == "lanes_sum_unguarded" for r in k.replays]
