"""The emulator builds what nvcc builds: heavy templates, vector types, math intrinsics with their rounding,
half precision, warp and block built-ins, device assert and printf -- each with a known result.

The kernels are our own (tests/fixtures/cuda/emulator_breadth); references are computed here, exactly
where the intrinsic rounds in a named direction (fractions.Fraction, then rounded as named).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from porter.backends import CannotEmulate, CompileError, CompileOptions, LaunchError
from porter.backends.cpu import CpuBackend, CpuProgram

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
]

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "emulator_breadth"
RNG = np.random.default_rng(29)
# Built as a model's candidate is: the import check then also proves no built-in reaches outside libm.
UNTRUSTED = CompileOptions(untrusted=True)


@pytest.fixture(scope="module")
def be() -> CpuBackend:
    return CpuBackend()


_BUILT: dict[tuple[str, str, CompileOptions], object] = {}


def load(be: CpuBackend, file: str, entry: str, options: CompileOptions = UNTRUSTED) -> CpuProgram:
    key = (file, entry, options)
    if key not in _BUILT:
        _BUILT[key] = be.compile((HERE / file).read_text(encoding="utf-8"), entry, options)
    return be.load(_BUILT[key], be.devices()[0])  # type: ignore[arg-type]


def run_rows(
    be: CpuBackend, prog: CpuProgram, inputs: list[np.ndarray], width: int, dtype: type, n: int
) -> np.ndarray:
    out = be.alloc(n * width * np.dtype(dtype).itemsize)
    prog(*(be.to_device(a) for a in inputs), out, np.int32(n), grid=((n + 63) // 64,), block=(64,))
    return be.to_host(out, dtype, (n, width))


# --------------------------------------------------------------------------- exact rounding references


def rounded(exact: Fraction, dtype: type, mode: str) -> float:
    """`exact` rounded to `dtype` (float16/32/64): rn (nearest even), rz, rd, ru."""
    inf = dtype(np.inf)
    with np.errstate(over="ignore"):
        c = dtype(float(exact))
    while np.isfinite(c) and Fraction(float(c)) > exact:
        c = np.nextafter(c, -inf)
    while np.isfinite(up := np.nextafter(c, inf)) and Fraction(float(up)) <= exact:
        c = up
    if Fraction(float(c)) == exact:
        return float(c)
    lo, hi = c, np.nextafter(c, inf)
    if mode == "rd" or (mode == "rz" and exact > 0):
        return float(lo)
    if mode == "ru" or mode == "rz":
        return float(hi)
    d_lo, d_hi = exact - Fraction(float(lo)), Fraction(float(hi)) - exact
    if d_lo != d_hi:
        return float(lo if d_lo < d_hi else hi)
    bits = np.array([lo], dtype).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize])[0]
    return float(lo if int(bits) % 2 == 0 else hi)


def sqrt_up(a: float, dtype: type) -> float:
    c = dtype(math.sqrt(a))
    while Fraction(float(c)) ** 2 > Fraction(a):
        c = np.nextafter(c, dtype(0))
    while Fraction(float(np.nextafter(c, dtype(np.inf)))) ** 2 <= Fraction(a):
        c = np.nextafter(c, dtype(np.inf))
    return float(c) if Fraction(float(c)) ** 2 == Fraction(a) else float(np.nextafter(c, dtype(np.inf)))


def F(v: float | np.floating[Any]) -> Fraction:
    return Fraction(float(v))


# --------------------------------------------------------------------------- templates


def test_heavy_templates_constexpr_unroll_launch_bounds_restrict(be: CpuBackend) -> None:
    n = 200
    for entry, dtype, unroll, scale in (
        ("unrolled<float, 4, 2>", np.float32, 4, 2),
        ("unrolled<int, 3, -1>", np.int32, 3, -1),
    ):
        data = (RNG.integers(-50, 50, (unroll, n))).astype(dtype)
        out = be.alloc(n * 4)
        load(be, "templates.cu", entry)(
            be.to_device(data), out, np.int32(n), grid=((n + 127) // 128,), block=(128,)
        )
        want = scale * data.sum(axis=0) + 120 + 10 + (np.arange(n) & 7) + 6
        np.testing.assert_array_equal(be.to_host(out, dtype, (n,)), want.astype(dtype))
    for entry, block, square in (("reduce<64, true>", 64, True), ("reduce<32, false>", 32, False)):
        blocks = 5
        x = RNG.random(blocks * block, dtype=np.float32)
        out = be.alloc(blocks * 4)
        load(be, "templates.cu", entry)(be.to_device(x), out, grid=(blocks,), block=(block,))
        ref = (x.astype(np.float64) ** (2 if square else 1)).reshape(blocks, block).sum(axis=1)
        np.testing.assert_allclose(be.to_host(out, np.float32, (blocks,)), ref, rtol=1e-5)


# --------------------------------------------------------------------------- vector types


def test_vector_type_sizes_and_alignment_are_cudas(be: CpuBackend) -> None:
    out = be.alloc(16 * 4)
    load(be, "vectors.cu", "vector_sizes")(out, grid=(1,), block=(1,))
    want = [8, 12, 16, 8, 16, 4, 16, 16, 16, 8, 8, 4, 4, 8, 16, 12]
    assert be.to_host(out, np.int32, (16,)).tolist() == want


def test_vector_loads_stores_and_members(be: CpuBackend) -> None:
    n, s = 150, np.float32(1.5)
    v = RNG.random((n, 4), dtype=np.float32)
    out4, out2, out3 = be.alloc(n * 16), be.alloc(n * 8), be.alloc(n * 12)
    load(be, "vectors.cu", "vector_math")(
        be.to_device(v), out4, out2, out3, s, np.int32(n), grid=(3,), block=(64,)
    )
    i = np.arange(n, dtype=np.float32)[:, None]
    r = (v * s + i * np.array([1, 2, 3, 4], np.float32)).astype(np.float32)
    np.testing.assert_array_equal(be.to_host(out4, np.float32, (n, 4)), r)
    want2 = np.stack([r[:, 0] + r[:, 1], r[:, 2] - r[:, 3]], axis=1)
    np.testing.assert_array_equal(be.to_host(out2, np.float32, (n, 2)), want2)
    want3 = r[:, :3].copy()
    want3[:, 2] += np.float32(1)
    np.testing.assert_array_equal(be.to_host(out3, np.float32, (n, 3)), want3)

    k = RNG.integers(-1000, 1000, (n, 4)).astype(np.int32)
    o2, ob, od = be.alloc(n * 8), be.alloc(n * 4), be.alloc(n * 16)
    load(be, "vectors.cu", "int_vectors")(be.to_device(k), o2, ob, od, np.int32(n), grid=(3,), block=(64,))
    np.testing.assert_array_equal(
        be.to_host(o2, np.int32, (n, 2)), np.stack([k[:, 0] + k[:, 1], k[:, 2] * k[:, 3]], axis=1)
    )
    idx = np.arange(n)
    bytes_ = np.stack([idx & 255, (idx + 1) & 255, (255 - idx) & 255, np.full(n, 7)], axis=1).astype(np.uint8)
    np.testing.assert_array_equal(be.to_host(ob, np.uint8, (n, 4)), bytes_)
    np.testing.assert_array_equal(
        be.to_host(od, np.float64, (n, 2)), np.stack([k[:, 0] * 0.5, k[:, 3] * 0.25], 1)
    )


# --------------------------------------------------------------------------- math intrinsics


def test_float_intrinsics_and_directed_rounding(be: CpuBackend) -> None:
    n = 96
    a = (RNG.standard_normal(n) * 3).astype(np.float32)
    b = (RNG.standard_normal(n) * 3).astype(np.float32)
    c = (RNG.standard_normal(n) * 1e-3).astype(np.float32)
    a[:4] = [1.0, 1.0, 0.5, -2.0]
    b[:4] = [3.0, 2.0**-30, 0.25, 7.0]  # 1/3 (inexact), a sum that only a directed mode moves
    got = run_rows(be, load(be, "math.cu", "float_intrinsics"), [a, b, c], 24, np.float32, n)
    x64, y64 = a.astype(np.float64), b.astype(np.float64)
    approx = {
        0: x64 / y64,
        1: np.exp(x64),
        2: np.log((np.abs(a) + np.float32(1)).astype(np.float64)),  # the sum rounds in float
        3: np.sin(x64),
        4: np.cos(x64),
        5: (np.abs(a) + np.float32(0.5)).astype(np.float64) ** y64,
        19: 1 / np.sqrt((np.abs(b) + np.float32(1)).astype(np.float64)),
    }
    for col, ref in approx.items():
        np.testing.assert_allclose(got[:, col], ref, rtol=2e-6, atol=1e-30, err_msg=f"column {col}")
    np.testing.assert_array_equal(got[:, 6], np.clip(a, 0, 1))
    np.testing.assert_array_equal(got[:, 20], np.fmin(a, b))
    np.testing.assert_array_equal(got[:, 21], np.fmax(a, b))
    np.testing.assert_array_equal(got[:, 18], a - b)
    for i in range(n):
        x, y, z = F(a[i]), F(b[i]), F(c[i])
        exact = {
            7: (x * y + z, "rn"),
            8: (x * y + z, "rz"),
            9: (x * y + z, "rd"),
            10: (x * y + z, "ru"),
            11: (x + y, "rz"),
            12: (x + y, "rd"),
            13: (x + y, "ru"),
            14: (x * y, "rz"),
            15: (x * y, "rd"),
            16: (x * y, "ru"),
            17: (x / y, "rz"),
            22: (1 / y, "rd"),
        }
        for col, (value, mode) in exact.items():
            assert got[i, col] == rounded(value, np.float32, mode), (i, col, mode)
        assert got[i, 23] == sqrt_up(abs(float(a[i])), np.float32), i
    assert got[1, 13] == float(np.nextafter(np.float32(1), np.float32(2)))  # 1 + 2^-30 rounded up
    assert got[1, 11] == 1.0 and got[1, 12] == 1.0


def test_conversions_round_as_named_and_saturate(be: CpuBackend) -> None:
    special = [
        2.5,
        -2.5,
        3.5,
        -0.5,
        0.49999997,
        1e10,
        -1e10,
        np.nan,
        np.inf,
        -np.inf,
        4294967296.0,
        -1.0,
        7.75,
    ]
    a = np.concatenate([np.array(special), RNG.standard_normal(51) * 1000]).astype(np.float32)
    n = a.size
    k = RNG.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    k[:3] = [16777217, -16777219, 2**31 - 1]
    prog = load(be, "math.cu", "conversions")
    out, fout = be.alloc(n * 12 * 4), be.alloc(n * 6 * 4)
    prog(be.to_device(a), be.to_device(k), out, fout, np.int32(n), grid=(2,), block=(64,))
    got = be.to_host(out, np.int32, (n, 12))

    def sat(v: float, lo: int, hi: int) -> int:
        return 0 if math.isnan(v) else int(min(max(v, lo), hi))

    def wrap(v: int) -> int:
        return (v + 2**31) % 2**32 - 2**31

    with np.errstate(invalid="ignore"):
        for i, x in enumerate(a.astype(np.float64)):
            rn, rz, rd, ru = np.rint(x), np.trunc(x), np.floor(x), np.ceil(x)
            want = [sat(r, -(2**31), 2**31 - 1) for r in (rn, rz, rd, ru)]
            want += [wrap(sat(r, 0, 2**32 - 1)) for r in (rn, rz, rd, ru)]
            want += [sat(rn, -(2**31), 2**31 - 1), wrap(sat(rd, -(2**63), 2**63 - 1))]
            want += [int(np.array([a[i]]).view(np.int32)[0]), sat(np.ceil(x * 0.5), -(2**31), 2**31 - 1)]
            assert got[i].tolist() == want, (i, x)
    fgot = be.to_host(fout, np.float32, (n, 6))
    for i, v in enumerate(k.tolist()):
        want_f = [rounded(Fraction(v), np.float32, m) for m in ("rn", "rz", "rd", "ru")]
        want_f += [rounded(Fraction(v % 2**32), np.float32, "rn"), rounded(Fraction(v * 3), np.float32, "rn")]
        assert fgot[i].tolist() == want_f, (i, v)


def test_integer_intrinsics(be: CpuBackend) -> None:
    a = RNG.integers(-(2**31), 2**31 - 1, 80, dtype=np.int64)
    b = RNG.integers(-(2**31), 2**31 - 1, 80, dtype=np.int64)
    a[:6] = [0, -1, 1, 2**31 - 1, -(2**31), 0x00F0F0F0]
    b[:6] = [0, 5, -(2**31), -(2**31), 2**31 - 1, 0x7FFFFF]
    a, b = a.astype(np.int32), b.astype(np.int32)
    n = a.size
    got = run_rows(be, load(be, "math.cu", "bit_intrinsics"), [a, b], 16, np.uint32, n)
    m32 = 2**32 - 1

    def sext24(v: int) -> int:
        v &= 0xFFFFFF
        return v - (1 << 24) if v & 0x800000 else v

    def ffs(v: int) -> int:
        return 0 if v == 0 else (v & -v).bit_length()

    for i in range(n):
        x, y = int(a[i]), int(b[i])
        ux, uy = x & m32, y & m32
        sel = 0x5140
        both = (uy << 32) | ux
        perm = sum(((both >> (8 * ((sel >> (4 * j)) & 7))) & 0xFF) << (8 * j) for j in range(4))
        want = [
            bin(ux).count("1"),
            32 - ux.bit_length(),
            ffs(ux),
            int(f"{ux:032b}"[::-1], 2),
            (sext24(x) * sext24(y)) & m32,
            ((ux & 0xFFFFFF) * (uy & 0xFFFFFF)) & m32,
            ((x * y) >> 32) & m32,
            (ux * uy) >> 32,
            (abs(x - y) + 5) & m32,
            (abs(ux - uy) + 1) & m32,
            bin((ux << 32) | uy).count("1"),
            64 - ux.bit_length(),
            perm,
            max(ux, uy),
            min(x, y) & m32,
            ffs((y << 20) & (2**64 - 1)),
        ]
        assert got[i].tolist() == want, (i, x, y)


def test_double_intrinsics(be: CpuBackend) -> None:
    n = 64
    a, b = RNG.standard_normal(n) * 10, RNG.standard_normal(n) * 10
    a[0], b[0] = 1.0, 2.0**-60
    got = run_rows(be, load(be, "math.cu", "double_intrinsics"), [a, b], 6, np.float64, n)
    for i in range(n):
        x, y = F(a[i]), F(b[i])
        assert got[i, 0] == rounded(x + y, np.float64, "rz")
        assert got[i, 1] == rounded(x * y, np.float64, "ru")
        assert got[i, 2] == rounded(x / y, np.float64, "rn")
        assert got[i, 3] == rounded(x * y + 1, np.float64, "rd")
        assert got[i, 5] == math.sqrt(abs(b[i]))
    np.testing.assert_allclose(got[:, 4], 1 / np.sqrt(np.abs(a) + 1), rtol=1e-15)


# --------------------------------------------------------------------------- half precision


def test_half_scalar_and_packed_arithmetic(be: CpuBackend) -> None:
    n = 128
    a = (RNG.standard_normal(n) * 8).astype(np.float32)
    b = (RNG.standard_normal(n) * 8).astype(np.float32)
    got = run_rows(be, load(be, "half.cu", "half_ops"), [a, b], 12, np.float32, n)
    h = np.float16
    x, y = a.astype(h), b.astype(h)

    def fma16(p: np.float16, q: np.float16, r: float) -> float:
        return rounded(F(p) * F(q) + Fraction(r), np.float16, "rn")

    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got[:, 0], (x + y).astype(np.float32))
        np.testing.assert_array_equal(got[:, 1], (x * y).astype(np.float32))
        np.testing.assert_array_equal(got[:, 2], [fma16(p, q, 1.0) for p, q in zip(x, y, strict=True)])
        np.testing.assert_array_equal(got[:, 3], (x - y).astype(np.float32))
        np.testing.assert_array_equal(got[:, 4], (x / y).astype(np.float32))
        np.testing.assert_array_equal(got[:, 5], (x < y).astype(np.float32))
        np.testing.assert_array_equal(got[:, 6], (x + y).astype(np.float32))
        np.testing.assert_array_equal(got[:, 7], (y + x).astype(np.float32))
        np.testing.assert_array_equal(got[:, 8], (x * y).astype(np.float32))
        np.testing.assert_array_equal(got[:, 9], [fma16(q, p, 0.5) for p, q in zip(x, y, strict=True)])
        d0, d1 = ((x - y) * h(2)).astype(np.float32), ((y - x) * h(2)).astype(np.float32)
        np.testing.assert_array_equal(got[:, 10], d0 + d1)
        np.testing.assert_array_equal(got[:, 11], (x - y).astype(np.float32) * (y - x).astype(np.float32))


def test_half_stores_and_conversions_round_once(be: CpuBackend) -> None:
    n = 100
    a = (RNG.standard_normal(n) * 100).astype(np.float32)
    hs, h2 = be.alloc(n * 2), be.alloc(n * 4)
    load(be, "half.cu", "half_store")(be.to_device(a), hs, h2, np.int32(n), grid=(2,), block=(64,))
    h = np.float16
    with np.errstate(all="ignore"):
        want = ((a.astype(h) + h(1)).astype(h) + h(0.25)).astype(h)
    np.testing.assert_array_equal(be.to_host(hs, np.float16, (n,)), want)
    np.testing.assert_array_equal(be.to_host(h2, np.float16, (n, 2)), np.stack([a, -a], 1).astype(h))


def test_double_to_half_rounds_once() -> None:
    """A double just above a binary16 tie rounds up; through float it would land on the tie and go to even."""
    src = """
    #include <cuda_fp16.h>
    __global__ void k(const double* d, float* out, int n) {
        int i = threadIdx.x;
        if (i < n) {
            out[4 * i] = __half2float(__double2half(d[i]));
            out[4 * i + 1] = __half2float(__float2half_rz((float)d[i]));
            out[4 * i + 2] = __half2float(__float2half_rd((float)d[i]));
            out[4 * i + 3] = __half2float(__float2half_ru((float)d[i]));
        }
    }
    """
    be = CpuBackend()
    tie = 1.0 + 2.0**-11  # halfway between 1 and the next half
    d = np.array([tie + 2.0**-40, tie, -tie - 2.0**-40, 1e5, -1e5, 1e-9, -1e-9, 0.1], np.float64)
    out = be.alloc(d.size * 16)
    be.load(be.compile(src, "k", UNTRUSTED))(be.to_device(d), out, np.int32(d.size), grid=(1,), block=(32,))
    got = be.to_host(out, np.float32, (d.size, 4))
    for i, v in enumerate(d):
        if abs(v) > 65504:  # past the largest half: toward zero it saturates, away from it overflows
            sign = math.copysign(1.0, v)
            rd_, ru_ = (65504.0, math.inf) if v > 0 else (-math.inf, -65504.0)
            assert got[i].tolist() == [sign * math.inf, sign * 65504.0, rd_, ru_], i
            continue
        assert got[i, 0] == rounded(F(v), np.float16, "rn"), i
        for col, mode in ((1, "rz"), (2, "rd"), (3, "ru")):
            assert got[i, col] == rounded(F(np.float32(v)), np.float16, mode), (i, col)
    assert got[0, 0] == 1.0 + 2.0**-10 and got[1, 0] == 1.0


# --------------------------------------------------------------------------- synchronisation, clocks, assert


def test_warp_block_sync_fences_clock_and_nanosleep(be: CpuBackend) -> None:
    blocks, threads = 2, 64
    out, t = be.alloc(blocks * threads * 4), be.alloc(blocks * 8)
    prog = load(be, "device_misc.cu", "sync_and_fences")
    for seed in (1, 2):
        prog(out, t, grid=(blocks,), block=(threads,), seed=seed)
        lane = np.arange(blocks * threads) % 32
        assert (
            be.to_host(out, np.int32, (blocks * threads,)).tolist()
            == (lane * 2 + (lane ^ 1) * 2 + 42).tolist()
        )
        assert be.to_host(t, np.int64, (blocks,)).tolist() == [1, 1]


def test_device_assert_fails_the_launch_and_names_the_thread(be: CpuBackend) -> None:
    prog = load(be, "device_misc.cu", "failing_assert")
    out = be.alloc(32 * 4)
    prog(out, np.int32(-1), grid=(1,), block=(32,))  # holds everywhere
    with pytest.raises(LaunchError, match=r"thread \(3,0,0\) Assertion `threadIdx.x != bad` failed"):
        prog(out, np.int32(3), grid=(1,), block=(32,))
    prog(out, np.int32(-1), grid=(1,), block=(32,))  # the next launch is unaffected


def test_a_spin_wait_on_another_block_fails_instead_of_hanging(be: CpuBackend) -> None:
    src = """
    __global__ void wait_for_last(volatile int* flag) {
        if (blockIdx.x == gridDim.x - 1) { *flag = 1; return; }
        while (*flag == 0) __nanosleep(100);
    }
    """
    prog = be.load(be.compile(src, "wait_for_last", CompileOptions(defines=("PORTER_MAX_SPINS=5000",))))
    flag = be.to_device(np.zeros(1, np.int32))
    with pytest.raises(LaunchError, match="__nanosleep.*another block"):
        for seed in range(8):  # in some block order the waiting block runs first
            flag = be.to_device(np.zeros(1, np.int32))
            prog(flag, grid=(2,), block=(32,), seed=seed)


def test_device_printf_prints(tmp_path: Path) -> None:
    # in a process of its own: the C library flushes the kernel's buffered stdout when that process exits
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from porter.backends.cpu import CpuBackend
            src = '#include <cstdio>\\n__global__ void hello(int v) { printf("hello %d from %u\\\\n", v, threadIdx.x); }'
            be = CpuBackend()
            be.load(be.compile(src, "hello"))(np.int32(7), grid=(1,), block=(3,))
            """
        ),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert sorted(proc.stdout.splitlines()) == ["hello 7 from 0", "hello 7 from 1", "hello 7 from 2"]


# --------------------------------------------------------------------------- what it cannot build


def test_a_construct_nvcc_rejects_too_is_a_compile_error_naming_it(be: CpuBackend) -> None:
    # CUDA defines no arithmetic on float4: nvcc rejects this kernel, so does the emulator, and the
    # first error names the operator and the operand types.
    src = "__global__ void k(float4* p) {\n    p[0] = p[0] + p[1];\n}\n"
    with pytest.raises(CompileError) as info:
        be.compile(src, "k")
    first = str(info.value).splitlines()[0]  # the line a verdict's reason keeps
    assert first.startswith("cpu: compile of k failed: kernel.cu:2: no match for 'operator+'"), first
    assert "float4" in first


def test_a_refused_import_is_named_on_the_first_line(be: CpuBackend) -> None:
    src = "#include <cstdlib>\n__global__ void k(int* p) {\n    p[0] = rand();\n}\n"
    with pytest.raises(CompileError) as info:
        be.compile(src, "k", UNTRUSTED)
    assert (
        str(info.value)
        .splitlines()[0]
        .startswith("cpu: compile of k failed: the kernel refers to host symbol(s)")
    )
    assert "rand" in str(info.value).splitlines()[0]


def test_an_unknown_intrinsic_is_named(be: CpuBackend) -> None:
    with pytest.raises(CannotEmulate, match="__made_up_intrinsic"):
        be.compile("__global__ void k(int* p) {\n    p[0] = __made_up_intrinsic(p[1]);\n}\n", "k")


# --------------------------------------------------------------------------- functions libm lacks, SIMD, lanes


def test_cuda_math_functions_the_c_library_lacks(be: CpuBackend) -> None:
    v = np.concatenate([np.array([0.0, 0.5, -0.5, 0.25, 1e-9]), RNG.uniform(-0.99, 0.99, 59)])
    n = v.size
    got = run_rows(be, load(be, "math_more.cu", "special_functions"), [v], 12, np.float64, n)

    def bessel(order: int, x: float) -> float:
        terms, term, k = [], (x / 2) ** order / math.factorial(order), 0
        while k < 200:
            terms.append(term)
            k += 1
            term *= (x * x / 4) / (k * (k + order))
        return math.fsum(terms)

    for i, x in enumerate(v.tolist()):
        o = got[i]
        assert abs(math.erf(o[0]) - x) <= 4e-16, (i, x)
        assert math.erfc(o[1]) == pytest.approx(1 + x, rel=4e-16, abs=0) and o[1] == pytest.approx(
            -o[0], abs=1e-14
        )
        assert o[2] == pytest.approx(0.5 * math.erfc(-4 * x / math.sqrt(2)), rel=1e-15)
        assert 0.5 * math.erfc(-o[3] / math.sqrt(2)) == pytest.approx(0.5 + 0.5 * x, rel=1e-14)
        assert o[4] == pytest.approx(math.exp(100 * x * x) * math.erfc(10 * x), rel=1e-12)
        assert o[5] == pytest.approx(bessel(0, 5 * x), rel=1e-14)
        assert o[6] == pytest.approx(bessel(1, 5 * x), rel=1e-14, abs=1e-300)
        assert o[7] == pytest.approx(math.sin(math.pi * 8 * x), abs=1e-13)
        assert o[8] == pytest.approx(math.cos(math.pi * 8 * x), abs=1e-13)
        assert o[9] == pytest.approx(1 / math.hypot(x, 2.0), rel=1e-15)
        assert o[10] == pytest.approx(math.sqrt(2) * 1e200, rel=1e-15)  # no square overflows
        assert o[11] == pytest.approx(o[0], rel=1e-6, abs=1e-12)
    out = be.alloc(17 * 8)
    load(be, "math_more.cu", "exact_multiples")(out, grid=(1,), block=(17,))
    sc = be.to_host(out, np.float32, (17, 2))
    for i in range(17):
        x = 0.5 * (i - 8)
        if x == int(x):
            assert sc[i, 0] == 0 and math.copysign(1, sc[i, 0]) == math.copysign(1, x), x
            assert sc[i, 1] == (-1) ** abs(int(x)), x
        else:
            assert sc[i, 0] == (1 if (x - 0.5) % 2 == 0 else -1) and sc[i, 1] == 0, x
            assert math.copysign(1, sc[i, 1]) == 1, x  # cospi(n + 1/2) is +0


def test_simd_video_intrinsics(be: CpuBackend) -> None:
    a = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    b = RNG.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    a[:3], b[:3] = [0x80FF7F01, 0x7FFF8000, 0], [0x7F01FF80, 0x00018000, 0xFFFFFFFF]
    n = a.size
    got = run_rows(be, load(be, "math_more.cu", "simd"), [a, b], 10, np.uint32, n)

    def lanes(x: int, bits: int, signed: bool) -> list[int]:
        out = [(x >> i) & ((1 << bits) - 1) for i in range(0, 32, bits)]
        return [v - (1 << bits) if signed and v >= 1 << (bits - 1) else v for v in out]

    def pack(vals: list[int], bits: int) -> int:
        return sum((v & ((1 << bits) - 1)) << (bits * k) for k, v in enumerate(vals))

    for i in range(n):
        x, y = int(a[i]), int(b[i])
        u4, v4, s4, t4 = lanes(x, 8, False), lanes(y, 8, False), lanes(x, 8, True), lanes(y, 8, True)
        s2, t2, u2, v2 = lanes(x, 16, True), lanes(y, 16, True), lanes(x, 16, False), lanes(y, 16, False)
        want = [
            pack([p + q for p, q in zip(u4, v4, strict=True)], 8),
            pack([min(max(p - q, -32768), 32767) for p, q in zip(s2, t2, strict=True)], 16),
            pack([abs(p - q) for p, q in zip(u4, v4, strict=True)], 8),
            pack([max(p, q) for p, q in zip(s4, t4, strict=True)], 8),
            pack([0xFFFF if p > q else 0 for p, q in zip(u2, v2, strict=True)], 16),
            pack([1 if p < q else 0 for p, q in zip(s4, t4, strict=True)], 8),
            pack([(p + q + 1) >> 1 for p, q in zip(u4, v4, strict=True)], 8),
            sum(abs(p - q) for p, q in zip(u4, v4, strict=True)),
            pack([min(p + q, 0xFFFF) for p, q in zip(u2, v2, strict=True)], 16),
            x,  # hi:lo shifted left by 40, clamped to 32: the high word is then lo
        ]
        assert got[i].tolist() == want, (i, hex(x), hex(y))


def test_lane_masks(be: CpuBackend) -> None:
    out = be.alloc(64 * 3 * 4)
    load(be, "math_more.cu", "lane_masks")(out, grid=(1,), block=(64,))
    got = be.to_host(out, np.uint32, (64, 3))
    for t in range(64):
        lane = t % 32
        assert got[t].tolist() == [(1 << lane) - 1, (~((1 << lane) - 1)) & 0xFFFFFFFF, 1], t
