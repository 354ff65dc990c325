"""Rendering of `porter optimize`: live progress on stderr, a table, one JSON document, a Markdown report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from porter.llm.loop import Event, Progress
from porter.redact import redact
from porter.report import plain_console
from porter.results import OptimizeReport

_STYLE = {"validated": "green", "failed": "red", "rejected": "magenta", "no-code": "yellow", "error": "red"}


def to_json(report: OptimizeReport) -> dict[str, Any]:
    return report.document()


def exit_code(report: OptimizeReport) -> int:
    return report.exit_code


def _num(value: object, fmt: str = ".4g") -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "-"


def _money(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.4f}"


def progress_printer() -> Progress:
    """A progress callback printing the loop's rounds and verdicts with rich, on stderr."""
    console = plain_console(stderr=True)
    streamed: dict[int, int] = {}

    def show(event: Event) -> None:
        totals = event.totals
        tokens = totals.tokens if totals else 0
        cost = totals.cost_usd if totals and totals.priced else None
        if event.kind == "round":
            streamed.clear()
            console.print(
                Text.assemble((f"round {event.round}", "bold"), f"  tokens {tokens}  cost {_money(cost)}")
            )
        elif event.kind == "request":
            streamed[event.candidate] = streamed.get(event.candidate, 0) + len(event.text)
        elif event.kind == "attempt" and event.attempt is not None:
            a = event.attempt
            style = _STYLE.get(a.status, "white")
            ev = a.evaluation
            timing = ""
            if ev is not None and ev.time_ms is not None:
                timing = f"  {ev.time_ms:.4g} ms" + (f" ({ev.speedup:.2f}x)" if ev.speedup else "")
            reason = redact(a.reason).splitlines()[0] if a.reason else ""
            console.print(
                Text.assemble(
                    f"  candidate {a.candidate}: ",
                    (a.status, style),
                    f"{timing}  tokens {a.usage.input_tokens}+{a.usage.output_tokens}  {reason[:160]}",
                )
            )
        elif event.kind == "stop":
            console.print(f"stopped: {event.text}  tokens {tokens}  cost {_money(cost)}")

    return show


def render(report: OptimizeReport) -> None:
    from rich.table import Table

    console = plain_console()
    table = Table(title=f"porter optimize: {report.source} ({report.kernel}) with {report.model}")
    for col in ("role", "what", "file", "device", "status", "time ms", "speedup", "max rel err"):
        table.add_column(col, justify="right" if col in ("time ms", "speedup", "max rel err") else "left")
    for row in report.rows():
        table.add_row(
            row["role"],
            row.get("label") or f"candidate {row['candidate']}",
            row["path"] or "-",
            row["device"] or "-",
            Text(row["status"], style=_STYLE.get(row["status"], "white")),
            _num(row["time_ms"]),
            _num(row["speedup"], ".2f"),
            _num(row["max_rel_err"], ".3g"),
        )
    console.print(table)
    for row in report.rows():
        if row["status"] == "failed":  # (without a validated candidate: each candidate's last attempt)
            console.print(f"candidate {row['candidate']}: {row['reason']}", markup=False, highlight=False)
    usage = report.document()["usage"]
    console.print(
        f"{report.loop.rounds} round(s), {usage['requests']} request(s); stopped: {report.loop.stop_reason}; "
        f"tokens in {usage['input_tokens']} out {usage['output_tokens']} cache read {usage['cache_read_tokens']} "
        f"write {usage['cache_write_tokens']}; cost {_money(usage['cost_usd'])}",
        markup=False,
        highlight=False,
    )
    for note in [*report.loop.notes, *report.notes]:
        console.print(f"note: {note}", markup=False, highlight=False)
    if report.tuned is not None:
        console.print(_tuned_summary(report), markup=False, highlight=False)
    outcome = (
        "validated rewrite written to " + report.out_dir if report.exit_code == 0 else "no validated rewrite"
    )
    console.print(f"{report.kernel}: {outcome}", markup=False, highlight=False)


def _tuned_summary(report: OptimizeReport) -> str:
    """One sentence on `--tune`'s search: its fastest configuration, against the original's geometry."""
    t = report.tuned
    if t is None:
        return ""
    best = next((c for c in t.configs if c.label == t.best), None)
    if best is None:
        return f"launch search (--tune): nothing validated and timed on {t.device}"
    speed = f", {t.speedup:.2f}x the original at its own launch" if t.speedup else ""
    return (f"launch search (--tune) over the original and the model's fastest rewrite: fastest is "
            f"{best.label} at {_num(best.time_ms)} ms on {t.device}{speed} ({t.out_dir}/report.json)")  # fmt: skip


def _tuned_lines(report: OptimizeReport) -> list[str]:
    t = report.tuned
    if t is None:
        return []
    size = ", ".join(f"{k}={v}" for k, v in t.size.items())
    lines = ["", "## Launch search (--tune): the original and the model's fastest rewrite", "",
             _tuned_summary(report) + ".", "", f"Timed at {size}.", "",
             "| configuration | validated | time ms | note |", "|---|---|---:|---|"]  # fmt: skip
    for c in t.configs:
        lines.append(f"| {c.label} | {'yes' if c.validated else 'no'} | {_num(c.time_ms)} | "
                     f"{c.reason.replace('|', '/')[:120]} |")  # fmt: skip
    return lines


def chart(report: OptimizeReport, path: Path) -> str:
    """tradeoffs.png: the trade-off pool (the original, every validated rewrite, the launch search's
    configurations) at (time, error) on the first device that timed them, area = shared memory (+
    registers) per block; '' when fewer than two were timed there."""
    from porter.report.charts import time_error

    pool = report.pool()
    device = next((c.evaluation.device for c in pool if c.evaluation.time_ms), "")
    points = [(c.label, c.evaluation.time_ms, c.evaluation.max_rel_err, c.evaluation.memory_bytes)
              for c in pool if device and c.evaluation.device == device]  # fmt: skip
    return time_error(points, device, path) if len(points) > 1 else ""


def markdown(report: OptimizeReport) -> str:
    """``report.md``: the outcome, the trade-off set, every attempt, usage and cost."""
    doc = report.full_document()
    usage = doc["usage"]
    lines = [
        f"# porter optimize: `{report.kernel}` from `{report.source}`",
        "",
        f"Model `{report.model}`; devices: {', '.join(report.devices)}; {report.loop.rounds} round(s); "
        f"stopped: {report.loop.stop_reason}.",
        "",
        "## Baselines (the original kernel)",
        "",
        "| device | original ms | roofline floor ms |",
        "|---|---:|---:|",
    ]
    for dev in report.devices:
        lines.append(f"| {dev} | {_num(report.baselines.get(dev))} | {_num(report.floors.get(dev))} |")
    lines += ["", "## Trade-off set", ""]
    pool = report.pool()
    if pool:
        lines += ["The validated rewrites, the launch search's fastest configurations (`--tune`) and the original, "
                  "each timed alike on every device; % of floor: the performance model's floor over the time.", "",
                  "| role | what | file | device | time ms | speedup | % of floor | memory B/block | max rel err |",
                  "|---|---|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for c in pool:
            roles = ", ".join(
                sel.role.replace("_", " ") for sel in report.selected if sel.contender.label == c.label
            )
            ev = c.evaluation
            for t in ev.timings or ({},):
                lines.append(
                    f"| {roles or '-'} | {c.label} | `{report.contender_path(c) or '-'}` | {t.get('device', '-')} | "
                    f"{_num(t.get('time_ms'))} | {_num(t.get('speedup'), '.2f')} | {_num(t.get('pct_of_floor'), '.0f')} | "
                    f"{_num(ev.memory_bytes, 'd')} | {_num(ev.max_rel_err, '.3g')} |"
                )  # fmt: skip
        if any(sel.contender.kind == "original" for sel in report.selected if sel.role == "fastest"):
            lines += ["", "No validated rewrite or configuration is faster than the original."]
    else:
        lines.append("No candidate was validated.")
    if report.chart:
        lines += ["", f"![time against error]({Path(report.chart).name})"]
    lines += _tuned_lines(report)
    lines += ["", "## Attempts", "", "| candidate | round | status | reason |", "|---:|---:|---|---|"]
    for a in doc["attempts"]:
        reason = str(a["reason"]).splitlines()[0] if a["reason"] else ""
        lines.append(
            f"| {a['candidate']} | {a['round']} | {a['status']} | {reason.replace('|', '/')[:200]} |"
        )
    lines += [
        "",
        "## Usage",
        "",
        f"{usage['requests']} request(s); input tokens {usage['input_tokens']}, output tokens "
        f"{usage['output_tokens']}, cache read {usage['cache_read_tokens']}, cache write "
        f"{usage['cache_write_tokens']}; cost {_money(usage['cost_usd'])}.",
    ]
    for note in doc["notes"]:
        lines.append(f"\nNote: {note}")
    return "\n".join(lines) + "\n"
