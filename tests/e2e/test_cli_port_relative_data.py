"""`porter port DIR --run --data FOLDER` of a program that opens its input at a fixed path relative to
the folder it runs in, outside its own folder (Rodinia's srad_v1: ../../../data/srad/image.pgm): the
original and its port each find it from their scratch copy, and their runs are compared."""

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
RELATIVE_DATA = ROOT / "tests" / "fixtures" / "programs" / "relative_data"


def porter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=900
    )


def test_the_original_and_its_port_read_data_at_its_relative_position(tmp_path: Path) -> None:
    src, data, out = tmp_path / "relative_data", tmp_path / "data", tmp_path / "out"
    shutil.copytree(RELATIVE_DATA, src)
    data.mkdir()
    (data / "input.txt").write_text(" ".join(str(i * 7 % 101) for i in range(200)) + "\n")
    data_before = sorted(p.name for p in data.iterdir())
    r = porter(
        "port", str(src), "--to", "hip", "--toolchains", "cpu-runtime", "--run", "", "--data", str(data),
        "--out", str(out), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads((out / "report.json").read_text())
    run = doc["program"]["runs"][0]
    assert run["original"]["exit"] == 0, run["original"]
    assert "values 200 checksum" in run["original"]["stdout_tail"]
    assert [v["status"] for v in run["variants"]] and all(v["status"] == "matches" for v in run["variants"])
    assert not any("relative position" in n for n in doc["notes"])
    assert sorted(p.name for p in data.iterdir()) == data_before  # nothing written beside the user's data
    assert not (tmp_path / "relative_data" / "data").exists()


def test_a_data_folder_holding_the_program_is_seen_at_its_own_path_and_the_notes_say_so(
    tmp_path: Path,
) -> None:
    src, out = tmp_path / "relative_data", tmp_path / "out"
    shutil.copytree(RELATIVE_DATA, src)
    r = porter(
        "port", str(src), "--to", "hip", "--toolchains", "cpu-runtime", "--run", "", "--data", str(tmp_path),
        "--out", str(out), "--json",
    )  # fmt: skip
    doc = json.loads((out / "report.json").read_text())
    notes = doc["notes"]
    assert any("holds the program's folder" in n for n in notes), (notes, r.stderr)
    # the original cannot find ../data/input.txt from its copy: a failed original, not a porter error
    assert doc["program"]["runs"][0]["original"]["status"] == "failed"
