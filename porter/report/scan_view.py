"""How `porter scan` results look: one JSON document, or rich tables per file.

The JSON field names are a public contract (see the `porter scan` issue):
``{"files": [{"path", "language", "kernels", "launches", "allocations", "loops", "hazards", ...}],
"errors": [...], "skipped": [...]}``.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from porter.model import FileScan, Kernel, Param, to_jsonable
from porter.report import PIPED_WIDTH, plain_console


class _Result(Protocol):  # porter.scan.ScanResult (kept structural: report does not import scan)
    @property
    def files(self) -> list[FileScan]: ...
    @property
    def errors(self) -> list[str]: ...
    @property
    def skipped(self) -> list[str]: ...


def to_json(result: _Result) -> dict[str, Any]:
    return {
        "files": [to_jsonable(f) for f in result.files],
        "errors": list(result.errors),
        "skipped": list(getattr(result, "skipped", [])),
    }


def exit_code(result: _Result) -> int:
    """0 when at least one file was scanned (parse warnings included), 2 when nothing usable was given."""
    return 0 if result.files else 2


def problems(result: _Result) -> list[str]:
    """One line per parse warning and per skipped file, for stderr."""
    lines = []
    for f in result.files:
        for w in f.warnings:
            lines.append(f"{f.path}:{w.line}:{w.column}: warning: {w.message}")
    for err in result.errors:
        lines.append(f"{err}" if ": " in err else f"error: {err}")
    if not result.files:
        lines.append("no CUDA (.cu, .cuh, C++ with CUDA) or Python (.py) file could be scanned")
    return lines


def render_problems(result: _Result, err: Console | None = None) -> None:
    err = err or plain_console(file=sys.stderr, soft_wrap=True)
    for line in problems(result):
        err.print(Text("porter: " + line, style="yellow"))


def _param(p: Param) -> str:
    role = "out" if p.written else ("in" if p.pointer else "")
    return f"{p.type} {p.name}" + (f" [{role}]" if role else "")


def _shared(k: Kernel) -> str:
    parts = []
    for s in k.shared:
        size = "[]" if s.size is None else f"[{s.size}]"
        parts.append(("extern " if s.extern else "") + f"{s.type} {s.name}{size}")
    return "\n".join(parts)


def _file_tables(f: FileScan) -> list[Table]:
    tables = []
    if f.kernels:
        t = Table(title="kernels", title_justify="left", show_lines=True)
        for col in (
            "kernel",
            "line",
            "parameters",
            "__shared__",
            "barriers",
            "atomics / warp",
            "launch bounds",
        ):
            t.add_column(col)
        for k in f.kernels:
            name = k.qualified + (f"\n<{', '.join(k.template_params)}>" if k.template_params else "")
            t.add_row(
                name,
                str(k.line),
                "\n".join(_param(p) for p in k.params),
                _shared(k),
                str(k.barriers),
                "\n".join((*k.atomics, *k.warp_intrinsics)),
                k.launch_bounds or "",
            )
        tables.append(t)
    if f.launches:
        t = Table(title="launches", title_justify="left")
        for col in ("kernel", "line", "grid", "block", "shared bytes", "stream", "arguments"):
            t.add_column(col)
        for launch in f.launches:
            name = launch.kernel + (f"<{', '.join(launch.template_args)}>" if launch.template_args else "")
            if launch.via != "chevrons":
                name += f" ({launch.via})"
            t.add_row(
                name,
                str(launch.line),
                launch.grid,
                launch.block,
                launch.shared_bytes or "",
                launch.stream or "",
                ", ".join(launch.args),
            )
        tables.append(t)
    if f.allocations or f.copies:
        t = Table(title="allocations and copies", title_justify="left")
        for col in ("line", "api", "variable", "bytes", "detail"):
            t.add_column(col)
        rows = [(a.line, a.api, a.var, a.bytes, a.elem_type or "") for a in f.allocations]
        rows += [(c.line, c.api, f"{c.dst} <- {c.src}", c.bytes, c.kind) for c in f.copies]
        for line, api, var, nbytes, detail in sorted(rows):
            t.add_row(str(line), api, var, nbytes, detail)
        tables.append(t)
    if f.loops:
        t = Table(title="loop nests", title_justify="left")
        for col in ("function", "line", "variables", "kind", "reason"):
            t.add_column(col)
        for loop in f.loops:
            t.add_row(loop.function, str(loop.line), ", ".join(loop.vars), str(loop.kind), loop.reason)
        tables.append(t)
    if f.hazards:
        t = Table(title="portability hazards", title_justify="left")
        for col in ("line", "code", "message"):
            t.add_column(col)
        for h in f.hazards:
            style = "red" if h.severity == "error" else "yellow"
            t.add_row(str(h.line), Text(h.code, style=style), h.message)
        tables.append(t)
    return tables


def render(result: _Result, out: Console | None = None, err: Console | None = None) -> None:
    """Tables per file on stdout; parse warnings and skipped files on stderr."""
    out = out or plain_console()
    for f in result.files:
        counts = (
            f"{len(f.kernels)} kernels, {len(f.launches)} launches, {len(f.loops)} loop nests, "
            f"{len(f.hazards)} hazards"
            if f.language != "python"  # CUDA and HIP code: kernels and launches
            else f"{len(f.loops)} loop nests, {len(f.hazards)} hazards"
        )
        title = Text(f"{f.path} ({f.language}): {counts}", style="bold")
        # a rule spans the console: an unbounded one (printing to a pipe) gets its title's width
        width = out.width if out.width < PIPED_WIDTH else max(80, title.cell_len + 4)
        out.print(Rule(title, align="left"), width=width)
        tables = _file_tables(f)
        if not tables:
            out.print("nothing to report")
        for table in tables:
            out.print(table)
    render_problems(result, err)
