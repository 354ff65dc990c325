"""Where a command's CPU time goes: run COMMAND, sample every process of the machine from /proc while it
runs, and print the CPU seconds of its process tree by kind of process (porter itself, its kernel
children, compilers, the program's own runs, spares...), beside the wall time and the machine's total.

    python bench/cpu_breakdown.py [--every 0.2] [--json OUT.json] -- COMMAND ARGS...

A process is counted at its last sample (utime + stime from /proc/PID/stat), so one that lives shorter
than the sampling interval is missed, and its last interval too: the table's total is a
lower bound, the machine's total (/proc/stat) the check.  Kinds are matched on the command line
(``KINDS`` below, first match wins).  Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

KINDS = [  # (kind, pattern over the command line)
    ("kernel child (job)", r"porter\.backends\._child job"),
    ("kernel child (spare)", r"porter\.backends\._child serve"),
    ("kernel child (other)", r"porter\.backends\._child"),
    ("jail (bubblewrap/landlock)", r"porter\.sandbox\.jail|bwrap"),
    ("porter", r"-m porter\b|porter/__main__"),
    ("nvcc toolchain", r"nvcc|cicc|ptxas|cudafe|fatbinary|nvlink"),
    ("g++ / cc1plus / ld", r"cc1plus|cc1\b|g\+\+|/ld\b|collect2|\bas\b"),
    ("hipcc / clang", r"hipcc|clang|lld"),
    ("nvidia-smi", r"nvidia-smi"),
]
HZ = os.sysconf("SC_CLK_TCK")


# a kernel child's tag, the last word of its command line (backends/isolate.py _tag): backend/device kind
TAG = re.compile(r"porter\.backends\._child (?:job|serve) .* (\w+/\w+)$")


def kind_of(cmdline: str) -> str:
    for kind, pattern in KINDS:
        if re.search(pattern, cmdline):
            tag = TAG.search(cmdline) if kind.startswith("kernel child") else None
            return f"{kind[:-1]}, {tag.group(1)})" if tag else kind
    return "other: " + (cmdline.split()[0].rsplit("/", 1)[-1] if cmdline.split() else "?")


def snapshot() -> dict[int, tuple[int, float, str]]:
    """pid -> (parent pid, CPU seconds so far, command line)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = (
                Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except (OSError, IndexError):
            continue
        out[int(entry.name)] = (int(stat[1]), (int(stat[11]) + int(stat[12])) / HZ, cmd.strip())
    return out


def machine_cpu() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(x) for i, x in enumerate(fields) if i not in (3, 4))  # all but idle and iowait
    return busy / HZ


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--every", type=float, default=0.2)
    ap.add_argument("--json")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no command")
    start_cpu, start = machine_cpu(), time.monotonic()
    proc = subprocess.Popen(command)
    tree = {proc.pid}
    # a `timeout` around this script: stop the command as Ctrl-C would, then print the table
    stopped: list[float] = []  # when it is killed if it has not stopped by then

    def stop(signum: int, frame: object) -> None:
        if not stopped:
            stopped.append(time.monotonic() + 10)  # then 10 s for it to stop before it is killed
            proc.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, stop)
    seen: dict[int, tuple[float, str]] = {}  # pid -> (CPU s at its last sample, command line)
    while True:
        snap = snapshot()
        grew = True
        while grew:  # the tree: the command's process and every descendant alive now
            grew = False
            for pid, (parent, _, _) in snap.items():
                if parent in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree & snap.keys():
            _, cpu, cmd = snap[pid]
            seen[pid] = (cpu, cmd or (seen[pid][1] if pid in seen else ""))
        if proc.poll() is not None:
            break
        if stopped and time.monotonic() > stopped[0]:
            proc.kill()
        time.sleep(a.every)
    wall, machine = time.monotonic() - start, machine_cpu() - start_cpu
    by_kind: dict[str, list[float]] = {}
    for cpu, cmd in seen.values():
        row = by_kind.setdefault(kind_of(cmd), [0.0, 0])
        row[0] += cpu  # (every process of the tree started after the command did)
        row[1] += 1
    counted = sum(r[0] for r in by_kind.values())
    print(
        f"command: {' '.join(command)}  (exit {proc.returncode}{', stopped by SIGTERM' if stopped else ''})"
    )
    print(f"wall {wall:.1f} s; machine CPU {machine:.1f} s ({machine / wall:.1f} cores busy); "
          f"counted in its tree {counted:.1f} s over {len(seen)} processes\n")  # fmt: skip
    print("| kind | CPU s | processes |\n|---|---:|---:|")
    for kind, (cpu, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        print(f"| {kind} | {cpu:.1f} | {n} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"wall": wall, "machine_cpu": machine, "kinds": by_kind}))
    return proc.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
