"""Rendering of `porter bench`: rich tables, one JSON document, or a Markdown table.

JSON (schema ``porter.bench/1``)::

    {"schema": "porter.bench/1", "file": str, "devices": [label], "notes": [str],
     "kernels": [{"kernel", "spec_source", "error", "benchmarked": bool, "size": {sym: int},
                  "cost": {"bytes_read", "bytes_written", "flops": {dtype: n}, "threads", "tensor", "notes"} | null,
                  "predictions": [{"device", "device_name", "floor_ms", "memory_ms", "compute_ms", "bound", "note"}],
                  "results": [{"device", "device_name", "device_kind", "backend", "target", "provenance", "size",
                               "ok", "reason", "median_ms", "iqr_ms", "runs", "floor_ms", "bound",
                               "achieved_gb_s", "pct_bandwidth", "achieved_tflop_s", "pct_compute",
                               "suspect", "representative", "revalidated", "revalidation", "occupancy",
                               "speedup", "baseline_ms", "contended", "notes"}]}]}
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from porter.model import to_jsonable
from porter.report import plain_console
from porter.results import BenchReport, BenchResult, KernelBench

SCHEMA = "porter.bench/1"


def _r(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else float(f"{value:.{digits}g}")


def result_json(r: BenchResult) -> dict[str, Any]:
    a, t = r.assessment, r.timing
    return {
        "device": r.device,
        "device_name": r.device_name,
        "device_kind": r.device_kind,
        "backend": r.backend,
        "target": r.target,
        "provenance": r.provenance,
        "size": dict(r.size),
        "ok": r.ok,
        "reason": r.reason,
        "median_ms": _r(t.median_ms) if t else None,
        "iqr_ms": _r(t.iqr_ms) if t else None,
        "runs": t.runs if t else 0,
        "floor_ms": _r(a.floor_ms) if a else None,
        "bound": a.bound if a else "",
        "achieved_gb_s": _r(a.achieved_bandwidth / 1e9) if a and a.achieved_bandwidth else None,
        "pct_bandwidth": _r(a.pct_bandwidth, 4) if a else None,
        "achieved_tflop_s": _r(a.achieved_flops / 1e12) if a and a.achieved_flops else None,
        "pct_compute": _r(a.pct_compute, 4) if a else None,
        "suspect": r.suspect,
        "representative": r.representative,
        "revalidated": r.revalidated,
        "revalidation": r.revalidation,
        "occupancy": to_jsonable(r.occupancy) if r.occupancy else None,
        "speedup": _r(r.speedup, 4),
        "contended": r.contended,
        "baseline_ms": _r(r.baseline_ms),
        "toolchain": r.toolchain,
        "notes": list(r.notes),
    }


def kernel_json(k: KernelBench) -> dict[str, Any]:
    cost = None
    if k.cost is not None:
        cost = {
            "bytes_read": k.cost.bytes_read,
            "bytes_written": k.cost.bytes_written,
            "flops": dict(k.cost.flops),
            "threads": k.cost.threads,
            "tensor": k.cost.tensor,
            "notes": list(k.cost.notes),
        }
    return {
        "kernel": k.kernel,
        "spec_source": k.spec_source,
        "error": k.error,
        "benchmarked": k.benchmarked,
        "size": dict(k.size),
        "cost": cost,
        "predictions": [
            {
                "device": p.device,
                "device_name": p.device_name,
                "floor_ms": _r(p.floor_ms),
                "memory_ms": _r(p.memory_ms),
                "compute_ms": _r(p.compute_ms),
                "bound": p.bound,
                "note": p.note,
            }
            for p in k.predictions
        ],
        "results": [result_json(r) for r in k.results],
    }


def to_json(report: BenchReport) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "file": report.path,
        "devices": list(report.devices),
        "notes": list(report.notes),
        "kernels": [kernel_json(k) for k in report.kernels],
    }


def exit_code(report: BenchReport) -> int:
    """0 when every kernel was benchmarked somewhere, 1 otherwise."""
    return 0 if report.kernels and all(k.benchmarked for k in report.kernels) else 1


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _size(size: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items()) or "-"


def _achieved(r: BenchResult) -> tuple[str, str]:
    a = r.assessment
    if a is None:
        return "-", "-"
    if a.bound == "compute" and a.achieved_flops:
        return (
            f"{a.achieved_flops / 1e12:.3g} TFLOP/s",
            "-" if a.pct_compute is None else f"{a.pct_compute:.1f}% compute",
        )
    if a.achieved_bandwidth:
        pct = "-" if a.pct_bandwidth is None else f"{a.pct_bandwidth:.1f}% bandwidth"
        return f"{a.achieved_bandwidth / 1e9:.4g} GB/s", pct
    return "-", "-"


def render(report: BenchReport, console: Console | None = None) -> None:
    console = console or plain_console()
    for k in report.kernels:
        if k.error:
            console.print(Text(f"{k.kernel}: {k.error}", style="red"))
            continue
        cost = k.cost
        if cost is not None:
            flops = ", ".join(f"{n:.3g} {d}" for d, n in cost.flops.items()) or "0"
            console.print(
                Text.assemble(
                    (k.kernel, "bold"),
                    f" at {_size(k.size)}: {cost.bytes / 1e6:.4g} MB moved, {flops} FLOPs (static estimate)",
                )
            )
        pred = Table(title=f"{k.kernel}: predicted floor", show_lines=False)
        for col in ("device", "floor ms", "memory ms", "compute ms", "bound"):
            pred.add_column(col)
        for p in k.predictions:
            pred.add_row(
                p.device_name, _ms(p.floor_ms), _ms(p.memory_ms), _ms(p.compute_ms), p.bound or p.note
            )
        console.print(pred)
        if not k.results:
            continue
        table = Table(title=f"{k.kernel}: measured", show_lines=True)
        for col in (
            "device",
            "variant",
            "size",
            "median ms (IQR)",
            "achieved",
            "% of peak",
            "floor ms",
            "speedup",
            "notes",
        ):
            table.add_column(col, overflow="fold")
        for r in k.results:
            if not r.ok:
                table.add_row(
                    r.device, r.target, _size(r.size), Text("failed", style="red"), "", "", "", "", r.reason
                )
                continue
            t = r.timing
            assert t is not None
            achieved, pct = _achieved(r)
            floor = r.assessment.floor_ms if r.assessment else None
            notes = list(r.notes)
            if r.revalidation:
                notes.append(r.revalidation)
            status = (
                Text("SUSPECT", style="bold red")
                if r.suspect
                else Text(f"{t.median_ms:.4g} ({t.iqr_ms:.2g})")
            )
            table.add_row(
                r.device,
                f"{r.target} ({r.provenance})",
                _size(r.size),
                status,
                achieved,
                pct,
                _ms(floor),
                "-" if r.speedup is None else f"{r.speedup:.2f}x",
                "\n".join(notes),
            )
        console.print(table)
    for note in report.notes:
        console.print(Text(note, style="yellow"))


def markdown(report: BenchReport) -> str:
    """One Markdown table row per (kernel, measured result): the docs/BENCHMARKS.md format."""
    rows = [
        "| kernel | backend | size | median ms (IQR) | achieved | % of peak | predicted floor ms | suspect? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in report.kernels:
        if k.error:
            rows.append(f"| {k.kernel} | - | - | not run: {k.error} | | | | |")
            continue
        for r in k.results:
            if not r.ok:
                rows.append(
                    f"| {k.kernel} | {r.backend} | {_size(r.size)} | failed: {r.reason[:120]} | | | | |"
                )
                continue
            t = r.timing
            assert t is not None
            achieved, pct = _achieved(r)
            floor = r.assessment.floor_ms if r.assessment else None
            rows.append(
                f"| {k.kernel} | {r.backend} | {_size(r.size)} | {t.median_ms:.4g} ({t.iqr_ms:.2g}) | {achieved} | "
                f"{pct} | {_ms(floor)} | {'yes' if r.suspect else 'no'} |"
            )
    return "\n".join(rows)
