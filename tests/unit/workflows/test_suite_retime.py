"""A suite's GPU timings taken beside the other programs' GPU work are contended; once every program has ended,
the programs holding such timings are ported again -- their ledgers give back every build, run and verdict -- so
that those timings are taken with the GPU quiet (issue #33; porter.workflows.suite).  The ports are a stand-in
for ``porter port`` that writes a signed report: its first port's GPU time is contended, a second one's not."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pytest

from porter.report import suite_view
from porter.workflows.suite import STATE_DIR, SuiteHooks, SuiteOptions, run_suite
from porter.workflows.suite_file import load_suite

# what every stand-in port starts with: its output folder, and what its earlier ports there kept (ports.json)
HEAD = """import json, os, sys
from porter import signing
from porter.results import SCHEMAS
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
ports = os.path.join(out, "ports.json")
seen = json.load(open(ports)) if os.path.exists(ports) and "--fresh" not in sys.argv else []
"""

PORT = (
    HEAD
    + """seen.append(sys.argv[1:])
json.dump(seen, open(ports, "w"))
busy = os.path.basename(out) == "busy" and len(seen) == 1
row = {"variant": "hip", "device": "cuda:GPU", "status": "validated", "reason": "ok", "instance": "k",
       "time_ms": 0.5 if busy else 0.4, "contended": "contended: other processes used cuda:GPU: 7 ./other" if busy else ""}
doc = {"schema": SCHEMAS["program"], "complete": True, "kernels": [{"name": "k", "replays": [row]}]}
open(os.path.join(out, "report.json"), "w").write(signing.sign_json_text(json.dumps(doc)))
print("port", len(seen))
"""
)


def test_programs_with_contended_gpu_times_are_ported_again_after_the_rest(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    names = ["busy", "quiet"]
    text = 'root = "src"\n' + "".join(f'\n[programs.{n}]\npath = "."\nruns = [""]\n' for n in names)
    (tmp_path / "suite.toml").write_text(text, encoding="utf-8")
    (tmp_path / "port.py").write_text(PORT, encoding="utf-8")
    out = tmp_path / "out"
    options = SuiteOptions(out, jobs=2, fresh=True, command=(sys.executable, str(tmp_path / "port.py")))
    report = run_suite(load_suite(tmp_path / "suite.toml"), options, SuiteHooks(markdown=suite_view.markdown))
    busy, quiet = (json.loads((out / n / "ports.json").read_text()) for n in names)
    assert len(quiet) == 1  # nothing contended: ported once
    # the first port as asked (--fresh), the second resuming from the ledger the first left
    assert len(busy) == 2 and "--fresh" in busy[0] and "--fresh" not in busy[1], busy
    results = {p.name: p for p in report.programs}
    assert results["busy"].status == "done" and results["busy"].timed_again == 1
    assert results["quiet"].timed_again == 0
    (row,) = results["busy"].report["kernels"][0]["replays"]  # type: ignore[index]
    assert row["contended"] == "" and row["time_ms"] == 0.4
    summary = json.loads((out / "summary.json").read_text())
    assert {p["name"]: p["timed_again"] for p in summary["programs"]} == {"busy": 1, "quiet": 0}
    assert "GPU timings taken again once every program had ended" in (out / "summary.md").read_text()
    log = (out / STATE_DIR / "busy.log").read_text()
    assert "port 1" in log and "port 2" in log  # both ports' output, one after the other
    # a suite run again resumes both: nothing contended is left to take again
    again = run_suite(load_suite(tmp_path / "suite.toml"), SuiteOptions(out, jobs=2, command=options.command))
    assert {p.status for p in again.programs} == {"resumed"}
    assert len(json.loads((out / "busy" / "ports.json").read_text())) == 2


TIMED = (
    HEAD
    + """import time
began = time.time()
time.sleep(0.4)
seen.append([began, time.time(), os.environ.get("CUDA_VISIBLE_DEVICES")])
json.dump(seen, open(ports, "w"))
first = len(seen) == 1
row = {"variant": "hip", "device": "cuda:GPU", "status": "validated", "reason": "ok", "instance": "k",
       "time_ms": 0.5, "contended": "contended: other processes used cuda:GPU: 7 python3" if first else ""}
doc = {"schema": SCHEMAS["program"], "complete": True, "kernels": [{"name": "k", "replays": [row]}]}
open(os.path.join(out, "report.json"), "w").write(signing.sign_json_text(json.dumps(doc)))
"""
)


# two GPUs, as nvidia-smi lists them (what porter.backends.gpu_slots reads)
SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=index,uuid,pci.bus_id,name*)
    printf '0, GPU-aaaa, 00000000:1B:00.0, NVIDIA H200\\n1, GPU-bbbb, 00000000:43:00.0, NVIDIA H200\\n' ;;
  *) exit 9 ;;
esac
"""


@pytest.mark.parametrize("gpus", [0, 2])
def test_the_programs_timed_again_run_one_per_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int
) -> None:
    """Side by side, one program's timing children load their kernels on the GPU while another's time: the
    pass that takes contended times again runs the programs one per GPU (one at a time where none can be
    pinned), while the first pass ran them side by side."""
    tools = tmp_path / "tools"
    tools.mkdir()
    if gpus:
        (tools / "nvidia-smi").write_text(SMI, encoding="utf-8")
        (tools / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (tmp_path / "src").mkdir()
    names = ["a", "b", "c", "d"]
    text = 'root = "src"\n' + "".join(f'\n[programs.{n}]\npath = "."\nruns = [""]\n' for n in names)
    (tmp_path / "suite.toml").write_text(text, encoding="utf-8")
    (tmp_path / "port.py").write_text(TIMED, encoding="utf-8")
    out = tmp_path / "out"
    options = SuiteOptions(out, jobs=4, fresh=True, command=(sys.executable, str(tmp_path / "port.py")))
    report = run_suite(load_suite(tmp_path / "suite.toml"), options)
    assert {p.name: p.timed_again for p in report.programs} == dict.fromkeys(names, 1)
    spans = [json.loads((out / n / "ports.json").read_text()) for n in names]

    def most_at_once(runs: list[list]) -> int:
        return max(sum(1 for other in runs if other[0] <= run[0] < other[1]) for run in runs)

    assert most_at_once([s[0] for s in spans]) > max(gpus, 1)  # the first ports: side by side (-j 4)
    again = [s[1] for s in spans]
    assert most_at_once(again) <= max(gpus, 1), again
    for run in again:  # two ported again at once are never on one GPU
        beside = [o for o in again if o is not run and o[0] <= run[0] < o[1]]
        assert all(o[2] != run[2] for o in beside), again
    assert {s[1][2] for s in spans} == ({"GPU-aaaa", "GPU-bbbb"} if gpus else {None})


def test_the_second_pass_never_runs_more_programs_at_once_than_j_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two GPUs allow two programs at once in the second pass, but -j 1 said one."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "nvidia-smi").write_text(SMI, encoding="utf-8")
    (tools / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    (tmp_path / "src").mkdir()
    names = ["a", "b", "c"]
    text = 'root = "src"\n' + "".join(f'\n[programs.{n}]\npath = "."\nruns = [""]\n' for n in names)
    (tmp_path / "suite.toml").write_text(text, encoding="utf-8")
    (tmp_path / "port.py").write_text(TIMED, encoding="utf-8")
    out = tmp_path / "out"
    options = SuiteOptions(out, jobs=1, fresh=True, command=(sys.executable, str(tmp_path / "port.py")))
    report = run_suite(load_suite(tmp_path / "suite.toml"), options)
    assert {p.name: p.timed_again for p in report.programs} == dict.fromkeys(names, 1)
    again = sorted(json.loads((out / n / "ports.json").read_text())[1] for n in names)
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(again)), again


CUT = (
    HEAD
    + """seen.append(sys.argv[1:])
json.dump(seen, open(ports, "w"))
if len(seen) == 1:
    row = {"variant": "hip", "device": "cuda:GPU", "status": "validated", "reason": "ok", "instance": "k",
           "time_ms": 0.5, "contended": "contended: other processes used cuda:GPU: 7 ./other"}
    doc = {"schema": SCHEMAS["program"], "complete": True, "kernels": [{"name": "k", "replays": [row]}]}
    open(os.path.join(out, "report.md"), "w").write("# the first port's report\\n")
else:  # the second port rewrites its report from its start, and is stopped before it gets far
    doc = {"schema": SCHEMAS["program"], "complete": False, "kernels": [], "stages": {"plan": 0.1}}
    open(os.path.join(out, "report.md"), "w").write("# cut short\\n")
open(os.path.join(out, "report.json"), "w").write(signing.sign_json_text(json.dumps(doc)))
sys.exit(0 if len(seen) == 1 else 3)
"""
)


def test_a_port_again_that_does_not_finish_leaves_the_first_ports_report(tmp_path: Path) -> None:
    """On an H100 a suite's second pass was stopped while reduction was ported again for its timings: its
    report.json then held only the plan, and the summary's row 0 validated, though its first port had judged
    every kernel.  The first port's report files are now put back and its verdicts are the row, the timings
    not taken again said."""
    (tmp_path / "src").mkdir()
    (tmp_path / "suite.toml").write_text('root = "src"\n\n[programs.busy]\npath = "."\nruns = [""]\n')
    (tmp_path / "port.py").write_text(CUT, encoding="utf-8")
    out = tmp_path / "out"
    options = SuiteOptions(out, jobs=1, fresh=True, command=(sys.executable, str(tmp_path / "port.py")))
    report = run_suite(load_suite(tmp_path / "suite.toml"), options)
    assert len(json.loads((out / "busy" / "ports.json").read_text())) == 2  # it was ported again
    (result,) = report.programs
    assert result.status == "done" and result.timed_again == 0
    assert result.reason.startswith("its contended GPU timings were not taken again (")
    assert "first port's report is kept" in result.reason
    (row,) = result.report["kernels"][0]["replays"]  # type: ignore[index]
    assert row["status"] == "validated" and row["contended"]
    on_disk = json.loads((out / "busy" / "report.json").read_text())
    assert on_disk["complete"] is True and on_disk["kernels"][0]["replays"][0]["status"] == "validated"
    assert (out / "busy" / "report.md").read_text() == "# the first port's report\n"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["programs"][0]["status"] == "done"
