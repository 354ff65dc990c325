"""A program port, then the same command again on unchanged inputs: the re-run must take under 10% of the
first (it reuses every translation's build verdict, program build, run and chart).

    python bench/program_rerun.py [--repeat 3] [--toolchains cpu-runtime,...]

The first run starts from an empty porter cache (a fresh PORTER_CACHE_DIR): a user's first port of the
program.  Prints the first run's seconds, each re-run's, and the ratio; docs/BENCHMARKS.md keeps the figures.

Python's bytecode: an installed porter has its modules compiled (pip writes them), so by default the
children may write theirs -- into a fresh folder (PYTHONPYCACHEPREFIX), so the first run pays for compiling
them as a first run after installing would.  ``--no-bytecode`` keeps PYTHONDONTWRITEBYTECODE=1 (what some
sandboxes set): every run then compiles every module it imports.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "programs" / "smooth"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--toolchains", default="")
    ap.add_argument("--no-bytecode", action="store_true", help="every run compiles porter's modules")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "smooth"
        shutil.copytree(SAMPLE, src)
        cmd = [sys.executable, "-m", "porter", "port", str(src), "--to", "hip,opencl", "--out", f"{tmp}/out"]
        cmd += ["--run", "./smooth data/values.txt 4"]
        if args.toolchains:
            cmd += ["--toolchains", args.toolchains]

        # a fresh cache: the first run is a user's first port of the program (nothing compiled before)
        env = {**os.environ, "PORTER_CACHE_DIR": f"{tmp}/cache"}
        if args.no_bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = f"{tmp}/pycache"

        def once() -> float:
            start = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                sys.exit(f"porter exited {proc.returncode}: {proc.stderr[-400:]}")
            return time.monotonic() - start

        first = once()
        again = [once() for _ in range(args.repeat)]
    median = statistics.median(again)
    print(
        f"first run {first:.2f} s; re-runs {', '.join(f'{t:.2f}' for t in again)} s (median {median:.2f} s)"
    )
    print(f"re-run / first = {100 * median / first:.1f}% (target < 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
