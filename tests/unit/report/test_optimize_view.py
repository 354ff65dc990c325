"""optimize's views -- the terminal table, report.md, the chart -- when the trade-off set holds the original
and a tuned configuration beside the model's rewrites."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from porter.model import Status, Verdict
from porter.records import FAILED, VALIDATED, Attempt, Evaluation, LoopResult, Totals
from porter.report import optimize_view
from porter.results import ORIGINAL, TUNED, Contender, OptimizeReport, Selected, TunedConfig


def evaluation(ms: float, memory: int, err: float) -> Evaluation:
    return Evaluation(True, "done", "ok", time_ms=ms, memory_bytes=memory, max_rel_err=err, device="gpu:0",
                      timings=({"device": "gpu:0", "time_ms": ms, "speedup": 2.0 / ms, "pct_of_floor": 40.0},))  # fmt: skip


def report(attempts: list[Attempt], tuned: list[Contender]) -> OptimizeReport:
    r = OptimizeReport(source="k.cu", kernel="k", model="openai:m", out_dir="out", devices=("gpu:0",),
                       loop=LoopResult(tuple(attempts), 1, "rounds", Totals()))  # fmt: skip
    r.original = Contender(ORIGINAL, "the original", "orig", evaluation(2.0, 4096, 0.0))
    r.configurations = tuned
    paths = {ORIGINAL: "k.cu", TUNED: "out/k.{role}.cu"}
    r.selected = [Selected(role, c, paths.get(c.kind, "out/k.{role}.cu").format(role=role))
                  for role, c in r.roles().items()]  # fmt: skip
    return r


VERDICT = Verdict("k", "cuda", "gpu:0", "cuda", "nvrtc", True, True, True, Status.VALIDATED, "matches", 3,
                  max_rel_err=1e-6)  # fmt: skip
SLOW = Attempt(1, 1, VALIDATED, "ok", "__global__ void k() {}\n",
               replace(evaluation(3.0, 2048, 1e-6), verdicts=(VERDICT,)))  # fmt: skip
CONFIG = TunedConfig("block 512", ["512"], ["(n + 511) / 512"], True, 1.0, "validated", max_rel_err=0.0)
TUNED_512 = Contender(TUNED, "tuned: block 512", "orig", evaluation(1.5, 8192, 0.0), launch=CONFIG)


def test_the_table_shows_the_original_and_a_tuned_configuration_in_their_roles(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per row
    r = report([SLOW], [])
    assert r.roles()["fastest"].kind == ORIGINAL  # the rewrite is slower
    optimize_view.render(r)  # (a row of the original has no candidate: no KeyError)
    rows = [
        [c.strip() for c in ln.split("│")[1:-1]]
        for ln in capsys.readouterr().out.splitlines()
        if ln.startswith("│")
    ]
    assert [(row[0], row[1], row[2], row[4]) for row in rows] == [
        ("best", "candidate 1 (round 1)", "out/k.best.cu", "validated"),
        ("fastest", "the original", "k.cu", "original"),  # the input file: never copied
        ("least_memory", "candidate 1 (round 1)", "out/k.least_memory.cu", "validated"),
        ("most_precise", "the original", "k.cu", "original"),
    ]
    md = optimize_view.markdown(r)
    assert "| fastest, most precise | the original | `k.cu` |" in md
    assert "No validated rewrite or configuration is faster than the original." in md
    r = report([SLOW], [TUNED_512])
    md = optimize_view.markdown(r)
    assert "| best, fastest, most precise | tuned: block 512 | `out/k.best.cu` | gpu:0 | 1.5 |" in md
    assert "faster than the original" not in md


def test_without_a_validated_candidate_each_failure_is_told(capsys: pytest.CaptureFixture[str]) -> None:
    bad = Attempt(1, 1, FAILED, "validate: mismatch", "__global__ void k() {}\n")
    optimize_view.render(report([bad], []))
    assert "candidate 1: failed: validate: mismatch" in capsys.readouterr().out


def test_the_chart_draws_every_contender(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    r = report([SLOW], [TUNED_512])
    assert optimize_view.chart(r, tmp_path / "t.png") == str(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 0
