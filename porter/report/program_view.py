"""Rendering of a program port (`porter port DIR`): a table per target for people, report.md, JSON."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.text import Text

from porter.report import plain_console, short
from porter.report.charts import pyplot
from porter.results import STAGES, KernelReplay, ProgramReport

_STYLE = {
    "built": "green",
    "refused": "yellow",
    "unavailable": "dim",
    "compiled": "green",
    "translated": "cyan",
    "copied": "dim",
    "failed": "red",
    "untranslatable": "magenta",
    "none": "dim",
}
_WIDTH = 140
_VERDICT_STYLE = {
    "matches": "green", "differs": "red", "failed": "red", "not-run": "yellow", "ran": "green",
    "validated": "green", "compiled": "yellow", "not-replayable": "yellow",
}  # fmt: skip


def _launches(r: KernelReplay) -> str:
    return f"{r.launches}" + (f" ({r.held_back} held back)" if r.held_back else "") if r.launches else "-"


def _time(r: KernelReplay) -> str:
    """A replay's time at its captured launch: median (IQR) ms, speedup over the original, the floor."""
    if r.time_ms is None:
        return "-"
    out = f"{r.time_ms:.4g} ms ({r.time_iqr_ms or 0:.2g})"
    if r.speedup is not None and r.original_ms is not None and r.variant != "original":
        out += f", {r.speedup:.2f}x the original ({r.original_ms:.4g} ms beside it)"
    elif r.speedup is not None and r.variant != "original":
        out += f", {r.speedup:.2f}x the original"
    if r.floor_ms is not None:
        out += f", floor {r.floor_ms:.2g} ms"
    if r.contended:  # the why is among the report's notes (contended_notes)
        out += " (contended)"
    return out


def contended_notes(report: ProgramReport) -> list[str]:
    """One line per replay timed while the GPU was not porter's alone: its time is marked "(contended)"."""
    return [
        f"time of {r.instance or k.name}, {r.variant} on {r.device}: {r.contended}"
        for k in report.kernels
        for r in k.replays
        if r.contended
    ]


def to_json(report: ProgramReport) -> dict[str, Any]:
    return report.document()


def _short(text: str, width: int = _WIDTH) -> str:
    return short(text, width)


def _counts(report: ProgramReport, target: str) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(report.counts(target).items())) or "nothing"


def render(report: ProgramReport) -> None:
    from rich.table import Table

    console = plain_console()
    port = report.build.get("port")  # porter verify: a port of the user's, not files porter wrote
    if port:
        console.print(f"porter verify: the {', '.join(report.targets)} port {port} against {report.root}")
    for target in report.targets if not port else ():
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
    if report.builds:
        table = Table(title="program builds")
        for col in ("variant", "toolchain", "status", "runs on / reason"):
            table.add_column(col)
        for b in report.builds:
            detail = b.device if b.status == "built" else b.reason
            if b.status == "built" and not b.device:
                detail = "builds only (no device here)"
            table.add_row(
                b.variant, b.toolchain, Text(b.status, style=_STYLE.get(b.status, "")), _short(detail)
            )
        console.print(table)
    for run in report.runs:
        table = Table(title=f"run: {run.args or '(no arguments)'}")
        for col in ("variant", "device", "status", "exit", "seconds", "difference / reason"):
            table.add_column(col)
        for r in [*run.originals, *run.variants]:
            detail = r.differences[0] if r.differences else r.reason
            secs = f"{r.seconds:.3f}" if r.seconds is not None else ""
            table.add_row(
                r.variant, r.device or "-", Text(r.status, style=_VERDICT_STYLE.get(r.status, "")),
                "" if r.exit is None else str(r.exit), secs, _short(detail),
            )  # fmt: skip
        console.print(table)
    replayed = [(k, rp) for k in report.kernels for rp in k.replays]
    if replayed:
        table = Table(title="kernels, replayed from the program's run")
        timed = any(rp.time_ms is not None for _k, rp in replayed)
        for col in (
            "kernel",
            "variant",
            "device",
            "lanes",
            "verdict",
            "launches",
            *(["time"] if timed else []),
            "reason",
        ):
            table.add_column(col)
        for k, rp in replayed:
            table.add_row(
                rp.instance or k.name, rp.variant, rp.device or "-", str(rp.wavefront or "-"),
                Text(rp.status, style=_VERDICT_STYLE.get(rp.status, "")),
                _launches(rp), *([_time(rp)] if timed else []), "" if rp.status == "validated" else _short(rp.reason),
            )  # fmt: skip
        console.print(table)
    for target, v in report.verdicts().items():
        console.print(
            Text.assemble(
                f"program verdict, {target}: ",
                (v["status"], _VERDICT_STYLE.get(v["status"], "")),
                f" ({_short(v['detail'], 100)})",
            )
        )
    for h in report.build.get("port_hazards") or ():
        console.print(f"port hazard {h['file']}:{h['line']} {h['code']}: {h['at_64']}")
    for line in unit_lines(report):
        console.print(line)
    for line in count_lines(report):
        console.print(line)
    for note in report.notes:
        console.print(f"note: {note}", style="dim")
    console.print(
        f"report: {report.out_dir}/report.json, {report.out_dir}/report.md"
        + (f", {report.chart}" if report.chart else "")
    )


def markdown(report: ProgramReport) -> str:
    """report.md: per-file and per-kernel tables, with the compiler behind every build verdict."""
    port = report.build.get("port")  # porter verify: a port of the user's, not files porter wrote
    if port:
        out = [f"# Verification of `{port}` against `{report.root}`", ""]
        out += [
            f"The {', '.join(report.targets)} port as its author wrote it. Output: `{report.out_dir}`.",
            "",
        ]
    else:
        out = [f"# Port of `{report.root}`", ""]
        out += [f"Targets: {', '.join(report.targets)}. Output: `{report.out_dir}`.", ""]
    for target in report.targets if not port else ():
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
    out += [f"- built: {build.get('built', '')}"]
    out += [f"- jail: {build['jail']}"] if build.get("jail") else []
    out.append("")
    if report.builds:
        out += [
            "| variant | toolchain | status | runs on | toolchain version / reason | seconds |",
            "|---|---|---|---|---|---|",
        ]
        for b in report.builds:
            why = b.reason if b.status != "built" else b.toolchain_id
            out.append(
                f"| {b.variant} | {b.toolchain} | {b.status} | {b.device or '-'} | {_short(why, 200).replace('|', '/')} | {b.seconds:.1f} |"
            )
        out.append("")
    if report.runs:
        out += ["## Runs", ""]
        verdicts = report.verdicts()
        if verdicts:
            out += ["| target | program verdict | devices / first difference |", "|---|---|---|"]
            out += [
                f"| {t} | **{v['status']}** | {_short(v['detail'], 200).replace('|', '/')} |"
                for t, v in verdicts.items()
            ]
            out.append("")
        for run in report.runs:
            out += [f"### `{run.args or '(no arguments)'}` ({run.executable})", ""]
            out += [
                "| variant | toolchain | device | status | exit | seconds | compared with |",
                "|---|---|---|---|---|---|---|",
            ]
            for r in [*run.originals, *run.variants]:
                secs = f"{r.seconds:.3f}" if r.seconds is not None else ""
                out.append(
                    f"| {r.variant} | {r.toolchain or '-'} | {r.device or '-'} | {r.status} | "
                    f"{'' if r.exit is None else r.exit} | {secs} | {r.against or '-'} |"
                )
            out.append("")
            for r in [*run.originals, *run.variants]:
                if r.differences:
                    out += [f"Differences of {r.variant} on {r.device}:", ""]
                    out += [f"- {d}" for d in r.differences]
                    out.append("")
                elif r.reason:
                    out += [f"- {r.variant} ({r.device or 'no device'}): {r.reason}"]
                if r.varies:
                    out += [f"- {r.variant} ({r.device}): {v}" for v in r.varies]
            out.append("")
        if report.chart:
            out += [f"![run times]({Path(report.chart).name})", ""]
    replayed = [(k, r) for k in report.kernels for r in k.replays]
    sources = sorted({r.captured_on for _k, r in replayed if r.captured_on})
    if replayed:
        out += [
            "## Kernels replayed from the program's run",
            "",
            "Each kernel run from the launches the original's run captured (docs/CAPTURE_FORMAT.md), "
            "compared with what the original left"
            + (f"; captured on {', '.join(sources)}." if sources else "."),
            "",
            "| kernel | variant | device | lanes per warp | verdict | launches | time at the largest captured launch | reason |",
            "|---|---|---|---|---|---|---|---|",
        ]
        out += [
            f"| `{r.instance or k.name}` | {r.variant} | {r.device or '-'} | {r.wavefront or '-'} | {r.status} | {_launches(r)} | "
            f"{_time(r)} | {_short(r.reason, 200).replace('|', '/')} |"
            for k, r in replayed
        ]
        out.append("")
    notes = [*report.notes, *contended_notes(report)]
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    hazards = report.build.get("port_hazards") or ()
    if hazards:
        out += ["## Wave-size hazards in the port, and what the 64-lane runs say", ""]
        out += ["| where | hazard | at 64 lanes |", "|---|---|---|"]
        out += [
            f"| `{h['file']}:{h['line']}` | {h['code']}: {_short(str(h['message']), 160).replace('|', '/')} | "
            f"{str(h['at_64']).replace('|', '/')} |"
            for h in hazards
        ]
        out.append("")
    units = unit_lines(report)
    if units:
        out += ["## Units compiled as device code", ""] + [f"- {line}" for line in units] + [""]
    counted = count_lines(report)
    if counted:
        out += ["## Kernel instances judged", ""] + [f"- {line}" for line in counted] + [""]
    if report.stages:
        out += ["## Where the time went", "", stage_line(report.stages), ""]
    return "\n".join(out)


def stage_line(stages: Mapping[str, float]) -> str:
    """``plan 0.4 s, translate 2.1 s, build and run 12.0 s, replay 20.3 s (timing 4.2 s)``: a port's wall
    seconds per stage, timing shown as the part of the replay it is."""
    shown = [f"{s} {stages[s]:.1f} s" for s in STAGES if s in stages and s != "timing"]
    line = ", ".join(shown)
    return line + (f" (timing {stages['timing']:.1f} s)" if "timing" in stages else "")


def unit_lines(report: ProgramReport) -> list[str]:
    """One line per target whose outputs a real compiler checked: ``hip: 2 of 3 units compile as device
    code (hip:gfx90a); bucketsort.cu does not: <the compiler's first error>``.  A program's verdict comes
    from building the port with the program toolchains here (for HIP: porter's CPU runtime, HIP on NVIDIA),
    so a unit AMD's compiler rejects is said here, not there."""
    out = []
    for target in report.targets:
        checked = [
            (f.path, t)
            for f in report.files
            if (t := f.targets.get(target)) is not None and t.status in ("compiled", "failed") and t.toolchain
        ]
        if not checked:
            continue
        ok = [t for _, t in checked if t.status == "compiled"]
        where = sorted({m.group(1) for t in ok if (m := re.match(r"compiles for (\S+)", t.reason))})
        line = f"{target}: {len(ok)} of {len(checked)} units compile as device code"
        line += f" ({', '.join(where)})" if where else ""
        bad = [(path, t) for path, t in checked if t.status == "failed"]
        if bad:
            path, t = bad[0]
            line += f"; {path} does not: {_short(t.reason.split(': ', 1)[-1], 160)}"
            line += f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        out.append(line)
    return out


def launched_share(counts: Mapping[str, Any]) -> str:
    """`` (V of L launched by the runs)`` when some of a count's instances no run launched (``unlaunched``: a
    template's instantiations the program compiles), else ""."""
    if not counts.get("unlaunched"):
        return ""
    return f" ({counts['validated']} of {counts['instances'] - counts['unlaunched']} launched by the runs)"


def count_lines(report: ProgramReport) -> list[str]:
    """One line per variant: ``hip: 58 of 60 kernel instances validated, 2 not replayable (why)``."""
    out = []
    for variant, c in report.kernel_counts().items():
        reasons = c["reasons"]
        line = (
            f"{variant}: {c['validated']} of {c['instances']} kernel instances validated{launched_share(c)}"
        )
        for status, said in (
            ("failed", "failed"),
            ("compiled", "compiled only"),
            ("not-replayable", "not replayable"),
        ):
            if c[status]:
                line += f", {c[status]} {said}"
        if reasons:
            line += " (" + "; ".join(f"{n} {why}" for why, n in list(reasons.items())[:4])
            line += f"; {len(reasons) - 4} more reasons)" if len(reasons) > 4 else ")"
        out.append(line)
    return out


def exit_code(report: ProgramReport) -> int:
    return report.exit_code


def chart(report: ProgramReport, out: Path) -> str:
    """runs.png: the seconds of every run per variant and device (matplotlib); '' when nothing ran or
    matplotlib is missing."""
    bars = [
        (f"{i}: {r.variant}\n{r.device.split(':')[0] or '-'}", r.seconds, r.status)
        for i, run in enumerate(report.runs, 1)
        for r in [*run.originals, *run.variants]
        if r.seconds is not None
    ]
    if not bars:
        return ""
    plt = pyplot()
    if plt is None:
        return ""
    colours = {"ran": "#4c72b0", "matches": "#55a868", "differs": "#c44e52", "failed": "#c44e52"}
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(bars) + 1), 3.2))
    ax.bar(range(len(bars)), [b[1] or 0.0 for b in bars], color=[colours.get(b[2], "#8c8c8c") for b in bars])
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.set_ylabel("seconds (whole run)")
    ax.set_title("porter port --run: run times per variant and device", fontsize=9)
    fig.tight_layout()
    path = out / "runs.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
