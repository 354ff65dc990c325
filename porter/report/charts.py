"""Charts shared by the reports: candidates placed by time against error, their area the memory they use."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def pyplot() -> Any | None:
    """matplotlib's pyplot on the file-only Agg backend, or None where matplotlib is not installed (the
    charts are an extra: a report without them is still whole)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def time_error(
    points: Sequence[tuple[str, float | None, float | None, int | None]], device: str, path: Path
) -> str:
    """A PNG at `path` of (label, time ms, max relative error, memory bytes) points; '' when matplotlib is
    missing or no point has a time."""
    timed = [p for p in points if p[1]]
    if not timed:
        return ""
    plt = pyplot()
    if plt is None:
        return ""
    fig, ax = plt.subplots(figsize=(6, 4))
    most = max((mem or 1) for _, _, _, mem in timed)
    for label, ms, err, mem in timed:
        at = (ms or 0.0, max(err or 0.0, 1e-17))  # an exact result sits on the axis's floor
        ax.scatter([at[0]], [at[1]], s=40 + 400 * (mem or 0) / most, alpha=0.6)
        ax.annotate(label, at, fontsize=8)
    ax.set_xlabel(f"time (ms) on {device}")
    ax.set_ylabel("max relative error against the reference")
    ax.set_yscale("log")
    ax.set_title("candidates: time against error (area: memory)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
