"""Rendering of `porter optimize` without a model (the autotuner): each configuration, its verdict and
time, the best one and its speedup; terminal, JSON and Markdown."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from porter.report import plain_console, short
from porter.results import TunedConfig, TuneReport


def to_json(report: TuneReport) -> dict[str, Any]:
    return report.document()


def exit_code(report: TuneReport) -> int:
    return report.exit_code


def _time(ms: float | None) -> str:
    return f"{ms:.4g} ms" if ms is not None else "-"


def _rate(c: TunedConfig) -> str:
    """Achieved bandwidth and its share of the datasheet's (and of the measured copy's, when known)."""
    if c.achieved_bandwidth is None:
        return "-"
    text = f"{c.achieved_bandwidth / 1e9:.4g} GB/s"
    shares = [f"{p:.0f}%" for p in (c.pct_bandwidth,) if p is not None]
    shares += [f"{p:.0f}% of copy" for p in (c.pct_measured_bandwidth,) if p is not None]
    return f"{text} ({', '.join(shares)})" if shares else text


def _where(report: TuneReport) -> str:
    size = ", ".join(f"{k}={v}" for k, v in report.size.items())
    floor = f"; the model's floor there {report.floor_ms:.4g} ms ({report.bound})" if report.floor_ms else ""
    return f"timed on {report.device}" + (f" at {size}" if size else "") + floor


def render(report: TuneReport) -> None:
    console = plain_console()
    table = Table(title=f"porter optimize (autotuner): {report.kernel} in {report.source}, {_where(report)}")
    for col in ("configuration", "block", "grid", "status", "time", "bandwidth", "note"):
        table.add_column(col)
    for c in report.configs:
        status = "suspect" if c.suspect else ("validated" if c.validated else "rejected")
        mark = " *" if c.label == report.best else ""
        table.add_row(
            c.label + mark, " x ".join(c.block), short(", ".join(c.grid), 50),
            Text(status, style="green" if c.validated and not c.suspect else "red"), _time(c.time_ms), _rate(c),
            short(c.reason, 60),
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
             f"Source `{report.source}`; launches from {report.spec_source}; {_where(report)}.", "",
             "| configuration | block | grid | status | time | bandwidth | note |",
             "|---|---|---|---|---:|---:|---|"]  # fmt: skip
    for c in report.configs:
        best = " **(best)**" if c.label == report.best else ""
        status = "suspect" if c.suspect else ("validated" if c.validated else "rejected")
        lines.append(
            f"| {c.label}{best} | {' x '.join(c.block)} | `{', '.join(c.grid)}` | {status} | {_time(c.time_ms)} "
            f"| {_rate(c)} | {c.reason.replace('|', '/')} |"
        )
    if report.speedup:
        lines += ["", f"Speedup of the best configuration over the original's: {report.speedup:.2f}x."]
    lines += [f"\nNote: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"
