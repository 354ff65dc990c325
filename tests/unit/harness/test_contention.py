"""A timing says when the GPU was not porter's alone (issue #36: times that agree), and --exclusive
serialises porter's own timings on one device."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from porter.backends import BackendBase, Device, register_backend, unregister
from porter.backends._child import device_lock
from porter.backends.cuda.smi import compute_apps
from porter.backends.isolate import Job

from porter.harness import contention
from porter.report.program_view import contended_notes, markdown
from porter.results import KernelReplay, ProgramKernel, ProgramReport

NAME = "busygpu"
LISTED: list[tuple[int, str]] = []


class _Busy(BackendBase):
    name = NAME

    def other_users(self, device: Device) -> list[tuple[int, str]]:
        return list(LISTED)


@pytest.fixture
def gpu() -> Iterator[Device]:
    register_backend(NAME, _Busy, replace=True)
    LISTED.clear()
    contention.set_exclusive(False)
    yield Device(NAME, "Busy GPU", "sm_90", "gpu")
    contention.set_exclusive(False)
    unregister(NAME)


@contextlib.contextmanager
def _timed_launches(lock_fd: int | None) -> Iterator[None]:
    """What the timing child does with the descriptor it inherits (porter.backends._child.device_lock)."""
    with device_lock(Job(backend=NAME, source="", entry="", device_lock_fd=lock_fd)):
        yield


def _overlapping(device: Device, other: Device | None = None) -> tuple[list[str], list[tuple[float, float]]]:
    reasons: list[str] = []
    spans: list[tuple[float, float]] = []
    gate = threading.Barrier(2)

    def one(on: Device) -> None:
        gate.wait()
        with contention.timing(on) as watch:
            time.sleep(0.1)  # the child's compile and load: never serialised
            with _timed_launches(watch.lock_fd):
                began = time.monotonic()
                time.sleep(0.2)
                spans.append((began, time.monotonic()))
        reasons.append(watch.reason)

    threads = [threading.Thread(target=one, args=(d,)) for d in (device, other or device)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return reasons, sorted(spans)


def test_two_timings_at_once_on_one_gpu_are_both_contended(gpu: Device) -> None:
    reasons, spans = _overlapping(gpu)
    assert spans[1][0] < spans[0][1]  # they did overlap
    assert len(reasons) == 2 and all(
        r == "contended: 1 other timing of porter ran on busygpu:Busy GPU at the same time (--exclusive "
        "serialises them)"
        for r in reasons
    ), reasons


def test_exclusive_times_one_at_a_time_and_nothing_is_contended(gpu: Device) -> None:
    contention.set_exclusive(True)
    reasons, spans = _overlapping(gpu)
    assert spans[1][0] >= spans[0][1]  # the second waited for the first
    assert reasons == ["", ""]


def test_device_lock_files_serialise_timings_across_porter_processes(
    gpu: Device, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suite's programs (PORTER_DEVICE_LOCKS): each timing's child holds its device's lock file (flock)
    around its timed launches, so those never overlap -- between threads here as between processes -- and
    are not marked contended; the lock is free after."""
    import fcntl

    monkeypatch.setenv(contention.LOCKS_ENV, str(tmp_path / "locks"))
    reasons, spans = _overlapping(gpu)
    assert spans[1][0] >= spans[0][1] and reasons == ["", ""]
    (lock,) = (tmp_path / "locks").iterdir()
    assert lock.name == "busygpu_Busy_GPU.lock"
    with contention.timing(gpu) as watch, _timed_launches(watch.lock_fd):  # a timing child's hold
        fd = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: another process would wait
        finally:
            os.close(fd)


def test_two_gpus_of_one_model_time_side_by_side_and_two_views_of_one_gpu_do_not(
    gpu: Device, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine of several GPUs each suite program sees its GPU as device 0 (CUDA_VISIBLE_DEVICES): the
    same label, but its PCI address tells the GPUs apart; the CUDA and the OpenCL view of one GPU are one."""
    monkeypatch.setenv(contention.LOCKS_ENV, str(tmp_path / "locks"))
    first, second = replace(gpu, uid="pci:0000:1b:00"), replace(gpu, uid="pci:0000:43:00")
    assert first.label == second.label
    contention.set_exclusive(True)
    reasons, spans = _overlapping(first, second)
    assert spans[1][0] < spans[0][1] and reasons == ["", ""]  # ran at once, and neither was contended
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == [
        "pci_0000_1b_00.lock",
        "pci_0000_43_00.lock",
    ]
    contention.set_exclusive(False)
    as_opencl = replace(first, backend=NAME, name="Busy GPU (OpenCL)")
    reasons, spans = _overlapping(first, as_opencl)
    assert spans[1][0] >= spans[0][1] and reasons == ["", ""]  # one GPU: its lock file serialised them


def test_other_processes_on_the_gpu_make_a_time_contended_but_porters_own_do_not(gpu: Device) -> None:
    LISTED[:] = [(os.getpid(), "python"), (999_999_999, "train.py")]  # porter itself, and another job
    with contention.timing(gpu) as watch:
        pass
    assert watch.reason == "contended: other processes used busygpu:Busy GPU: 999999999 train.py"
    LISTED[:] = [(os.getpid(), "python")]
    with contention.timing(gpu) as alone:
        pass
    assert alone.reason == ""


def test_a_cpu_device_is_never_watched(gpu: Device) -> None:
    LISTED[:] = [(999_999_999, "train.py")]
    with contention.timing(Device(NAME, "cpu-emulator", "x86_64", "emulator")) as watch:
        pass
    assert watch.reason == ""


def test_the_gpus_processes_are_read_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "nvidia-smi"
    tool.write_text(
        '#!/bin/sh\ncase "$*" in *--query-compute-apps=pid,process_name*"-i 1"*) ;; *) exit 9;; esac\n'
        "printf '4242, /usr/bin/python3\\n77, ./md_sim\\n'\n",
        encoding="utf-8",
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert compute_apps(1) == [(4242, "/usr/bin/python3"), (77, "./md_sim")]
    assert compute_apps(0) == []  # nvidia-smi failed: nothing is claimed
    assert compute_apps("0000:1b:00.0") == []  # by PCI bus id (another GPU here)


def test_a_contended_replay_time_is_marked_and_its_reason_is_in_the_notes() -> None:
    why = "contended: other processes used cuda:NVIDIA H200: 77 ./md_sim"
    row = KernelReplay(
        "hip", "hip:NVIDIA H200", "validated", time_ms=7.7, time_iqr_ms=0.1, original_ms=10.27,
        speedup=10.27 / 7.7, contended=why,
    )  # fmt: skip
    report = ProgramReport(
        "prog", "prog.ported", ("hip",), kernels=[ProgramKernel("saxpy", "main.cu", 3, replays=[row])]
    )
    assert contended_notes(report) == [f"time of saxpy, hip on hip:NVIDIA H200: {why}"]
    text = markdown(report)
    # the speedup is the ratio of the two times shown beside it, and the row says the GPU was shared
    assert "7.7 ms (0.1), 1.33x the original (10.27 ms beside it) (contended)" in text
    assert f"- time of saxpy, hip on hip:NVIDIA H200: {why}" in text


def test_a_devices_pci_address_is_its_uid() -> None:
    from porter.backends import pci_uid

    assert pci_uid(0, 0x1B, 0) == "pci:0000:1b:00" and pci_uid(None, 3, 0) == "" and pci_uid("x", 1, 2) == ""


def test_nvidias_opencl_pci_slot_is_the_device_number() -> None:
    """cl_nv_device_attribute_query as NVIDIA's driver 580 answers it for an H100 at 00:06.0 (nvidia-smi's
    bus id; the CUDA view's uid pci:0000:00:06): bus 0, slot 6, domain 0 -- the slot is not device << 3."""
    import types

    from porter.backends.opencl.devices import _pci_uid

    codes = {"PCI_BUS_ID_NV": 0x4008, "PCI_SLOT_ID_NV": 0x4009, "PCI_DOMAIN_ID_NV": 0x400A}
    answers = {0x4008: 0, 0x4009: 6, 0x400A: 0}
    cl = types.SimpleNamespace(device_info=types.SimpleNamespace(**codes))
    device = types.SimpleNamespace(
        extensions="cl_khr_fp64 cl_nv_device_attribute_query", get_info=answers.get
    )
    assert _pci_uid(cl, device) == "pci:0000:00:06"
    answers[0x4008] = 0x1B  # another bus: the bus number is kept as it is
    assert _pci_uid(cl, device) == "pci:0000:1b:06"


@pytest.mark.gpu
def test_an_nvidia_gpu_is_known_by_its_pci_address_to_cuda_and_opencl() -> None:
    from porter.backends import get_backend

    gpus = [d for d in get_backend("cuda").devices() if d.times]
    if not gpus:
        pytest.skip("no CUDA device visible to CuPy")
    assert all(d.uid.startswith("pci:") for d in gpus), [d.uid for d in gpus]
    assert len({d.uid for d in gpus}) == len(gpus)
    # NVIDIA's OpenCL, where it is registered (bench/h200_env.sh does), names the same GPUs the same way
    opencl = [d for d in get_backend("opencl").devices() if d.times and "NVIDIA" in d.name]
    if opencl:
        assert {d.uid for d in opencl} == {d.uid for d in gpus}, [(d.label, d.uid) for d in opencl + gpus]


def test_timing_children_holding_or_awaiting_the_lock_are_not_contention(
    gpu: Device, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a suite the driver lists other programs' timing children on the GPU: one holding the device's lock
    file (its timed launches end before this timing's begin) and those waiting for it (they run nothing
    meanwhile) are read from the kernel's lock table and are no contention; any other process still is."""
    import subprocess
    import sys

    from porter.backends import device_locks

    monkeypatch.setenv(contention.LOCKS_ENV, str(tmp_path / "locks"))
    hold = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); time.sleep(60)"
    with contention.timing(gpu):  # creates the lock file
        pass
    path = device_locks.path_of(gpu.physical)
    children = [subprocess.Popen([sys.executable, "-c", hold, path]) for _ in range(2)]
    try:
        deadline = time.monotonic() + 20
        while device_locks.lockers(gpu.physical) != {c.pid for c in children} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert device_locks.lockers(gpu.physical) == {c.pid for c in children}  # one holds, one waits
        LISTED[:] = [(children[0].pid, "python3"), (children[1].pid, "python3"), (999_999_999, "train.py")]
        with contention.timing(gpu) as watch:
            pass
        assert watch.reason == "contended: other processes used busygpu:Busy GPU: 999999999 train.py"
    finally:
        for c in children:
            c.kill()
            c.wait()
    monkeypatch.delenv(contention.LOCKS_ENV)
    assert device_locks.lockers(gpu.physical) == set()  # no lock folder: nobody is told apart
