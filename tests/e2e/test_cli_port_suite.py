"""`porter port --suite` (issue #33): three programs of the fixtures ported two at a time, each into
OUT/<name>/ by its own porter port, one summary whose counts are the reports' own; a re-run resumes them; a
program that hangs is killed at its timeout and the suite goes on; Ctrl-C keeps what finished."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from porter.results import STAGES

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("emulator")]

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"
THREE = ("warp_sum", "unity_types", "included_kernel_unit")


def _suite(folder: Path, entries: dict[str, str]) -> Path:
    """A suite file of fixture programs, each run once with no arguments on the CPU runtime."""
    text = f'root = "{PROGRAMS}"\n\n[defaults]\nruns = [""]\ntoolchains = "cpu-runtime,opencl"\n'
    for name, extra in entries.items():
        text += f'\n[programs.{name}]\npath = "{name}"\n{extra}'
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.toml").write_text(text, encoding="utf-8")
    return folder / "suite.toml"


def porter(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "porter", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _doc(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _survivors(needle: str) -> list[str]:
    """Command lines of processes still naming `needle` (a killed port must leave none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmd and state != "Z":
            found.append(cmd)
    return found


def test_three_programs_two_at_a_time_summed_up_from_their_own_reports(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "s", dict.fromkeys(THREE, ""))
    out = tmp_path / "out"
    proc = porter("port", "--suite", str(suite), "--out", str(out), "-j", "2", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    doc = _doc(proc)
    assert doc["schema"] == "porter-suite-summary/1" and doc["jobs"] == 2 and doc["complete"]
    assert json.loads((out / "summary.json").read_text()) == doc
    assert [p["name"] for p in doc["programs"]] == list(THREE)
    totals: dict[str, dict[str, int]] = {}
    for p in doc["programs"]:
        assert p["status"] == "done", p
        report = json.loads((out / p["name"] / "report.json").read_text())
        assert report["complete"] and p["exit_code"] == report["exit_code"]
        # where its time went: every stage of a port with a run, clocked, and none longer than the port
        assert p["stages"] == report["stages"] and list(report["stages"])[:4] == list(STAGES[:4]), p
        assert 0 < sum(report["stages"][s] for s in STAGES[:4]) <= p["seconds"], p
        for target, row in p["targets"].items():
            counted = report["kernel_counts"][target]
            assert row["kernels"] == {k: counted[k] for k in row["kernels"]}, (p["name"], target)
            assert row["verdict"] == report["program"]["verdicts"][target]["status"]
            for key, n in row["kernels"].items():
                totals.setdefault(target, {}).setdefault(key, 0)
                totals[target][key] += n
        assert p["targets"]["hip"]["kernels"]["validated"] >= 1  # every fixture's kernel validates as HIP
        assert p["targets"]["hip"]["time_ratio"], p  # each port ran beside its original
    assert {t: row["kernels"] for t, row in doc["totals"].items()} == totals
    assert doc["stages"]["replay"] == pytest.approx(
        sum(p["stages"]["replay"] for p in doc["programs"]), abs=0.01
    )
    assert doc["exit_code"] == int(any(p["exit_code"] for p in doc["programs"]))
    markdown = (out / "summary.md").read_text()
    assert all(f'<a id="program-{name}"></a>' in markdown for name in THREE)
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the same suite again: every program resumed from its report, nothing ported again
    start = time.monotonic()
    again = _doc(porter("port", "--suite", str(suite), "--out", str(out), "--json"))
    assert time.monotonic() - start < 30
    assert [p["status"] for p in again["programs"]] == ["resumed"] * 3
    assert again["totals"] == doc["totals"]


def test_a_hanging_program_is_killed_at_its_timeout_and_the_suite_goes_on(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "s", {"hangs": "timeout = 2\n", "warp_sum": ""})
    out = tmp_path / "out"
    proc = porter("port", "--suite", str(suite), "--out", str(out), "-j", "2", "--json")
    assert proc.returncode == 1, proc.stderr
    rows = {p["name"]: p for p in _doc(proc)["programs"]}
    assert (
        rows["hangs"]["status"] == "timed-out" and rows["hangs"]["reason"] == "killed at its timeout of 2 s"
    )
    assert rows["hangs"]["seconds"] < 2 + 10 + 5  # SIGTERM at 2 s, SIGKILL at most 10 s later
    assert rows["warp_sum"]["status"] == "done" and rows["warp_sum"]["report_complete"]
    assert not _survivors(str(out / "hangs"))
    assert "timed-out" in (out / "summary.md").read_text()
    # --json: progress as JSON lines on stderr (CI logs), a start and an end per program
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert {(e["event"], e["program"]) for e in events} == {
        (kind, name) for kind in ("program-started", "program-done") for name in ("hangs", "warp_sum")
    }
    ended = {e["program"]: e for e in events if e["event"] == "program-done"}
    assert ended["hangs"]["status"] == "timed-out" and ended["warp_sum"]["status"] == "done"
    assert events[-1]["done"] == events[-1]["total"] == 2 and events[-1]["left"] == 0


def test_ctrl_c_stops_the_running_program_and_keeps_what_finished(tmp_path: Path) -> None:
    """-j 1: warp_sum finishes, then Ctrl-C while the hanging program runs: exit 130, warp_sum's report
    and the summary kept, the hanging one interrupted, its processes gone; a re-run resumes warp_sum."""
    suite = _suite(tmp_path / "s", {"warp_sum": "", "hangs": "", "unity_types": ""})
    out = tmp_path / "out"
    driver = subprocess.Popen(
        [sys.executable, "-m", "porter", "port", "--suite", str(suite), "--out", str(out), "-j", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                rows = {p["name"]: p for p in json.loads((out / "summary.json").read_text())["programs"]}
            except (OSError, ValueError):
                rows = {}
            if rows.get("hangs", {}).get("status") == "running":
                break
            assert driver.poll() is None, driver.communicate()
            time.sleep(0.5)
        time.sleep(3)  # well into the hanging program's port
        driver.send_signal(signal.SIGINT)
        _, err = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 130, err
    assert "Traceback" not in err
    doc = json.loads((out / "summary.json").read_text())
    rows = {p["name"]: p for p in doc["programs"]}
    assert [rows[n]["status"] for n in ("warp_sum", "hangs", "unity_types")] == [
        "done",
        "interrupted",
        "not-started",
    ]
    assert json.loads((out / "warp_sum" / "report.json").read_text())["complete"]
    assert not doc["complete"] and doc["exit_code"] == 1
    assert not _survivors(str(out / "hangs"))
    again = _suite(tmp_path / "s", {"warp_sum": ""})
    rerun = _doc(porter("port", "--suite", str(again), "--out", str(out), "--json"))
    assert rerun["programs"][0]["status"] == "resumed"


def test_a_bad_suite_is_one_line_at_its_line_and_exit_2(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "s", {"warp_sum": "", "missing": ""})
    proc = porter("port", "--suite", str(suite), "--out", str(tmp_path / "out"), timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("porter: ")]
    assert lines == [
        f"porter: {suite}:11: program 'missing': 'missing' does not exist ({PROGRAMS / 'missing'})"
    ]
    assert not (tmp_path / "out").exists()
