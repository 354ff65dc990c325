"""porter.harness.checkers: what a remembered compute-sanitizer finding depends on, and that a finding
is served from the cache without running the checker again (a fake run_job stands in for the child)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CompileOptions, Device
from porter.backends.isolate import Job, JobResult

from porter.harness import checkers
from porter.harness.trial import Instance, Reject, ValidateOptions
from porter.model import ArgSpec, KernelSpec, Role, Variant

GPU = Device("cuda", "NVIDIA H200", "sm_90", "gpu", driver="580.159")


def _job(x: np.ndarray, **kw: object) -> Job:
    return Job("cuda", "k-source", "k", CompileOptions(), GPU, (x, np.int32(x.size)), (1,), (32,), **kw)  # type: ignore[arg-type]


def test_the_key_follows_the_build_inputs_geometry_device_and_check() -> None:
    x = np.arange(32, dtype=np.float32)
    base = checkers._sanitizer_key("memcheck", "/bin/cs", _job(x))
    assert base == checkers._sanitizer_key("memcheck", "/bin/cs", _job(x.copy()))
    y = x.copy()
    y[5] = -1
    changed = [
        checkers._sanitizer_key("racecheck", "/bin/cs", _job(x)),
        checkers._sanitizer_key("memcheck", "/bin/cs", _job(y)),
        checkers._sanitizer_key("memcheck", "/bin/cs", replace(_job(x), source="other")),
        checkers._sanitizer_key("memcheck", "/bin/cs", replace(_job(x), block=(64,))),
        checkers._sanitizer_key("memcheck", "/bin/cs", replace(_job(x), device=replace(GPU, driver="590"))),
        checkers._sanitizer_key(
            "memcheck", "/bin/cs", replace(_job(x), symbols={"c": np.ones(4, np.float32)})
        ),
    ]
    assert base not in changed and len(set(changed)) == len(changed)


def test_findings_are_remembered_and_a_remembered_error_still_rejects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from porter.backends.cuda import sanitizer

    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PORTER_NO_CACHE", raising=False)
    monkeypatch.setattr(sanitizer, "tool", lambda: "/usr/bin/compute-sanitizer")
    ran: list[str] = []
    verdict = {"memcheck": 0, "racecheck": 0}

    def fake_run_job(job: Job, timeout_s: float = 60.0) -> JobResult:
        check = job.wrapper[job.wrapper.index("--tool") + 1]
        ran.append(check)
        n = verdict[check]
        log = f"========= Invalid __global__ read of size 4\n========= ERROR SUMMARY: {n} errors\n"
        return JobResult(ok=True, stage="done", files={checkers.SANITIZER_LOG: log})

    monkeypatch.setattr(checkers, "run_job", fake_run_job)
    spec = KernelSpec(
        "k", (ArgSpec("x", "float32", Role.INOUT, ("n",)), ArgSpec("n", "int32", Role.SCALAR, value="n")),
        grid=("1",), block=("32",), sizes=({"n": 32},),
    )  # fmt: skip
    variant = Variant(
        "k", "cuda", "__global__ void k(float* x, int n) { x[threadIdx.x] += 1; }\n", "k", "original"
    )
    inst = Instance.given(spec, {"n": 32}, "n=32", [np.ones(32, np.float32), np.int32(32)])
    opts = ValidateOptions()
    logs: list[str] = []
    assert checkers.sanitizer_pass(variant, spec, GPU, inst, opts, logs) == ["memcheck", "racecheck"]
    assert sorted(ran) == ["memcheck", "racecheck"]  # both passes ran, side by side
    assert checkers.sanitizer_pass(variant, spec, GPU, inst, opts, logs) == ["memcheck", "racecheck"]
    assert len(ran) == 2  # the second time, nothing ran: the same build, inputs and device
    other = Instance.given(spec, {"n": 32}, "n=32", [np.zeros(32, np.float32), np.int32(32)])
    verdict["memcheck"] = 2
    with pytest.raises(Reject, match="memcheck: 2 error"):
        checkers.sanitizer_pass(variant, spec, GPU, other, opts, logs)
    with pytest.raises(Reject, match="memcheck: 2 error"):  # remembered, and still a rejection
        checkers.sanitizer_pass(variant, spec, GPU, other, opts, logs)
    assert len(ran) == 4


def test_racecheck_is_not_run_on_a_launch_without_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """racecheck looks for shared-memory hazards only: a build with no static shared memory (the compiler's
    report) launched with no dynamic shared memory gives it nothing to watch, and the log says so; unknown
    static shared memory, or any shared memory, runs it."""
    from porter.backends.cuda import sanitizer

    monkeypatch.setenv("PORTER_NO_CACHE", "1")
    monkeypatch.setattr(sanitizer, "tool", lambda: "/usr/bin/compute-sanitizer")
    ran: list[str] = []

    def fake_run_job(job: Job, timeout_s: float = 60.0) -> JobResult:
        ran.append(job.wrapper[job.wrapper.index("--tool") + 1])
        return JobResult(
            ok=True, stage="done", files={checkers.SANITIZER_LOG: "========= ERROR SUMMARY: 0 errors\n"}
        )

    monkeypatch.setattr(checkers, "run_job", fake_run_job)

    def spec(smem: str) -> KernelSpec:
        return KernelSpec(
            "k", (ArgSpec("x", "float32", Role.INOUT, ("n",)), ArgSpec("n", "int32", Role.SCALAR, value="n")),
            grid=("1",), block=("32",), sizes=({"n": 32},), shared_bytes=smem,
        )  # fmt: skip

    variant = Variant(
        "k", "cuda", "__global__ void k(float* x, int n) { x[threadIdx.x] += 1; }\n", "k", "original"
    )
    plain = spec("0")
    inst = Instance.given(plain, {"n": 32}, "n=32", [np.ones(32, np.float32), np.int32(32)])
    logs: list[str] = []
    assert checkers.sanitizer_pass(variant, plain, GPU, inst, ValidateOptions(), logs, 0) == ["memcheck"]
    assert ran == ["memcheck"] and any(
        line.startswith("racecheck not run: the kernel has no shared memory") for line in logs
    )
    for static, smem in ((None, "0"), (16, "0"), (0, "256")):
        ran.clear()
        with_smem = spec(smem)
        one = Instance.given(with_smem, {"n": 32}, "n=32", [np.ones(32, np.float32), np.int32(32)])
        done = checkers.sanitizer_pass(variant, with_smem, GPU, one, ValidateOptions(), [], static)
        assert done == ["memcheck", "racecheck"] and sorted(ran) == ["memcheck", "racecheck"], (static, smem)
