"""Wall time of one suite ported here (`-j N`) and through a Ray cluster of this machine (issue #33 part 4).

    .venv/bin/python bench/suite_ray.py [--rounds 2] [--json OUT.json]

The suite is the three fixture programs of docs/BENCHMARKS.md's `-j 1` / `-j 2` table (warp_sum, unity_types,
included_kernel_unit, each `runs = [""]`, every toolchain here), each run `porter --no-cache port --suite S
--fresh`.  The cluster is started with ray.cluster_utils (real raylets, stopped by their process ids at the
end): a head node of 2 CPUs, then a second node of 1 CPU joining it.  Rounds interleave the configurations
so that the machine's load (other sessions) falls on all of them alike; the load average is printed with each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"
THREE = ("warp_sum", "unity_types", "included_kernel_unit")


def suite_file(folder: Path) -> Path:
    text = f'root = "{PROGRAMS}"\n\n[defaults]\nruns = [""]\n'
    for name in THREE:
        text += f'\n[programs.{name}]\npath = "{name}"\n'
    (folder / "suite.toml").write_text(text, encoding="utf-8")
    return folder / "suite.toml"


def port(suite: Path, out: Path, extra: list[str]) -> dict[str, object]:
    cmd = [sys.executable, "-m", "porter", "--no-cache", "port", "--suite", str(suite), "--out", str(out)]
    cmd += ["--fresh", "--json", *extra]
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - start
    doc = json.loads(proc.stdout)
    return {
        "wall_s": round(wall, 1),
        "load": round(load, 1),
        "statuses": [p["status"] for p in doc["programs"]],
        "per_program_s": [p["seconds"] for p in doc["programs"]],
        "totals": {t: row["kernels"] for t, row in doc["totals"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="porter-bench-ray-") as tmp:
        base = Path(tmp)
        suite = suite_file(base)
        start = time.monotonic()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
        try:
            print(f"head node up in {time.monotonic() - start:.1f} s", flush=True)
            configs = [("local -j 2", ["-j", "2"]), ("ray, 1 node, -j 2", ["-j", "2"])]
            for r in range(args.rounds):
                for name, extra in configs:
                    ray = (
                        ["--executor", "ray", "--ray-address", cluster.address]
                        if name.startswith("ray")
                        else []
                    )
                    row = {"config": name, "round": r, **port(suite, base / f"out-{len(rows)}", extra + ray)}
                    print(row, flush=True)
                    rows.append(row)
            start = time.monotonic()
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            print(f"second node joined in {time.monotonic() - start:.1f} s", flush=True)
            ray = ["--executor", "ray", "--ray-address", cluster.address]
            for r in range(args.rounds):
                for name, extra in [("ray, 2 nodes, -j 2", ["-j", "2"]), ("ray, 2 nodes, -j 3", [])]:
                    row = {"config": name, "round": r, **port(suite, base / f"out-{len(rows)}", extra + ray)}
                    print(row, flush=True)
                    rows.append(row)
        finally:
            cluster.shutdown()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
