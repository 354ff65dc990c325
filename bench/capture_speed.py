"""What capturing costs and what a replay takes: the issue's targets (capture at most 2x the original's run
on the CPU runtime; re-validating one kernel from a capture, warm caches, at most 2 s on the CPU machine).

    python bench/capture_speed.py [--program DIR] [--run ARGS] [-I DIR] [--repeat 5]
                                  [--toolchain cpu-runtime|nvcc] [--replay-on cpu|cuda]

1. builds PROGRAM with the capturing toolchain (``porter capture --toolchain``: the CPU runtime, or the
   instrumented nvcc build on an NVIDIA GPU), then runs the executable ``--repeat`` times without and
   with the capture on (the same scratch folder, output discarded): medians and their ratio;
2. replays every captured kernel's original on the devices of one backend (``--replay-on``: the CPU
   emulator, or the GPU through CuPy) ``--repeat`` times (the first warms the compile cache): median
   seconds per kernel, each job in a child started for it; then again with the child already started
   and warmed up (porter.backends.spares: what a porter command does while it reads and plans).

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
    ap.add_argument("--toolchain", default="cpu-runtime")
    ap.add_argument("--replay-on", default="cpu", help="the backend whose devices replay the kernels")
    args = ap.parse_args()
    args.include = [os.path.abspath(d) for d in args.include]  # the replay's children run elsewhere
    os.environ.setdefault("PORTER_SPARES", "1")  # measured with a warm child whatever the machine's size
    sys.path.insert(0, str(ROOT))
    from porter.backends import CompileOptions, isolate, spares

    from porter import capture
    from porter.defines import BuildFlags
    from porter.harness import replay
    from porter.harness.trial import ValidateOptions
    from porter.model import Variant
    from porter.plan import run_devices
    from porter.scan.extract import device_code
    from porter.workflows.capture import capture_program
    from porter.workflows.program_run import ProgramRuns

    jobs: list[str] = []  # each child job's kind and seconds, to see where a replay's time goes
    real_run_job = isolate.run_job

    def counted(job: isolate.Job, timeout_s: float = 60.0) -> isolate.JobResult:
        res = real_run_job(job, timeout_s)
        kind = (
            os.path.basename(job.wrapper[0]) if job.wrapper else ("compile" if job.device is None else "run")
        )
        jobs.append(f"{kind} {res.wall_s:.2f} s{' (cached)' if res.cached else ''}")
        return res

    import porter.harness.checkers
    import porter.harness.gate
    import porter.harness.reference
    import porter.harness.validate

    for mod in (
        porter.harness.checkers,
        porter.harness.gate,
        porter.harness.reference,
        porter.harness.validate,
    ):
        mod.run_job = counted  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / Path(args.program).name
        shutil.copytree(args.program, src)
        report = capture_program(
            [str(src)],
            ProgramRuns((args.run,)),
            flags=BuildFlags(tuple(args.include)),
            out_dir=f"{tmp}/cap",
            toolchain=args.toolchain,
        )
        if report.exit_code != 0:
            sys.exit(f"capture failed: {report}")
        exe = max(
            (
                p
                for p in Path(f"{tmp}/cap/work/build/original/{args.toolchain}/bin").rglob("*")
                if p.is_file()
            ),
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
            f"{args.toolchain} program run: {p:.3f} s without capture, {c:.3f} s with it (median of {args.repeat}): {c / p:.2f}x"
        )

        launches = capture.by_kernel(capture.load(f"{tmp}/cap").launches)
        devices = [d for d in run_devices("cuda") if d.backend == args.replay_on]
        if not devices:
            sys.exit(f"no {args.replay_on} device here")
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
            jobs.clear()
            for _ in range(args.repeat):
                start = time.monotonic()
                (verdict,) = replay.replay(variant, rep, devices, opts)
                times.append(time.monotonic() - start)
            print(
                f"{name}: {verdict.status.value} on {verdict.device} at {len(rep.instances)} launch(es); replay "
                f"{times[0]:.2f} s cold, {statistics.median(times[1:] or times):.2f} s warm (median)"
                + ("" if verdict.status.value == "validated" else f"\n  {verdict.reason}")
            )
            last = jobs[-len(jobs) // args.repeat :] if jobs else []
            print("  child jobs of the last replay: " + ", ".join(last))
            # as inside a porter command: a spare child started ahead (while porter reads and plans),
            # warmed up by the time the replay asks for it
            warm = []
            for _ in range(args.repeat):
                with spares.warm_children():
                    for d in devices:
                        isolate.prestart(isolate.Job(d.backend, "", "", opts.compile, d), opts.timeout_s)
                    spares.settle(60)
                    jobs.clear()
                    start = time.monotonic()
                    (verdict,) = replay.replay(variant, rep, devices, opts)
                    warm.append(time.monotonic() - start)
            print(
                f"  with a warm child: {verdict.status.value}, replay {statistics.median(warm):.2f} s (median of "
                f"{args.repeat}); its jobs: " + ", ".join(jobs)
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
