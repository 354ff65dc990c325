"""Rendering of a suite (`porter port --suite`): progress on a terminal, the table, summary.md, the chart."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from rich.text import Text

from porter.report import plain_console, short
from porter.report.charts import pyplot
from porter.report.program_view import launched_share, stage_line
from porter.suite_report import SuiteProgress, SuiteReport

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

_STATUS_STYLE = {
    "done": "green", "resumed": "green", "timed-out": "red", "error": "red", "interrupted": "yellow",
    "not-started": "dim", "running": "cyan",
}  # fmt: skip
_VERDICT_STYLE = {"matches": "green", "differs": "red", "failed": "red", "not-run": "yellow"}
# the chart's segments: status in kernel_counts -> (label, colour)
_SEGMENTS = (
    ("validated", "validated", "#55a868"),
    ("compiled", "compiled only", "#8c8c8c"),
    ("not-replayable", "not replayable", "#dd8452"),
    ("failed", "failed", "#c44e52"),
)


def to_json(report: SuiteReport) -> dict[str, Any]:
    return report.document()


def exit_code(report: SuiteReport) -> int:
    return report.exit_code


def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def target_cell(row: dict[str, Any]) -> str:
    """``matches · 3/1/0 · 0.91x cpu:cpu-emulator``: the verdict, kernel instances validated / not
    replayable / failed, and the run-time ratio per device."""
    k = row["kernels"]
    parts = [row["verdict"] or "no run"]
    if k["instances"]:
        parts.append(f"{k['validated']}/{k['not-replayable']}/{k['failed']}")
    ratios = ", ".join(f"{r:.2f}x {device}" for device, r in row["time_ratio"].items())
    if ratios:
        parts.append(ratios)
    return " · ".join(parts)


def _headline(doc: dict[str, Any]) -> str:
    counts = {k: v for k, v in doc["counts"].items() if k != "programs"}
    said = ", ".join(f"{n} {status}" for status, n in counts.items())
    return (
        f"{doc['counts']['programs']} program(s) ({said}) in {_seconds(doc['seconds'])} with -j {doc['jobs']}; "
        f"output: {doc['out']}"
    )


# --------------------------------------------------------------------------- terminal


def render(report: SuiteReport) -> None:
    from rich.table import Table

    doc = report.document()
    console = plain_console()
    table = Table(title=f"porter port --suite {doc['suite']}")
    table.add_column("program", no_wrap=True)
    table.add_column("status")
    for t in doc["targets"]:
        table.add_column(f"{t}: verdict · kernels validated/not replayable/failed · run time vs original")
    table.add_column("time", justify="right")
    for p in doc["programs"]:
        status = Text(p["status"], style=_STATUS_STYLE.get(p["status"], ""))
        if p["reason"]:
            status.append(f" ({short(p['reason'], 60)})")
        cells = []
        for t in doc["targets"]:
            row = p["targets"].get(t) if p["report"] else None  # no report: nothing to say per target
            cells.append(
                Text(target_cell(row), style=_VERDICT_STYLE.get(row["verdict"], "")) if row else Text("-")
            )
        table.add_row(p["name"], status, *cells, _seconds(p["seconds"]))
    console.print(table)
    for t, tot in doc["totals"].items():
        k = tot["kernels"]
        verdicts = ", ".join(f"{n} {v}" for v, n in tot["verdicts"].items())
        console.print(
            f"{t}: {tot['programs']} program(s) ({verdicts or 'none'}); {k['validated']} of {k['instances']} "
            f"kernel instances validated{launched_share(k)}, {k['not-replayable']} not replayable, "
            f"{k['failed']} failed" + (f", {k['compiled']} compiled only" if k["compiled"] else "")
        )
    for r in doc["reasons"][:5]:
        console.print(
            f"reason: {r['instances']} x {short(r['reason'], 80)} ({', '.join(r['targets'])}; "
            f"{', '.join(r['programs'][:6])}{' ...' if len(r['programs']) > 6 else ''})"
        )
    out = Path(doc["out"])
    files = [str(out / "summary.md"), str(out / "summary.json")] + ([doc["chart"]] if doc["chart"] else [])
    console.print(_headline(doc))
    console.print("summary: " + ", ".join(files))


class Progress:
    """Programs done / running / left, the ETA and the failures so far: a live line on a terminal (stderr),
    else one line per program as it ends (CI logs)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or plain_console(stderr=True)
        self.live: Live | None = None
        self.said: set[str] = set()

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(console=self.console, transient=True, refresh_per_second=4)
            self.live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def update(self, state: SuiteProgress) -> None:
        for p in state.done:  # each end once, above the live line (or alone, when piped)
            if p.name in self.said:
                continue
            self.said.add(p.name)
            line = Text(f"porter: [{len(self.said)}/{state.total}] {p.name}: ")
            line.append(p.status, style=_STATUS_STYLE.get(p.status, ""))
            if p.seconds is not None:
                line.append(f" in {_seconds(p.seconds)}")
            if p.reason:
                line.append(f" ({short(p.reason, 100)})")
            self.console.print(line)
        if self.live is not None:
            self.live.update(self.line(state))

    @staticmethod
    def line(state: SuiteProgress) -> Text:
        running = ", ".join(f"{name} ({_seconds(s)})" for name, s in state.running.items())
        eta = f" · ETA {_seconds(state.eta_s)}" if state.eta_s is not None else ""
        text = Text(
            f"suite: {len(state.done)} of {state.total} done · running {len(state.running)}"
            + (f": {running}" if running else "")
            + f" · {state.left} left{eta}",
            style="dim",
        )
        failures = state.failures
        if failures:
            text.append(
                f"\nfailing so far: {', '.join(f'{p.name} ({p.status})' for p in failures[:8])}", style="red"
            )
        return text


class JsonProgress:
    """The same progress as JSON lines on stderr (``porter port --suite --json``, for CI logs and tools): an
    event when a program starts and when it ends, each with the counts so far; the summary itself goes to
    stdout.  Events (docs/REPORT_FORMAT.md): ``{"event": "program-started", "program": NAME, ...}`` and
    ``{"event": "program-done", "program": NAME, "status": ..., "seconds": ..., "reason": ..., "exit_code": ...}``,
    both with ``done``, ``running``, ``left``, ``total`` and ``eta_s``."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.started: set[str] = set()
        self.said: set[str] = set()

    def __enter__(self) -> JsonProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stream.flush()

    def update(self, state: SuiteProgress) -> None:
        counts = {
            "done": len(state.done), "running": len(state.running), "left": state.left, "total": state.total,
            "eta_s": None if state.eta_s is None else round(state.eta_s, 1),
        }  # fmt: skip
        for name in state.running:
            if name not in self.started:
                self.started.add(name)
                self._emit({"event": "program-started", "program": name, **counts})
        for p in state.done:
            if p.name in self.said:
                continue
            self.said.add(p.name)
            self.started.add(p.name)
            self._emit(
                {
                    "event": "program-done",
                    "program": p.name,
                    "status": p.status,
                    "exit_code": p.exit_code,
                    "seconds": None if p.seconds is None else round(p.seconds, 2),
                    "reason": p.reason,
                    **counts,
                }  # fmt: skip
            )

    def _emit(self, event: dict[str, Any]) -> None:
        self.stream.write(json.dumps(event) + "\n")
        self.stream.flush()


# --------------------------------------------------------------------------- summary.md


def markdown(report: SuiteReport) -> str:
    doc = report.document()
    targets = doc["targets"]
    out = [f"# porter suite: {doc['suite']}", "", _headline(doc), ""]
    out += [
        "## Programs",
        "",
        "Per target: the program verdict, then kernel instances validated / not replayable / failed (as each "
        "report counts them), then the port's run time over the original's on each device.",
        "",
        "| program | status | " + " | ".join(targets) + " | time |",
        "|---|---|" + "---|" * len(targets) + "---|",
    ]
    for p in doc["programs"]:
        name = f'<a id="{p["anchor"]}"></a>'
        name += f"[{p['name']}]({p['name']}/report.md)" if p["report"] else p["name"]
        status = p["status"] + (f": {_cell(p['reason'])}" if p["reason"] else "")
        cells = [
            _cell(target_cell(p["targets"][t])) if t in p["targets"] and p["report"] else "-" for t in targets
        ]
        out.append(f"| {name} | {status} | " + " | ".join(cells) + f" | {_seconds(p['seconds'])} |")
    again = [p for p in doc["programs"] if p["timed_again"]]
    if again:
        out += [
            "",
            f"GPU timings taken again once every program had ended (contended beside the other programs' GPU "
            f"work): {sum(p['timed_again'] for p in again)}, in "
            + ", ".join(f"[{p['name']}](#{p['anchor']}) ({p['timed_again']})" for p in again)
            + ".",
        ]
    out += [
        "",
        "## Totals per target",
        "",
        "| target | programs | verdicts | kernel instances | validated | not replayable | failed | compiled only |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t, tot in doc["totals"].items():
        k = tot["kernels"]
        verdicts = ", ".join(f"{n} {v}" for v, n in tot["verdicts"].items()) or "-"
        out.append(
            f"| {t} | {tot['programs']} | {verdicts} | {k['instances']} | {k['validated']} | "
            f"{k['not-replayable']} | {k['failed']} | {k['compiled']} |"
        )
    if doc["reasons"]:
        out += ["", "## Top reasons kernel instances were not validated", ""]
        for i, r in enumerate(doc["reasons"], 1):
            links = ", ".join(f"[{name}](#program-{name})" for name in r["programs"])
            out.append(
                f"{i}. **{_cell(r['reason'])}**: {r['instances']} ({', '.join(r['targets'])}): {links}"
            )
    if doc["stages"]:
        out += [
            "",
            "## Where the time went",
            "",
            "Each stage's wall seconds summed over the programs: " + stage_line(doc["stages"]),
        ]
    if doc["chart"]:
        out += ["", f"![kernel instances per program and target]({Path(doc['chart']).name})"]
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return short(text, 200).replace("|", "/")


# --------------------------------------------------------------------------- summary.png


def chart(report: SuiteReport, path: Path) -> str:
    """summary.png: a bar per program and target, its kernel instances stacked by verdict; '' when no
    report counted any or matplotlib is missing."""
    doc = report.document()
    bars = [
        (f"{p['name']} · {t}", row["kernels"])
        for p in doc["programs"]
        for t, row in p["targets"].items()
        if row["kernels"]["instances"]
    ]
    if not bars:
        return ""
    plt = pyplot()
    if plt is None:
        return ""
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.3 * len(bars) + 1.2)))
    rows = list(range(len(bars)))[::-1]
    left = [0] * len(bars)
    for status, label, colour in _SEGMENTS:
        widths = [k[status] for _, k in bars]
        if any(widths):
            ax.barh(rows, widths, left=left, color=colour, label=label)
            left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(rows, [b[0] for b in bars], fontsize=7)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("kernel instances")
    ax.set_title("porter port --suite: kernel instances per program and target", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
