"""The sample CUDA programs' kernels, executed on an NVIDIA GPU through cuda and hip-on-cuda, against NumPy.

Device code comes from ``porter.scan.extract.device_code`` (compiled with NVRTC) when that module
exists; otherwise the whole sample is compiled with nvcc, which ignores the host code in a cubin.
hip-on-cuda compiles the same CUDA device code through porter's HIP-on-CUDA header (CUDA names are
valid there), exercising the hip backend's compile/load/run path on NVIDIA.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from porter.backends import CompileOptions, get_backend

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "cuda"

pytestmark = pytest.mark.gpu


@dataclass(frozen=True)
class Case:
    sample: str
    entry: str
    # rng -> (args as host arrays / numpy scalars, indices of outputs, grid, block, shared bytes)
    build: Callable[[np.random.Generator], tuple[list[Any], list[int], tuple[int, ...], tuple[int, ...], int]]
    # host args -> expected outputs (one per output index)
    reference: Callable[[list[Any]], list[np.ndarray]]
    rtol: float = 1e-5
    atol: float = 1e-5


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _vector_add(rng):
    n = 1_000_003
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    return [a, b, c, np.int32(n)], [2], (_cdiv(n, 256),), (256,), 0


def _matmul(rng):
    m, n, k = 70, 50, 41
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    return [a, b, c, np.int32(m), np.int32(n), np.int32(k)], [2], (_cdiv(n, 16), _cdiv(m, 16)), (16, 16), 0


def _histogram(rng):
    n = (1 << 20) + 7
    data = rng.integers(0, 256, n, dtype=np.uint8)
    return [data, np.zeros(256, np.uint32), np.int32(n)], [1], (64,), (256,), 0


def _reduce(rng):
    n = (1 << 20) + 3
    x = rng.random(n, dtype=np.float32)
    return [x, np.zeros(1, np.float32), np.int32(n)], [1], (96,), (256,), 256 // 32 * 4


def _jacobi(rng):
    nx, ny = 67, 45
    a = rng.standard_normal((ny, nx)).astype(np.float32)
    out = np.full((ny, nx), np.nan, np.float32)
    return [a, out, np.int32(nx), np.int32(ny)], [1], (_cdiv(nx, 16), _cdiv(ny, 16)), (16, 16), 0


def _jacobi_ref(args):
    a = args[0]
    out = a.copy()
    out[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])
    return [out]


def _axpby(rng):
    n = 10_007
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    return [np.int32(n), np.float32(1.5), x, np.float32(-2.0), y], [4], (_cdiv(n, 256),), (256,), 0


def _block_sum(rng):
    n = 10_000
    x = rng.standard_normal(n).astype(np.float32)
    blocks = _cdiv(n, 256)
    return [x, np.full(blocks, np.nan, np.float32), np.int32(n)], [1], (blocks,), (256,), 0


def _block_sum_ref(args):
    x = args[0]
    blocks = args[1].size
    padded = np.concatenate([x, np.zeros(blocks * 256 - x.size, np.float32)])
    return [padded.reshape(blocks, 256).sum(axis=1, dtype=np.float64).astype(np.float32)]


CASES = [
    Case("vector_add.cu", "vector_add", _vector_add, lambda a: [a[0] + a[1]]),
    Case("matmul_tiled.cu", "matmul_tiled", _matmul, lambda a: [a[0] @ a[1]], rtol=1e-4, atol=1e-4),
    Case(
        "histogram.cu",
        "histogram_shared",
        _histogram,
        lambda a: [np.bincount(a[0], minlength=256).astype(np.uint32)],
    ),
    Case(
        "reduce_shfl.cu",
        "reduce_sum",
        _reduce,
        lambda a: [np.array([a[0].sum(dtype=np.float64)], np.float32)],
        rtol=1e-4,
    ),
    Case("stencil2d.cu", "jacobi_step", _jacobi, _jacobi_ref),
    Case("templated.cu", "axpby<float>", _axpby, lambda a: [a[1] * a[2] + a[3] * a[4]]),
    Case("templated.cu", "block_sum<256>", _block_sum, _block_sum_ref, rtol=1e-4, atol=1e-4),
]


def _device_code(source: str) -> str | None:
    try:
        module = importlib.import_module("porter.scan.extract")
    except ImportError:
        return None
    return module.device_code(source)


@pytest.mark.parametrize("backend_name", ["cuda", "hip"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.sample}:{c.entry}")
def test_sample_kernel_matches_numpy(backend_name: str, case: Case) -> None:
    path = SAMPLES / case.sample
    if not path.is_file():
        pytest.skip(f"sample {case.sample} not present")
    source = path.read_text(encoding="utf-8")
    if case.entry.split("<")[0] not in source:
        pytest.skip(f"{case.sample} no longer defines {case.entry}")
    backend = get_backend(backend_name)
    devices = [d for d in backend.devices() if backend_name == "cuda" or d.platform == "hip-on-cuda"]
    if not devices:
        pytest.skip(f"{backend_name}: no NVIDIA GPU")
    device = devices[0]
    device_source = _device_code(source)
    options = CompileOptions(
        include_dirs=(str(SAMPLES),),
        flags=() if device_source is not None else ("compiler=nvcc",),
    )
    binary = backend.compile(
        device_source if device_source is not None else source, case.entry, options, device
    )
    program = backend.load(binary, device)

    rng = np.random.default_rng(7)
    host_args, outputs, grid, block, shared = case.build(rng)
    expected = case.reference(host_args)
    device_args = [backend.to_device(a, device) if isinstance(a, np.ndarray) else a for a in host_args]
    assert program(*device_args, grid=grid, block=block, shared_bytes=shared) is None
    for index, want in zip(outputs, expected, strict=True):
        got = backend.to_host(device_args[index], host_args[index].dtype, host_args[index].shape)
        if got.dtype.kind == "f":
            assert not np.isnan(got).any(), "output left poisoned"
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)

    if not any(case.sample.startswith(p) for p in ("histogram", "reduce")):  # accumulating kernels excluded
        backend.flush_cache(device)
        ms = program(*device_args, grid=grid, block=block, shared_bytes=shared, timed=True)
        assert isinstance(ms, float) and ms > 0.0
