"""What capturing costs and what a replay takes: the issue's targets (capture at most 2x the original's run
on the CPU runtime; re-validating one kernel from a capture, warm caches, at most 2 s on the CPU machine).

    python bench/capture_speed.py [--program DIR] [--run ARGS] [-I DIR] [--repeat 5]

1. builds PROGRAM with the CPU runtime (``porter capture``), then runs the executable ``--repeat`` times
   without and with the capture on (the same scratch folder, output discarded): medians and their ratio;
2. replays every captured kernel's original on the emulator ``--repeat`` times (the first warms the
   compile cache): median seconds per kernel.

Default program: the bundled sample (samples/programs/smooth, ``./smooth data/values.txt 4``).
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

ROOT = Path(__file__).resolve().parent.parent


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} exited {proc.returncode}")
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", default=str(ROOT / "samples" / "programs" / "smooth"))
    ap.add_argument("--run", default="./smooth data/values.txt 4")
    ap.add_argument("-I", dest="include", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from porter.backends import CompileOptions

    from porter import capture
    from porter.harness import replay
    from porter.harness.trial import ValidateOptions
    from porter.model import Variant
    from porter.plan import run_devices
    from porter.scan.extract import device_code
    from porter.workflows.capture import capture_program

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / Path(args.program).name
        shutil.copytree(args.program, src)
        report = capture_program([str(src)], [args.run], out_dir=f"{tmp}/cap", include_dirs=args.include)
        if report.exit_code != 0:
            sys.exit(f"capture failed: {report}")
        exe = max(
            (p for p in Path(f"{tmp}/cap/work/build/original/cpu-runtime/bin").rglob("*") if p.is_file()),
            key=lambda p: p.stat().st_mtime,
        )
        words = args.run.split()
        run_dir = Path(tmp) / "run"
        shutil.copytree(src, run_dir)
        shutil.copy2(exe, run_dir / "prog")
        cmd = ["./prog", *words[1:]]
        env = dict(os.environ)
        plain = [_timed(cmd, run_dir, env) for _ in range(args.repeat)]
        captured = []
        for n in range(args.repeat):
            env_c = {**env, **capture.capture_env(Path(tmp) / f"c{n}")}
            captured.append(_timed(cmd, run_dir, env_c))
        p, c = statistics.median(plain), statistics.median(captured)
        print(
            f"program run: {p:.3f} s without capture, {c:.3f} s with it (median of {args.repeat}): {c / p:.2f}x"
        )

        launches = capture.by_kernel(capture.load(f"{tmp}/cap").launches)
        devices = [d for d in run_devices("cuda") if d.backend == "cpu"]
        dirs = (str(src), *(str(src / d) for d in ("include", "src") if (src / d).is_dir()), *args.include)
        sources = {
            p: p.read_text(errors="replace") for p in src.rglob("*") if p.suffix in (".cu", ".cuh", ".h")
        }
        for name, las in launches.items():
            base = name.split("<")[0]
            text = next((t for t in sources.values() if f"void {base}" in t), None)
            rep = replay.build(name, las)
            if text is None or rep.spec is None:
                print(f"{name}: not replayed ({rep.problem or 'source not found'})")
                continue
            variant = Variant(name, "cuda", device_code(text), name, "original")
            opts = ValidateOptions(compile=CompileOptions(include_dirs=dirs))
            times = []
            for _ in range(args.repeat):
                start = time.monotonic()
                (verdict,) = replay.replay(variant, rep, devices, opts)
                times.append(time.monotonic() - start)
            print(
                f"{name}: {verdict.status.value} at {len(rep.instances)} launch(es); replay "
                f"{times[0]:.2f} s cold, {statistics.median(times[1:] or times):.2f} s warm (median)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
