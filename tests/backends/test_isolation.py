"""Isolation: every compile and run happens in a child; hangs, crashes and errors come back as data.

The mechanism tests use a wrapper command in front of the child (what `oclgrind` is in a checking run)
so they need no backend; the kernel tests run real kernels on the CPU emulator and on OpenCL (PoCL).
"""

from __future__ import annotations

import contextlib
import signal
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CompileOptions, Device, get_backend
from porter.backends.isolate import WAITING, Job, JobResult, TimingPlan, probe_backend, run_job


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PORTER_CACHE_DIR", str(root))  # inherited by the children
    monkeypatch.delenv("PORTER_NO_CACHE", raising=False)
    return root


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")  # a zombie waiting for init to reap it is dead


# ------------------------------------------------------------------------------- the mechanism


@pytest.mark.integration
def test_timeout_kills_the_whole_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the fallback without namespaces: the process group alone must take the grandchild down (the
    # wrapper writes its pid outside the scratch folder, so the file-system layer is off too)
    monkeypatch.setenv("PORTER_SANDBOX_DISABLE", "bubblewrap,filesystem")
    pidfile = tmp_path / "grandchild.pid"
    job = Job(
        backend="cpu",
        source="",
        entry="k",
        wrapper=("sh", "-c", f'sleep 300 & echo $! > {pidfile}; wait; exec "$@"', "sh"),
    )
    start = time.monotonic()
    result = run_job(job, timeout_s=1.0)
    elapsed = time.monotonic() - start
    assert (result.ok, result.stage) == (False, "timeout")
    assert "1 s limit" in result.error
    assert result.returncode is None
    assert elapsed < 30  # returned, not hung on the grandchild (generous: loaded CI machines)
    pid = int(pidfile.read_text())
    for _ in range(100):
        if _gone(pid):
            break
        time.sleep(0.05)
    assert _gone(pid), "the grandchild survived the timeout"


@pytest.mark.parametrize("how", ["direct", "through-a-shell"])
@pytest.mark.integration
def test_signal_is_reported_as_crash(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # bubblewrap reports a signal as 128 + n like a shell; this checks what porter itself sees
    monkeypatch.setenv("PORTER_SANDBOX_DISABLE", "bubblewrap")
    script = "kill -SEGV $$" if how == "direct" else 'sh -c "kill -SEGV \\$\\$"; exit $?'
    result = run_job(
        Job(backend="cpu", source="", entry="k", wrapper=("sh", "-c", script, "sh")), timeout_s=30
    )
    assert (result.ok, result.stage) == (False, "crash")
    assert "SIGSEGV" in result.error
    assert result.returncode == (-signal.SIGSEGV if how == "direct" else 128 + signal.SIGSEGV)


@pytest.mark.integration
def test_exit_without_result_is_a_crash_with_output() -> None:
    job = Job(backend="cpu", source="", entry="k", wrapper=("sh", "-c", "echo dying words >&2; exit 3", "sh"))
    result = run_job(job, timeout_s=30)
    assert (result.ok, result.stage, result.returncode) == (False, "crash", 3)
    assert "exit status 3" in result.error
    assert "dying words" in result.log


@pytest.mark.integration
def test_a_kernel_child_starts_with_one_blas_thread_unless_its_job_says_otherwise() -> None:
    """NumPy's OpenBLAS would start a spinning thread per processor in every child (2 CPU-s each on 16 cores)."""
    dump = ("sh", "-c", 'env > {scratch}/env.txt; exec "$@"', "sh")
    for env, threads in (({}, "1"), ({"OPENBLAS_NUM_THREADS": "4"}, "4")):
        result = run_job(
            Job(backend="cpu", source="", entry="k", wrapper=dump, collect=("env.txt",), env=env), 30
        )
        seen = dict(line.split("=", 1) for line in result.files["env.txt"].splitlines() if "=" in line)
        assert seen.get("OPENBLAS_NUM_THREADS") == threads, result.files["env.txt"]
        assert seen.get("MKL_NUM_THREADS") == "1"


@pytest.mark.integration
def test_a_kernel_childs_command_line_ends_with_its_backend_and_device_kind() -> None:
    """What bench/cpu_breakdown.py sums a suite's CPU by: cuda/gpu, opencl/cpu, cpu/emulator, hip/compile."""
    dump = ("sh", "-c", 'echo "$@" > {scratch}/cmd.txt; exec "$@"', "sh")
    emulator = get_backend("cpu").devices()[0]
    for device, tag in ((emulator, "cpu/emulator"), (None, "cpu/compile")):
        result = run_job(
            Job(backend="cpu", source="", entry="k", device=device, wrapper=dump, collect=("cmd.txt",)), 30
        )
        assert result.files["cmd.txt"].split()[-1] == tag, result.files


@pytest.mark.integration
def test_missing_wrapper_is_data() -> None:
    result = run_job(
        Job(backend="cpu", source="", entry="k", wrapper=("/nonexistent/checker",)), timeout_s=30
    )
    assert not result.ok and result.stage == "crash"
    assert "/nonexistent/checker" in result.log


@pytest.mark.integration
def test_unknown_backend_is_unavailable() -> None:
    result = run_job(Job(backend="no-such-backend", source="", entry="k"), timeout_s=60)
    assert (result.ok, result.stage) == (False, "unavailable")
    assert "no-such-backend" in result.error
    assert result.returncode == 0


def test_unpicklable_job_is_data() -> None:
    result = run_job(Job(backend="cpu", source="", entry="k", args=(lambda: 0,)), timeout_s=60)
    assert not result.ok and result.stage == "load"
    assert "child" in result.error


@pytest.mark.integration
def test_probe_of_unknown_backend_never_raises() -> None:
    found = probe_backend("no-such-backend", timeout_s=60)
    assert (found.compile, found.run) == (False, False)
    assert "no-such-backend" in found.hint


# ------------------------------------------------------------------------------- real kernels

CUDA = {
    "axpy": """
extern "C" __global__ void axpy(const float *x, float *y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] + a * x[i];
}
""",
    "spin": """
extern "C" __global__ void spin(float *y, int n) {
    // y starts as zeros and nothing writes y[0] before the loop ends: a volatile global
    // read the compiler cannot fold away (an empty side-effect-free loop may be removed).
    volatile float *flag = y;
    while (flag[0] == 0.0f) { }
    if (threadIdx.x < n) y[threadIdx.x] = 1.0f;
}
""",
    "wild": """
extern "C" __global__ void wild(float *y, unsigned long long address) {
    float *p = (float *)address;
    p[threadIdx.x] = y[threadIdx.x];
}
""",
    "broken": """
extern "C" __global__ void broken(float *y) {
    y[threadIdx.x] = undeclared_identifier + 1;
}
""",
}

OPENCL = {
    "axpy": """
__kernel void axpy(__global const float *x, __global float *y, float a, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = y[i] + a * x[i];
}
""",
    "spin": """
__kernel void spin(__global float *y, int n) {
    volatile int forever = 1;
    while (forever) { }
    if (get_local_id(0) < n) y[get_local_id(0)] = 1.0f;
}
""",
    "wild": """
__kernel void wild(__global float *y, ulong address) {
    __global float *p = (__global float *)address;
    p[get_local_id(0)] = y[get_local_id(0)];
}
""",
    "broken": """
__kernel void broken(__global float *y) {
    y[get_local_id(0)] = undeclared_identifier + 1;
}
""",
}

SOURCES = {"cpu": CUDA, "opencl": OPENCL}


def running_device(name: str) -> Device:
    try:
        found = get_backend(name).availability()
    except Exception as err:  # noqa: BLE001 - a broken backend is its own test's business
        pytest.skip(f"{name} backend cannot be loaded: {err}")
    if not found.run or not found.devices:
        pytest.skip(f"{name} cannot run here: {found.hint}")
    runnable = [d for d in found.devices if d.kind != "checker"]
    if not runnable:
        pytest.skip(f"{name} has only checker devices here")
    return runnable[0]


def job(name: str, kernel: str, device: Device | None, args: tuple, block: int = 32, **kw) -> Job:
    return Job(
        backend=name,
        source=SOURCES[name][kernel],
        entry=kernel,
        device=device,
        args=args,
        grid=(1,),
        block=(block,),
        **kw,
    )


def precompile(j: Job) -> JobResult:
    """Compile and load without launching, filling the cache so the timed part of a test is the kernel alone."""
    result = run_job(replace(j, runs=0, timing=None), timeout_s=300)
    assert result.ok, result.error + "\n" + result.log
    return result


@pytest.mark.parametrize("name", ["cpu", "opencl"])
@pytest.mark.integration
def test_normal_job_fresh_buffers_each_run(name: str) -> None:
    device = running_device(name)
    n = 100
    x = np.arange(n, dtype=np.float32)
    poison = np.full(n, 7.0, dtype=np.float32)
    j = job(name, "axpy", device, (x, poison, np.float32(2.0), np.int32(n)), block=128, runs=2, seed=5)
    result = run_job(j, timeout_s=300)
    assert result.ok, f"{result.stage}: {result.error}\n{result.log}"
    assert result.stage == "done" and result.returncode == 0
    assert result.toolchain
    assert len(result.outputs) == 2
    expected = poison + 2.0 * x
    for run in result.outputs:  # [x, y]: every array comes back by default
        assert len(run) == 2
        np.testing.assert_array_equal(run[0], x)
        # y starts from the parent's values in every run: a second run on the first run's buffer
        # would give 7 + 4x
        np.testing.assert_allclose(run[1], expected, rtol=1e-6)

    # the second identical job is a cache hit, and read_back picks the arrays that come back
    again = run_job(
        job(name, "axpy", device, (x, poison, np.float32(2.0), np.int32(n)), block=128, read_back=(1,)),
        timeout_s=300,
    )
    assert again.ok and again.cached
    assert len(again.outputs) == 1 and len(again.outputs[0]) == 1
    np.testing.assert_allclose(again.outputs[0][0], expected, rtol=1e-6)


@pytest.mark.parametrize("name", ["cpu", "opencl"])
@pytest.mark.integration
def test_timing_returns_times(name: str) -> None:
    device = running_device(name)
    n = 64
    x = np.ones(n, dtype=np.float32)
    plan = TimingPlan(warmup=1, repeats=4, flush_l2=True, rotate=2)
    result = run_job(job(name, "axpy", device, (x, x.copy(), np.float32(1), np.int32(n)), timing=plan), 300)
    assert result.ok, f"{result.stage}: {result.error}\n{result.log}"
    assert len(result.times_ms) == 4
    assert all(t >= 0.0 for t in result.times_ms)


@pytest.mark.integration
def test_the_child_holds_the_device_lock_from_its_load_to_its_last_timed_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suite's timings on one GPU (Job.device_lock_fd): the child compiles while another process holds
    the device's lock file, and waits for it before it loads the kernel -- its runs and timed launches
    happen with the GPU to itself; it releases the lock after."""
    import fcntl
    import json
    import os
    import threading

    from porter.backends import spares

    works: list[Path] = []

    def new_work() -> Path:
        works.append(tmp_path / f"work{len(works)}")
        works[-1].mkdir()
        return works[-1]

    monkeypatch.setattr(spares, "new_work", new_work)
    device = running_device("cpu")
    n = 64
    x = np.ones(n, dtype=np.float32)
    lock = tmp_path / "gpu.lock"
    held = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)  # another program's timing, holding the GPU
    mine = os.open(lock, os.O_RDWR | os.O_CLOEXEC)  # this job's descriptor (contention.timing's)
    fcntl.flock(held, fcntl.LOCK_EX)
    results: list[JobResult] = []
    timed = job("cpu", "axpy", device, (x, x.copy(), np.float32(1), np.int32(n)),
                timing=TimingPlan(warmup=1, repeats=3), runs=2)  # fmt: skip
    worker = threading.Thread(
        target=lambda: results.append(run_job(replace(timed, device_lock_fd=mine), 300))
    )
    try:
        worker.start()
        stage = None  # the child's own progress file: compiled, waiting for the device
        progress: dict[str, object] = {}
        for _ in range(3000):
            time.sleep(0.1)
            with contextlib.suppress(OSError, ValueError, IndexError):
                progress = json.loads((works[0] / "progress.json").read_text())
                stage = progress.get("stage")
            if stage == WAITING or not worker.is_alive():
                break
        assert stage == WAITING and worker.is_alive() and progress.get("toolchain")  # compiled already
        time.sleep(1.0)
        assert worker.is_alive() and not results  # it waits for the lock, not past it
        assert json.loads((works[0] / "progress.json").read_text()).get("stage") == WAITING
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        worker.join(300)
        os.close(held)
        os.close(mine)
    (result,) = results
    assert result.ok, f"{result.stage}: {result.error}\n{result.log}"
    assert len(result.outputs) == 2 and len(result.times_ms) == 3
    free = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(free, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released by the child: free again
    finally:
        os.close(free)


@pytest.mark.parametrize("name", ["cpu", "opencl"])
@pytest.mark.integration
def test_infinite_loop_times_out_cleanly(name: str) -> None:
    device = running_device(name)
    y = np.zeros(32, dtype=np.float32)
    j = job(name, "spin", device, (y, np.int32(32)))
    precompile(j)
    start = time.monotonic()
    result = run_job(j, timeout_s=4.0)
    elapsed = time.monotonic() - start
    assert (result.ok, result.stage) == (False, "timeout"), f"{result.error}\n{result.log}"
    assert "4 s limit" in result.error and "launch" in result.error
    assert result.cached  # the progress file told us the compile was a hit before the hang
    assert elapsed < 60
    # porter carries on: the next job on the same backend works
    x = np.ones(8, dtype=np.float32)
    ok = run_job(job(name, "axpy", device, (x, x.copy(), np.float32(1), np.int32(8))), timeout_s=300)
    assert ok.ok, ok.error


@pytest.mark.parametrize("name", ["cpu", "opencl"])
@pytest.mark.integration
def test_wild_pointer_write_is_a_crash_with_the_signal(name: str) -> None:
    device = running_device(name)
    y = np.ones(32, dtype=np.float32)
    result = run_job(job(name, "wild", device, (y, np.uint64(16))), timeout_s=300)
    assert (result.ok, result.stage) == (False, "crash"), f"{result.stage}: {result.error}\n{result.log}"
    assert any(sig in result.error for sig in ("SIGSEGV", "SIGBUS")), result.error
    assert "launch" in result.error
    # where it crashed: the device, and its toolchain (driver, runtime version)
    assert f" on {device.label} [" in result.error and result.toolchain in result.error, result.error


@pytest.mark.parametrize("name", ["cpu", "opencl"])
@pytest.mark.integration
def test_compile_error_is_stage_compile_with_the_log(name: str) -> None:
    device = running_device(name)
    result = run_job(job(name, "broken", device, (np.ones(32, dtype=np.float32),)), timeout_s=300)
    assert (result.ok, result.stage) == (False, "compile"), f"{result.stage}: {result.error}\n{result.log}"
    assert "undeclared_identifier" in result.log
    assert result.outputs == []


@pytest.mark.integration
def test_no_cache_environment_reaches_the_child(
    monkeypatch: pytest.MonkeyPatch, _private_cache: Path
) -> None:
    monkeypatch.setenv("PORTER_NO_CACHE", "1")  # what `porter --no-cache` sets (before anything runs)
    try:
        found = get_backend("cuda").availability()
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"cuda backend cannot be loaded: {err}")
    if not found.compile:
        pytest.skip(f"cuda cannot compile here: {found.hint}")
    j = Job(backend="cuda", source=CUDA["axpy"], entry="axpy")
    results = [run_job(j, timeout_s=300) for _ in range(2)]
    assert all(r.ok and not r.cached for r in results), [r.error for r in results]
    assert not _private_cache.exists() or not any(p.is_file() for p in _private_cache.rglob("*"))


@pytest.mark.parametrize("name", ["cuda", "hip"])
@pytest.mark.integration
def test_compile_only_job(name: str) -> None:
    try:
        found = get_backend(name).availability()
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"{name} backend cannot be loaded: {err}")
    if not found.compile:
        pytest.skip(f"{name} cannot compile here: {found.hint}")
    prefix = "#include <hip/hip_runtime.h>\n" if name == "hip" else ""
    j = Job(backend=name, source=prefix + CUDA["axpy"], entry="axpy")
    first = run_job(j, timeout_s=300)
    assert first.ok and first.stage == "done", f"{first.stage}: {first.error}\n{first.log}"
    assert first.toolchain and not first.cached and first.compile_s > 0
    second = run_job(j, timeout_s=300)
    assert second.ok and second.cached
    if name == "cuda":  # NVRTC is quick; the hipcc path is the same code
        assert not run_job(replace(j, use_cache=False), timeout_s=300).cached
    broken = run_job(Job(backend=name, source=prefix + CUDA["broken"], entry="broken"), timeout_s=300)
    assert broken.stage == "compile" and "undeclared_identifier" in broken.log


@pytest.mark.integration
def test_out_of_memory_is_reported_and_porter_carries_on() -> None:
    device = running_device("opencl")
    if device.kind != "cpu":
        pytest.skip("the address-space limit is for CPU devices")
    big = np.ones(16 << 20, dtype=np.float32)  # 64 MiB; timing keeps 16 rotating copies of both arrays alive
    args = (big, big, np.float32(2), np.int32(16))
    plan = TimingPlan(warmup=0, repeats=1, rotate=16)
    j = job("opencl", "axpy", device, args, block=16, timing=plan, memory_limit_mb=1536)
    result = run_job(j, timeout_s=300)
    assert not result.ok
    assert result.stage == "crash" or "memory" in (result.error + result.log).lower(), result.error
    assert "timing" in result.error or result.stage != "crash"  # where it died is part of the report
    small = np.ones(16, dtype=np.float32)
    ok = run_job(job("opencl", "axpy", device, (small, small, np.float32(2), np.int32(16)), block=16), 300)
    assert ok.ok, ok.error


@pytest.mark.integration
def test_construct_the_emulator_refuses_is_stage_emulate() -> None:
    device = running_device("cpu")
    y = np.ones(32, dtype=np.float32)
    options = CompileOptions(defines=("PORTER_WARP_SIZE=16",))  # the emulator models 32 or 64 lanes
    result = run_job(job("cpu", "axpy", device, (y, y, np.float32(1), np.int32(32)), options=options), 300)
    assert (result.ok, result.stage) == (False, "emulate"), f"{result.stage}: {result.error}"
    assert "cannot emulate" in result.error


# ------------------------------------------------------------------------------- on a GPU

HIP_PREFIX = "#include <hip/hip_runtime.h>\n"


def gpu_device(name: str) -> Device:
    found = get_backend(name).availability()
    gpus = [d for d in found.devices if d.kind == "gpu"]
    if name == "cuda":
        assert found.run and gpus, f"an NVIDIA GPU is here but the cuda backend cannot run: {found.hint}"
    elif not gpus:
        pytest.skip(f"{name} cannot run on a GPU here: {found.hint}")
    return gpus[0]


def gpu_job(name: str, kernel: str, device: Device, args: tuple, **kw) -> Job:
    source = (HIP_PREFIX if name == "hip" else "") + CUDA[kernel]
    return Job(backend=name, source=source, entry=kernel, device=device, args=args, **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cuda", "hip"])
def test_gpu_job_runs_fresh_buffers_and_times(name: str) -> None:
    device = gpu_device(name)
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 7.0, dtype=np.float32)
    plan = TimingPlan(warmup=2, repeats=5, flush_l2=True, rotate=2)
    j = gpu_job(name, "axpy", device, (x, y, np.float32(2.0), np.int32(n)), grid=(4,), block=(256,), runs=2)
    result = run_job(replace(j, timing=plan), timeout_s=300)
    assert result.ok, f"{result.stage}: {result.error}\n{result.log}"
    assert len(result.outputs) == 2
    for run in result.outputs:
        np.testing.assert_allclose(run[1], y + 2.0 * x, rtol=1e-6)
    assert len(result.times_ms) == 5 and all(t > 0 for t in result.times_ms)
    assert run_job(j, timeout_s=300).cached


@pytest.mark.gpu
def test_gpu_infinite_loop_times_out_and_the_gpu_recovers() -> None:
    device = gpu_device("cuda")
    y = np.zeros(32, dtype=np.float32)
    j = gpu_job("cuda", "spin", device, (y, np.int32(32)), grid=(1,), block=(32,))
    precompile(j)
    result = run_job(j, timeout_s=20.0)
    assert (result.ok, result.stage) == (False, "timeout"), f"{result.error}\n{result.log}"
    assert "launch" in result.error
    x = np.ones(64, dtype=np.float32)
    ok = run_job(
        gpu_job("cuda", "axpy", device, (x, x.copy(), np.float32(1), np.int32(64)), block=(64,)), 300
    )
    assert ok.ok, f"{ok.stage}: {ok.error}\n{ok.log}"
    np.testing.assert_allclose(ok.outputs[0][1], 2.0 * x)


@pytest.mark.gpu
def test_gpu_illegal_address_is_reported_and_the_gpu_recovers() -> None:
    device = gpu_device("cuda")
    y = np.ones(32, dtype=np.float32)
    result = run_job(gpu_job("cuda", "wild", device, (y, np.uint64(16)), block=(32,)), timeout_s=300)
    assert not result.ok and result.stage in ("launch", "crash"), (
        f"{result.stage}: {result.error}\n{result.log}"
    )
    x = np.ones(64, dtype=np.float32)
    ok = run_job(
        gpu_job("cuda", "axpy", device, (x, x.copy(), np.float32(1), np.int32(64)), block=(64,)), 300
    )
    assert ok.ok, f"{ok.stage}: {ok.error}\n{ok.log}"
