"""Kernel times of porter's OpenCL translation beside the CUDA original, at a program's own launches.

    python bench/opencl_kernel_speed.py [--corpus .corpus] [--only nw,gaussian] [--toolchain nvcc]
                                        [--backend cuda --backend opencl] [--json out.json]

For each program of bench/corpus_runs.toml that has a run (with ``--gpu-sizes``, its ``gpu_runs`` where the
table gives them: sizes for a GPU; a program whose inputs bench/corpus_inputs.py makes, its ``generated_runs``
or ``generated_gpu_runs``, the inputs written into ``--inputs``/<program> and given as ``--data``), ``porter capture`` records its launches with the chosen toolchain (nvcc: the program's
native run on the GPU), then ``porter bench FILE --capture`` times every kernel of each source file that
defines one, on each backend, with the captured grid, block and data (CUDA events, warm-up, L2 flushed,
one kernel at a time: ``--exclusive``).  The table gives, per kernel, the original's median, each port's
median and its speed against the original (original ms / port ms: above 1 is faster); the last lines the
geometric mean and the slowest kernel per backend -- issue #30's goal is >= 0.95x geomean, none under 0.8x,
on the H200.  The corpus is third-party code, read in place; captures and logs go under --work.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from corpus_inputs import placed, prepare  # noqa: E402  (bench/ is no package)

GLOBAL = re.compile(r"__global__")


def kernel_files(folder: Path) -> list[Path]:
    """The files ``porter bench`` times: each source file that defines a kernel, or, where another
    source file includes it (a unity build: lavaMD's wrapper, myocyte's main.cu), the outermost file
    including it, which gives its kernels their types and macros."""
    sources = [
        f for f in sorted(folder.rglob("*")) if f.suffix in {".cu", ".cuh", ".c", ".cpp"} and f.is_file()
    ]
    text = {f: f.read_text(errors="replace") for f in sources}

    def includer(f: Path) -> Path | None:
        pattern = re.compile(r'#\s*include\s*"([^"]*/)?' + re.escape(f.name) + '"')
        return next((g for g in sources if g != f and g.suffix != ".cuh" and pattern.search(text[g])), None)

    found: list[Path] = []
    for f in sources:
        if not GLOBAL.search(text[f]):
            continue
        top, seen = f, {f}
        while (up := includer(top)) is not None and up not in seen:
            top = up
            seen.add(up)
        if top not in found:
            found.append(top)
    return found


def run(cmd: list[str], timeout: float, log: Path) -> subprocess.CompletedProcess[str] | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        log.write_text(f"timed out after {timeout:.0f} s: {' '.join(cmd)}\n", encoding="utf-8")
        return None
    log.write_text(f"$ {' '.join(cmd)}\nexit {proc.returncode}\n{proc.stderr[-4000:]}", encoding="utf-8")
    return proc


def _capture_reason(proc: subprocess.CompletedProcess[str]) -> str:
    """Why `porter capture --json` failed: its runs' reasons (on stdout), else the end of its stderr."""
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = {}
    reasons = (
        [r.get("reason", "") for r in doc.get("runs", []) if r.get("reason")] if isinstance(doc, dict) else []
    )
    return ("; ".join(reasons) or proc.stderr.strip())[-300:]


def program_rows(
    name: str, entry: dict[str, Any], args: argparse.Namespace, porter: list[str]
) -> list[dict[str, Any]]:
    """Capture one program and bench each of its kernel files; one row per (kernel, backend result)."""
    corpus, work = Path(args.corpus), Path(args.work)
    folder = corpus / entry["path"]
    inputs = Path(args.inputs or work / "inputs")
    runs, data = prepare(name, entry, inputs, args.gpu_sizes)
    # a program that opens its input beside the folder it runs in (srad_v1, dwt2d): a copy with the input placed
    moved = placed(name, entry, corpus, inputs, args.gpu_sizes)
    if moved is not None:
        folder, data = moved
    includes = [x for inc in entry.get("include", []) for x in ("-I", str(corpus / inc))]
    cap = work / f"{name}.cap"
    cmd = [*porter, "capture", str(folder), "--out", str(cap), "--toolchain", args.toolchain, "--json"]
    for each in runs:
        cmd += ["--run", each]
    if data is not None:
        cmd += ["--data", str(data)]
    proc = run(cmd + includes, args.timeout, work / f"{name}.capture.log")
    if proc is None or proc.returncode != 0:
        why = "timed out" if proc is None else f"exit {proc.returncode}: {_capture_reason(proc)}"
        return [{"program": name, "kernel": "-", "error": f"capture failed: {why}"}]
    rows: list[dict[str, Any]] = []
    for f in kernel_files(folder):
        cmd = [*porter, "bench", str(f), "--capture", str(cap), "--json", "--exclusive", "-I", str(f.parent)]
        for b in args.backend:
            cmd += ["--backend", b]
        proc = run(cmd + includes, args.timeout, work / f"{name}.{f.stem}.bench.log")
        if proc is None:
            rows.append({"program": name, "file": f.name, "kernel": "-", "error": "bench timed out"})
            continue
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            rows.append({"program": name, "file": f.name, "kernel": "-", "error": proc.stderr.strip()[-200:]})
            continue
        for k in doc.get("kernels", []):
            # one row per timed launch size (porter bench times up to three) and device of a port, the
            # baseline backend's first device at the same size beside it
            by_device: dict[str, list[dict[str, Any]]] = {}
            for r in k.get("results", []):
                if not (r.get("device_kind") == "cpu" and args.gpu_only):
                    by_device.setdefault(r["device"], []).append(r)
            base = next((v for v in by_device.values() if v[0]["backend"] == args.backend[0]), [])
            ports = [v for v in by_device.values() if v[0]["backend"] != args.backend[0]]
            if not by_device and k.get("error"):
                rows.append({"program": name, "file": f.name, "kernel": k["kernel"], "error": k["error"]})
            for results in ports or [[]]:
                for i in range(max(len(results), len(base))):
                    row: dict[str, Any] = {
                        "program": name,
                        "file": f.name,
                        "kernel": k["kernel"],
                        "error": "",
                    }
                    for r in ([base[min(i, len(base) - 1)]] if base else []) + (
                        [results[min(i, len(results) - 1)]] if results else []
                    ):
                        row["size"] = ", ".join(
                            f"{a}={b}" for a, b in r.get("size", {}).items() if a[0] in "gb"
                        )
                        row[r["backend"]] = {
                            "device": r["device"],
                            "ok": r["ok"],
                            "median_ms": r.get("median_ms"),
                            "reason": r.get("reason", ""),
                            "contended": r.get("contended", ""),
                        }
                    rows.append(row)
    return rows


def speed(row: dict[str, Any], base: str, port: str) -> float | None:
    a, b = row.get(base), row.get(port)
    if not a or not b or not a["ok"] or not b["ok"] or not a["median_ms"] or not b["median_ms"]:
        return None
    return float(a["median_ms"]) / float(b["median_ms"])


def table(rows: list[dict[str, Any]], backends: list[str]) -> str:
    base, ports = backends[0], backends[1:]
    out = [
        "| program | kernel | "
        + " | ".join(f"{b} ms" for b in backends)
        + " | "
        + " | ".join(f"{p} vs {base}" for p in ports)
        + " |",
        "|---|---|" + "---:|" * (len(backends) + len(ports)),
    ]
    for row in rows:
        cells = []
        for b in backends:
            r = row.get(b)
            cells.append(
                f"{r['median_ms']:.4g}"
                if r and r["ok"] and r["median_ms"]
                else (r or {}).get("reason", row.get("error", "-"))[:80] or "-"
            )
        ratios = [speed(row, base, p) for p in ports]
        out.append(
            f"| {row['program']} | {row['kernel']} {row.get('size', '')} | "
            + " | ".join(c.replace("|", "/") for c in cells)
            + " | "
            + " | ".join(f"{x:.2f}x" if x else "-" for x in ratios)
            + " |"
        )
    for p in ports:
        per_kernel: dict[tuple[str, str], list[float]] = {}  # a kernel timed at several sizes counts once
        for r in rows:
            if (x := speed(r, base, p)) is not None:
                per_kernel.setdefault((r["program"], r["kernel"]), []).append(x)
        got = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in per_kernel.items()}
        if got:
            geo = math.exp(sum(math.log(x) for x in got.values()) / len(got))
            (lp, lk), low = min(got.items(), key=lambda t: t[1])
            out.append(
                f"\n{p} against {base}: geometric mean {geo:.2f}x over {len(got)} kernels (each kernel's sizes "
                f"averaged first); slowest {lp} {lk} {low:.2f}x; under 0.8x: {sum(1 for x in got.values() if x < 0.8)}"
            )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(HERE.parent.parent / "shared" / "corpus"))
    ap.add_argument(
        "--only", default="", help="programs, comma-separated (default: every Rodinia program with a run)"
    )
    ap.add_argument("--toolchain", default="nvcc", help="porter capture --toolchain (nvcc or cpu-runtime)")
    ap.add_argument(
        "--backend", action="append", default=[], help="backends timed; the first is the baseline"
    )
    ap.add_argument("--gpu-only", action="store_true", help="leave CPU devices out of the table")
    ap.add_argument(
        "--gpu-sizes", action="store_true", help="run each program at its gpu_runs sizes (default: its runs)"
    )
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per capture and per bench")
    ap.add_argument("--work", default="/tmp/porter-ocl-speed")
    ap.add_argument("--inputs", default="", help="where generated inputs go (default: WORK/inputs)")
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--md", default="", help="also write the table here after each program (a cut-off run keeps it)"
    )
    args = ap.parse_args()
    args.backend = args.backend or ["cuda", "opencl"]
    Path(args.work).mkdir(parents=True, exist_ok=True)
    table_src = tomllib.loads((HERE / "corpus_runs.toml").read_text(encoding="utf-8"))["programs"]
    wanted = [w for w in args.only.split(",") if w]
    names = wanted or [
        n
        for n, e in table_src.items()
        if e["path"].startswith("rodinia/") and (e.get("runs") or e.get("generated_runs"))
    ]
    porter = [sys.executable, "-m", "porter"]
    rows: list[dict[str, Any]] = []
    for name in names:
        rows += program_rows(name, table_src[name], args, porter)
        print(f"{name}: {sum(1 for r in rows if r['program'] == name)} rows", file=sys.stderr, flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
        if args.md:
            Path(args.md).write_text(table(rows, args.backend) + "\n", encoding="utf-8")
    print(table(rows, args.backend))
    return 0


if __name__ == "__main__":
    sys.exit(main())
