"""The CPU emulator backend: real g++ compiles of CUDA / HIP kernels, checked against NumPy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from porter.backends import (
    BACKEND_NAMES,
    Binary,
    CannotEmulate,
    CompileError,
    CompileOptions,
    LaunchError,
    get_backend,
)
from porter.backends.cpu import CpuBackend, CpuProgram, asan_environment, warp_size_for
from porter.backends.cpu.source import blank_comments_and_strings, rewrite_shared

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
]


@pytest.fixture(scope="module")
def be() -> CpuBackend:
    return CpuBackend()


_BINARIES: dict[tuple[str, str, CompileOptions], Binary] = {}


def build(be: CpuBackend, source: str, entry: str, options: CompileOptions | None = None) -> CpuProgram:
    """Compile (once per module run) and load a fresh program."""
    key = (textwrap.dedent(source), entry, options or CompileOptions())
    if key not in _BINARIES:
        _BINARIES[key] = be.compile(*key)
    return be.load(_BINARIES[key], be.devices()[0])


RNG = np.random.default_rng(1234)


# --------------------------------------------------------------------------- contract


def test_registered_and_available(be: CpuBackend) -> None:
    assert "cpu" in BACKEND_NAMES
    assert isinstance(get_backend("cpu"), CpuBackend)
    av = be.availability()
    assert av.compile and av.run
    assert av.toolchain.startswith("g++ ")
    (dev,) = be.devices()
    assert dev.kind == "emulator" and dev.backend == "cpu" and dev.name == "cpu-emulator"
    assert dev.facts.warp_size == 32 and dev.facts.max_threads_per_block == 1024
    assert dev.facts.shared_mem_per_block >= 48 * 1024


def test_toolchain_id_tracks_warp_size(be: CpuBackend) -> None:
    assert be.toolchain_id() != be.toolchain_id(arch="gfx90a")
    assert warp_size_for("gfx90a") == 64 and warp_size_for("gfx1100") == 32
    assert warp_size_for(None) == 32 and warp_size_for("sm_90") == 32
    assert warp_size_for(None, ("PORTER_WARP_SIZE=64",)) == 64


def test_buffers_round_trip_and_alloc_is_poisoned(be: CpuBackend) -> None:
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert np.array_equal(be.to_host(be.to_device(x), np.float64, (3, 4)), x)
    fresh = be.to_host(be.alloc(16), np.float32, (4,))
    assert np.isnan(fresh).all()
    with pytest.raises(LaunchError):
        be.to_host(be.alloc(8), np.float32, (4,))


# --------------------------------------------------------------------------- kernels vs NumPy

SAXPY = """
#include <cuda_runtime.h>
__global__ void saxpy(int n, float a, const float* __restrict__ x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void vector_add(const double* a, const double* b, double* c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        c[i] = a[i] + b[i];
}
"""


def test_saxpy_against_numpy(be: CpuBackend) -> None:
    prog = build(be, SAXPY, "saxpy")
    assert prog.signature == ("i4", "f4", "p8", "p8")
    n = 3000
    x, y = RNG.random(n, dtype=np.float32), RNG.random(n, dtype=np.float32)
    dy = be.to_device(y)
    ms = prog(
        np.int32(n), np.float32(2.5), be.to_device(x), dy, grid=((n + 255) // 256,), block=(256,), timed=True
    )
    assert isinstance(ms, float) and ms >= 0
    np.testing.assert_allclose(be.to_host(dy, np.float32, (n,)), np.float32(2.5) * x + y, rtol=1e-6)


def test_noinline_beside_a_standard_header_that_spells_the_attribute(be: CpuBackend, tmp_path) -> None:
    # libstdc++'s <memory> says __attribute__((__noinline__)): a macro for __noinline__ breaks it (seen on
    # the H200 machine replaying a corpus kernel whose helpers include it); the device code's own
    # __noinline__, in the file and in a header it includes, is spelled as the attribute instead
    (tmp_path / "helpers.cuh").write_text(
        "__device__ __noinline__ float half_of(float v) { return v / 2; }\n"
    )
    src = """
    #include <memory>
    #include "helpers.cuh"
    __noinline__ __device__ float twice_of(float v) { return 2 * v; }
    __global__ void k(float* x) { x[threadIdx.x] = half_of(twice_of(x[threadIdx.x])) + 1; }
    """
    prog = build(be, src, "k", CompileOptions(include_dirs=(str(tmp_path),)))
    x = be.to_device(np.arange(8, dtype=np.float32))
    prog(x, grid=(1,), block=(8,))
    assert list(be.to_host(x, np.float32, (8,))) == [i + 1.0 for i in range(8)]


def test_a_kernel_named_kernel(be: CpuBackend) -> None:
    # Rodinia's particlefilter names its kernel `kernel`; porter's launcher must not shadow it
    prog = build(be, "__global__ void kernel(float* x) { x[threadIdx.x] += 1.0f; }", "kernel")
    x = be.to_device(np.zeros(4, np.float32))
    prog(x, grid=(1,), block=(4,))
    assert be.to_host(x, np.float32, (4,)).tolist() == [1.0] * 4


@pytest.mark.parametrize(("entry", "added"), [("kérnel", 1.0), ("ñadir", 2.0), ("sc\\u00e4le", 3.0)])
def test_unicode_kernel_names(be: CpuBackend, entry: str, added: float) -> None:
    # C++ identifiers may be Unicode, first letter included, or universal character names (scäle)
    src = (
        "__global__ void kérnel(float* x) { x[threadIdx.x] += 1.0f; }\n"
        "__global__ void ñadir(float* x) { x[threadIdx.x] += 2.0f; }\n"
        "__global__ void sc\\u00e4le(float* x) { x[threadIdx.x] += 3.0f; }\n"
    )
    prog = build(be, src, entry)
    x = be.to_device(np.zeros(4, np.float32))
    prog(x, grid=(1,), block=(4,))
    assert be.to_host(x, np.float32, (4,)).tolist() == [added] * 4


def test_half_and_bfloat16_round_as_a_gpu_does(be: CpuBackend) -> None:
    # binary16 through porter's cuda_fp16.h: every float class (normal, subnormal, overflow, ties,
    # inf, NaN) rounds to nearest-even, bit for bit as NumPy's float16; bfloat16 keeps the upper half
    src = """
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    __global__ void k(const float* x, float* h, float* b, float* s, int n) {
        int i = threadIdx.x + blockIdx.x * blockDim.x;
        if (i >= n) return;
        h[i] = __half2float(__float2half(x[i]));
        b[i] = __bfloat162float(__float2bfloat16(x[i]));
        __half a = __float2half(x[i]);
        s[i] = __half2float(__hadd(a, __hmul(a, __float2half(0.5f))));
    }
    """
    rng = np.random.default_rng(3)
    special = [
        0.0,
        -0.0,
        1.0,
        65504.0,
        65520.0,
        1e6,
        6e-8,
        3e-8,
        2.98e-8,
        1e-5,
        2049.0,
        2051.0,
        np.inf,
        -np.inf,
    ]
    x = np.concatenate([np.array(special, np.float32), rng.standard_normal(100).astype(np.float32) * 100,
                        rng.standard_normal(50).astype(np.float32) * 1e-6]).astype(np.float32)  # fmt: skip
    n = x.size
    prog = build(be, src, "k")
    h, b, sd = (be.to_device(np.zeros(n, np.float32)) for _ in range(3))
    prog(be.to_device(x), h, b, sd, np.int32(n), grid=((n + 127) // 128,), block=(128,))
    with np.errstate(over="ignore", invalid="ignore"):  # 1e6 and inf overflow binary16 on purpose
        want_h = x.astype(np.float16).astype(np.float32)
        a16 = x.astype(np.float16)
        want_s = (a16 + (a16 * np.float16(0.5)).astype(np.float16)).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(be.to_host(h, np.float32, (n,)), want_h)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
    np.testing.assert_array_equal(be.to_host(b, np.float32, (n,)), rounded)
    np.testing.assert_array_equal(be.to_host(sd, np.float32, (n,)), want_s)


def test_vector_add_grid_stride(be: CpuBackend) -> None:
    prog = build(be, SAXPY, "vector_add")
    n = 5000
    a, b = RNG.random(n), RNG.random(n)
    c = be.alloc(n * 8)
    assert prog(be.to_device(a), be.to_device(b), c, np.int32(n), grid=(4,), block=(128,)) is None
    assert np.array_equal(be.to_host(c, np.float64, (n,)), a + b)


def test_argument_checks(be: CpuBackend) -> None:
    prog = build(be, SAXPY, "saxpy")
    x = be.to_device(np.zeros(4, np.float32))
    with pytest.raises(LaunchError, match="float"):
        prog(np.int32(4), np.float64(1.0), x, x, grid=(1,), block=(4,))
    with pytest.raises(LaunchError, match="pointer"):
        prog(np.int32(4), np.float32(1.0), np.float32(0), x, grid=(1,), block=(4,))
    with pytest.raises(LaunchError, match="takes 4 arguments"):
        prog(np.int32(4), x, grid=(1,), block=(4,))
    with pytest.raises(LaunchError, match="1024"):
        prog(np.int32(4), np.float32(1), x, x, grid=(1,), block=(2048,))
    with pytest.raises(LaunchError, match="limit"):
        prog(np.int32(4), np.float32(1), x, x, grid=(1 << 16, 1 << 8), block=(1024,))
    prog(4, 1.0, x, x, grid=(1,), block=(4,))  # Python numbers are converted to the parameter types


MATMUL = """
#define TILE 16
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int ac = t * TILE + threadIdx.x, br = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ac < K) ? A[row * K + ac] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (br < K && col < N) ? B[br * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""


def test_shared_memory_tiled_matmul(be: CpuBackend) -> None:
    prog = build(be, MATMUL, "matmul_tiled")
    M, N, K = 40, 33, 50
    a = RNG.random((M, K), dtype=np.float32)
    b = RNG.random((K, N), dtype=np.float32)
    c = be.alloc(M * N * 4)
    grid = ((N + 15) // 16, (M + 15) // 16)
    prog(
        be.to_device(a), be.to_device(b), c, np.int32(M), np.int32(N), np.int32(K), grid=grid, block=(16, 16)
    )
    np.testing.assert_allclose(be.to_host(c, np.float32, (M, N)), a @ b, rtol=1e-5)


HISTOGRAM = """
#define BINS 64
__global__ void histogram(const unsigned char* data, unsigned int* hist, int n)
{
    __shared__ unsigned int local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] % BINS], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) atomicAdd(&hist[b], local[b]);
}
"""


def test_histogram_shared_and_global_atomics(be: CpuBackend) -> None:
    prog = build(be, HISTOGRAM, "histogram")
    n = 4000
    data = RNG.integers(0, 256, n, dtype=np.uint8)
    hist = be.to_device(np.zeros(64, np.uint32))
    prog(be.to_device(data), hist, np.int32(n), grid=(5,), block=(96,))
    expected = np.bincount(data % 64, minlength=64).astype(np.uint32)
    assert np.array_equal(be.to_host(hist, np.uint32, (64,)), expected)


ATOMICS = """
__global__ void atomics(int* i, unsigned* u, unsigned long long* ull, float* f, double* d)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&i[0], 1); atomicSub(&i[1], 2); atomicMax(&i[2], t); atomicMin(&i[3], -t);
    atomicAnd(&u[0], ~(1u << (t % 32))); atomicOr(&u[1], 1u << (t % 32)); atomicXor(&u[2], 1u);
    atomicInc(&u[3], 9u); atomicDec(&u[4], 9u);
    atomicAdd(&ull[0], 3ull);
    int old = i[4], assumed;
    do { assumed = old; old = atomicCAS(&i[4], assumed, assumed + 1); } while (old != assumed);
    atomicExch(&i[5], 7); atomicAdd_block(&i[6], 2);
    atomicAdd(&f[0], 0.5f); atomicAdd(&d[0], 0.25); atomicMax(&f[1], (float)t);
}
"""


def test_atomics_all_types(be: CpuBackend) -> None:
    prog = build(be, ATOMICS, "atomics")
    threads = 100
    i = be.to_device(np.zeros(8, np.int32))
    u = be.to_device(np.array([0xFFFFFFFF, 0, 0, 0, 0], np.uint32))
    ull = be.to_device(np.zeros(1, np.uint64))
    f = be.to_device(np.zeros(2, np.float32))
    d = be.to_device(np.zeros(1, np.float64))
    prog(i, u, ull, f, d, grid=(4,), block=(25,))
    hi = be.to_host(i, np.int32, (8,))
    assert list(hi[:4]) == [threads, -2 * threads, threads - 1, -(threads - 1)]
    assert hi[4] == threads and hi[5] == 7 and hi[6] == 2 * threads
    hu = be.to_host(u, np.uint32, (5,))
    assert hu[0] == 0 and hu[1] == 0xFFFFFFFF and hu[2] == 0
    assert hu[3] == threads % 10 and hu[4] == (-threads) % 10
    assert be.to_host(ull, np.uint64, (1,))[0] == 3 * threads
    assert list(be.to_host(f, np.float32, (2,))) == [threads * 0.5, threads - 1]
    assert be.to_host(d, np.float64, (1,))[0] == threads * 0.25


WARP = """
__inline__ __device__ float warp_sum(float v)
{
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}
__global__ void reduce_shfl(const float* in, float* out, int n)
{
    extern __shared__ float partial[];
    int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / warpSize ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}
__global__ void warp_ops(const int* in, int* out)
{
    int lane = threadIdx.x % 32;
    int v = in[threadIdx.x];
    out[0 * 64 + threadIdx.x] = __shfl_sync(0xffffffff, v, 3);
    out[1 * 64 + threadIdx.x] = __shfl_up_sync(0xffffffff, v, 1, 8);
    out[2 * 64 + threadIdx.x] = __shfl_xor_sync(0xffffffff, v, 1);
    out[3 * 64 + threadIdx.x] = (int)__ballot_sync(0xffffffff, v % 2);
    out[4 * 64 + threadIdx.x] = __all_sync(0xffffffff, v >= 0) + 2 * __any_sync(0xffffffff, v == 5);
    out[5 * 64 + threadIdx.x] = __reduce_add_sync(0xffffffffu, (unsigned)v);
    if (lane < 16) out[6 * 64 + threadIdx.x] = __shfl_down_sync(0x0000ffff, v, 4, 16);
    else out[6 * 64 + threadIdx.x] = -1;
    int active = __popc(__activemask());  // lanes not yet exited: all of them before the __syncwarp
    __syncwarp();
    out[7 * 64 + threadIdx.x] = active + __lane_id() * 100;
}
"""


def test_warp_shuffle_reduction_with_dynamic_shared(be: CpuBackend) -> None:
    prog = build(be, WARP, "reduce_shfl")
    n, blocks, threads = 5000, 6, 128
    x = RNG.random(n, dtype=np.float32)
    out = be.alloc(blocks * 4)
    prog(
        be.to_device(x), out, np.int32(n), grid=(blocks,), block=(threads,), shared_bytes=(threads // 32) * 4
    )
    got = be.to_host(out, np.float32, (blocks,))
    # every element is summed once, by block (i // threads) % blocks
    idx = (np.arange(n) // threads) % blocks
    ref = np.array([x[idx == b].astype(np.float64).sum() for b in range(blocks)])
    np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_warp_intrinsics_semantics(be: CpuBackend) -> None:
    prog = build(be, WARP, "warp_ops")
    v = np.arange(64, dtype=np.int32)
    out = be.alloc(8 * 64 * 4)
    prog(be.to_device(v), out, grid=(1,), block=(64,))
    o = be.to_host(out, np.int32, (8, 64))
    lane = np.arange(64) % 32
    base = np.arange(64) - lane
    assert np.array_equal(o[0], base + 3)
    assert np.array_equal(o[1], np.where(lane % 8 >= 1, v - 1, v))
    assert np.array_equal(o[2], v ^ 1)
    odd = sum(1 << k for k in range(1, 32, 2))
    assert np.array_equal(o[3], np.full(64, np.int32(np.uint32(odd).view(np.int32))))
    assert np.array_equal(o[4], np.array([1 + 2] * 32 + [1] * 32))
    assert np.array_equal(o[5], np.repeat([sum(range(32)), sum(range(32, 64))], 32))
    assert np.array_equal(o[6], np.where(lane < 16, np.where(lane + 4 < 16, v + 4, v), -1))
    assert np.array_equal(o[7], 32 + lane * 100)


STENCIL = """
__global__ void jacobi(const float* in, float* out, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) { out[y * nx + x] = in[y * nx + x]; return; }
    out[y * nx + x] = 0.25f * (in[y * nx + x - 1] + in[y * nx + x + 1] + in[(y - 1) * nx + x] + in[(y + 1) * nx + x]);
}
"""


def test_2d_stencil(be: CpuBackend) -> None:
    prog = build(be, STENCIL, "jacobi")
    ny, nx = 37, 45
    a = RNG.random((ny, nx), dtype=np.float32)
    out = be.alloc(a.nbytes)
    prog(
        be.to_device(a), out, np.int32(nx), np.int32(ny), grid=((nx + 15) // 16, (ny + 7) // 8), block=(16, 8)
    )
    ref = a.copy()
    ref[1:-1, 1:-1] = np.float32(0.25) * (a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1])
    np.testing.assert_allclose(be.to_host(out, np.float32, (ny, nx)), ref, rtol=1e-6)


TEMPLATES = """
template <typename T>
__global__ void axpby(int n, T a, const T* x, T b, T* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b * y[i];
}
template <int BLOCK>
__global__ void block_sum(const float* in, float* partial, int n)
{
    __shared__ float s[BLOCK];
    int tid = threadIdx.x, i = blockIdx.x * BLOCK + tid;
    s[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = s[0];
}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_template_kernel_instantiation(be: CpuBackend, dtype: type) -> None:
    ctype = "float" if dtype is np.float32 else "double"
    prog = build(be, TEMPLATES, f"axpby<{ctype}>")
    n = 1000
    x, y = RNG.random(n).astype(dtype), RNG.random(n).astype(dtype)
    dy = be.to_device(y)
    prog(np.int32(n), dtype(2), be.to_device(x), dtype(-0.5), dy, grid=(4,), block=(256,))
    np.testing.assert_allclose(be.to_host(dy, dtype, (n,)), dtype(2) * x + dtype(-0.5) * y, rtol=1e-6)


@pytest.mark.parametrize("block", [128, 256])
def test_non_type_template_shared_size(be: CpuBackend, block: int) -> None:
    prog = build(be, TEMPLATES, f"block_sum<{block}>")
    n = 1000
    blocks = (n + block - 1) // block
    x = RNG.random(n, dtype=np.float32)
    out = be.alloc(blocks * 4)
    prog(be.to_device(x), out, np.int32(n), grid=(blocks,), block=(block,))
    ref = np.add.reduceat(x.astype(np.float64), np.arange(0, n, block))
    np.testing.assert_allclose(be.to_host(out, np.float32, (blocks,)), ref, rtol=1e-5)


DYNAMIC = """
extern __shared__ double scratch[];
__global__ void reverse_block(const double* in, double* out)
{
    extern __shared__ __align__(16) unsigned char raw[];
    double* s = reinterpret_cast<double*>(raw);
    int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    s[t] = in[base + t];
    __syncthreads();
    out[base + t] = scratch[blockDim.x - 1 - t];
}
"""


def test_extern_shared_dynamic_size(be: CpuBackend) -> None:
    prog = build(be, DYNAMIC, "reverse_block")
    threads, blocks = 200, 3
    x = RNG.random(threads * blocks)
    out = be.alloc(x.nbytes)
    prog(be.to_device(x), out, grid=(blocks,), block=(threads,), shared_bytes=threads * 8)
    assert np.array_equal(be.to_host(out, np.float64, (blocks, threads)), x.reshape(blocks, threads)[:, ::-1])
    with pytest.raises(LaunchError, match="shared"):
        prog(be.to_device(x), out, grid=(1,), block=(threads,), shared_bytes=1 << 30)


# --------------------------------------------------------------------------- races and poison

RACE = """
#define B 128
__global__ void shift_sum(const float* in, float* out, int with_barrier)
{
    __shared__ float s[B];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * B + t] * 2.0f;
    if (with_barrier) __syncthreads();
    out[blockIdx.x * B + t] = s[t] + s[(t + 1) % B];
}
"""


def test_missing_syncthreads_is_exposed_across_seeds(be: CpuBackend) -> None:
    prog = build(be, RACE, "shift_sum")
    x = RNG.random(4 * 128, dtype=np.float32)

    def run(with_barrier: int, seed: int) -> np.ndarray:
        out = be.alloc(x.nbytes)
        prog(be.to_device(x), out, np.int32(with_barrier), grid=(4,), block=(128,), seed=seed)
        return be.to_host(out, np.float32, (x.size,))

    good = [run(1, seed) for seed in range(4)]
    for other in good[1:]:
        assert other.tobytes() == good[0].tobytes()
    ref = 2 * x.reshape(4, 128)
    np.testing.assert_allclose(good[0].reshape(4, 128), ref + np.roll(ref, -1, axis=1), rtol=1e-6)
    racy = [run(0, seed) for seed in range(4)]
    assert all(np.isnan(r).any() for r in racy)  # read the poisoned shared memory
    assert len({r.tobytes() for r in racy}) > 1  # and differently on every schedule
    assert len({run(0, 99).tobytes() for _ in range(2)}) == 1  # a given seed replays its schedule


def test_default_seeds_differ_between_launches(be: CpuBackend) -> None:
    prog = build(be, RACE, "shift_sum")
    x = be.to_device(RNG.random(128, dtype=np.float32))
    outs = set()
    seeds = set()
    for _ in range(3):
        out = be.alloc(512)
        prog(x, out, np.int32(0), grid=(1,), block=(128,))
        seeds.add(prog.last_seed)
        outs.add(be.to_host(out, np.float32, (128,)).tobytes())
    assert len(seeds) == 3 and len(outs) > 1


POISON = """
__global__ void read_uninitialised(float* f, int* i, float* local_out)
{
    __shared__ float sf[64];
    __shared__ int si[64];
    float never_set;
    f[threadIdx.x] = sf[threadIdx.x];
    i[threadIdx.x] = si[threadIdx.x];
    if (threadIdx.x == 0) *local_out = never_set;
    sf[threadIdx.x] = 1.0f;  // block 1 must see the poison again, not block 0's values
}
"""


def test_uninitialised_shared_memory_reads_poison(be: CpuBackend) -> None:
    prog = build(be, POISON, "read_uninitialised")
    f, i, loc = be.to_device(np.zeros(64, np.float32)), be.to_device(np.zeros(64, np.int32)), be.alloc(4)
    for _ in range(2):
        prog(f, i, loc, grid=(2,), block=(64,))
        assert np.isnan(be.to_host(f, np.float32, (64,))).all()
        assert (be.to_host(i, np.int32, (64,)) == -1).all()
    local = be.to_host(loc, np.uint32, (1,))[0]
    assert local == 0xFEFEFEFE  # -ftrivial-auto-var-init=pattern


def test_divergent_barrier_is_reported_as_deadlock(be: CpuBackend) -> None:
    src = """
    __global__ void bad(float* x)
    {
        if (threadIdx.x < 16) { __syncthreads(); }
        else { x[threadIdx.x] = 1.0f; __syncwarp(); }
    }
    """
    prog = build(be, src, "bad")
    with pytest.raises(LaunchError, match="deadlock"):
        prog(be.alloc(256), grid=(1,), block=(64,))


def test_early_exit_threads_do_not_block_barriers(be: CpuBackend) -> None:
    src = """
    __global__ void tail(const int* in, int* out, int n)
    {
        __shared__ int s[64];
        int t = threadIdx.x;
        if (t >= n) return;
        s[t] = in[t];
        __syncthreads();
        out[t] = s[n - 1 - t];
    }
    """
    prog = build(be, src, "tail")
    out = be.to_device(np.zeros(64, np.int32))
    prog(be.to_device(np.arange(64, dtype=np.int32)), out, np.int32(50), grid=(1,), block=(64,))
    assert list(be.to_host(out, np.int32, (64,))[:50]) == list(range(49, -1, -1))


def test_barrier_reductions_and_match(be: CpuBackend) -> None:
    src = """
    __global__ void votes(const int* in, int* out)
    {
        int v = in[threadIdx.x];
        out[threadIdx.x] = __syncthreads_count(v > 10);
        out[100 + threadIdx.x] = __syncthreads_and(v >= 0) * 10 + __syncthreads_or(v > 98);
        out[200 + threadIdx.x] = (int)__match_any_sync(0xffffffff, v % 4);
    }
    """
    prog = build(be, src, "votes")
    v = np.arange(96, dtype=np.int32)
    out = be.alloc(300 * 4)
    prog(be.to_device(v), out, grid=(1,), block=(96,))
    o = be.to_host(out, np.int32, (300,))
    assert (o[:96] == 85).all() and (o[100:196] == 10).all()
    lane = np.arange(96) % 32
    expected = np.array([sum(1 << k for k in range(32) if k % 4 == ln % 4) for ln in lane], np.uint32)
    assert np.array_equal(o[200:296].view(np.uint32), expected)


def test_trap_is_a_launch_error(be: CpuBackend) -> None:
    prog = build(be, "__global__ void k(int* p) { if (threadIdx.x == 3) __trap(); p[threadIdx.x] = 1; }", "k")
    with pytest.raises(LaunchError, match="__trap"):
        prog(be.alloc(64), grid=(2,), block=(16,))
    prog2 = build(be, "__global__ void k(int* p) { p[threadIdx.x] = 1; }", "k")
    prog2(be.alloc(64), grid=(1,), block=(16,))


def test_portable_ucontext_switch_gives_same_results(be: CpuBackend) -> None:
    prog = build(be, MATMUL, "matmul_tiled", CompileOptions(flags=("-DPORTER_UCONTEXT",)))
    M = N = K = 20
    a, b = RNG.random((M, K), dtype=np.float32), RNG.random((K, N), dtype=np.float32)
    c = be.alloc(M * N * 4)
    prog(
        be.to_device(a),
        be.to_device(b),
        c,
        np.int32(M),
        np.int32(N),
        np.int32(K),
        grid=(2, 2),
        block=(16, 16),
    )
    np.testing.assert_allclose(be.to_host(c, np.float32, (M, N)), a @ b, rtol=1e-5)


def test_struct_argument_by_value(be: CpuBackend) -> None:
    src = """
    struct Params { int n; float scale; double offset; };
    __global__ void apply(Params p, float* y)
    {
        int i = threadIdx.x;
        if (i < p.n) y[i] = p.scale * i + (float)p.offset;
    }
    """
    prog = build(be, src, "apply")
    assert prog.signature == ("s16", "p8")
    dt = np.dtype([("n", np.int32), ("scale", np.float32), ("offset", np.float64)])
    params = np.array([(10, 2.0, 0.5)], dtype=dt)[0]
    y = be.to_device(np.zeros(16, np.float32))
    prog(params, y, grid=(1,), block=(16,))
    assert list(be.to_host(y, np.float32, (16,))) == [2.0 * i + 0.5 for i in range(10)] + [0.0] * 6


# --------------------------------------------------------------------------- HIP and wave64

HIP = """
#include <hip/hip_runtime.h>
__global__ void hip_scale(const float* x, float* y, float a, int n)
{
    int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = a * x[i];
}
__global__ void wave_ballot(unsigned long long* out)
{
    unsigned long long b = __ballot(threadIdx.x % 3 == 0);
    if (threadIdx.x % warpSize == 0) out[threadIdx.x / warpSize] = b;
    out[2 + threadIdx.x] = __shfl_xor(threadIdx.x, 32);
}
"""


def test_hip_spelling(be: CpuBackend) -> None:
    binary = be.compile(HIP, "hip_scale")
    assert binary.meta["dialect"] == "hip"
    prog = be.load(binary, be.devices()[0])
    n = 700
    x = RNG.random(n, dtype=np.float32)
    y = be.alloc(x.nbytes)
    prog(be.to_device(x), y, np.float32(3), np.int32(n), grid=(3,), block=(256,))
    np.testing.assert_allclose(be.to_host(y, np.float32, (n,)), 3 * x, rtol=1e-6)


def test_wave64_semantics_for_amd_arch(be: CpuBackend) -> None:
    binary = be.compile(HIP, "wave_ballot", CompileOptions(arch="gfx90a"))
    assert binary.meta["warp_size"] == 64
    prog = be.load(binary, be.devices()[0])
    assert prog.warp_size == 64
    out = be.alloc((2 + 128) * 8)
    prog(out, grid=(1,), block=(128,))
    got = be.to_host(out, np.uint64, (130,))
    mask = sum(1 << k for k in range(64) if k % 3 == 0)
    mask2 = sum(1 << (k - 64) for k in range(64, 128) if k % 3 == 0)
    assert int(got[0]) == mask and int(got[1]) == mask2
    assert np.array_equal(got[2:], np.arange(128) ^ 32)


# --------------------------------------------------------------------------- refusals and errors


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        ('asm volatile("mov.u32 %0, %%laneid;" : "=r"(x));', "inline assembly"),
        ("x = tex2D(tex, 0.5f, 0.5f);", "textures"),  # (1-D references read by tex1Dfetch are emulated)
        ("cooperative_groups::this_grid().sync();", "cooperative groups"),
        ("grid_group g = this_grid(); g.sync();", "grid"),
        ("child<<<1, 1>>>(p);", "dynamic parallelism"),
        ("__builtin_amdgcn_s_sleep(1);", "target-specific compiler builtins"),
        ("wmma::fill_fragment(frag, 0.0f);", "tensor-core"),
        ("__nv_fp8_e4m3 h = __nv_fp8_e4m3(1.0f);", "fp8"),
    ],
)
def test_unemulatable_constructs_are_refused(be: CpuBackend, snippet: str, what: str) -> None:
    src = f"__global__ void k(float* p)\n{{\n    int x = 0;\n    {snippet}\n}}\n"
    with pytest.raises(CannotEmulate, match=rf"^cannot emulate: .*{what}.*line 4"):
        be.compile(src, "k")


def test_refused_header_and_comment_mentions(be: CpuBackend) -> None:
    with pytest.raises(CannotEmulate, match=r"cannot emulate: fp8 \(cuda_fp8.h\)"):
        be.compile("#include <cuda_fp8.h>\n__global__ void k() {}\n", "k")
    ok = '// uses no asm("...") here\n__global__ void k(int* p) { const char* s = "asm"; p[0] = s[0]; }\n'
    be.compile(ok, "k")


def test_unknown_intrinsic_is_cannot_emulate(be: CpuBackend) -> None:
    with pytest.raises(CannotEmulate, match="__fancy_intrinsic"):
        be.compile("__global__ void k(int* p)\n{\n    p[0] = __fancy_intrinsic(1);\n}\n", "k")


def test_compile_error_carries_numbered_source_and_user_line(be: CpuBackend) -> None:
    src = "#include <cuda_runtime.h>\n\n__global__ void k(float* p)\n{\n    p[0] = undefined_name;\n}\n"
    with pytest.raises(CompileError) as info:
        be.compile(src, "k")
    err = info.value
    assert "kernel.cu:5:" in err.log
    assert "\n5 |     p[0] = undefined_name;" in str(err)
    assert err.backend == "cpu" and err.entry == "k"


def test_bad_entry_is_compile_error(be: CpuBackend) -> None:
    with pytest.raises(CompileError):
        be.compile(SAXPY, "saxpy; system")
    with pytest.raises(CompileError):
        be.compile(SAXPY, "no_such_kernel")


def test_constant_memory_symbol(be: CpuBackend) -> None:
    src = """
    __constant__ float taps[3];
    __device__ int calls;
    __global__ void conv(const float* x, float* y, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i > 0 && i < n - 1) y[i] = taps[0] * x[i - 1] + taps[1] * x[i] + taps[2] * x[i + 1];
        atomicAdd(&calls, 1);
    }
    """
    prog = build(be, src, "conv")
    taps = np.array([0.25, 0.5, 0.25], np.float32)
    prog.set_symbol("taps", taps)
    prog.set_symbol("calls", np.int32(0))
    n = 300
    x = RNG.random(n, dtype=np.float32)
    y = be.to_device(np.zeros(n, np.float32))
    prog(be.to_device(x), y, np.int32(n), grid=(2,), block=(256,))
    got = be.to_host(y, np.float32, (n,))
    np.testing.assert_allclose(got[1:-1], 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:], rtol=1e-6)
    assert prog.get_symbol("calls", np.int32, ())[()] == 512
    with pytest.raises(LaunchError):
        prog.set_symbol("nope", taps)


def test_address_sanitizer_build_catches_out_of_bounds(be: CpuBackend, tmp_path) -> None:
    env = asan_environment()
    if not os.path.exists(env["LD_PRELOAD"]):
        pytest.skip("libasan is not installed")
    script = tmp_path / "oob.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from porter.backends import CompileOptions
            from porter.backends.cpu import CpuBackend
            be = CpuBackend()
            src = "__global__ void oob(const float* x, float* y, int n) { int i = threadIdx.x; if (i <= n) y[i] = x[i]; }"
            prog = be.load(be.compile(src, "oob", CompileOptions(debug=True)))
            prog(be.to_device(np.ones(63, np.float32)), be.alloc(63 * 4), np.int32(63), grid=(1,), block=(64,))
            print("no report")
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )
    assert "heap-buffer-overflow" in proc.stderr
    assert "no report" not in proc.stdout
    binary = be.compile("__global__ void k(int* p) { p[0] = 1; }", "k", CompileOptions(debug=True))
    with pytest.raises(LaunchError, match="LD_PRELOAD"):
        be.load(binary)


def test_rewrite_shared_keeps_lines() -> None:
    src = (
        "extern __shared__ float dyn[];\n"
        "__global__ void k() {\n"
        "    __shared__ float a[4][8], b; // note\n"
        "    static __shared__ int\n"
        "        c[2];\n"
        "}\n"
    )
    out = rewrite_shared(src)
    assert out.count("\n") == src.count("\n")
    lines = out.splitlines()
    assert "PORTER_DYN_SHARED(float)" in lines[0]
    assert "PORTER_SHARED_INIT(a); PORTER_SHARED_INIT(b);" in lines[2] and lines[2].endswith("// note")
    assert "static" not in lines[3] and "PORTER_SHARED_INIT(c)" in lines[4]
    assert blank_comments_and_strings('a /* x */ "y" // z') == "a                 "


def test_host_side_cuda_headers_beside_the_kernels_compile(be: CpuBackend) -> None:
    # the device code of a whole program file keeps its includes: the profiler API, driver types
    source = (
        "#include <cuda_profiler_api.h>\n#include <driver_types.h>\n#include <crt/host_defines.h>\n" + SAXPY
    )
    prog = build(be, source, "saxpy")
    assert prog.signature == ("i4", "f4", "p8", "p8")


def test_the_wavefront_device_builds_and_runs_with_64_lane_warps(be: CpuBackend) -> None:
    assert be.wavefront_device(32) is None  # the default width is the emulator itself
    wave = be.wavefront_device(64)
    assert wave is not None and wave.label == "cpu:cpu-emulator-wave64" and wave.facts.warp_size == 64
    assert "warp64" in be.toolchain_id(wave) and "warp32" in be.toolchain_id(be.devices()[0])
    source = "__global__ void width(int* out) { out[threadIdx.x] = warpSize; }\n"
    prog = be.load(be.compile(source, "width", CompileOptions(), wave), wave)
    out = be.to_device(np.zeros(4, dtype=np.int32))
    prog(out, grid=(1,), block=(4,))
    assert be.to_host(out, np.int32, (4,)).tolist() == [64] * 4


@pytest.mark.parametrize("wave", [32, 64])
def test_a_shuffle_after_some_lanes_exited_has_one_rule_for_every_spelling(be: CpuBackend, wave: int) -> None:
    # lanes i >= n return first; the rest shuffle.  The CUDA full mask and HIP's mask-less spelling must
    # agree (both: the lanes still running), never a deadlock for one and a result for the other.
    body = "int i = threadIdx.x; if (i >= n) return; float v = x[i]; v += {call}; x[i] = v; }}\n"
    full = "0xffffffff" if wave == 32 else "0xffffffffffffffffull"  # a 32-bit mask leaves lanes 32-63 out
    spellings = {
        "cuda": "__global__ void k(float* x, int n) { " + body.format(call=f"__shfl_down_sync({full}, v, 1)"),
        "hip": "#include <hip/hip_runtime.h>\n__global__ void k(float* x, int n) { "
        + body.format(call="__shfl_down(v, 1)"),
    }
    device = be.devices()[0] if wave == 32 else be.wavefront_device(64)
    assert device is not None
    for block, n in ((40, 40), (32, 20), (64, 50)):
        got = {}
        for name, source in spellings.items():
            prog = be.load(be.compile(source, "k", CompileOptions(), device), device)
            x = be.to_device(np.arange(block, dtype=np.float32))
            prog(x, np.int32(n), grid=(1,), block=(block,))
            got[name] = be.to_host(x, np.float32, (block,))
        np.testing.assert_array_equal(got["cuda"], got["hip"], err_msg=f"block {block}, n {n}")


def test_shared_memory_declared_in_an_included_header_is_rewritten_too(be: CpuBackend, tmp_path) -> None:
    (tmp_path / "smem.cuh").write_text(
        "template <class T> struct Dyn { __device__ T* get() { extern __shared__ T buf[]; return buf; } };\n"
    )
    source = (
        '#include "smem.cuh"\n'
        "__global__ void rev(float* x) {\n"
        "    float* s = Dyn<float>().get();\n"
        "    s[threadIdx.x] = x[threadIdx.x];\n    __syncthreads();\n"
        "    x[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];\n}\n"
    )
    device = be.devices()[0]
    prog = be.load(be.compile(source, "rev", CompileOptions(include_dirs=(str(tmp_path),)), device), device)
    x = be.to_device(np.arange(8, dtype=np.float32))
    prog(x, grid=(1,), block=(8,), shared_bytes=8 * 4)
    assert be.to_host(x, np.float32, (8,)).tolist() == list(range(7, -1, -1))
    assert (tmp_path / "smem.cuh").read_text().count("extern __shared__") == 1  # the user's file untouched


def test_shared_memory_in_a_header_found_through_a_nested_include_folder(be: CpuBackend, tmp_path) -> None:
    # a program's own folder and its include/ both on the path (as porter builds a kernel of a program
    # whose -I names include/): the header found through include/ is the rewritten one (issue #29)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "ops.cuh").write_text(
        "__global__ void rev(float* x) {\n"
        "    extern __shared__ float part[];\n"
        "    part[threadIdx.x] = x[threadIdx.x];\n    __syncthreads();\n"
        "    x[threadIdx.x] = part[blockDim.x - 1 - threadIdx.x];\n}\n"
    )
    source = '#include "ops.cuh"\n'
    dirs = (str(tmp_path), str(tmp_path / "include"))
    device = be.devices()[0]
    prog = be.load(be.compile(source, "rev", CompileOptions(include_dirs=dirs), device), device)
    x = be.to_device(np.arange(8, dtype=np.float32))
    prog(x, grid=(1,), block=(8,), shared_bytes=8 * 4)
    assert be.to_host(x, np.float32, (8,)).tolist() == list(range(7, -1, -1))


def test_a_header_earlier_on_the_include_path_keeps_coming_first(be: CpuBackend, tmp_path) -> None:
    # two headers of one name: the first include folder's wins, as in the program's own build, though
    # only the second one's copy is rewritten
    for sub, value in (("a", 1), ("b", 2)):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "v.cuh").write_text(
            f"__device__ float v() {{ {'extern __shared__ float s[]; (void)s; ' if sub == 'b' else ''}"
            f"return {value}.0f; }}\n"
        )
    source = '#include "v.cuh"\n__global__ void k(float* x) { x[threadIdx.x] = v(); }\n'
    dirs = (str(tmp_path / "a"), str(tmp_path / "b"))
    device = be.devices()[0]
    prog = be.load(be.compile(source, "k", CompileOptions(include_dirs=dirs), device), device)
    x = be.to_device(np.zeros(4, dtype=np.float32))
    prog(x, grid=(1,), block=(4,))
    assert be.to_host(x, np.float32, (4,)).tolist() == [1.0] * 4


@pytest.mark.integration
def test_an_empty_entry_compiles_the_unit_only(be: CpuBackend) -> None:
    """A unit whose kernels are templates no launch in it instantiates (Rodinia dwt2d's components.cu, ported to
    HIP, checked on a machine without hipcc): compiled as it is, no kernel looked up -- as NVRTC does with an empty
    entry; a broken unit still fails, naming g++'s first error in its first line."""
    only_templates = "template <typename T> __global__ void fill(T* x, T v) { x[threadIdx.x] = v; }\n"
    binary = be.compile(only_templates, "")
    assert binary.entry == "" and binary.data[:4] == b"\x7fELF"
    with pytest.raises(CompileError) as info:
        be.compile(only_templates + "__device__ int broken = oops;\n", "")
    first = str(info.value).splitlines()[0]
    assert first.startswith("cpu: compile of source failed: kernel.cu:2: ") and "'oops'" in first, first
    with pytest.raises(CompileError, match="not a kernel name"):
        be.compile(only_templates, "fill<int>; system")
