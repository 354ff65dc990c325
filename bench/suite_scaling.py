"""A scaling model for suites (issue #33): a corpus sweep's measured per-program, per-stage costs -> the
projected wall time of a suite of P programs on 1, 4, 16 ... nodes.

    python bench/suite_scaling.py --sweep SWEEP.json.gz [--programs 500] [--nodes 1,4,16] [--cores 16] [--gpus 1]
        [--measured-cores 2] [--busy 1.59] [--efficiency 0.8]

Input: the JSON of ``bench/corpus_programs.py --json`` (each program ported alone, one after another, on a
machine of ``--measured-cores`` cores).  For each program its report gives the stages' seconds: the builds
(every toolchain's build of every variant), the runs (the original's and each port's, on each device), and the
rest of its wall time (scanning, translating, capturing, replaying and judging kernels).  A stage that ran on
a GPU (a device named ``cuda:`` / ``hip:`` / ``opencl:`` of a GPU, as the report names it) counts as GPU
time, serialised per GPU as porter's device locks serialise it; everything else is CPU time.

The model, stated so it can be checked against a real cluster:
* one program ported alone keeps ``--busy`` cores busy on average (its builds and replays spread over cores;
  its serial steps do not).  Measured on the 2-core machine: three programs took 47.9 s at ``-j 1`` and
  38.1 s at ``-j 2`` with both cores saturated, so a program alone kept 2 x 38.1 / 47.9 = 1.59 cores busy;
* a node of ``--cores`` cores runs enough programs at once to keep its cores busy, at ``--efficiency`` of
  linear (the issue's goal is 0.8), its GPU stages one at a time per GPU;
* a suite of P programs costs P times the mean program of the sweep (its mix of sizes), and never less than
  its longest program;
* CPU work measured on the sweep's machine is scaled by ``--cpu-speed`` (the target node's single-core
  speed against the measured machine's; 1.0 when unknown).

Output: markdown on stdout -- the mean program's stages and the projection per node count.  Not a test.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GPU_DEVICE_PREFIXES = ("cuda:", "hip:")  # a GPU device as reports name them; opencl:<gpu name> is checked too


@dataclass(frozen=True)
class Stages:
    name: str
    wall: float  # the program's whole port, alone
    build: float  # summed over toolchains and variants
    runs_cpu: float
    runs_gpu: float

    @property
    def rest(self) -> float:
        return max(0.0, self.wall - self.build - self.runs_cpu - self.runs_gpu)


def _gpu(device: str) -> bool:
    if device.startswith(GPU_DEVICE_PREFIXES):
        return True
    name = device.lower()
    return name.startswith("opencl:") and any(
        w in name for w in ("nvidia", "amd", "radeon", "instinct", "gfx")
    )


def stages(name: str, row: dict[str, Any]) -> Stages | None:
    """One program's stage seconds from its sweep row (None when it has no report or no time)."""
    report = row.get("report") or {}
    program = report.get("program") if isinstance(report, dict) else None
    wall = row.get("seconds")
    if not isinstance(program, dict) or not isinstance(wall, (int, float)):
        return None
    build = sum(float(b.get("seconds") or 0.0) for b in (program.get("build") or {}).get("programs", []))
    cpu = gpu = 0.0
    for run in program.get("runs", []):
        for r in [*(run.get("originals") or []), *(run.get("variants") or [])]:
            seconds = float(r.get("seconds") or 0.0)
            if _gpu(str(r.get("device", ""))):
                gpu += seconds
            else:
                cpu += seconds
    return Stages(name, float(wall), build, cpu, gpu)


def load(path: Path) -> list[Stages]:
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return [s for name, row in doc.items() if (s := stages(name, row)) is not None]


def project(
    programs: list[Stages],
    count: int,
    nodes: int,
    cores: int,
    gpus: int,
    busy: float,
    efficiency: float,
    cpu_speed: float,
) -> tuple[float, str]:
    """(projected wall seconds, what bounds it) for `count` programs like the sweep's on `nodes` nodes."""
    mean_cpu = statistics.fmean((p.wall - p.runs_gpu) * busy for p in programs) / cpu_speed  # core-seconds
    mean_gpu = statistics.fmean(p.runs_gpu for p in programs)
    longest = max(p.wall for p in programs) / cpu_speed
    cpu_bound = count * mean_cpu / (nodes * cores * efficiency)
    gpu_bound = count * mean_gpu / (nodes * gpus) if gpus else 0.0
    wall = max(cpu_bound, gpu_bound, longest)
    why = "CPU stages" if wall == cpu_bound else "GPU stages" if wall == gpu_bound else "the longest program"
    return wall, why


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--sweep", required=True, help="bench/corpus_programs.py --json output (.json or .json.gz)"
    )
    ap.add_argument("--programs", type=int, default=500)
    ap.add_argument("--nodes", default="1,4,16")
    ap.add_argument("--cores", type=int, default=16, help="cores of each node")
    ap.add_argument("--gpus", type=int, default=1, help="GPUs of each node")
    ap.add_argument("--measured-cores", type=int, default=2, help="cores of the machine the sweep ran on")
    ap.add_argument("--busy", type=float, default=1.59, help="cores one program alone keeps busy (see above)")
    ap.add_argument("--efficiency", type=float, default=0.8, help="of linear speed-up in the CPU stages")
    ap.add_argument("--cpu-speed", type=float, default=1.0, help="a node core's speed against the sweep's")
    args = ap.parse_args()
    programs = load(Path(args.sweep))
    if not programs:
        print(f"{args.sweep}: no program with a report and a time", file=sys.stderr)
        return 2
    busy = min(args.busy, args.measured_cores)
    total = sum(p.wall for p in programs)
    print(f"sweep: {args.sweep}: {len(programs)} programs, {_minutes(total)} one after another on "
          f"{args.measured_cores} cores\n")  # fmt: skip
    print("| stage | mean per program | share |\n|---|---:|---:|")
    for label, attr in (
        ("builds", "build"), ("runs on CPU devices", "runs_cpu"), ("runs on GPUs", "runs_gpu"),
        ("scan, translate, capture, replay, judge", "rest"),
    ):  # fmt: skip
        mean = statistics.fmean(getattr(p, attr) for p in programs)
        print(f"| {label} | {mean:.1f} s | {100 * mean * len(programs) / total:.0f} % |")
    longest = max(programs, key=lambda p: p.wall)
    print(f"\nlongest: {longest.name} {longest.wall:.0f} s; a program keeps {busy:.2f} cores busy alone\n")
    print(
        f"| nodes ({args.cores} cores, {args.gpus} GPU each) | {args.programs} programs | bound by | "
        f"programs at once |\n|---:|---:|---|---:|"
    )
    for n in (int(x) for x in args.nodes.split(",") if x.strip()):
        wall, why = project(
            programs, args.programs, n, args.cores, args.gpus, busy, args.efficiency, args.cpu_speed
        )
        at_once = max(1, round(n * args.cores / busy))
        print(f"| {n} | {_minutes(wall)} | {why} | {at_once} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
