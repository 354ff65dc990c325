"""porter.backends.device_locks: a suite's timings hold their GPU's lock file exclusively, one at a time;
nothing else takes it (holding it shared around every piece of GPU work stalled the suite on an H100)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from porter.backends import device_locks

GPU = "pci:0000:1b:00"


@pytest.fixture
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(device_locks.LOCKS_ENV, str(tmp_path / "locks"))
    yield tmp_path / "locks"


def test_two_timings_on_one_gpu_hold_its_lock_one_after_the_other(locks: Path) -> None:
    spans: list[tuple[float, float]] = []
    gate = threading.Barrier(2)

    def timing() -> None:
        with device_locks.opened(GPU) as fd:
            gate.wait()
            with device_locks.exclusive(fd):
                began = time.monotonic()
                time.sleep(0.2)
                spans.append((began, time.monotonic()))

    threads = [threading.Thread(target=timing) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    spans.sort()
    assert len(spans) == 2 and spans[1][0] >= spans[0][1]
    assert [p.name for p in locks.iterdir()] == ["pci_0000_1b_00.lock"]


def test_without_a_locks_folder_nothing_is_opened_or_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(device_locks.LOCKS_ENV, raising=False)
    with device_locks.opened(GPU) as fd, device_locks.exclusive(fd):
        assert fd is None
