"""`porter check VARIANT --against ORIGINAL --capture DIR`: a variant judged on a program's captured launches."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TOUR = Path(__file__).resolve().parents[1] / "fixtures" / "programs" / "capture_tour"


def porter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=900
    )


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_check_with_a_capture_accepts_the_original_and_rejects_a_planted_defect(tmp_path: Path) -> None:
    shutil.copytree(TOUR, tmp_path / "tour")
    r = porter("capture", str(tmp_path / "tour"), "--run", "./main", "--mib", "2")
    assert r.returncode == 0, r.stderr + r.stdout
    cap = str(tmp_path / "tour.capture")
    original = str(tmp_path / "tour" / "main.cu")
    ok = porter("check", original, "--against", original, "--kernel", "scale", "--capture", cap)
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert "3 captured launch(es)" in " ".join(ok.stdout.split())
    bad = tmp_path / "bad.cu"
    bad.write_text((tmp_path / "tour" / "main.cu").read_text().replace("x[i] * a + 1.0f", "x[i] * a + 1.01f"))
    rejected = porter("check", str(bad), "--against", original, "--kernel", "scale", "--capture", cap)
    assert rejected.returncode == 1 and "matches-reference" in rejected.stdout, rejected.stdout
    # a kernel the capture cannot replay: one line, exit 2, naming why
    struct = porter("check", original, "--against", original, "--kernel", "touch", "--capture", cap)
    assert struct.returncode == 2 and "holds a device pointer" in struct.stderr
    assert len(struct.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_bench_with_a_capture_times_each_kernel_at_the_programs_own_launches(tmp_path: Path) -> None:
    import json

    shutil.copytree(TOUR, tmp_path / "tour")
    r = porter(
        "capture",
        str(tmp_path / "tour"),
        "--run",
        "./main",
        "--mib",
        "2",
        "--first-mib",
        "2",
        "--toolchain",
        "cpu-runtime",
    )
    assert r.returncode == 0, r.stderr + r.stdout
    cap = str(tmp_path / "tour.capture")
    src = str(tmp_path / "tour" / "main.cu")
    b = porter("bench", src, "--kernel", "scale", "--capture", cap, "--backend", "cpu", "--json")
    assert b.returncode == 0, b.stderr + b.stdout
    (k,) = json.loads(b.stdout)["kernels"]
    assert k["kernel"] == "scale" and k["spec_source"] == "capture"
    assert k["size"]["n0"] == 256 and k["size"]["gx"] == 2 and k["size"]["bx"] == 128  # the run's own launch
    timed = [r for r in k["results"] if r["ok"]]
    assert timed and all(r["size"] == k["size"] for r in timed), k["results"]
    assert all(r["median_ms"] > 0 for r in timed)
    # a template kernel's instance, named as the run deduced it
    ramp = porter("bench", src, "--kernel", "ramp", "--capture", cap, "--backend", "cpu", "--json")
    assert ramp.returncode == 0, ramp.stderr
    assert [k["kernel"] for k in json.loads(ramp.stdout)["kernels"]] == ["ramp<32>"]
    both = porter("bench", src, "--capture", cap, "--size", "n=4")
    assert both.returncode == 2 and "exclude each other" in both.stderr
    none = porter("bench", src, "--kernel", "fill", "--capture", cap, "--backend", "cpu")
    assert none.returncode == 1 and "not replayable" in " ".join(none.stdout.split())  # nothing timed


@pytest.mark.parametrize("command", ["check", "bench", "optimize"])
def test_a_tampered_capture_exits_2_naming_the_record_not_the_variant(tmp_path: Path, command: str) -> None:
    """Issue #37, item 10: an array of the capture changed after it was written used to be judged as the
    variant's mismatch (check: exit 1); now every command that reads a capture refuses it before
    anything runs, in one line naming the file and the launch."""
    from fakes.captures import KERNEL, make
    from fakes.programs import run_porter

    original = tmp_path / "orig.cu"
    original.write_text(KERNEL)
    cap = make(tmp_path / "cap")
    if command == "check":  # as written, the capture judges the original itself validated
        ok = run_porter(tmp_path, "check", str(original), "--against", str(original), "--capture", str(cap))
        assert ok.returncode == 0, ok.stdout + ok.stderr
    after = cap / "arrays" / "k0-2-a0-after.bin"
    after.write_bytes(b"\x00\x00\x40\x40" + after.read_bytes()[4:])  # x[0] = 3.0 after launch 2, not 1.0
    args = {
        "check": ["check", str(original), "--against", str(original), "--capture", str(cap)],
        "bench": ["bench", str(original), "--kernel", "scale", "--capture", str(cap), "--backend", "cpu"],
        "optimize": ["optimize", str(original), "--capture", str(cap), "--out", str(tmp_path / "opt")],
    }[command]
    r = run_porter(tmp_path, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(after) in lines[0] and "launch 2 of scale" in lines[0], r.stderr
    assert "does not match the sha256" in lines[0]
