"""Rendering of `porter capture`: a table of the runs and the launches each kept, or JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.table import Table
from rich.text import Text

from porter.report import plain_console, short
from porter.results import CaptureReport


def to_json(report: CaptureReport) -> dict[str, Any]:
    return {"schema": "porter-capture-report/1", **asdict(report), "exit_code": report.exit_code}


def exit_code(report: CaptureReport) -> int:
    return report.exit_code


def render(report: CaptureReport) -> None:
    console = plain_console()
    console.print(f"program: {report.root}; build: {report.build}; captured on: {report.device or '-'}")
    table = Table(title="captured runs")
    for col in ("run", "exit", "launches kept", "folder / reason"):
        table.add_column(col)
    for r in report.runs:
        kept = ", ".join(f"{k} ({', '.join(map(str, n))})" for k, n in r.kernels.items()) or "-"
        style = "green" if r.folder and r.status == "ran" else "red"
        table.add_row(
            r.args, Text("" if r.exit is None else str(r.exit), style=style), short(kept, 80),
            short(r.folder or r.reason, 80),
        )  # fmt: skip
    console.print(table)
    console.print(f"capture: {report.out_dir} (format: docs/CAPTURE_FORMAT.md)")
    for note in report.notes:
        console.print(f"note: {note}")
