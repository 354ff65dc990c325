"""Rendering of `porter lift`: one row per function and target (pattern, devices, verdicts), the
refusals with their reasons, as a terminal table, JSON (report.json) or Markdown (report.md)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table
from rich.text import Text

from porter.model import Status
from porter.report import plain_console, short
from porter.results import LiftedFunction, LiftReport


def to_json(report: LiftReport) -> dict[str, Any]:
    return report.document()


def exit_code(report: LiftReport) -> int:
    return report.exit_code


def _by_target(f: LiftedFunction) -> dict[str, list[Any]]:
    rows: dict[str, list[Any]] = defaultdict(list)
    for v in f.verdicts:
        rows[v.target].append(v)
    return rows


def _summary(verdicts: list[Any]) -> tuple[str, str]:
    """(status, the devices it was validated on / the first failure's device and reason)."""
    good = [v.device for v in verdicts if v.status is Status.VALIDATED]
    bad = [v for v in verdicts if v.status is Status.FAILED]
    if bad:
        return "failed", f"{bad[0].device or bad[0].target}: {bad[0].reason}"
    if good:
        return "validated", ", ".join(good)
    return (verdicts[0].status.value if verdicts else "-"), (verdicts[0].reason if verdicts else "")


def render(report: LiftReport) -> None:
    console = plain_console()
    table = Table(title=f"porter lift: {report.source}")
    for col in ("function", "pattern", "target", "status", "devices / reason"):
        table.add_column(col)
    for f in report.functions:
        first = True
        for target, verdicts in _by_target(f).items():
            status, detail = _summary(verdicts)
            style = {"validated": "green", "failed": "red"}.get(status, "yellow")
            table.add_row(
                f.function if first else "", ", ".join(f.patterns) if first else "", target,
                Text(status, style=style), short(detail, 100),
            )  # fmt: skip
            first = False
    console.print(table)
    for r in report.refused:
        console.print(f"refused: {r.function} (line {r.line}): {r.reason}", style="yellow")
    for f in report.functions:
        for note in f.notes:
            console.print(f"note: {f.function}: {note}", style="dim")
    if report.module:
        console.print(f"drop-in module: {report.module}")
    console.print(f"report: {report.out_dir}/report.json, {report.out_dir}/report.md")


def markdown(report: LiftReport) -> str:
    lines = [f"# porter lift: `{report.source}`", ""]
    lines += ["| function | pattern | target | status | devices / reason |", "|---|---|---|---|---|"]
    for f in report.functions:
        for target, verdicts in _by_target(f).items():
            status, detail = _summary(verdicts)
            lines.append(
                f"| `{f.function}` | {', '.join(f.patterns)} | {target} | {status} | {detail.replace('|', '/')} |"
            )
    lines.append("")
    if report.refused:
        lines += ["## Refused", ""]
        lines += [f"- `{r.function}` (line {r.line}): {r.reason}" for r in report.refused]
        lines.append("")
    lines += ["## Sizes", ""]
    for f in report.functions:
        hidden = "; ".join(", ".join(f"{k}={v}" for k, v in h.items()) for h in f.hidden) or "none"
        shown = ", ".join(f"{k}={v}" for k, v in f.sizes.items()) or "-"
        lines.append(
            f"- `{f.function}`: {shown} (held back: {hidden}); the Python reference took {f.reference_s:.2f} s"
        )
        lines += [f"  - note: {n}" for n in f.notes]
    lines.append("")
    if report.module:
        lines += [
            f"Drop-in module: `{report.module}` (the validated functions, same names and signatures).",
            "",
        ]
    return "\n".join(lines)
