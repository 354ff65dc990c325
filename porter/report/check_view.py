"""Rendering of `porter check` results: a table for people, one JSON document for machines."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from porter.model import Status, to_jsonable
from porter.report import plain_console
from porter.results import CheckResult

_STYLE = {Status.VALIDATED: "green", Status.COMPILED: "yellow", Status.FAILED: "red"}


def to_json(result: CheckResult) -> dict[str, Any]:
    return {
        "variant": result.variant,
        "original": result.original,
        "kernel": result.kernel,
        "language": result.language,
        "spec": {
            "source": result.spec.source,
            "file": result.spec_file,
            "sizes": to_jsonable(result.spec.sizes),
        },
        "verdicts": [
            {
                "device": v.device,
                "backend": v.backend,
                "status": v.status.value,
                "reason": v.reason,
                "compiled": v.compiled,
                "executed": v.executed,
                "correct": v.correct,
                "trials": v.trials,
                "sizes": to_jsonable(v.sizes),
                "max_abs_err": v.max_abs_err,
                "max_rel_err": v.max_rel_err,
                "checks": list(v.checks),
                "toolchain": v.toolchain,
                "logs": list(v.logs),
            }
            for v in result.verdicts
        ],
        "exit_code": result.exit_code,
    }


def render(result: CheckResult) -> None:
    from rich.table import Table

    console = plain_console()
    table = Table(title=f"porter check: {result.variant} against {result.original} ({result.kernel})")
    table.add_column("device")
    table.add_column("status")
    table.add_column("trials", justify="right")
    table.add_column("max abs err", justify="right")
    table.add_column("max rel err", justify="right")
    for v in result.verdicts:
        table.add_row(
            v.device or f"{v.backend} (compile only)",
            Text(v.status.value, style=_STYLE.get(v.status, "white")),
            str(v.trials),
            "-" if v.max_abs_err is None else f"{v.max_abs_err:.3g}",
            "-" if v.max_rel_err is None else f"{v.max_rel_err:.3g}",
        )
    console.print(table)
    for v in result.verdicts:
        console.print(f"{v.device or v.backend}: {v.reason}", markup=False, highlight=False)
    if not result.verdicts:
        console.print("no backend here can build or run this variant", style="red")
    verdict = "validated" if result.exit_code == 0 else "NOT validated"
    console.print(f"{result.kernel}: {verdict}")


def exit_code(result: CheckResult) -> int:
    return result.exit_code
