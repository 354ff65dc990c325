"""The suite summary (issue #33): each program's counts are its report's own, the totals their sums, the top
reasons link to the programs they came from, and summary.json has exactly the schema docs/REPORT_FORMAT.md
documents."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from porter.report import suite_view
from porter.results import KernelReplay, ProgramKernel, ProgramReport, ProgramRun, RunResult
from porter.suite_report import SuiteProgramResult, SuiteReport

ROOT = Path(__file__).resolve().parents[3]
NOT_LAUNCHED = "no launch to replay: none of the program's runs launched it"


def _first() -> ProgramReport:
    """Two kernels: scale validated everywhere but failed at 64 lanes, unused launched by no run."""
    scale = [
        KernelReplay("original", "cpu:cpu-emulator", "validated", instance="scale<float>"),
        KernelReplay("hip", "cpu:cpu-emulator", "validated", instance="scale<float>"),
        KernelReplay(
            "hip", "cpu:cpu-emulator-wave64", "failed", "matches-reference: arg1[3]", instance="scale<float>"
        ),
        KernelReplay("opencl", "opencl:pthread", "validated", instance="scale<float>"),
    ]
    unused = [KernelReplay(v, "", "not-replayable", NOT_LAUNCHED) for v in ("original", "hip", "opencl")]
    run = ProgramRun(
        "./prog", "prog",
        originals=[RunResult("original", "cpu-runtime", "cpu:cpu-emulator", "ran", 0, 2.0)],
        variants=[
            RunResult("hip", "cpu-runtime", "cpu:cpu-emulator", "matches", 0, 1.0, against="cpu:cpu-emulator"),
            RunResult("opencl", "opencl-pthread", "opencl:pthread", "matches", 0, 6.0, against="cpu:cpu-emulator"),
        ],
    )  # fmt: skip
    return ProgramReport(
        "prog", "out/first", ("hip", "opencl"), complete=True, runs=[run],
        kernels=[ProgramKernel("scale", "k.cuh", 3, replays=scale), ProgramKernel("unused", "k.cuh", 9, replays=unused)],
        stages={"plan": 0.5, "translate": 1.0, "build and run": 6.0, "replay": 4.0, "timing": 1.5},
    )  # fmt: skip


def _second() -> ProgramReport:
    rows = [
        KernelReplay("original", "cpu:cpu-emulator", "validated", instance="step"),
        KernelReplay("hip", "", "not-replayable", NOT_LAUNCHED, instance="step"),
    ]
    return ProgramReport(
        "two", "out/second", ("hip",), complete=True, kernels=[ProgramKernel("step", "s.cu", 1, replays=rows)],
        stages={"plan": 0.25, "translate": 0.5, "build and run": 2.0, "replay": 0.25},
    )  # fmt: skip


def _suite() -> tuple[SuiteReport, list[ProgramReport]]:
    reports = [_first(), _second()]
    programs = [
        SuiteProgramResult("first", ("/p/first",), "out/first", ("hip", "opencl"), "done", 1, 12.0, report=reports[0].document()),
        SuiteProgramResult("second", ("/p/second",), "out/second", ("hip",), "resumed", 0, 3.0, report=reports[1].document()),
        SuiteProgramResult("hangs", ("/p/hangs",), "out/hangs", ("hip", "opencl"), "timed-out", -15, 2.1, "killed at its timeout of 2 s"),
    ]  # fmt: skip
    return SuiteReport("suite.toml", "out", 2, programs, seconds=20.0), reports


def test_each_programs_counts_are_its_reports_own_and_the_totals_their_sums() -> None:
    suite, reports = _suite()
    doc = suite.document()
    rows = {p["name"]: p for p in doc["programs"]}
    for name, report in zip(("first", "second"), reports, strict=True):
        counts = report.kernel_counts()
        for target in report.targets:
            mine = rows[name]["targets"][target]["kernels"]
            assert mine == {k: counts[target][k] for k in mine}, (name, target)
            assert rows[name]["targets"][target]["reasons"] == counts[target]["reasons"]
    assert rows["first"]["targets"]["hip"]["kernels"] == {
        "instances": 2, "failed": 1, "validated": 0, "compiled": 0, "not-replayable": 1, "unlaunched": 1,
    }  # fmt: skip
    assert rows["first"]["targets"]["hip"]["time_ratio"] == {"cpu:cpu-emulator": 0.5}
    assert rows["first"]["targets"]["opencl"]["time_ratio"] == {"opencl:pthread": 3.0}
    assert rows["hangs"]["targets"]["hip"]["kernels"]["instances"] == 0 and rows["hangs"]["report"] == ""
    hip = doc["totals"]["hip"]
    assert hip["programs"] == 3 and hip["verdicts"] == {"matches": 1, "no-run": 1, "timed-out": 1}
    assert hip["kernels"] == {
        "instances": 3, "failed": 1, "validated": 0, "compiled": 0, "not-replayable": 2, "unlaunched": 2,
    }  # fmt: skip
    assert doc["reasons"][0] == {
        "reason": "no launch to replay", "instances": 3, "targets": ["hip", "opencl"], "programs": ["first", "second"],
    }  # fmt: skip
    assert doc["counts"] == {"programs": 3, "done": 1, "resumed": 1, "timed-out": 1}
    assert (doc["complete"], doc["exit_code"]) == (True, 1)


def test_an_interrupted_suite_is_incomplete_and_fails() -> None:
    suite, _ = _suite()
    suite.programs[2].status = "not-started"
    suite.interrupted = True
    assert (suite.complete, suite.exit_code) == (False, 1)


def test_summary_md_links_every_reason_to_its_program_rows() -> None:
    text = suite_view.markdown(_suite()[0])
    assert '<a id="program-first"></a>[first](first/report.md)' in text
    assert '<a id="program-hangs"></a>hangs | timed-out: killed at its timeout of 2 s' in text
    assert (
        "1. **no launch to replay**: 3 (hip, opencl): [first](#program-first), [second](#program-second)"
        in text
    )
    assert "| hip | 3 | 1 matches, 1 no-run, 1 timed-out | 3 | 0 | 2 | 1 | 0 |" in text


def _documented() -> dict[str, Any]:
    """The example of docs/REPORT_FORMAT.md's suite section, its // comments removed."""
    doc = (ROOT / "docs" / "REPORT_FORMAT.md").read_text(encoding="utf-8")
    section = doc.split("# The suite summary", 1)[1]
    block = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert block is not None
    return json.loads(re.sub(r"\s+//.*$", "", block.group(1), flags=re.M))  # type: ignore[no-any-return]


def test_summary_json_has_the_documented_schema() -> None:
    def shape(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [shape(value[0])] if value else []
        return type(value).__name__.replace("int", "number").replace("float", "number")

    documented = _documented()
    doc = _suite()[0].document()
    assert doc["schema"] == documented["schema"] == "porter-suite-summary/1"
    assert list(doc) == list(documented)
    program, example = doc["programs"][0], documented["programs"][0]
    assert list(program) == list(example)
    assert list(program["targets"]["hip"]) == list(example["targets"]["hip"])
    assert list(program["targets"]["hip"]["kernels"]) == list(example["targets"]["hip"]["kernels"])
    assert shape(program["original"]) == shape(example["original"])
    assert list(doc["totals"]["hip"]) == list(documented["totals"]["hip"])
    assert shape(doc["reasons"][0]) == shape(documented["reasons"][0])
    json.dumps(doc)  # plain JSON throughout


def test_stage_seconds_are_each_reports_own_and_the_suite_sums_them() -> None:
    """Where a suite's time went: each program row carries its report's stages, the suite sums them per
    stage (a program without a report adds nothing), and summary.md says it in one line."""
    suite, _ = _suite()
    doc = suite.document()
    first, second, hangs = doc["programs"]
    assert first["stages"]["build and run"] == 6.0 and second["stages"]["replay"] == 0.25
    assert hangs["stages"] == {}
    assert doc["stages"] == {
        "plan": 0.75,
        "translate": 1.5,
        "build and run": 8.0,
        "replay": 4.25,
        "timing": 1.5,
    }
    assert (
        "summed over the programs: plan 0.8 s, translate 1.5 s, build and run 8.0 s, replay 4.2 s (timing 1.5 s)"
        in suite_view.markdown(suite)
    )


def test_json_progress_is_one_event_per_start_and_end_with_the_counts_so_far() -> None:
    import io

    from porter.suite_report import SuiteProgress

    stream = io.StringIO()
    progress = suite_view.JsonProgress(stream)
    first = SuiteProgramResult("a", ("a",), "out/a", ("hip",), status="done", exit_code=0, seconds=1.234)
    late = SuiteProgramResult("b", ("b",), "out/b", ("hip",), status="timed-out", reason="killed at 2 s")
    with progress:
        progress.update(SuiteProgress(total=2, jobs=2, running={"a": 0.1, "b": 0.1}, left=0))
        progress.update(SuiteProgress(total=2, jobs=2, done=[first], running={"b": 1.0}, left=0, eta_s=3.21))
        progress.update(
            SuiteProgress(total=2, jobs=2, done=[first], running={"b": 1.5}, left=0)
        )  # nothing new
        progress.update(SuiteProgress(total=2, jobs=2, done=[first, late], left=0))
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["event"], e["program"]) for e in events] == [
        ("program-started", "a"), ("program-started", "b"), ("program-done", "a"), ("program-done", "b"),
    ]  # fmt: skip
    assert events[2] == {
        "event": "program-done", "program": "a", "status": "done", "exit_code": 0, "seconds": 1.23, "reason": "",
        "done": 1, "running": 1, "left": 0, "total": 2, "eta_s": 3.2,
    }  # fmt: skip
    assert (
        events[3]["status"] == "timed-out"
        and events[3]["reason"] == "killed at 2 s"
        and events[3]["done"] == 2
    )
