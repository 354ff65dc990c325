"""The lock files through which porter processes sharing a machine's GPUs keep their timings clean.

Where :data:`LOCKS_ENV` names a folder (``porter port --suite`` sets it for the programs it runs side by side),
each GPU has a lock file there, named after its :attr:`~porter.backends.Device.physical` identity (the CUDA and
the OpenCL view of one GPU share it), and a *turnstile* file beside it:

* every other piece of porter's work on that GPU -- a kernel child (:func:`porter.backends.isolate.run_job`),
  a program's run or capture -- holds the lock **shared** while it runs (:func:`shared`, in the parent,
  around the child process), so such work runs side by side as before;
* a timing child holds it **exclusively** from loading its kernel to its last timed launch
  (:func:`exclusive`, with the descriptors its parent opened: :func:`opened`), so while it times nothing
  else of the suite runs on that GPU.

``flock`` alone would let a stream of shared holders starve a timing waiting for the exclusive hold; the
turnstile gives the waiting timing priority: a timing takes the turnstile, waits for the lock, and lets the
turnstile go once it holds the lock; a shared holder passes the turnstile (takes and drops it) before taking
the lock, so none starts while a timing waits.  Nothing waits on a lock while holding one of the same device
except through the turnstile, in that order, so there is no cycle; a thread already holding a device's
shared hold does not take it again (a nested hold would queue behind a waiting timing that waits for it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

LOCKS_ENV = "PORTER_DEVICE_LOCKS"
# the process id of the suite's driver: the processes under it hold the locks around their GPU work
SUITE_ROOT_ENV = "PORTER_SUITE_ROOT"
TURNSTILE = ".turnstile"

_held = threading.local()  # physical device -> depth of this thread's shared hold


@dataclass(frozen=True)
class LockFiles:
    """A device's lock file and turnstile, open (descriptors a timing child inherits)."""

    lock: int
    turnstile: int | None  # None: the lock alone (timings exclude one another; nothing gives them priority)


def folder() -> str:
    return os.environ.get(LOCKS_ENV, "")


def _path(physical: str) -> str:
    return os.path.join(folder(), re.sub(r"[^A-Za-z0-9._-]", "_", physical) + ".lock")


@contextlib.contextmanager
def opened(physical: str) -> Iterator[LockFiles | None]:
    """The lock file and turnstile of the device `physical` names, open and not held (None where
    :data:`LOCKS_ENV` names no folder, or one that cannot be used); closed afterwards."""
    if not folder():
        yield None
        return
    path = _path(physical)
    fds: list[int] = []
    try:
        os.makedirs(folder(), exist_ok=True)
        for name in (path, path + TURNSTILE):
            fds.append(os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError:
        for fd in fds:
            os.close(fd)
        yield None
        return
    try:
        yield LockFiles(fds[0], fds[1])
    finally:
        for fd in fds:
            os.close(fd)


@contextlib.contextmanager
def exclusive(files: LockFiles | None) -> Iterator[None]:
    """Hold the device exclusively (a timing child, from its kernel's load to its last timed launch): the
    turnstile first, so no new shared holder starts meanwhile, then the lock once the shared holders left."""
    if files is None:
        yield
        return
    if files.turnstile is not None:
        fcntl.flock(files.turnstile, fcntl.LOCK_EX)
    try:
        fcntl.flock(files.lock, fcntl.LOCK_EX)
    finally:
        if files.turnstile is not None:
            fcntl.flock(files.turnstile, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(files.lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def shared(physical: str | None) -> Iterator[None]:
    """Hold the device `physical` names shared while porter's work other than a timing runs on it (None, no
    :data:`LOCKS_ENV`, or this thread holding it already: nothing to take)."""
    depth: dict[str, int] = _held.__dict__.setdefault("depth", {})
    if not physical or depth.get(physical, 0) > 0:
        depth[physical or ""] = depth.get(physical or "", 0) + 1
        try:
            yield
        finally:
            depth[physical or ""] -= 1
        return
    with opened(physical) as files:
        if files is None:
            yield
            return
        assert files.turnstile is not None
        fcntl.flock(files.turnstile, fcntl.LOCK_EX)  # behind a timing that waits
        fcntl.flock(files.turnstile, fcntl.LOCK_UN)
        fcntl.flock(files.lock, fcntl.LOCK_SH)
        depth[physical] = 1
        try:
            yield
        finally:
            depth[physical] = 0
            fcntl.flock(files.lock, fcntl.LOCK_UN)


__all__ = ["LOCKS_ENV", "SUITE_ROOT_ENV", "LockFiles", "exclusive", "folder", "opened", "shared"]
