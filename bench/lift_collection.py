"""Run `porter lift` on the loop-nest collection (samples/python/loop_nests.py), one function at a time,
and tabulate what happened against each function's ``expect:`` line: lifted and validated on every
target and device, refused (with porter's reason), or lifted wrongly (a verdict that ran and differed
from the Python -- caught by validation, so porter's failure, never the user's).

    .venv/bin/python bench/lift_collection.py [--sizes n=40,m=36,p=32,q=30,nr=6,nq=8,np_=10,steps=4] [--root DIR] [--only f,g]
        [--markdown OUT.md] [--jobs 1]

``--root DIR``: run the porter of another checkout (``git worktree add DIR <commit>``) -- its
``porter/`` package shadows this one's -- to measure a figure before a change.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECTION = ROOT / "samples" / "python" / "loop_nests.py"
SHADOW = (
    "import sys, importlib.util as u; root = sys.argv.pop(1); sys.path.insert(0, root); "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in getattr(f, '__name__', type(f).__name__)]; "
    "import porter\n"
    "for name, d in (('backends', 'backends'), ('grammars', 'grammars')):\n"
    "    s = u.spec_from_file_location('porter.' + name, f'{root}/{d}/__init__.py', submodule_search_locations=[f'{root}/{d}'])\n"
    "    m = u.module_from_spec(s); sys.modules['porter.' + name] = m; setattr(porter, name, m); s.loader.exec_module(m)\n"
    "from porter.cli import main; sys.argv[0] = 'porter'; sys.exit(main())"
)


def expectations(path: Path) -> dict[str, str]:
    """Each public function's ``expect: ...`` (lifted or refused), from its docstring."""
    out: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            doc = " ".join((ast.get_docstring(node) or "").split())
            out[node.name] = doc.split("expect:", 1)[1].strip() if "expect:" in doc else "?"
    return out


def run_one(function: str, sizes: str, root: str | None, timeout: float) -> dict[str, object]:
    got = _run_one(function, sizes, root, timeout)
    why = str(got["why"])
    if got["outcome"] == "error" and "which no lifted function has (sizes: " in why:
        # name only the sizes this function binds
        have = why.rsplit("(sizes: ", 1)[1].rstrip(")").split(", ")
        keep = ",".join(kv for kv in sizes.split(",") if kv.split("=")[0] in have)
        got = _run_one(function, keep, root, timeout)
    return got


def _run_one(function: str, sizes: str, root: str | None, timeout: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable]
        cmd += ["-c", SHADOW, root] if root else ["-m", "porter.cli"]
        cmd += ["lift", f"{COLLECTION}::{function}", "--sizes", sizes, "--out", tmp, "--fresh"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        took = time.monotonic() - t0
        report = Path(tmp) / "report.json"
        if not report.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no report"]
            return {"function": function, "outcome": "error", "why": tail[0][:200], "seconds": took}
        data = json.loads(report.read_text())
    for r in data.get("refused", []):
        if r.get("function") == function:
            return {"function": function, "outcome": "refused", "why": r.get("reason", ""), "seconds": took}
    for f in data.get("functions", []):
        if f.get("function") != function:
            continue
        verdicts = f.get("verdicts", [])
        # a checker that aborted (Oclgrind's FATAL ERROR) judged nothing: a failure, not a wrong result
        wrong = [
            v
            for v in verdicts
            if v.get("executed") and v.get("correct") is False and "FATAL ERROR" not in str(v.get("reason"))
        ]
        ran = [v for v in verdicts if v.get("executed")]  # a stack not installed here did not run
        bad = [v for v in ran if v.get("status") != "validated"]
        patterns = ", ".join(f.get("patterns", []))
        if wrong:
            v = wrong[0]
            return {
                "function": function,
                "outcome": "wrong (caught)",
                "why": f"{v['target']} {v['device']}: {v['reason']}",
                "seconds": took,
            }
        if bad or not ran:
            v = bad[0] if bad else {"target": "", "device": "", "reason": "no verdict"}
            return {
                "function": function,
                "outcome": "failed",
                "why": f"{v['target']} {v['device']}: {v['reason']}",
                "seconds": took,
            }
        return {"function": function, "outcome": "lifted+validated", "why": patterns, "seconds": took}
    return {"function": function, "outcome": "error", "why": "not in the report", "seconds": took}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="n=40,m=36,p=32,q=30,nr=6,nq=8,np_=10,steps=4")
    ap.add_argument("--root", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args()
    expect = expectations(COLLECTION)
    names = [n for n in expect if not args.only or n in args.only.split(",")]
    rows = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(lambda f: run_one(f, args.sizes, args.root, args.timeout), names):
            print(f"{r['function']}: {r['outcome']} -- {str(r['why'])[:160]}", flush=True)
            rows.append(r)
    lines = ["| function | expected | outcome | patterns / reason | s |", "|---|---|---|---|---|"]
    for r in rows:
        exp = expect[str(r["function"])].split(" ", 1)[0].rstrip(":")
        why = str(r["why"]).replace("|", "\\|")
        lines.append(f"| {r['function']} | {exp} | {r['outcome']} | {why} | {float(r['seconds']):.0f} |")  # type: ignore[arg-type]
    ok = sum(r["outcome"] == "lifted+validated" for r in rows)
    wrong = sum(str(r["outcome"]).startswith("wrong") for r in rows)
    refused = sum(r["outcome"] == "refused" for r in rows)
    summary = f"{ok}/{len(rows)} lifted and validated ({100 * ok / max(1, len(rows)):.0f}%), {refused} refused, {wrong} wrong (caught), {len(rows) - ok - refused - wrong} other"
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
