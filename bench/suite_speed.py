"""Kernel speed of a suite's ports against their originals (issue #30's goal on the GPU: porter's OpenCL at
>= 0.95x of the CUDA original, geomean over kernels, none under 0.8x), read from the reports a
`porter port --suite S --out OUT` run left: every replay row with a timing (``speedup``: the original's time
over the variant's, at the program's own captured launches, on one device).

    python bench/suite_speed.py OUT [--under 0.8] [--json SPEED.json]

Per (target, device): how many kernel instances were timed, the geometric mean of their speed-ups, the
slowest, and each instance under ``--under`` by program and name.  Instances timed under contention (the row's
``contended``) are counted apart.  Markdown on stdout.  Not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def rows(out: Path) -> list[dict[str, Any]]:
    """One dict per timed replay: program, kernel instance, target, device, speedup, contended."""
    found: list[dict[str, Any]] = []
    for report in sorted(out.glob("*/report.json")):
        try:
            doc = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for kernel in doc.get("kernels") or []:
            for replay in kernel.get("replays") or []:
                speedup = replay.get("speedup")
                if (
                    replay.get("variant") == "original"
                    or not isinstance(speedup, int | float)
                    or speedup <= 0
                ):
                    continue
                found.append({
                    "program": report.parent.name,
                    "kernel": replay.get("instance") or kernel.get("name"),
                    "target": replay.get("variant"),
                    "device": replay.get("device"),
                    "speedup": float(speedup),
                    "contended": bool(replay.get("contended")),
                })  # fmt: skip
    return found


def table(found: list[dict[str, Any]], under: float) -> str:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in found:
        groups[(str(r["target"]), str(r["device"]))].append(r)
    lines = [
        "| target | device | instances timed | geomean speed-up | slowest | under "
        f"{under}x | contended (left out) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    slow: list[str] = []
    for (target, device), rs in sorted(groups.items()):
        clean = [r for r in rs if not r["contended"]]
        if clean:
            geo = math.exp(sum(math.log(r["speedup"]) for r in clean) / len(clean))
            low = min(clean, key=lambda r: r["speedup"])
            below = [r for r in clean if r["speedup"] < under]
            lines.append(
                f"| {target} | {device} | {len(clean)} | {geo:.2f} | {low['speedup']:.2f} "
                f"({low['program']} {low['kernel']}) | {len(below)} | {len(rs) - len(clean)} |"
            )
            slow += [
                f"- {target} on {device}: {r['program']} `{r['kernel']}` {r['speedup']:.2f}x"
                for r in sorted(below, key=lambda r: r["speedup"])
            ]
        else:
            lines.append(f"| {target} | {device} | 0 | - | - | - | {len(rs)} |")
    return "\n".join(lines + ([""] + slow if slow else [])) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="a suite's output folder")
    ap.add_argument("--under", type=float, default=0.8)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    found = rows(a.out)
    if a.json:
        a.json.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    sys.stdout.write(table(found, a.under))
    return 0


if __name__ == "__main__":
    sys.exit(main())
