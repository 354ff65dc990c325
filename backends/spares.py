"""Warm children: isolated child processes started before their job is known, so a job does not wait for
an interpreter, NumPy, the backend's runtime and (on a GPU) a driver context to come up.

A job's child costs about 0.45 s before its kernel runs on the CPU machine and about 1 s on the H200
(``bench/child_start.py``), which dominated re-validating a kernel from a capture.  Inside
:func:`warm_children` (the workflows that run many jobs enter it), :func:`porter.backends.isolate.run_job`
keeps *spares*: children already started in the sandbox plan a job of the same key would get (backend,
device, limits, readable folders, environment), with the backend imported and the device's driver
initialised, blocked on their standard input.  A job with that key is written into a spare's scratch
folder and the spare told to go; a new spare is started at once for the next job of the key.

What does not change: every job still runs in its own fresh child, which runs exactly one job and exits
(a spare never serves a second job, so nothing one variant leaves in a process reaches another); the
child reads its job, enters the sandbox and locks down as a cold child does, after its warm-up, which
runs porter's code only; the parent alone judges what comes back.  A spare that died while waiting is
discarded and the job starts cold.  Spares are killed when the ``with`` block ends, when porter exits,
and, through their closed standard input or bubblewrap's ``--die-with-parent``, when porter dies.

``PORTER_SPARES=0`` turns them off; ``PORTER_SPARES=N`` keeps up to N per key (default: 1 on a machine of
4 or more processors, 0 on a smaller one, where an unused spare only competes with the jobs).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pickle
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

MAX_SPARES = 6  # over every key: older spares are stopped first
MIN_CPUS = 4  # below this, spares are off unless PORTER_SPARES asks for them
ENV = "PORTER_SPARES"  # spares kept per key (0: none)


@dataclass
class Spare:
    """A started child waiting for its job in `work` (job.pkl, result/, progress.json, output.log)."""

    key: tuple[Any, ...]
    work: Path
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    plan: Any  # the sandbox.Plan it was started under
    started: float = field(default_factory=time.monotonic)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        """Warmed up and waiting (the child writes ``ready`` into its folder then)."""
        return (self.work / "ready").exists()

    def stop(self) -> None:
        kill_group(self.proc)
        self.discard()

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.log.close()
        shutil.rmtree(self.work, ignore_errors=True)
        if getattr(self.plan, "cache", ""):  # its compile-cache outbox (porter.cache.make_outbox)
            shutil.rmtree(self.plan.cache, ignore_errors=True)


_LOCK = threading.Lock()
_POOL: dict[tuple[Any, ...], list[Spare]] = {}
_ACTIVE = 0  # nesting depth of warm_children()
_OWNER = os.getpid()  # spares belong to the process that started them (not to forked workers)
_STATS = {"taken": 0, "cold": 0, "started": 0}


def per_key() -> int:
    """Spares kept per key: ``PORTER_SPARES``, else one where the machine has processors to spare (4 or
    more: a spare's start then overlaps porter's own work), none on smaller ones (where a spare that no
    job takes would only compete with the jobs)."""
    default = 1 if (os.cpu_count() or 1) >= MIN_CPUS else 0
    text = os.environ.get(ENV, str(default)).strip()
    try:
        return max(0, int(text))
    except ValueError:
        return default


def enabled() -> bool:
    return _ACTIVE > 0 and os.getpid() == _OWNER and per_key() > 0


@contextlib.contextmanager
def warm_children() -> Iterator[None]:
    """Keep spares for the jobs run inside the block; stop every spare when the outermost block ends."""
    global _ACTIVE
    with _LOCK:
        _ACTIVE += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE -= 1
            last = _ACTIVE == 0
        if last:
            stop_all()


def warm(fn: F) -> F:
    """Run `fn` (a workflow that runs many jobs) inside :func:`warm_children`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with warm_children():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


def settle(timeout_s: float = 10.0) -> None:
    """Wait (at most `timeout_s`) until no spare is still warming up: a timed job then has the
    machine's processors to itself."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with _LOCK:
            busy = [s for spares in _POOL.values() for s in spares if s.alive() and not s.ready()]
        if not busy:
            return
        time.sleep(0.02)


def stats() -> dict[str, int]:
    """How many jobs found a warm child, how many started cold, how many spares were started."""
    return dict(_STATS)


def take(key: tuple[Any, ...]) -> Spare | None:
    """A live spare for `key` (removed from the pool), or None."""
    if not enabled():
        return None
    with _LOCK:
        spares = _POOL.get(key, [])
        while spares:
            spare = spares.pop(0)
            if spare.alive():
                _STATS["taken"] += 1
                return spare
            spare.discard()
        _STATS["cold"] += 1
    return None


def refill(key: tuple[Any, ...], start: Callable[[], Spare | None]) -> None:
    """Start spares for `key` until it has its share (`start` makes one; None when it cannot)."""
    if not enabled():
        return
    while True:
        with _LOCK:
            if len(_POOL.get(key, [])) >= per_key():
                return
        spare = start()
        if spare is None:
            return
        with _LOCK:
            if not enabled():  # the block ended meanwhile
                spare.stop()
                return
            _POOL.setdefault(key, []).append(spare)
            _STATS["started"] += 1
            extra = _over_cap()
        for old in extra:
            old.stop()


def _over_cap() -> list[Spare]:
    """The oldest spares beyond MAX_SPARES, removed from the pool (caller holds the lock)."""
    every = sorted((s for spares in _POOL.values() for s in spares), key=lambda s: s.started)
    extra = every[: max(0, len(every) - MAX_SPARES)]
    for spare in extra:
        _POOL[spare.key].remove(spare)
    return extra


def stop_all() -> None:
    if os.getpid() != _OWNER:
        return
    with _LOCK:
        every = [s for spares in _POOL.values() for s in spares]
        _POOL.clear()
    for spare in every:
        spare.stop()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill a child's whole process group (its session: the child started it) and reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: the child's pid is its group id
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()


def new_work() -> Path:
    return Path(tempfile.mkdtemp(prefix="porter-job-"))


def write_warm(work: Path, warm: Any) -> Path:
    path = work / "warm.pkl"
    path.write_bytes(pickle.dumps(warm, protocol=pickle.HIGHEST_PROTOCOL))
    return path


atexit.register(stop_all)
