"""Kernels on CUDA's three-component vectors in global memory, translated keeping CUDA's layout
(backends/opencl/packed.py), built and run on every OpenCL device here and compared with NumPy on arrays of
12-byte elements (``float32`` rows of three): before, a ``bump(float3* v, int n)`` of ours translated to
``__global float3*`` failed 200 of 300 floats.  The kernels are those of our fixture program
tests/fixtures/programs/packed_vectors/main.cu; its whole port: tests/e2e/test_cli_port_opencl_packed_vectors.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opencl_launch import launch_translated
from porter.backends.opencl.translate import translate_to_opencl

from porter.model import Translation

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "programs" / "packed_vectors" / "main.cu"
N = 300  # 3600 bytes in CUDA's layout; OpenCL C's float3 would reach 4800


def _backend() -> Any:
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    from porter.backends import get_backend

    return get_backend("opencl")


def _devices() -> list[Any]:
    found = [d for d in _backend().devices() if d.role == "runs"]
    if not found:
        pytest.skip("no OpenCL device here (apt-get install pocl-opencl-icd)")
    return found


def _on_each_device(check: Any) -> None:
    """`check(device)` on every OpenCL device that runs kernels; the failures of all of them together."""
    failed = []
    for device in _devices():
        try:
            check(device)
        except AssertionError as err:
            failed.append(f"{device.label}: {err}")
    assert not failed, "\n".join(failed)


def _translation() -> Translation:
    tr = translate_to_opencl(FIXTURE.read_text(encoding="utf-8"), str(FIXTURE))
    assert all(not k.untranslatable for k in tr.kernels), [k.untranslatable for k in tr.kernels]
    return tr


def _bump_reference(v: np.ndarray, w: np.ndarray, d: np.ndarray) -> np.ndarray:
    """bump: v[i] = spun(v[i], w[i].x); v[i].y = p.y * 2 + w[i].z; v[i] += d; z raised to -1 at least."""
    p = v.copy()
    s = w[:, 0]
    out = np.stack([p[:, 1] * s, p[:, 2] + s, p[:, 0] - s], axis=1).astype(np.float32)
    out[:, 1] = p[:, 1] * np.float32(2) + w[:, 2]
    out += d
    out[:, 2] = np.maximum(out[:, 2], np.float32(-1))
    return out


def test_bump_keeps_cudas_layout_on_each_device() -> None:
    _on_each_device(_bump_on)


def _bump_on(device: Any) -> None:
    tr = _translation()
    kernel = next(k for k in tr.kernels if k.name == "bump")
    rng = np.random.default_rng(7)
    v = rng.uniform(-4, 4, (N, 3)).astype(np.float32)  # 12-byte rows: CUDA's float3 array
    w = rng.uniform(-2, 2, (N, 3)).astype(np.float32)
    d = np.array([1.0, -2.0, 0.5], np.float32)
    # the float3 argument goes as CUDA passes it: 12 bytes (OpenCL C's float3 argument takes 16)
    packed_d = np.array(tuple(d), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4")])[()]
    assert v.nbytes == 12 * N and packed_d.nbytes == 12
    got_v, got_w = launch_translated(
        _backend(), device, tr.text, kernel, [v.copy(), w.copy(), packed_d, np.int32(N)], (3,), (128,)
    )
    np.testing.assert_array_equal(got_w, w)  # read only
    np.testing.assert_allclose(got_v, _bump_reference(v, w, d), rtol=1e-6, atol=1e-6)


def test_combine_keeps_cudas_int3_layout_on_each_device() -> None:
    _on_each_device(_combine_on)


def _combine_on(device: Any) -> None:
    tr = _translation()
    kernel = next(k for k in tr.kernels if k.name == "combine")
    rng = np.random.default_rng(11)
    cells = rng.integers(-1000, 1000, (N, 3), dtype=np.int32)
    totals = np.full((N, 3), -7, np.int32)
    got_cells, got_totals = launch_translated(
        _backend(), device, tr.text, kernel, [cells.copy(), totals, np.int32(N)], (5,), (64,)
    )
    np.testing.assert_array_equal(got_cells, cells)
    c = cells
    want = np.stack([c[:, 0] + c[:, 1], c[:, 1] * c[:, 2], c[:, 0] - 1], axis=1)
    np.testing.assert_array_equal(got_totals, want)
