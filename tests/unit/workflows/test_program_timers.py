"""The lines a program prints from a timer reach the comparison of its runs: the plan's texts give the
patterns (each file read and parsed once), the rule the runs are compared by carries them, and the report says
which lines were not compared and why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from porter import grammars
from porter.harness.outputs import default_rule, with_tolerance
from porter.program import discover
from porter.workflows.program_plan import ProgramPlan
from porter.workflows.program_timers import timer_rule

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "programs" / "timed_copy"


def _line(text: str) -> int:
    source = (FIXTURE / "main.cu").read_text(encoding="utf-8")
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.fixture
def timed(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "timed_copy")
    return tmp_path / "timed_copy"


def test_the_plan_s_texts_give_the_rule_its_timer_lines(timed: Path) -> None:
    grammars.forget()
    plan = ProgramPlan(discover([str(timed)]))
    base = with_tolerance(rtol=1e-3)
    rule = timer_rule(plan, base)
    assert rule.rtol == base.rtol  # the user's tolerances kept
    assert [(t.what, t.file, t.line) for t in rule.timers] == [
        ("t1 - t0", "main.cu", _line("COPY IN")),
        ("elapsed(...)", "main.cu", _line("COPY BACK")),
    ]
    assert rule.timed is not None and rule.timed.fullmatch("COPY BACK: 0.000026")
    assert not rule.timed.fullmatch("RESULT: 32640.000000")
    assert default_rule().timers == ()  # nothing else changed
    # the timers asked the plan for the file's text and scan, and parsed what the scan parsed: once
    scan = plan.scan(plan.program.units[0])
    assert scan is not None and [k.name for k in scan.kernels] == ["twice"]
    assert all(n == 1 for n in grammars.PARSES.values()), grammars.PARSES


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_ported_program_s_timer_lines_are_named_and_not_compared(timed: Path, tmp_path: Path) -> None:
    from porter.workflows.program import port_program
    from porter.workflows.program_run import ProgramRuns

    report = port_program(
        [str(timed)],
        ["hip"],
        out_dir=str(tmp_path / "o"),
        run=ProgramRuns(("",), toolchains=("cpu-runtime",)),
    )
    hip = [r for r in report.runs[0].variants if r.variant == "hip"]
    assert hip  # the CPU runtime at 32 lanes, and at 64
    for run in hip:
        assert run.status == "matches", run.differences
        assert run.reason == (
            f"stdout line 1 printed from a timer (t1 - t0 at main.cu:{_line('COPY IN')}): not compared; "
            f"stdout line 2 printed from a timer (elapsed(...) at main.cu:{_line('COPY BACK')}): not compared"
        )
    original = report.runs[0].original
    assert original is not None and not original.varies  # the timers' lines are not "lines that vary"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")
def test_a_verified_hand_port_s_timer_lines_are_named_and_not_compared_too(
    timed: Path, tmp_path: Path
) -> None:
    """porter verify compares the runs by the same rule as port: the original's timer lines are masked."""
    from porter.workflows.program import port_program
    from porter.workflows.program_run import ProgramRuns
    from porter.workflows.verify import verify_program

    port_program([str(timed)], ["hip"], out_dir=str(tmp_path / "t"), translate_only=True)
    hand = tmp_path / "hand_port"
    shutil.copytree(tmp_path / "t" / "hip", hand)  # a port of the user's, as if written by hand
    report = verify_program(
        [str(hand)], [str(timed)], out_dir=str(tmp_path / "v"),
        run=ProgramRuns(("",), toolchains=("cpu-runtime",)),
    )  # fmt: skip
    hip = [r for r in report.runs[0].variants if r.variant == "hip"]
    assert hip and all(r.status == "matches" for r in hip), [r.differences for r in hip]
    assert all(f"(t1 - t0 at main.cu:{_line('COPY IN')}): not compared" in r.reason for r in hip), hip
