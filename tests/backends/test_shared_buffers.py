"""One allocation, several kernel arguments: a job's ``Alias(index, offset)`` is a pointer `offset` bytes
into the buffer of array argument `index` on every backend (the CPU emulator's pointer arithmetic,
OpenCL sub-buffers or shared virtual memory, CuPy's pointer offset), so a write through one argument is
what the other reads -- never a copy."""

from __future__ import annotations

import numpy as np
import pytest
from porter.backends import get_backend
from porter.backends.isolate import Alias, Job, run_job

from porter.plan import run_devices

pytestmark = pytest.mark.integration  # children compile and run kernels

CUDA = """extern "C" __global__ void advance(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1.0f;
}
"""
OPENCL = """__kernel void advance(__global const float* in, __global float* out, int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = in[i] + 1.0f;
}
"""


def _expected(data: np.ndarray, offset_floats: int, n: int) -> np.ndarray:
    """`advance(data, data + offset, n)` run one element at a time, in order: what an aliasing buffer
    gives where one thread per element reads and writes disjoint or same-thread elements."""
    out = data.copy()
    for i in range(n):
        out[offset_floats + i] = out[i] + 1.0
    return out


def _run(backend: str, device, source: str, offset_floats: int):
    n = 64
    data = np.arange(4 * n, dtype=np.float32)
    job = Job(
        backend, source, "advance", device=device, args=(data, Alias(0, 4 * offset_floats), np.int32(n)),
        grid=(1,), block=(n,),
    )  # fmt: skip
    res = run_job(job, 120)
    return res, _expected(data, offset_floats, n)


@pytest.mark.parametrize("offset", [64, 67])  # the second half (256 bytes); 268 bytes: not aligned
def test_the_emulator_points_into_one_buffer(offset: int) -> None:
    devices = [d for d in run_devices("cuda") if d.backend == "cpu"]
    if not devices:
        pytest.skip("the CPU emulator is not available here")
    res, want = _run("cpu", devices[0], CUDA, offset)
    assert res.ok, res.error
    assert np.array_equal(res.outputs[0][0][: want.size], want)


@pytest.mark.parametrize("offset", [32, 3])  # 128 bytes: a sub-buffer; 12 bytes: shared virtual memory
def test_opencl_points_into_one_buffer(offset: int) -> None:
    devices = [d for d in run_devices("opencl") if not d.checks]
    if not devices:
        pytest.skip("no OpenCL device here")
    for device in devices:
        res, want = _run("opencl", device, OPENCL, offset)
        assert res.ok, (device.label, res.error)
        # overlapping at 3 floats, the read of element i + 3 races with its write: only the elements
        # no other work-item writes are certain
        got = res.outputs[0][0][: want.size]
        sure = slice(0, 3) if offset == 3 else slice(0, want.size)
        assert np.array_equal(got[sure], want[sure]), device.label
        if offset == 32:
            assert np.array_equal(got, want), device.label


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [64, 67])
def test_cupy_points_into_one_buffer(offset: int) -> None:
    gpus = [d for d in get_backend("cuda").devices() if d.kind == "gpu"]
    if not gpus:
        pytest.skip("no NVIDIA GPU visible to CuPy")
    res, want = _run("cuda", gpus[0], CUDA, offset)
    assert res.ok, res.error
    assert np.array_equal(res.outputs[0][0][: want.size], want)  # 64 and 67 floats: no overlap
