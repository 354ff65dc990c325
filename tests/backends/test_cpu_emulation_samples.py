"""Every kernel of samples/cuda, emulated on the CPU and checked against a NumPy reference.

The device-only translation unit comes from porter.scan.extract.device_code (host code blanked,
line numbers kept); problem sizes are small so the suite stays fast.  Each kernel runs under two
scheduling seeds: a sample with a race would disagree with itself or with NumPy.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CannotEmulate, CompileOptions
from porter.backends.cpu import CpuBackend, CpuProgram

from porter.scan.extract import device_code

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
]

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "cuda"
SEEDS = (11, 12345)
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def be() -> CpuBackend:
    return CpuBackend()


Check = Callable[[CpuBackend, CpuProgram, int], None]


@dataclass(frozen=True)
class Case:
    file: str
    entry: str
    check: Check | None  # None: the emulator must refuse it (CannotEmulate)
    refusal: str = ""


def vector_add(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
    n = 3001
    a, b = RNG.random(n, dtype=np.float32), RNG.random(n, dtype=np.float32)
    c = be.alloc(n * 4)
    prog(be.to_device(a), be.to_device(b), c, np.int32(n), grid=((n + 255) // 256,), block=(256,), seed=seed)
    assert np.array_equal(be.to_host(c, np.float32, (n,)), a + b)


def histogram(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
    n = 5000
    data = RNG.integers(0, 256, n, dtype=np.uint8)
    hist = be.to_device(np.zeros(256, np.uint32))
    prog(be.to_device(data), hist, np.int32(n), grid=(4,), block=(128,), seed=seed)
    assert np.array_equal(be.to_host(hist, np.uint32, (256,)), np.bincount(data, minlength=256))


def matmul(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
    M, N, K = 37, 29, 45
    a, b = RNG.random((M, K), dtype=np.float32), RNG.random((K, N), dtype=np.float32)
    c = be.alloc(M * N * 4)
    grid = ((N + 15) // 16, (M + 15) // 16)
    prog(
        be.to_device(a),
        be.to_device(b),
        c,
        np.int32(M),
        np.int32(N),
        np.int32(K),
        grid=grid,
        block=(16, 16),
        seed=seed,
    )
    np.testing.assert_allclose(be.to_host(c, np.float32, (M, N)), a.astype(np.float64) @ b, rtol=1e-5)


def reduce_sum(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
    n, threads, blocks = 6000, 256, 5
    x = RNG.random(n, dtype=np.float32) + np.float32(0.5)
    out = be.to_device(np.zeros(1, np.float32))
    prog(
        be.to_device(x),
        out,
        np.int32(n),
        grid=(blocks,),
        block=(threads,),
        shared_bytes=(threads // 32) * 4,
        seed=seed,
    )
    np.testing.assert_allclose(be.to_host(out, np.float32, (1,))[0], x.astype(np.float64).sum(), rtol=1e-5)


def jacobi(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
    ny, nx = 35, 50
    a = RNG.random((ny, nx), dtype=np.float32)
    out = be.alloc(a.nbytes)
    prog(
        be.to_device(a),
        out,
        np.int32(nx),
        np.int32(ny),
        grid=((nx + 15) // 16, (ny + 15) // 16),
        block=(16, 16),
        seed=seed,
    )
    ref = a.copy()
    ref[1:-1, 1:-1] = np.float32(0.2) * (
        a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1]
    )
    np.testing.assert_allclose(be.to_host(out, np.float32, (ny, nx)), ref, rtol=1e-6)


def axpby(dtype: type) -> Check:
    def check(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
        n = 2000
        x, y = RNG.random(n).astype(dtype), RNG.random(n).astype(dtype)
        a, b = dtype(2.0), dtype(-1.25)
        dy = be.to_device(y)
        prog(np.int32(n), a, be.to_device(x), b, dy, grid=((n + 255) // 256,), block=(256,), seed=seed)
        np.testing.assert_allclose(be.to_host(dy, dtype, (n,)), a * x + b * y, rtol=1e-6)

    return check


def block_sum(block: int) -> Check:
    def check(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
        n = 3000
        blocks = (n + block - 1) // block
        x = RNG.random(n, dtype=np.float32)
        out = be.alloc(blocks * 4)
        prog(be.to_device(x), out, np.int32(n), grid=(blocks,), block=(block,), seed=seed)
        ref = np.add.reduceat(x.astype(np.float64), np.arange(0, n, block))
        np.testing.assert_allclose(be.to_host(out, np.float32, (blocks,)), ref, rtol=1e-5)

    return check


def conv1d(be: CpuBackend, prog: CpuProgram, seed: int) -> None:
    n, k = 2500, 9
    taps = RNG.random(k, dtype=np.float32)
    prog.set_symbol("coeffs", taps)  # cudaMemcpyToSymbol
    x = RNG.random(n, dtype=np.float32)
    y = be.alloc(n * 4)
    prog(be.to_device(x), y, np.int32(n), grid=((n + 255) // 256,), block=(256,), seed=seed)
    padded = np.concatenate([np.zeros(k // 2), x, np.zeros(k // 2)]).astype(np.float64)
    ref = np.array([np.dot(taps, padded[i : i + k]) for i in range(n)])
    np.testing.assert_allclose(be.to_host(y, np.float32, (n,)), ref, rtol=1e-5, atol=1e-6)


def scale_unbound_texture(be: CpuBackend, prog, seed: int) -> None:
    n = 300
    out = be.to_device(np.full(n, 7.0, np.float32))
    prog(out, np.float32(3.0), np.int32(n), grid=(2,), block=(256,), seed=seed)
    np.testing.assert_array_equal(be.to_host(out, np.float32, (n,)), np.zeros(n, np.float32))
    prog.bind_texture("tex_in", np.arange(n // 2, dtype=np.float32))  # bound: the first n/2 values
    prog(out, np.float32(3.0), np.int32(n), grid=(2,), block=(256,), seed=seed)
    want = np.concatenate([3.0 * np.arange(n // 2), np.zeros(n - n // 2)]).astype(np.float32)
    np.testing.assert_array_equal(be.to_host(out, np.float32, (n,)), want)


def saxpy(be: CpuBackend, prog, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    d_y = be.to_device(y)
    prog(np.int32(n), np.float32(0.75), be.to_device(x), d_y, grid=(4,), block=(256,), seed=seed)
    np.testing.assert_allclose(be.to_host(d_y, np.float32, (n,)), 0.75 * x + y, rtol=1e-6)


CASES = (
    Case("vector_add.cu", "vector_add", vector_add),
    Case("histogram.cu", "histogram_shared", histogram),
    Case("matmul_tiled.cu", "matmul_tiled", matmul),
    Case("reduce_shfl.cu", "reduce_sum", reduce_sum),
    Case("stencil2d.cu", "jacobi_step", jacobi),
    Case("templated.cu", "axpby<float>", axpby(np.float32)),
    Case("templated.cu", "axpby<double>", axpby(np.float64)),
    Case("templated.cu", "block_sum<256>", block_sum(256)),
    Case("templated.cu", "block_sum<128>", block_sum(128)),
    Case("conv1d_constant.cu", "conv1d", conv1d),
    # A 1-D texture reference read with tex1Dfetch is a pointer and a size: unbound, it reads zero.
    Case("legacy_texture.cu", "scale_tex", scale_unbound_texture),
    Case("legacy_texture.cu", "saxpy_plain", saxpy),
)


def _compile(be: CpuBackend, case: Case):
    source = device_code((SAMPLES / case.file).read_text(encoding="utf-8"))
    return be.compile(source, case.entry, CompileOptions(include_dirs=(str(SAMPLES),)))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.file}:{c.entry}")
def test_sample_kernel_against_numpy(be: CpuBackend, case: Case) -> None:
    if not (SAMPLES / case.file).exists():
        pytest.skip(f"sample {case.file} is not in this checkout")
    if case.check is None:
        with pytest.raises(CannotEmulate, match=f"^cannot emulate: {case.refusal}"):
            _compile(be, case)
        return
    binary = _compile(be, case)
    for seed in SEEDS:
        case.check(be, be.load(binary, be.devices()[0]), seed)


def test_every_sample_kernel_is_covered() -> None:
    covered = {(c.file, c.entry.split("<")[0]) for c in CASES}
    found = set()
    for path in sorted(SAMPLES.glob("*.cu")):
        for name in re.findall(r"__global__\s+void\s+(\w+)", device_code(path.read_text(encoding="utf-8"))):
            found.add((path.name, name))
    assert found, "no sample kernels found"
    assert found <= covered, f"sample kernels without an emulation test: {sorted(found - covered)}"
