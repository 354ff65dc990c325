"""`porter port DIR --run` with two checkouts of porter on the same programs: time and verdicts side by side.

    python bench/port_before_after.py --before /path/to/older/checkout [--corpus ../shared/corpus]
                                      [--only smooth,vectorAdd] [--repeat 1] [--out /tmp/porter-ab]

Each checkout runs from its own folder with its own virtual environment (``<checkout>/.venv``), as a user
would run it: ``python -m porter port DIR --to hip,opencl --run ARGS --toolchains cpu-runtime --fresh
--json``.  The programs are the bundled sample (samples/programs/smooth) and the corpus programs
tests/e2e/test_corpus_replay.py holds to their verdicts (bench/corpus_runs.toml gives their runs); each
is copied to a scratch folder first (a run writes beside itself).  The two checkouts alternate, so
neither always runs on a warm cache.  Printed: a Markdown table (seconds of each, and whether every
(kernel, instance, variant, device) replay verdict, build verdict and program verdict is the same),
then every difference.  The corpus is third-party code: it is read, never copied into the project.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS_TESTED = (
    "vectorAdd",
    "matrixMul",
    "scalarProd",
    "simpleTemplates",
    "gaussian",
    "lud",
    "nw",
    "pathfinder",
    "lavaMD",
)


def verdicts(doc: dict[str, Any]) -> set[tuple[str, ...]]:
    """What a report concluded, as comparable rows (reasons left out: their wording may change)."""
    rows: set[tuple[str, ...]] = set()
    for k in doc.get("kernels", []):
        for r in k.get("replays", []):
            rows.add(
                ("replay", k["name"], r.get("instance", ""), r["variant"], r.get("device", ""), r["status"])
            )
    prog = doc.get("program", {})
    for f in prog.get("files", []):
        for target, t in f.get("targets", {}).items():
            rows.add(("file", f["path"], target, t["status"]))
    for b in prog.get("build", {}).get("programs", []):
        rows.add(("build", b["variant"], b["toolchain"], b["status"]))
    for target, v in prog.get("verdicts", {}).items():
        rows.add(("program", target, v.get("status", "")))
    return rows


def port(
    checkout: Path, src: Path, out: Path, include: list[str], runs: list[str]
) -> tuple[float, dict[str, Any]]:
    cmd = [str(checkout / ".venv" / "bin" / "python"), "-m", "porter", "port", str(src), "--to", "hip,opencl"]
    cmd += ["--out", str(out), "--json", "--fresh", "--toolchains", "cpu-runtime", "--timeout", "300"]
    for inc in include:
        cmd += ["-I", inc]
    for run in runs:
        cmd += ["--run", run]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=checkout)
    seconds = time.monotonic() - start
    try:
        return seconds, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return seconds, {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="the older checkout (with its own .venv)")
    ap.add_argument("--after", default=str(ROOT), help="the newer checkout (default: this one)")
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--only", default="")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default="/tmp/porter-ab")
    args = ap.parse_args()
    table = tomllib.loads((HERE / "corpus_runs.toml").read_text(encoding="utf-8"))["programs"]
    corpus = Path(args.corpus)
    programs: dict[str, tuple[Path, list[str], list[str]]] = {
        "smooth (sample)": (ROOT / "samples" / "programs" / "smooth", [], ["./smooth data/values.txt 4"])
    }
    for name in CORPUS_TESTED:
        entry = table[name]
        if (corpus / entry["path"]).is_dir():
            programs[name] = (
                corpus / entry["path"],
                [str(corpus / inc) for inc in entry.get("include", [])],
                list(entry.get("runs", [])),
            )
    wanted = {w for w in args.only.split(",") if w}
    checkouts = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    scratch = Path(args.out)
    shutil.rmtree(scratch, ignore_errors=True)
    lines, differences = [], []
    total = {"before": 0.0, "after": 0.0}
    for n, (name, (folder, include, runs)) in enumerate(programs.items()):
        if wanted and name.split()[0] not in wanted:
            continue
        seconds: dict[str, list[float]] = {"before": [], "after": []}
        found: dict[str, set[tuple[str, ...]]] = {}
        for rep in range(args.repeat):
            order = ["before", "after"] if (n + rep) % 2 == 0 else ["after", "before"]
            for which in order:
                src = scratch / which / f"src-{rep}" / folder.name
                shutil.copytree(folder, src)
                took, doc = port(
                    checkouts[which], src, scratch / which / f"out-{rep}" / folder.name, include, runs
                )
                seconds[which].append(took)
                found[which] = verdicts(doc) if "error" not in doc else {("error", doc["error"])}
        best = {w: min(s) for w, s in seconds.items()}
        for w in total:
            total[w] += best[w]
        same = found["before"] == found["after"]
        replays = sum(1 for r in found["after"] if r[0] == "replay")
        validated = sum(1 for r in found["after"] if r[0] == "replay" and r[-1] == "validated")
        lines.append(
            f"| {name} | {best['before']:.1f} | {best['after']:.1f} | {validated}/{replays} | "
            f"{'same' if same else '**differ**'} |"
        )
        print(lines[-1], flush=True)
        if not same:
            differences += [f"{name}: only before: {r}" for r in sorted(found["before"] - found["after"])]
            differences += [f"{name}: only after: {r}" for r in sorted(found["after"] - found["before"])]
    print()
    print("| program | before (s) | after (s) | replays validated (after) | verdicts |")
    print("|---|---|---|---|---|")
    print("\n".join(lines))
    print(f"| total | {total['before']:.1f} | {total['after']:.1f} | | |")
    for d in differences:
        print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
