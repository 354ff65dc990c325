"""Rendering of `porter generate`: the estimates before running, every candidate with its verdict, time,
memory and error, the trade-off set, and the chart (time against error, point size = memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from porter.report import plain_console, short
from porter.results import GenerateReport


def to_json(report: GenerateReport) -> dict[str, Any]:
    return report.document()


def exit_code(report: GenerateReport) -> int:
    return report.exit_code


def _ms(v: float | None) -> str:
    return f"{v:.4g} ms" if v is not None else "-"


def _bytes(v: int | None) -> str:
    if v is None:
        return "-"
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v} B"


def _err(v: float | None) -> str:
    return f"{v:.2g}" if v is not None else "-"


def _marks(report: GenerateReport, label: str) -> str:
    return ", ".join(k.replace("_", " ") for k, v in report.tradeoffs.items() if v == label)


def _at(report: GenerateReport) -> str:
    return ", ".join(f"{k}={v}" for k, v in report.timing_size.items())


def _per_device(report: GenerateReport) -> list[tuple[str, str, str, str]]:
    """(candidate, device, time, % of peak) for every time a validated candidate took."""
    rows = []
    for c in report.candidates:
        for dev, ms in c.times.items():
            pct = c.pct_of_peak.get(dev)
            rows.append((c.label, dev, _ms(ms), f"{pct:.1f}%" if pct is not None else "-"))
    return rows


def render(report: GenerateReport) -> None:
    console = plain_console()
    console.print(f"porter generate: {report.description}")
    est = Table(title="floors before running (the performance model, from the reference's bytes and FLOPs, "
                      f"at {_at(report)})")  # fmt: skip
    for col in ("device", "floor", "bound"):
        est.add_column(col)
    for e in report.estimates:
        est.add_row(e.device, _ms(e.floor_ms), e.bound or e.note)
    console.print(est)
    table = Table(title="candidates")
    for col in ("candidate", "status", "time", "floor", "memory", "max rel err", "trade-off", "reason"):
        table.add_column(col)
    for c in report.candidates:
        status = "validated" if c.validated else "rejected"
        time = _ms(c.time_ms) + (" (suspect)" if c.suspect else "")
        table.add_row(
            c.label + (f" [{c.precision}]" if c.precision else ""), Text(status, style="green" if c.validated else "red"),
            time, _ms(c.floor_ms), _bytes(c.memory_bytes), _err(c.max_rel_err), _marks(report, c.label), short(c.reason, 60),
        )  # fmt: skip
    console.print(table)
    times = Table(title=f"times on each device (GPUs at {_at(report)}; CPU devices at the reference's size)")
    for col in ("candidate", "device", "time", "% of peak (floor / time)"):
        times.add_column(col)
    for row in _per_device(report):
        times.add_row(*row)
    console.print(times)
    if report.requests:
        console.print(f"model: {report.requests} request(s), {report.input_tokens} input and "
                      f"{report.output_tokens} output tokens, ${report.cost_usd:.4f}")  # fmt: skip
    for n in report.notes:
        console.print(f"note: {n}", style="dim")
    if report.chart:
        console.print(f"chart: {report.chart}")
    console.print(f"report: {report.out_dir}/report.json, {report.out_dir}/report.md")


def markdown(report: GenerateReport) -> str:
    lines = ["# porter generate", "", f"> {report.description}", "",
             f"Reference `{report.reference}`; requirements: {report.requirements or 'none'}.", "",
             "## Floors before running", "", f"At {_at(report)}, from the reference's bytes and FLOPs.", "",
             "| device | floor | bound |", "|---|---:|---|"]  # fmt: skip
    lines += [f"| {e.device} | {_ms(e.floor_ms)} | {e.bound or e.note} |" for e in report.estimates]
    lines += ["", "## Candidates", "",
              "| candidate | status | time | floor | memory | max rel err | trade-off | file / reason |",
              "|---|---|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for c in report.candidates:
        status = "validated" if c.validated else "rejected"
        where = f"`{Path(c.file).name}`" if c.file and c.validated else c.reason.replace("|", "/")
        lines.append(
            f"| {c.label}{f' [{c.precision}]' if c.precision else ''} | {status} | {_ms(c.time_ms)}"
            f"{' (suspect)' if c.suspect else ''} | {_ms(c.floor_ms)} | {_bytes(c.memory_bytes)} | {_err(c.max_rel_err)} | "
            f"{_marks(report, c.label)} | {where} |"
        )
    lines += ["", "## Times on each device", "",
              f"GPUs at {_at(report)}; CPU devices at the reference's size. % of peak: the floor over the time.", "",
              "| candidate | device | time | % of peak |", "|---|---|---:|---:|"]  # fmt: skip
    lines += [f"| {' | '.join(row)} |" for row in _per_device(report)]
    if report.requests:
        lines += ["", f"Model: {report.requests} request(s), {report.input_tokens} input and {report.output_tokens} "
                      f"output tokens, ${report.cost_usd:.4f}."]  # fmt: skip
    if report.chart:
        lines += ["", f"![time against error]({Path(report.chart).name})"]
    lines += ["", *(f"- {n}" for n in report.notes)]
    return "\n".join(lines) + "\n"


def chart(report: GenerateReport, path: Path) -> str:
    """tradeoffs.png: each validated, timed candidate at (time, error), its area the memory it uses; ''
    when matplotlib is missing or nothing was timed."""
    from porter.report.charts import time_error

    points = [(c.label, c.time_ms, c.max_rel_err, c.memory_bytes) for c in report.candidates
              if c.validated and c.time_ms]  # fmt: skip
    device = next((c.device for c in report.candidates if c.validated and c.time_ms), "")
    return time_error(points, device, path)
