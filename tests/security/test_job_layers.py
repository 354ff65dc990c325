"""Every job child, GPU jobs included, loads its binary with the sandbox's layers in place.

A GPU job initialises its driver before it enters the sandbox (a first cuInit fails under Landlock and
seccomp), then gets every layer a CPU job gets; the result says which ones were in place.  The GPU
tests run on the H200 (`-m gpu`); the wire-format and emulator tests run everywhere.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from porter.backends import Device, get_backend
from porter.backends.isolate import Job, JobResult, read_result, run_job, write_result

from porter import sandbox

CONFINING = ("network", "filesystem", "seccomp", "rlimits")

SCALE = """
extern "C" __global__ void scale(float* x, int n, int extra)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + extra) x[i] *= 2.0f;
}
"""

SCALE_CL = """
__kernel void scale(__global float* x, int n, int extra)
{
    int i = get_global_id(0);
    if (i < n + extra) x[i] *= 2.0f;
}
"""


def _expected_layers() -> set[str]:
    """The confining layers a child started here gets (those this machine offers)."""
    return {layer.name for layer in sandbox.layers() if layer.active and layer.name in CONFINING}


def _scale_job(backend: str, source: str, device: Device, extra: int = 0, **kw: object) -> Job:
    return Job(
        backend=backend,
        source=source,
        entry="scale",
        device=device,
        args=(np.arange(1024, dtype=np.float32), np.int32(1024), np.int32(extra)),
        grid=(5,) if extra else (4,),
        block=(256,),
        read_back=(0,),
        use_cache=False,
        **kw,  # type: ignore[arg-type]
    )


def _devices(backend: str, kind: str) -> list[Device]:
    try:
        return [d for d in get_backend(backend).devices() if d.kind == kind]
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"{backend} unavailable: {err}")


def _assert_confined(res: JobResult, label: str) -> None:
    assert res.ok, f"{label}: {res.stage}: {res.error}\n{res.log[-2000:]}"
    missing = _expected_layers() - set(res.layers)
    assert not missing, f"{label} loaded its binary without {sorted(missing)} (had {res.layers})"
    np.testing.assert_array_equal(res.outputs[0][0], np.arange(1024, dtype=np.float32) * 2)


# ------------------------------------------------------------------------------- everywhere


def test_the_layers_travel_back_and_unknown_names_are_refused(tmp_path: Path) -> None:
    job = Job(backend="cpu", source="", entry="k")
    write_result(tmp_path / "good", JobResult(ok=True, stage="done", layers=["filesystem", "seccomp"]))
    back = read_result(tmp_path / "good", job)
    assert back is not None and back.layers == ["filesystem", "seccomp"]
    write_result(tmp_path / "bad", JobResult(ok=True, stage="done"))
    doc = json.loads((tmp_path / "bad" / "result.json").read_text())
    doc["layers"] = ["seccomp", "trust-me"]
    (tmp_path / "bad" / "result.json").write_text(json.dumps(doc))
    assert read_result(tmp_path / "bad", job) is None  # a malformed result is no result


@pytest.mark.integration
def test_an_emulator_job_reports_every_layer_it_ran_under() -> None:
    emulators = [d for d in get_backend("cpu").devices() if d.kind == "emulator"]
    if not emulators:
        pytest.skip("the CPU emulator is unavailable here (no C++ compiler)")
    if not _expected_layers() & {"filesystem", "seccomp"}:
        pytest.skip("neither Landlock nor seccomp is available here")
    _assert_confined(run_job(_scale_job("cpu", SCALE, emulators[0]), timeout_s=300), "emulator")


@pytest.mark.integration
def test_an_opencl_cpu_job_reports_every_layer_it_ran_under() -> None:
    cpus = _devices("opencl", "cpu")
    if not cpus:
        pytest.skip("no OpenCL CPU device here")
    for device in cpus:
        _assert_confined(run_job(_scale_job("opencl", SCALE_CL, device), timeout_s=300), device.label)


# ------------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
def test_a_cuda_job_on_the_gpu_runs_under_every_layer() -> None:
    gpus = _devices("cuda", "gpu")
    if not gpus:
        pytest.skip("the cuda backend lists no GPU")
    _assert_confined(run_job(_scale_job("cuda", SCALE, gpus[0]), timeout_s=300), gpus[0].label)


@pytest.mark.gpu
def test_an_opencl_job_on_the_gpu_runs_under_every_layer() -> None:
    gpus = _devices("opencl", "gpu")
    if not gpus:
        pytest.skip("no OpenCL GPU device registered (see shared/gpu/README.md, NVIDIA's OpenCL)")
    _assert_confined(run_job(_scale_job("opencl", SCALE_CL, gpus[0]), timeout_s=300), gpus[0].label)


@pytest.mark.gpu
def test_memcheck_still_sees_a_confined_gpu_job(tmp_path: Path) -> None:
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        pytest.skip("compute-sanitizer not found")
    gpus = _devices("cuda", "gpu")
    if not gpus:
        pytest.skip("the cuda backend lists no GPU")
    wrapper = (tool, "--tool", "memcheck", "--print-limit", "5", "--log-file", "{scratch}/memcheck.log")
    job = _scale_job("cuda", SCALE, gpus[0], extra=64, wrapper=wrapper, collect=("memcheck.log",))
    res = run_job(job, timeout_s=300)
    log = res.files.get("memcheck.log", "")
    assert "Invalid __global__ read" in log, log[-2000:] or res.log[-2000:]
    missing = _expected_layers() - set(res.layers)
    assert not missing, f"the sanitized job ran without {sorted(missing)} (had {res.layers})"
