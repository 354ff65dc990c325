"""Rendering of `porter doctor`: a rich table, or one JSON document.

JSON: ``{"backends": [{"name", "compile", "run", "devices": [...], "toolchain", "hint"}], "sandbox":
{"layers": {name: {"active", "detail"}}, "complete"}}`` with each device an object (backend, name, arch,
kind, index, platform, driver, facts).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from porter.backends import Availability, Device
from porter.model import to_jsonable
from porter.report import plain_console
from porter.results import DoctorReport
from porter.sandbox import REQUIRED, summary


def device_json(device: Device) -> dict[str, Any]:
    return to_jsonable(device)


def backend_json(found: Availability) -> dict[str, Any]:
    return {
        "name": found.name,
        "compile": bool(found.compile),
        "run": bool(found.run),
        "devices": [device_json(d) for d in found.devices],
        "toolchain": found.toolchain,
        "hint": found.hint,
    }


def to_json(report: DoctorReport) -> dict[str, Any]:
    return {
        "backends": [backend_json(b) for b in report.backends],
        "sandbox": summary(report.sandbox),
    }


def _yes_no(value: bool) -> Text:
    return Text("yes", style="green") if value else Text("no", style="red")


def _devices(found: Availability) -> str:
    if not found.devices:
        return "-"
    return "\n".join(
        f"{d.name} ({d.kind}, {d.arch}{', ' + d.platform if d.platform else ''})" for d in found.devices
    )


def render(report: DoctorReport, console: Console | None = None) -> None:
    console = console or plain_console()
    table = Table(title="porter doctor", show_lines=True)
    for column in ("backend", "compile", "run", "toolchain", "devices", "hint"):
        table.add_column(column, overflow="fold")
    for found in report.backends:
        table.add_row(
            Text(found.name),
            _yes_no(found.compile),
            _yes_no(found.run),
            Text(found.toolchain or "-"),
            Text(_devices(found)),
            Text(found.hint or ""),
        )
    console.print(table)
    usable = [b.name for b in report.backends if b.run]
    compile_only = [b.name for b in report.backends if b.compile and not b.run]
    console.print(f"run: {', '.join(usable) or 'none'}; compile only: {', '.join(compile_only) or 'none'}")
    if report.sandbox:
        layers = Table(title="sandbox of every child that compiles or runs code", show_lines=False)
        for column in ("layer", "active", "what"):
            layers.add_column(column, overflow="fold")
        for la in report.sandbox:
            layers.add_row(Text(la.name), _yes_no(la.active), Text(la.detail))
        console.print(layers)
        missing = [la.name for la in report.sandbox if la.name in REQUIRED and not la.active]
        console.print(
            Text(
                f"sandbox incomplete: {', '.join(missing)} missing (--require-sandbox refuses to run)"
                if missing
                else "sandbox complete"
            )
        )


def exit_code(report: DoctorReport) -> int:
    """Doctor reports; it never fails."""
    return 0
