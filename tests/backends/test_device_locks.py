"""A suite's GPU work holds the device's lock shared, a timing holds it exclusively, and a waiting timing goes
before new shared holders (porter.backends.device_locks)."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from porter.backends import Device, device_locks, isolate
from porter.backends.isolate import Job, JobResult

GPU = "pci:0000:1b:00"


@pytest.fixture
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(device_locks.LOCKS_ENV, str(tmp_path / "locks"))
    yield tmp_path / "locks"


def _held_exclusively_elsewhere(folder: Path) -> bool | None:
    """Whether another open file of the device's lock can take it exclusively now (False: someone holds it)."""
    fd = os.open(folder / "pci_0000_1b_00.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_shared_holders_run_side_by_side_and_a_timing_waits_for_them(locks: Path) -> None:
    events: list[str] = []
    gate = threading.Barrier(3)

    def work(name: str) -> None:
        with device_locks.shared(GPU):
            events.append(f"{name} in")
            gate.wait()  # both inside at once: a shared hold does not exclude another
            time.sleep(0.3)
            events.append(f"{name} out")

    def timing() -> None:
        gate.wait()
        with device_locks.opened(GPU) as files, device_locks.exclusive(files):
            events.append("timing in")
            events.append("timing out")

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")] + [
        threading.Thread(target=timing)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(events[:2]) == ["a in", "b in"]
    assert events.index("timing in") > max(events.index("a out"), events.index("b out"))
    assert _held_exclusively_elsewhere(locks)  # everything released


def test_a_waiting_timing_goes_before_work_that_asks_after_it(locks: Path) -> None:
    """Without the turnstile a stream of shared holders would starve the timing: here the work that asks
    while the timing waits starts only after the timing ends."""
    events: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with device_locks.shared(GPU):
            events.append("first in")
            first_in.set()
            time.sleep(0.5)
            events.append("first out")

    def timing() -> None:
        with device_locks.opened(GPU) as files, device_locks.exclusive(files):
            events.append("timing")

    def later() -> None:
        with device_locks.shared(GPU):
            events.append("later")

    a = threading.Thread(target=first)
    a.start()
    first_in.wait(5)
    t = threading.Thread(target=timing)
    t.start()
    time.sleep(0.15)  # the timing waits for `first`, holding the turnstile
    b = threading.Thread(target=later)
    b.start()
    for th in (a, t, b):
        th.join(10)
    assert events == ["first in", "first out", "timing", "later"]


def test_a_thread_holding_the_gpu_shared_takes_it_again_without_waiting(locks: Path) -> None:
    """A nested hold (a job run again without the cache inside the first's hold) never queues behind a
    timing waiting for the outer hold, which would wait for it in turn."""
    done = threading.Event()

    def timing() -> None:
        with device_locks.opened(GPU) as files, device_locks.exclusive(files):
            pass

    with device_locks.shared(GPU):
        t = threading.Thread(target=timing)
        t.start()
        time.sleep(0.15)  # the timing now holds the turnstile and waits
        with device_locks.shared(GPU):
            done.set()
        assert not _held_exclusively_elsewhere(locks)
    t.join(10)
    assert done.is_set() and not t.is_alive()


def test_without_a_locks_folder_nothing_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(device_locks.LOCKS_ENV, raising=False)
    with device_locks.shared(GPU), device_locks.opened(GPU) as files:
        assert files is None


def test_a_kernel_job_on_a_gpu_holds_its_lock_shared_and_a_timing_job_does_not(
    locks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_job holds the lock of a GPU job's device shared while its child runs; a timing job's child
    takes it exclusively itself, and a job on a CPU device takes nothing."""
    seen: list[bool | None] = []

    def child(job: Job, timeout_s: float) -> JobResult:
        folder = locks
        seen.append(
            _held_exclusively_elsewhere(folder) if (folder / "pci_0000_1b_00.lock").exists() else None
        )
        return JobResult(ok=True, stage="done")

    monkeypatch.setattr(isolate, "_run_job", child)
    gpu = Device("cuda", "NVIDIA H100", "sm_90", "gpu", uid=GPU)
    assert gpu.times
    isolate.run_job(Job(backend="cuda", source="", entry="k", device=gpu))
    isolate.run_job(Job(backend="cuda", source="", entry="k", device=gpu, device_lock_fd=99))
    isolate.run_job(
        Job(backend="cpu", source="", entry="k", device=Device("cpu", "cpu-emulator", "x86_64", "emulator"))
    )
    assert seen == [False, True, True]
