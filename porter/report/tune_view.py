"""Rendering of `porter optimize` without a model (the autotuner): each configuration, its verdict and
time, the best one and its speedup; terminal, JSON and Markdown."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from porter.report import plain_console, short
from porter.results import TuneReport


def to_json(report: TuneReport) -> dict[str, Any]:
    return report.document()


def exit_code(report: TuneReport) -> int:
    return report.exit_code


def _time(ms: float | None) -> str:
    return f"{ms:.4g} ms" if ms is not None else "-"


def render(report: TuneReport) -> None:
    console = plain_console()
    table = Table(
        title=f"porter optimize (autotuner): {report.kernel} in {report.source}, timed on {report.device}"
    )
    for col in ("configuration", "block", "grid", "status", "time", "note"):
        table.add_column(col)
    for c in report.configs:
        status = "validated" if c.validated else "rejected"
        mark = " *" if c.label == report.best else ""
        table.add_row(
            c.label + mark, " x ".join(c.block), short(", ".join(c.grid), 50),
            Text(status, style="green" if c.validated else "red"), _time(c.time_ms), short(c.reason, 60),
        )  # fmt: skip
    console.print(table)
    speed = f" ({report.speedup:.2f}x the original's speed)" if report.speedup else ""
    console.print(f"best: {report.best or 'none'}{speed}; launches from {report.spec_source}")
    for note in report.notes:
        console.print(f"note: {note}", style="dim")
    for f in report.files:
        console.print(f"wrote {f}")


def markdown(report: TuneReport) -> str:
    lines = [f"# porter optimize (autotuner): `{report.kernel}`", "",
             f"Source `{report.source}`; launches from {report.spec_source}; timed on {report.device}.", "",
             "| configuration | block | grid | status | time | note |", "|---|---|---|---|---:|---|"]  # fmt: skip
    for c in report.configs:
        best = " **(best)**" if c.label == report.best else ""
        status = "validated" if c.validated else "rejected"
        lines.append(
            f"| {c.label}{best} | {' x '.join(c.block)} | `{', '.join(c.grid)}` | {status} | {_time(c.time_ms)} | {c.reason.replace('|', '/')} |"
        )
    if report.speedup:
        lines += ["", f"Speedup of the best configuration over the original's: {report.speedup:.2f}x."]
    return "\n".join(lines) + "\n"
