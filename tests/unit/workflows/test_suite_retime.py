"""A suite's GPU timings taken beside the other programs' GPU work are contended; once every program has ended,
the programs holding such timings are ported again -- their ledgers give back every build, run and verdict -- so
that those timings are taken with the GPU quiet (issue #33; porter.workflows.suite).  The ports are a stand-in
for ``porter port`` that writes a signed report: its first port's GPU time is contended, a second one's not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from porter.report import suite_view
from porter.workflows.suite import STATE_DIR, SuiteHooks, SuiteOptions, run_suite
from porter.workflows.suite_file import load_suite

PORT = """import json, os, sys
from porter import signing
from porter.results import SCHEMAS
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
ports = os.path.join(out, "ports.json")
seen = json.load(open(ports)) if os.path.exists(ports) and "--fresh" not in sys.argv else []
seen.append(sys.argv[1:])
json.dump(seen, open(ports, "w"))
busy = os.path.basename(out) == "busy" and len(seen) == 1
row = {"variant": "hip", "device": "cuda:GPU", "status": "validated", "reason": "ok", "instance": "k",
       "time_ms": 0.5 if busy else 0.4, "contended": "contended: other processes used cuda:GPU: 7 ./other" if busy else ""}
doc = {"schema": SCHEMAS["program"], "complete": True, "kernels": [{"name": "k", "replays": [row]}]}
open(os.path.join(out, "report.json"), "w").write(signing.sign_json_text(json.dumps(doc)))
print("port", len(seen))
"""


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
