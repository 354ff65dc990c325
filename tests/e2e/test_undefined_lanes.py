"""`porter port` of a program whose kernel reads warp-shuffle lanes CUDA leaves undefined (issue #29): the
original's replay names the undefined read and shows that its result depends on it, and no port is judged
against that result -- the same way a non-deterministic original is handled.  A kernel whose undefined
reads are discarded is replayed and judged as any other."""

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


def test_an_original_that_depends_on_undefined_shuffle_lanes_is_named_and_its_ports_are_not_judged(
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
    assert original["status"] == "failed", original
    reason = original["reason"]
    assert reason.startswith(
        "undefined: reads shuffle lanes CUDA leaves undefined (lane 0 of warp 0 in block ("
    ), reason
    assert (
        "reads lane 16 through __shfl_down_sync with mask 0xf: outside its mask and beyond the block's last "
        "thread, source line 21" in reason
    ), reason
    assert "its result depends on what the device returns there: arg1[" in reason, reason
    assert "when they read 0 and" in reason and "when they read a poison pattern" in reason, reason
    ports = [x for x in flagged if x["variant"] != "original"]
    assert {x["variant"] for x in ports} == {"hip", "opencl"}, ports
    for port in ports:  # not judged against a result the original does not define
        assert port["status"] == "not-replayable", port
        assert port["reason"] == (
            f"the original kernel's replay does not reproduce the captured run: {reason}"
        ), port

    # its undefined reads are discarded (lanes 2 and 3 read past the block; only lane 0 stores): judged
    guarded = rows["lanes_sum_guarded"]
    assert [x["status"] for x in guarded if x["variant"] == "original"] == ["validated"], guarded
    assert any(x["variant"] == "hip" and x["status"] == "validated" for x in guarded), guarded
    assert all(x["status"] in ("validated", "not-replayable") for x in guarded), guarded
    # the program itself: lanes past the block read 0 on the CPU runtime, as on NVIDIA GPUs, so it passes
    assert doc["program"]["verdicts"]["hip"]["status"] == "matches", doc["program"]["verdicts"]
