"""Whether a timing had the device to itself, and a mode that makes sure of it (``--exclusive``).

Porter times kernels in child processes; the candidates of a model's round are judged in threads, so
two timings can run on one GPU at once, and so can another user's job.  Each timing of
:func:`porter.harness.bench.benchmark` runs inside :func:`timing`, which says afterwards whether it was
*contended*: another of porter's timings ran on the same device meanwhile, or the device's driver
listed processes other than porter's own (:meth:`porter.backends.Backend.other_users`).  A contended
time is marked so in every report.  With :func:`set_exclusive` (``--exclusive``) porter's own timings
on one device run one at a time; other processes can only be reported, never stopped.

Several porter processes on one machine (the programs of ``porter port --suite``, run side by side) share
its GPUs: where :data:`LOCKS_ENV` names a folder, every timing gets its device's lock file there
(:attr:`Watch.lock_fd`, :mod:`porter.backends.device_locks`), which the timing child holds from its kernel's
load to its last timed launch, so timings on one device run one at a time across those processes too, while
the children's compiles and driver starts -- most of a timing's wall time -- overlap.  The programs' other
work on the GPU takes no lock: a time beside it is contended.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from porter.backends import Device, device_locks, get_backend
from porter.backends.device_locks import LOCKS_ENV

_state = threading.Lock()
_exclusive = False
_serial: dict[str, threading.Lock] = {}  # device label -> its timing lock (--exclusive)
_active: dict[str, int] = {}  # device label -> timings running on it now
_started: dict[str, int] = {}  # device label -> timings started on it so far


def set_exclusive(on: bool) -> None:
    """``--exclusive``: porter's timings on one device run one at a time (the others wait)."""
    global _exclusive
    _exclusive = on


def exclusive() -> bool:
    return _exclusive


@dataclass
class Watch:
    """What one timing saw: ``reason`` is "" when it had the device to itself."""

    device: str
    others: list[str] = field(default_factory=list)  # other processes on the device (driver's list)
    overlapped: int = 0  # porter's own timings that ran on the device at the same time
    # the device's lock file, open, for the timing child to hold while it times (Job.device_lock_fd); None
    # where LOCKS_ENV names no usable folder
    lock_fd: int | None = None

    @property
    def reason(self) -> str:
        parts = []
        if self.overlapped and self.lock_fd is None:  # with the lock, porter's timed launches never overlap
            parts.append(
                f"{self.overlapped} other timing{'s' if self.overlapped > 1 else ''} of porter ran on "
                f"{self.device} at the same time (--exclusive serialises them)"
            )
        if self.others:
            parts.append(f"other processes used {self.device}: {', '.join(self.others[:3])}")
        return "contended: " + "; ".join(parts) if parts else ""


@contextlib.contextmanager
def timing(device: Device) -> Iterator[Watch]:
    """One timing on `device`: waits for the device under --exclusive; the Watch says afterwards
    whether the time was contended.  Devices whose times say nothing of GPU speed are not watched."""
    watch = Watch(device.label)
    if not device.times:
        yield watch
        return
    key = device.physical  # one GPU seen through two backends is one device; two GPUs are two
    with _state:
        lock = _serial.setdefault(key, threading.Lock())
    with lock if _exclusive else contextlib.nullcontext(), device_locks.opened(key) as watch.lock_fd:
        with _state:
            watch.overlapped = _active.get(key, 0)
            _active[key] = _active.get(key, 0) + 1
            _started[key] = _started.get(key, 0) + 1
            began = _started[key]
        watch.others = other_users(device)
        try:
            yield watch
        finally:
            with _state:
                _active[key] -= 1
                # timings that started on the device while this one ran
                watch.overlapped += _started[key] - began


def other_users(device: Device) -> list[str]:
    """Processes other than porter and its children that the device's driver lists on `device`, and other
    than the timing children that hold or wait for its lock file (:func:`device_locks.lockers`: another
    program's timing that holds it ends before this one's timed launches begin)."""
    try:
        listed = get_backend(device.backend).other_users(device)
    except Exception:  # noqa: BLE001 - a driver that cannot say: nothing is known, nothing claimed
        return []
    if not listed:  # the common case: nothing to tell porter's own processes from
        return []
    mine = _own_tree() | device_locks.lockers(device.physical)
    return [f"{pid} {name}".strip() for pid, name in listed if pid not in mine]


def _own_tree() -> set[int]:
    """This process and its descendants (the timing children, the spares), from /proc."""
    parents: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    tree = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


__all__ = ["LOCKS_ENV", "Watch", "exclusive", "other_users", "set_exclusive", "timing"]
