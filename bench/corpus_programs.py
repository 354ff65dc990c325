"""Port, build and run the development corpus as whole programs; print a Markdown table for BENCHMARKS.md.

    python bench/corpus_programs.py [--corpus ../shared/corpus] [--only name,name] [--timeout 120]
                                    [--out /tmp/porter-corpus] [--json summary.json] [--jobs N]
                                    [--inputs DIR] [--gpu-sizes]

Each program of bench/corpus_runs.toml is ported with the CLI, as a user would
(``porter port DIR -I ... --run ARGS --json``); the table says, per program, which program toolchains
built the original and the HIP port, and per run whether the original ran and the HIP port matched on
each device.  The corpus is third-party code: it is read in place, never copied into the project.
``--jobs N`` ports N programs at a time (each ``porter port`` is its own process); rows come in the table's
order, and ``--json`` is rewritten after each program, so a sweep cut off by a time limit keeps what it did.
A program whose inputs are not in the corpus but bench/corpus_inputs.py makes runs its ``generated_runs``,
the inputs written into ``--inputs``/<program> (default ``OUT/inputs``) and given to porter port as
``--data``.  ``--gpu-sizes``: each program's ``gpu_runs`` / ``generated_gpu_runs`` where it has them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from porter.results import (  # how the report counts an instance judged on several devices; an unlaunched one
    NOT_LAUNCHED,
    REPLAY_RANK,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from corpus_inputs import placed, prepare  # noqa: E402  (bench/ is no package)

SHORT = {"cpu-runtime": "cpu", "hip-on-cuda": "h-o-c", "nvcc": "nvcc", "hipcc": "hipcc"}


def _builds(doc: dict[str, Any], variant: str) -> str:
    out = []
    for b in doc["program"]["build"].get("programs", []):
        if b["variant"] != variant or b["status"] == "unavailable":
            continue
        mark = {"built": "ok", "failed": "FAIL", "refused": "refused"}.get(b["status"], b["status"])
        out.append(f"{SHORT.get(b['toolchain'], b['toolchain'])} {mark}")
    return ", ".join(out) or "-"


def _reason(doc: dict[str, Any], variant: str) -> str:
    for b in doc["program"]["build"].get("programs", []):
        if b["variant"] == variant and b["status"] in ("failed", "refused"):
            return f"{SHORT.get(b['toolchain'], b['toolchain'])}: {b['reason'][:90]}"
    return ""


def _runs(doc: dict[str, Any]) -> tuple[str, str]:
    originals, ports = [], []
    for r in doc["program"]["runs"]:
        for o in r["originals"]:
            originals.append(
                f"{o['device'].split(':')[0]} {o['status']}"
                + (f" ({o['seconds']:.2f}s)" if o["seconds"] else "")
            )
        for v in r["variants"]:
            if v["target"] != "hip":
                continue
            ports.append(f"{(v['device'] or '-').split(':')[0]} {v['status']}")
    return "; ".join(originals) or "-", "; ".join(ports) or "-"


TOTALS: dict[str, list[int]] = {}  # column -> validated, failed, other, never launched (every program)


def _replays(doc: dict[str, Any]) -> str:
    """Per variant, how many kernel instances were validated / failed / not replayable from the capture,
    and how many of the not replayable ones no run launched (``+N unlaunched``)."""
    counts: dict[str, list[int]] = {}
    for k in doc.get("kernels", []):
        seen: dict[tuple[str, str], tuple[str, str]] = {}
        for r in k.get("replays", []):
            column = r["variant"] + (" 64" if r.get("wavefront") == 64 else "")
            if column.startswith("opencl"):
                column = "opencl"
            key = (r.get("instance") or k.get("name", ""), column)
            # one verdict per instance and column, as the report counts it: failed on any device, else
            # validated on any, else compiled, else not replayable
            if REPLAY_RANK.get(r["status"], 4) < REPLAY_RANK.get(seen.get(key, ("", ""))[0], 5):
                seen[key] = (r["status"], r.get("reason", ""))
        for (_instance, column), (status, reason) in seen.items():
            c = counts.setdefault(column, [0, 0, 0, 0])
            if status != "validated" and status != "failed" and NOT_LAUNCHED in reason:
                c[3] += 1
            else:
                c[0 if status == "validated" else 1 if status == "failed" else 2] += 1
    for column, c in counts.items():
        TOTALS.setdefault(column, [0, 0, 0, 0])
        TOTALS[column] = [a + b for a, b in zip(TOTALS[column], c, strict=True)]
    order = ["original", "hip", "hip 64", "opencl"]
    return (
        ", ".join(
            f"{c} {'/'.join(map(str, counts[c][:3]))}"
            + (f" +{counts[c][3]} unlaunched" if counts[c][3] else "")
            for c in order
            if c in counts
        )
        or "-"
    )


def _row(name: str, proc: subprocess.CompletedProcess[str], seconds: float, summary: dict[str, Any]) -> str:
    """One program's table row (and its entry in ``summary``) from its ``porter port --json`` run."""
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return f"| {name} | porter exit {proc.returncode}: {proc.stderr.strip()[-120:]} | | | | | {seconds:.0f} |"
    orig_runs, hip_runs = _runs(doc)
    verdict = doc["program"].get("verdicts", {}).get("hip", {}).get("status", "-")
    why = _reason(doc, "original") or _reason(doc, "hip")
    ocl = doc["program"].get("verdicts", {}).get("opencl", {})
    ocl_why = str(ocl.get("detail", ""))[:160].replace("|", "/")
    summary[name] = {
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "verdict": verdict,
        "opencl_verdict": ocl.get("status", "-"),
        "report": doc,
    }
    return (
        f"| {name} | {_builds(doc, 'original')} | {_builds(doc, 'hip')} | {orig_runs} | {hip_runs} | "
        f"**{verdict}** {why.replace('|', '/')} | **{ocl.get('status', '-')}** {ocl_why} | {_replays(doc)} "
        f"| {seconds:.0f} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(HERE.parent.parent / "shared" / "corpus"))
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--out", default="/tmp/porter-corpus")
    ap.add_argument("--json", default="")
    ap.add_argument("--porter", default="", help="the porter command (default: this Python's -m porter)")
    ap.add_argument("--to", default="hip,opencl", help="the targets ported")
    ap.add_argument("--toolchains", default="", help="passed to porter port --toolchains")
    ap.add_argument("--jobs", type=int, default=1, help="programs ported at a time")
    ap.add_argument("--inputs", default="", help="where generated inputs go (default: OUT/inputs)")
    ap.add_argument(
        "--gpu-sizes",
        action="store_true",
        help="each program's gpu_runs / generated_gpu_runs where it has them",
    )
    args = ap.parse_args()
    table = tomllib.loads((HERE / "corpus_runs.toml").read_text(encoding="utf-8"))["programs"]
    wanted = {w for w in args.only.split(",") if w}
    corpus = Path(args.corpus)
    rows: dict[str, str] = {}
    summary: dict[str, Any] = {}
    python = sys.executable or shutil.which("python3") or "python3"
    base = args.porter.split() if args.porter else [python, "-m", "porter"]
    names = [n for n, e in table.items() if (not wanted or n in wanted) and (corpus / e["path"]).is_dir()]
    inputs = Path(args.inputs or f"{args.out}/inputs")
    # generated inputs are written here, one program after another, before any port starts
    prepared = {n: prepare(n, table[n], inputs, args.gpu_sizes) for n in names}
    # a program opening its input beside the folder it runs in: a copy of it, the input placed there
    moved = {n: p for n in names if (p := placed(n, table[n], corpus, inputs, args.gpu_sizes)) is not None}

    def port(name: str) -> tuple[str, subprocess.CompletedProcess[str], float]:
        entry = table[name]
        where = moved[name][0] if name in moved else corpus / entry["path"]
        cmd = [*base, "port", str(where), "--to", args.to, "--out", f"{args.out}/{name}"]
        cmd += ["--json", "--fresh"]
        for inc in entry.get("include", []):
            cmd += ["-I", str(corpus / inc)]
        for name_value in entry.get("define", []):
            cmd += ["-D", name_value]
        runs, data = prepared[name]
        data = moved[name][1] if name in moved else data
        for run in runs:
            cmd += ["--run", run]
        if data is not None:
            cmd += ["--data", str(data)]
        cmd += ["--timeout", str(args.timeout)]
        if args.toolchains:
            cmd += ["--toolchains", args.toolchains]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        return name, proc, time.monotonic() - start

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for done in as_completed([pool.submit(port, n) for n in names]):
            name, proc, seconds = done.result()
            rows[name] = _row(name, proc, seconds, summary)
            print(rows[name], flush=True)
            if args.json:  # gzip-compressed when the name ends in .gz
                text = json.dumps(summary, indent=1).encode()
                Path(args.json).write_bytes(gzip.compress(text) if args.json.endswith(".gz") else text)
    print()
    print(
        "| program | original built by | HIP port built by | original runs | HIP runs | HIP verdict "
        "| OpenCL program verdict | kernels replayed: validated / failed / other (not replayable, compiled only) (original, hip, hip 64 lanes, opencl) | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows[n] for n in names if n in rows))
    print()
    print(
        "Kernel instances over every program (validated / failed / not replayable; never launched by a run):"
    )
    for column, (ok, bad, other, unlaunched) in TOTALS.items():
        launched = ok + bad + other
        share = f"{100 * ok / launched:.0f} %" if launched else "-"
        print(
            f"- {column}: {ok} / {bad} / {other} of {launched} launched ({share} validated); {unlaunched} never launched"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
