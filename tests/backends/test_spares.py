"""Warm children (porter.backends.spares): a job may run in a child started before it was known, but
every job still gets a fresh child of its own, in the same sandbox, and no spare outlives its block."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from porter.backends import get_backend, spares
from porter.backends.isolate import Job, JobResult, prestart, run_job

# a device global that counts the launches of its process: a fresh child always reports 1 then 2
COUNTER = """
__device__ int launches;
extern "C" __global__ void count(int* out) {
    if (threadIdx.x == 0) { launches += 1; out[0] = launches; }
}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PORTER_SPARES", "1")  # (the default on a machine of two processors is none)


def _job() -> Job:
    device = get_backend("cpu").devices()[0]
    return Job(
        "cpu", COUNTER, "count", device=device, args=(np.zeros(1, np.int32),), grid=(1,), block=(4,), runs=2
    )


def _counts(res: JobResult) -> list[int]:
    assert res.ok, res.error + res.log
    return [int(run[0][0]) for run in res.outputs]


def _wait_ready(timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = [s for group in spares._POOL.values() for s in group]
        if pool and all(s.ready() for s in pool):
            return
        time.sleep(0.05)
    raise AssertionError("no spare became ready")


@pytest.mark.integration
def test_a_job_runs_in_a_spare_which_serves_it_alone() -> None:
    job = _job()
    cold = run_job(job, 120)
    before = spares.stats()
    with spares.warm_children():
        first = run_job(job, 120)  # cold: no spare yet; one is started for the next job
        _wait_ready()
        procs = [s.proc for group in spares._POOL.values() for s in group]
        second = run_job(job, 120)
        third = run_job(job, 120)
        left = [s.proc for group in spares._POOL.values() for s in group]
    after = spares.stats()
    assert after["taken"] - before["taken"] == 2 and after["cold"] - before["cold"] == 1
    # a fresh process each time: the device global starts at zero for every job
    assert _counts(cold) == _counts(first) == _counts(second) == _counts(third) == [1, 2]
    # the same sandbox layers as a child started for its job
    assert second.layers == cold.layers and "seccomp" in second.layers
    assert procs and all(p.poll() is not None for p in procs)  # each spare ran one job and exited
    assert left and all(p.poll() is not None for p in left)  # the block's end stopped the rest
    assert not spares._POOL


@pytest.mark.integration
def test_a_spare_that_died_waiting_leaves_the_job_to_a_child_of_its_own() -> None:
    job = _job()
    with spares.warm_children():
        prestart(job, 120)
        _wait_ready()
        for group in spares._POOL.values():
            for s in group:
                s.proc.kill()
                s.proc.wait()
        res = run_job(job, 120)
    assert _counts(res) == [1, 2]


@pytest.mark.integration
def test_a_stopped_block_or_a_zero_setting_starts_no_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job()
    before = spares.stats()["started"]
    run_job(job, 120)  # outside any block
    monkeypatch.setenv("PORTER_SPARES", "0")
    with spares.warm_children():
        assert _counts(run_job(job, 120)) == [1, 2]
    assert spares.stats()["started"] == before
    assert not spares._POOL


def test_a_spare_is_keyed_by_everything_its_start_depended_on() -> None:
    from porter.backends import CompileOptions
    from porter.backends.isolate import _spare_key

    job = _job()
    assert _spare_key(job, 120) == _spare_key(Job("cpu", "other", "k", device=job.device), 120)
    assert _spare_key(job, 120) != _spare_key(job, 60)  # the limits come from the timeout
    other = Job("cpu", "", "k", options=CompileOptions(include_dirs=("/tmp",)), device=job.device)
    assert _spare_key(job, 120) != _spare_key(other, 120)  # readable folders are in its sandbox plan
    assert _spare_key(Job("cpu", "", "k", device=job.device, env={"A": "1"}), 120) != _spare_key(job, 120)
    assert _spare_key(Job("cpu", "", "k", wrapper=("oclgrind",)), 120) is None  # a checker's wrapper
