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
