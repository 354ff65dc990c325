"""Reliability of the sandbox: no orphan child when porter is killed, and a checker that hangs is
capped in memory and reported as a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from porter.backends.isolate import Job, run_job

from porter import sandbox

HANG = "__global__ void k(float* a) { volatile int spin = 1; while (spin) { a[0] += 1.0f; } }\n"

DRIVER = textwrap.dedent(
    """
    import numpy as np, sys
    from porter.backends import get_backend
    from porter.backends.isolate import Job, run_job
    device = get_backend("cpu").devices()[0]
    job = Job(backend="cpu", source=sys.argv[1], entry="k", device=device,
              args=(np.zeros(4, dtype=np.float32),), block=(1,), use_cache=False)
    print("started", flush=True)
    run_job(job, timeout_s=300)
    """
)


def _children_with(marker: str) -> list[int]:
    """Processes whose environment carries `marker` (the children of one driver, in any namespace)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.integration
def test_no_orphan_child_after_porter_is_killed(tmp_path: Path, sig: signal.Signals) -> None:
    from porter.backends import get_backend

    if not get_backend("cpu").devices():
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    marker = f"porter-orphan-test-{uuid.uuid4().hex}"
    env = {**os.environ, "PORTER_CACHE_DIR": str(tmp_path / "cache"), "PORTER_TEST_MARKER": marker}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, HANG], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert driver.stdout is not None and driver.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while not [p for p in _children_with(marker) if p != driver.pid] and time.monotonic() < deadline:
            time.sleep(0.1)
        kids = [p for p in _children_with(marker) if p != driver.pid]
        assert kids, "the job's child never started"
        time.sleep(1.0)  # let it get to the hanging kernel
        driver.send_signal(sig)
        driver.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _children_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _children_with(marker) == [], "a child of porter outlived it"
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in _children_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_every_device_kind_has_memory_and_cpu_limits() -> None:
    for kind in ("cpu", "emulator", "checker", None):
        lim = sandbox.limits_for(kind, 60, None)
        assert lim.address_space and lim.cpu_seconds and lim.file_size and lim.open_files, kind
    gpu = sandbox.limits_for("gpu", 60, None)
    assert gpu.address_space is None and gpu.data and gpu.cpu_seconds  # drivers reserve huge ranges


@pytest.mark.integration
def test_checker_hang_is_capped_and_reported_as_a_timeout() -> None:
    pytest.importorskip("pyopencl")
    import shutil

    from porter.backends.opencl.oclgrind import checker_device, oclgrind_wrapper

    if shutil.which("oclgrind") is None:
        pytest.skip("oclgrind not installed")
    try:
        device = checker_device()
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"oclgrind unavailable: {err}")
    if device is None:
        pytest.skip("oclgrind unavailable")
    source = "__kernel void k(__global float* a) { for (;;) { a[0] += 1.0f; } }\n"
    job = Job(
        backend="opencl",
        source=source,
        entry="k",
        device=device,
        args=(np.zeros(4, dtype=np.float32),),
        grid=(1,),
        block=(1,),
        use_cache=False,
        wrapper=oclgrind_wrapper("{scratch}/oclgrind.log"),
        memory_limit_mb=2048,
    )
    start = time.monotonic()
    res = run_job(job, timeout_s=15)
    assert res.stage == "timeout", (res.stage, res.error)
    assert "15 s limit" in res.error
    assert time.monotonic() - start < 60
