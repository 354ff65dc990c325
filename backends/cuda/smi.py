"""The processes NVIDIA's driver lists on a GPU (``nvidia-smi --query-compute-apps``): whether a timing
shared the GPU with another job (:mod:`porter.harness.contention`)."""

from __future__ import annotations

import csv
import shutil
import subprocess

QUERY_TIMEOUT_S = 10.0


def compute_apps(index: int) -> list[tuple[int, str]]:
    """(pid, process name) of every compute process on GPU `index`; empty where nvidia-smi is missing,
    fails or lists none."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        done = subprocess.run(
            [tool, "--query-compute-apps=pid,process_name", "--format=csv,noheader", "-i", str(index)],
            capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    found = []
    for row in csv.reader(done.stdout.splitlines()):
        if len(row) >= 2 and row[0].strip().isdigit():
            found.append((int(row[0].strip()), row[1].strip()))
    return found
