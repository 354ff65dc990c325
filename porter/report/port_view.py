"""Rendering of `porter port` results: a summary table for people, one JSON document for machines."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from porter.report import plain_console, short
from porter.results import PortReport

_STYLE = {
    "validated": "green",
    "compiled": "yellow",
    "translated": "cyan",
    "failed": "red",
    "untranslatable": "magenta",
}
_REASON_WIDTH = 160


def to_json(report: PortReport) -> dict[str, Any]:
    return report.document()


def _err(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _short(text: str) -> str:
    return short(text, _REASON_WIDTH)


def render(report: PortReport) -> None:
    from rich.table import Table

    console = plain_console()
    table = Table(title=f"porter port: {report.source} -> {', '.join(report.targets)}")
    table.add_column("kernel", no_wrap=True)
    table.add_column("target", no_wrap=True)
    table.add_column("device", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("trials", justify="right")
    table.add_column("max rel err", justify="right")
    for k in report.kernels:
        for r in k.variants:
            table.add_row(
                k.name,
                r.target,
                r.device or "-",
                Text(r.status, style=_STYLE.get(r.status, "white")),
                str(r.trials),
                _err(r.max_rel_err),
            )
    console.print(table)
    for k in report.kernels:
        for r in k.variants:
            if r.status in ("failed", "untranslatable"):
                where = f"{k.name} {r.target}" + (f" on {r.device}" if r.device else "")
                console.print(f"{where}: {r.status}: {_short(r.reason)}", markup=False, highlight=False)
    if report.model is not None:
        for k in report.kernels:
            for r in k.variants:
                if r.provenance != "translate" and r.time_ms is not None:
                    speed = f", {r.speedup:.2f}x the original" if r.speedup is not None else ""
                    console.print(
                        f"{k.name} {r.target} on {r.device}: {r.time_ms:.4g} ms{speed} ({r.provenance})",
                        markup=False,
                        highlight=False,
                    )
        u = report.usage
        cost = f"${u.cost_usd:.4f}" if u.priced else "cost unknown"
        console.print(
            f"{report.model}: {u.requests} request(s), {u.usage.input_tokens} input + "
            f"{u.usage.output_tokens} output tokens, {cost}",
            markup=False,
            highlight=False,
        )
    for target, path in report.outputs.items():
        console.print(f"{target}: {path}", markup=False, highlight=False)
    console.print(f"report: {report.out_dir}/report.json", markup=False, highlight=False)
    rows = report.rows()
    counts = {s: sum(r.status == s for r in rows) for s in _STYLE}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    kept = sum(r.resumed for r in rows)
    if kept:
        summary += f"; {kept} kept from the previous report (same inputs; --fresh redoes them)"
    console.print(f"{len(rows)} variant(s): {summary or 'none'}", markup=False, highlight=False)


def exit_code(report: PortReport) -> int:
    return report.exit_code
