"""Rendering of a program port (`porter port DIR`): a table per target for people, report.md, JSON."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from porter.report import plain_console, short
from porter.results import ProgramReport

_STYLE = {
    "compiled": "green",
    "translated": "cyan",
    "copied": "dim",
    "failed": "red",
    "untranslatable": "magenta",
    "none": "dim",
}
_WIDTH = 140


def to_json(report: ProgramReport) -> dict[str, Any]:
    return report.document()


def _short(text: str, width: int = _WIDTH) -> str:
    return short(text, width)


def _counts(report: ProgramReport, target: str) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(report.counts(target).items())) or "nothing"


def render(report: ProgramReport) -> None:
    from rich.table import Table

    console = plain_console()
    for target in report.targets:
        table = Table(title=f"porter port: {report.root} -> {target}")
        table.add_column("file", no_wrap=True)
        table.add_column("status")
        table.add_column("output / reason")
        for f in report.files:
            t = f.targets.get(target)
            if t is None or t.status in ("copied", "none"):
                continue  # the summary line counts them
            style = _STYLE.get(t.status, "")
            detail = t.reason if t.status == "failed" else (t.path or t.reason)
            if t.diagnostics:
                detail += f" ({len(t.diagnostics)} diagnostic(s))"
            table.add_row(f.path, Text(t.status, style=style), _short(detail))
        console.print(table)
        console.print(f"{target}: {_counts(report, target)}")
    if report.kernels:
        console.print(
            "kernels: "
            + ", ".join(
                f"{k.name} ({k.file}:{k.line})" if k.line else f"{k.name} ({k.file})" for k in report.kernels
            )
        )
    for note in report.notes:
        console.print(f"note: {note}", style="dim")
    console.print(f"report: {report.out_dir}/report.json, {report.out_dir}/report.md")


def markdown(report: ProgramReport) -> str:
    """report.md: per-file and per-kernel tables, with the compiler behind every build verdict."""
    out = [f"# Port of `{report.root}`", ""]
    out.append(f"Targets: {', '.join(report.targets)}. Output: `{report.out_dir}`.")
    out.append("")
    for target in report.targets:
        out += [f"## {target}", "", f"{_counts(report, target)}.", ""]
        out += ["| file | status | output | compiler / reason |", "|---|---|---|---|"]
        for f in report.files:
            t = f.targets.get(target)
            if t is None:
                continue
            why = _short(t.reason, 200) if t.reason else t.toolchain
            path = t.path.removeprefix(report.out_dir).lstrip("/") if t.path else ""
            out.append(
                f"| `{f.path}` | {t.status} | {f'`{path}`' if path else ''} | {why.replace('|', '/')} |"
            )
        diags = [(f.path, d) for f in report.files for d in getattr(f.targets.get(target), "diagnostics", ())]
        if diags:
            out += ["", "Diagnostics:", ""]
            out += [
                f"- `{path}:{d.line}` {d.severity.value}: `{d.construct}`: {d.reason}" for path, d in diags
            ]
        out.append("")
    if report.kernels:
        out += ["## Kernels", "", "| kernel | defined in | " + " | ".join(report.targets) + " |"]
        out.append("|---|---|" + "---|" * len(report.targets))
        for k in report.kernels:
            where = f"`{k.file}:{k.line}`" if k.line else f"`{k.file}`"
            cells = [k.targets.get(t, "-").replace("|", "/") for t in report.targets]
            out.append(f"| `{k.name}` | {where} | " + " | ".join(cells) + " |")
        out.append("")
    build = report.build
    out += ["## Build", "", f"- flags from: {build.get('flags_from', 'none')}"]
    out += [f"- include folders: {', '.join(build.get('include_dirs') or []) or 'none'}"]
    out += [f"- built: {build.get('built', '')}", ""]
    if report.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in report.notes] + [""]
    return "\n".join(out)


def exit_code(report: ProgramReport) -> int:
    return report.exit_code
