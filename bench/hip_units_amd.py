"""Do the HIP ports of the development corpus compile for AMD?  One Markdown row per program.

    python bench/hip_units_amd.py [--corpus ../shared/corpus] [--only name,name] [--out /tmp/porter-hip-amd]
                                  [--jobs N] [--json units.json]

Each program of bench/corpus_runs.toml is ported to HIP with the CLI and nothing run (``porter port DIR
--to hip``): every unit that reaches a kernel is compiled as device code for the first AMD arch a compiler
here reaches (dialect.toml's ``compile_archs``: gfx90a with Debian's hipcc).  A program's whole-program
verdict on porter's CPU runtime or on NVIDIA (HIP on CUDA) says nothing about this: those build the port
against porter's own headers, not AMD's.  The row names each unit that does not compile and the
compiler's first error.  The corpus is third-party code: it is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _units(report: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """status -> [(unit, reason)] of the program's HIP units that were compiled as device code or refused
    (a header or a host-only file stays "translated": nothing of its own to compile; "translated" with a
    reason means no compiler here could check it)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for f in report["program"]["files"]:
        t = f["targets"].get("hip")
        if t is None or (t["status"] == "translated" and not t["reason"]):
            continue
        if t["status"] in ("compiled", "failed", "untranslatable", "translated"):
            out.setdefault(t["status"], []).append((f["path"], t["reason"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(HERE.parent.parent / "shared" / "corpus"))
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="/tmp/porter-hip-amd")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    table = tomllib.loads((HERE / "corpus_runs.toml").read_text(encoding="utf-8"))["programs"]
    wanted = {w for w in args.only.split(",") if w}
    corpus = Path(args.corpus)
    names = [n for n, e in table.items() if (not wanted or n in wanted) and (corpus / e["path"]).is_dir()]

    def port(name: str) -> tuple[str, dict[str, list[tuple[str, str]]] | str, float]:
        entry = table[name]
        cmd = [sys.executable, "-m", "porter", "port", str(corpus / entry["path"]), "--to", "hip"]
        cmd += ["--out", f"{args.out}/{name}", "--fresh"]
        for inc in entry.get("include", []):
            cmd += ["-I", str(corpus / inc)]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.monotonic() - start
        try:
            report = json.loads(Path(args.out, name, "report.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return name, f"no report (exit {proc.returncode}): {proc.stderr.strip()[-200:]}", seconds
        return name, _units(report), seconds

    results: dict[str, Any] = {}
    print("| program | HIP units compiled for AMD | not compiled (the compiler's first error) | s |")
    print("|---|---:|---|---:|")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for done in as_completed([pool.submit(port, n) for n in names]):
            name, units, seconds = done.result()
            results[name] = units
            if isinstance(units, str):
                print(f"| {name} | - | {units} | {seconds:.0f} |", flush=True)
                continue
            ok = len(units.get("compiled", []))
            bad = [(u, r) for status, rows in units.items() if status != "compiled" for u, r in rows]
            total = ok + len(bad)
            shown = "; ".join(f"`{u}` {r.split(': ', 1)[-1][:110]}" for u, r in bad) or "-"
            print(f"| {name} | {ok} of {total} | {shown} | {seconds:.0f} |", flush=True)
    programs = [u for u in results.values() if not isinstance(u, str)]
    every = sum(1 for u in programs if set(u) <= {"compiled"})
    units = sum(len(rows) for u in programs for rows in u.values())
    compiled = sum(len(u.get("compiled", [])) for u in programs)
    print(
        f"\n{every} of {len(results)} programs: every HIP unit compiles for AMD; {compiled} of {units} units"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
