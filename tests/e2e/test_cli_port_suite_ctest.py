"""`porter port --suite` on a CMake build's tests (issue #33): the fixture's [ctest] table makes two programs
(bump with runs "100" and "", warp_sum with one run), each ported by its own porter port with
--cmake-target on the CPU runtime; the script test is left out with a warning on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("emulator")]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "cmake_tests"


def test_a_ctest_suite_ports_each_test_executable_with_its_tests_as_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "porter", "port", "--suite", str(FIXTURE / "suite.toml"), "--out", str(out)]
        + ["-j", "2", "--json"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "porter: warning: " in proc.stderr and "[ctest] test 'check_format' left out" in proc.stderr
    doc = json.loads(proc.stdout)
    assert [p["name"] for p in doc["programs"]] == ["bump", "warp_sum"] and doc["complete"], doc
    for p in doc["programs"]:
        assert p["status"] == "done", p
        report = json.loads((out / p["name"] / "report.json").read_text())
        units = [f["path"] for f in report["program"]["files"] if f["kind"] == "source"]
        assert units == [f"project/{p['name']}/main.cu"]  # that target's unit only
        assert report["program"]["build"]["flags_from"] == f"compile_commands.json (CMake target {p['name']})"
        runs = [r["args"] for r in report["program"]["runs"]]
        assert runs == {"bump": ["100", ""], "warp_sum": [""]}[p["name"]]
        assert p["targets"]["hip"]["verdict"] == "matches", p  # the HIP port's runs match the original's
    bump, warp = doc["programs"]
    assert bump["exit_code"] == 0
    assert warp["exit_code"] == 1  # its __activemask has no OpenCL form: untranslatable there
    assert proc.returncode == 1  # a program's port exited 1
