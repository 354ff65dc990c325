"""What NVIDIA's driver tool says (``nvidia-smi``): the processes on a GPU (whether a timing shared the GPU
with another job, :mod:`porter.harness.contention`), and the GPUs a process may use, each with the
environment that pins a child to it (``porter port --suite`` spreads programs over them)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess

from porter.backends import GpuSlot, pci_uid

QUERY_TIMEOUT_S = 10.0


def _query(args: list[str]) -> list[list[str]] | None:
    """nvidia-smi's CSV rows for `args` (stripped cells); None where it is missing or fails."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [tool, *args, "--format=csv,noheader"], capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [[cell.strip() for cell in row] for row in csv.reader(done.stdout.splitlines()) if row]


def gpu_slots() -> list[GpuSlot]:
    """The GPUs nvidia-smi lists that this process may use (all, or those its ``CUDA_VISIBLE_DEVICES``
    names by index or UUID), each pinned by its UUID: ``CUDA_VISIBLE_DEVICES=GPU-...`` in a child (CUDA,
    HIP on CUDA and NVIDIA's OpenCL all honour it)."""
    rows = _query(["--query-gpu=index,uuid,pci.bus_id,name"]) or []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    allowed = None if visible is None else [v.strip() for v in visible.split(",") if v.strip()]
    slots = []
    for row in rows:
        if len(row) < 4 or not row[1].startswith("GPU-"):
            continue
        index, uuid, bus, name = row[:4]
        if allowed is not None and not any(
            a == index or (len(a) > 4 and uuid.startswith(a)) for a in allowed
        ):
            continue
        parts = bus.replace(".", ":").split(":")  # 00000000:1B:00.0 -> domain, bus, device, function
        uid = pci_uid(*(int(p, 16) for p in parts[:3])) if len(parts) >= 3 and all(
            c in "0123456789abcdefABCDEF" for p in parts[:3] for c in p
        ) else ""  # fmt: skip
        slots.append(GpuSlot(uid or uuid, name, (("CUDA_VISIBLE_DEVICES", uuid),)))
    return slots


def bus_id(uid: str) -> str:
    """nvidia-smi's form of a device's PCI uid ("pci:0000:1b:00" -> "0000:1b:00.0"), "" for any other."""
    return uid[4:] + ".0" if uid.startswith("pci:") else ""


def compute_apps(index: int | str) -> list[tuple[int, str]]:
    """(pid, process name) of every compute process on GPU `index` (nvidia-smi's index, or a PCI bus id,
    which stays right where CUDA_VISIBLE_DEVICES renumbers the process's GPUs); empty where nvidia-smi is
    missing, fails or lists none."""
    rows = _query(["--query-compute-apps=pid,process_name", "-i", str(index)]) or []
    return [(int(row[0]), row[1]) for row in rows if len(row) >= 2 and row[0].isdigit()]
