"""Out-of-bounds is a verdict (#29): every array a child hands to a kernel on the CPU emulator or an
OpenCL CPU device lies between inaccessible guard zones, so a kernel writing past or before an argument
fails with ``guard: out-of-bounds write: y[...]`` -- never heap corruption, never a lost record."""

from __future__ import annotations

import math
import mmap
import platform
import re
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from porter.backends import get_backend, guards
from porter.backends.isolate import GuardHit, Job, Launches, guard_hit, run_job

from porter.harness.trial import GUARD_ELEMENTS, Instance, guard_length
from porter.harness.validate import Reference, ValidateOptions, validate
from porter.model import ArgSpec, KernelSpec, Role, Status, Variant

N = 1000

# y[at] = 1 from one thread: `at` is the bug under test (one past, far past, before the start)
STORE_CUDA = """
__global__ void store(const float* x, float* y, int n, int at) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
    if (i == 0) y[at] = 1.0f;
}
"""
STORE_CL = """
__kernel void store(__global const float* x, __global float* y, int n, int at) {
    int i = get_global_id(0);
    if (i < n) y[i] = 2.0f * x[i];
    if (i == 0) y[at] = 1.0f;
}
"""
# y[i] = x[i] + x[at]: a read past the input
LOAD_CUDA = """
__global__ void load(const float* x, float* y, int n, int at) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[at];
}
"""
LOAD_CL = """
__kernel void load(__global const float* x, __global float* y, int n, int at) {
    int i = get_global_id(0);
    if (i < n) y[i] = x[i] + x[at];
}
"""
SOURCES = {"cpu": {"store": STORE_CUDA, "load": LOAD_CUDA}, "opencl": {"store": STORE_CL, "load": LOAD_CL}}


def _spec(kernel: str, at: int) -> KernelSpec:
    return KernelSpec(
        kernel=kernel,
        args=(
            ArgSpec("x", "float32", Role.IN, ("n",)),
            ArgSpec("y", "float32", Role.OUT, ("n",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
            ArgSpec("at", "int32", Role.SCALAR, value="at"),
        ),
        grid=("(n + 63) / 64",),
        block=("64",),
        sizes=({"n": N, "at": at},),
    )


def _store_ref(x, y, n, at) -> None:  # noqa: ANN001 - the reference's arguments are NumPy values
    y[:] = 2 * x


def _device(backend: str):  # noqa: ANN202
    devices = [d for d in get_backend(backend).devices() if d.role == "runs"]
    if not devices:
        pytest.skip(f"no {backend} device that runs kernels here")
    return devices[0]


def _variant(backend: str, kernel: str, source: str | None = None) -> Variant:
    target = "cuda" if backend == "cpu" else "opencl"
    return Variant(kernel, target, source or SOURCES[backend][kernel], kernel, "user")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))  # inherited by the children
    monkeypatch.delenv("PORTER_NO_CACHE", raising=False)


# ----------------------------------------------------------------------------- without a child


def test_the_guard_rounds_each_array_up_to_whole_pages() -> None:
    for elements, itemsize in ((N, 4), (1, 1), (4096, 8), (7, 12), (999, 24), (3, 4096 * 3)):
        g = guard_length(elements, itemsize)
        assert GUARD_ELEMENTS <= g < GUARD_ELEMENTS + guards.PAGE
        assert (elements + g) * itemsize % guards.PAGE == 0
    assert guard_length(N, 4, 0) == 0  # a checker's instance: no guard at all
    spec = _spec("store", 0)
    inst = Instance.draw(spec, {"n": N, "at": 0}, "size", 1)
    for i in (0, 1):
        assert inst.guarded[i].nbytes % guards.PAGE == 0  # type: ignore[union-attr]
        assert inst.length(i) == N


def _protection(address: int) -> str:
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, perms = line.split()[:2]
        lo, hi = (int(v, 16) for v in span.split("-"))
        if lo <= address < hi:
            return perms[:3]
    return "unmapped"


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_a_guarded_buffer_sits_between_inaccessible_zones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guards, "_armed", True)  # the zones, without the child's fault handler
    assert guards.host_bytes(10).ctypes.data % guards.ALIGN == 0
    exact = 3 * guards.PAGE
    with guards.tagged("1"):
        buf = guards.host_bytes(exact)
    start = buf.ctypes.data
    assert start % guards.PAGE == 0
    assert _protection(start) == "rw-" and _protection(start + exact - 1) == "rw-"
    assert _protection(start - 1) == "---" and _protection(start + exact) == "---"
    ((tag, data, nbytes, lo, hi),) = [z for z in guards.zones() if z[1] == start]
    assert (tag, data, nbytes) == ("1", start, exact) and lo + guards.ZONE_MIN <= start and hi > start + exact
    odd = guards.host_bytes(1001)  # not a multiple of ALIGN: aligned first, a few bytes of slack last
    assert odd.ctypes.data % guards.ALIGN == 0 and _protection(odd.ctypes.data + 1024) == "---"
    assert guards.host_bytes(5).flags.writeable
    monkeypatch.setattr(guards, "_armed", False)
    assert _protection(guards.host_bytes(16).ctypes.data) == "rw-"  # the parent's memory as before


def _report(start: int, nbytes: int, zone: int = guards.ZONE_MIN) -> list[list[object]]:
    return [["1", start, nbytes, start - zone, start + nbytes + zone]]


def test_the_parent_locates_a_fault_only_in_a_consistent_report() -> None:
    start, nbytes = 1 << 30, 2 * guards.PAGE
    report = _report(start, nbytes)
    line = f"fault 0x{start + nbytes + 8:016x} w\n"
    assert guards.locate(line, report, {"1": nbytes}) == guards.Hit("1", nbytes + 8, "write")
    before = f"fault 0x{start - 4:016x} r\n"
    assert guards.locate(before, report, {"1": nbytes}) == guards.Hit("1", -4, "read")
    assert guards.locate(f"fault 0x{start + 8:016x} w\n", report, {"1": nbytes}) is None  # inside it
    far = f"fault 0x{start + nbytes + guards.ZONE_MIN + 8:016x} w\n"
    assert guards.locate(far, report, {"1": nbytes}) is None  # past the zone: a plain crash
    assert guards.locate(line, report, {"1": nbytes - 4}) is None  # not the size the parent gave
    assert guards.locate(line, report, {"2": nbytes}) is None  # not an array of the job
    assert guards.locate(line, [["1", start, nbytes, start, start + nbytes]], {"1": nbytes}) is None
    assert guards.locate(line, "junk", {"1": nbytes}) is None
    assert guards.locate("fault 0x12 w\n", report, {"1": nbytes}) is None


def test_a_fault_report_counts_only_when_the_child_died_of_sigsegv() -> None:
    y = np.zeros(2048, np.float32)
    job = Job("cpu", "", "k", args=(np.zeros(4, np.float32), y), names={"1": ("y", 1000)})
    start = 1 << 30
    progress = {
        "guards": [["1", start, y.nbytes, start - guards.ZONE_MIN, start + y.nbytes + guards.ZONE_MIN]]
    }
    fault = f"fault 0x{start + y.nbytes:016x} w\n"
    hit = GuardHit("y", 2048, 1000, "write")
    assert guard_hit(job, -signal.SIGSEGV, fault, progress) == hit
    assert guard_hit(job, 128 + signal.SIGSEGV, fault, progress) == hit  # through bubblewrap
    assert guard_hit(job, -signal.SIGABRT, fault, progress) is None
    assert guard_hit(job, 0, fault, progress) is None
    assert guard_hit(job, -signal.SIGSEGV, "", progress) is None


# ----------------------------------------------------------------------------- in a child

BACKENDS = ("cpu", "opencl")


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("at", "reason"),
    [
        (N, "y[1000] written past its 1000 elements (run 1"),  # the parent sees the poisoned guard
        (N + 1000, "y[2000] written past its 1000 elements (run 1"),
        (N + 5000, "y[6000] written past its 1000 elements (the variant died on the guard page beside y"),
        (-1, "y[-1] written before its first element (the variant died on the guard page beside y"),
        (-3000, "y[-3000] written before its first element (the variant died on the guard page beside y"),
    ],
)
def test_a_write_past_or_before_an_argument_is_a_guard_verdict(backend: str, at: int, reason: str) -> None:
    device = _device(backend)
    spec = _spec("store", at)
    (v,) = validate(
        _variant(backend, "store"), spec, Reference(python=_store_ref), [device], ValidateOptions(trials=1)
    )
    assert v.status is Status.FAILED and v.compiled and not v.correct, v.reason
    assert v.reason.startswith("guard: out-of-bounds write: "), v.reason
    assert reason in v.reason, v.reason


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_far_past_an_input_names_the_input(backend: str) -> None:
    (v,) = validate(
        _variant(backend, "load"),
        _spec("load", N + 20000),
        Reference(python=_store_ref),
        [_device(backend)],
        ValidateOptions(trials=1),
    )
    assert v.status is Status.FAILED and v.reason.startswith("guard: out-of-bounds "), v.reason
    assert "x[21000]" in v.reason and "past its 1000 elements" in v.reason, v.reason
    if _x86():  # the page fault's error code says read or write
        assert v.reason.startswith("guard: out-of-bounds read: x[21000] read past"), v.reason


def _x86() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_beyond_every_zone_is_still_a_record_with_the_log(backend: str) -> None:
    # 8 GB past y: no zone is that wide, the child dies of SIGSEGV somewhere else -- a crash verdict
    (v,) = validate(
        _variant(backend, "store"),
        _spec("store", 2_000_000_000),
        Reference(python=_store_ref),
        [_device(backend)],
        ValidateOptions(trials=1),
    )
    assert v.status is Status.FAILED and not v.correct
    assert re.match(r"(run: the variant crashed .*SIGSEGV|guard: )", v.reason), v.reason
    assert v.logs and any("Segmentation fault" in log or "SIGSEGV" in log for log in (v.reason, *v.logs))


def _store_job(backend: str, at: int) -> Job:
    device = _device(backend)
    x = np.arange(N + 24, dtype=np.float32)  # no guard of the caller's: the zones alone
    y = np.zeros(N + 24, dtype=np.float32)
    return Job(
        backend,
        SOURCES[backend]["store"],
        "store",
        device=device,
        args=(x, y, np.int32(N), np.int32(at)),
        grid=(math.ceil(N / 64),),
        block=(64,),
        names={"1": ("y", N)},
    )


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_run_job_names_the_array_and_keeps_the_childs_log(backend: str) -> None:
    res = run_job(_store_job(backend, -1), timeout_s=60)
    assert (res.ok, res.stage) == (False, "guard"), res.error
    assert res.guard == GuardHit("y", -1, N, "write" if _x86() else "access")
    assert res.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV)
    assert "y[-1], before its first element" in res.error and "SIGSEGV" in res.error
    assert "Segmentation fault" in res.log  # faulthandler's stack: the record keeps the child's words
    fine = run_job(_store_job(backend, N + 10), timeout_s=60)  # inside the buffer (N + 24 elements)
    assert fine.ok, fine.error


@pytest.mark.integration
def test_a_sequence_of_launches_is_guarded_too() -> None:
    device = _device("cpu")
    x = np.arange(N, dtype=np.float32)
    y = np.zeros(N, dtype=np.float32)
    step = (0, (math.ceil(N / 64),), (64,), 0, ("x", "y", np.int32(N), np.int32(N + 5000)))
    job = Job(
        "cpu",
        "",
        "",
        device=device,
        launches=(Launches(((STORE_CUDA, "store"),), {"x": x, "y": y}, (step,), ("y",)),),
        names={"0:y": ("y", N)},
    )
    res = run_job(job, timeout_s=60)
    assert res.stage == "guard" and res.guard is not None, res.error
    assert (res.guard.argument, res.guard.element) == ("y", N + 5000)


def _store_first_ref(x, y, n, at) -> None:  # noqa: ANN001
    y[:] = 2 * x
    y[at] = 1.0


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_correct_kernel_still_validates_on_guarded_buffers(backend: str) -> None:
    spec = replace(_spec("store", 0), sizes=({"n": 999, "at": 0}, {"n": 77, "at": 0}))
    (v,) = validate(
        _variant(backend, "store"),
        spec,
        Reference(python=_store_first_ref),
        [_device(backend)],
        ValidateOptions(),
    )
    assert v.status is Status.VALIDATED, v.reason
    assert "guard" in v.checks


def test_guard_pages_are_the_systems(monkeypatch: pytest.MonkeyPatch) -> None:
    assert guards.PAGE == mmap.PAGESIZE and guards.PAGE % guards.ALIGN == 0


# ----------------------------------------------------------------------------- a program's replay

PROGRAM = """
#include <cstdio>
#include <cuda_runtime.h>

__global__ void twice(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

int main() {
    const int n = 1000;
    static float h[n];
    for (int i = 0; i < n; ++i) h[i] = 0.5f * i - 100.0f;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
    twice<<<(n + 63) / 64, 64>>>(y, x, n);
    cudaMemcpy(h, y, n * sizeof(float), cudaMemcpyDeviceToHost);
    printf("%.1f\\n", h[n - 1]);
    return 0;
}
"""


@pytest.mark.integration
def test_a_replayed_launch_written_past_is_a_guard_verdict(tmp_path: Path) -> None:
    import shutil

    from porter import capture
    from porter.harness import replay
    from porter.plan import run_devices
    from porter.scan.extract import device_code
    from porter.workflows.capture import capture_program
    from porter.workflows.program_run import ProgramRuns

    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    devices = [d for d in run_devices("cuda") if d.backend == "cpu"]
    if not devices:
        pytest.skip("the CPU emulator is not available here")
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "main.cu").write_text(PROGRAM, encoding="utf-8")
    report = capture_program(
        [str(tmp_path / "prog")], ProgramRuns(("./main",)), out_dir=str(tmp_path / "cap")
    )
    assert report.exit_code == 0, report
    rep = replay.build("twice", capture.by_kernel(capture.load(tmp_path / "cap").launches)["twice"])
    assert rep.spec is not None, rep.problem
    good = device_code(PROGRAM)
    (ok,) = replay.replay(Variant("twice", "cuda", good, "twice", "original"), rep, devices[:1])
    assert ok.status is Status.VALIDATED, ok.reason
    # the first thread to fault names the element: any of them, in the emulator's seeded order
    for bug, element, side in (
        ("y[i - 1]", "-1", "before its first element"),
        ("y[i + 9000]", "9[0-9]{3}", "past"),
    ):
        variant = Variant("twice", "cuda", good.replace("y[i]", bug), "twice", "user")
        (v,) = replay.replay(variant, rep, devices[:1])
        assert v.status is Status.FAILED, v.reason
        # the replay's spec names each argument by its position (y is the launch's first: arg0)
        assert re.match(rf"guard: out-of-bounds write: arg0\[{element}\] written {side}", v.reason), v.reason
        assert "launch 1 of run 1" in v.reason
