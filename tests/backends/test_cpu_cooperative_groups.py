"""Cooperative groups on the CPU emulator and runtime (backends/cpu/porter_cooperative_groups.h).

porter's own kernels (tests/fixtures/programs/cg_tiles/tiles.cuh), built as a CUDA and as a HIP kernel
file and run at 32 and 64 lanes, against results computed here from what CUDA's cooperative groups
define: tiles of 1 to 32 threads within a warp, tiles of several warps, cg::reduce with every operator,
the scans, tiles of tiles; then the same kernels in whole programs (main.cu, main.hip) on the CPU runtime
at both widths, and the constructs that stay refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CannotEmulate, CompileOptions, LaunchError, get_backend
from porter.backends.cpu import CpuBackend, CpuProgram
from porter.backends.programs import ProgramSource

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "programs" / "cg_tiles"
FILES = {"cuda": "kernels.cu", "hip": "kernels_hip.hip"}
WIDTHS = [32, 64]
BLOCK = 256


@pytest.fixture(scope="module")
def be() -> CpuBackend:
    return CpuBackend()


def build(be: CpuBackend, entry: str, wave: int, dialect: str = "cuda") -> CpuProgram:
    device = be.devices()[0] if wave == 32 else be.wavefront_device(64)
    assert device is not None
    source = (FIXTURE / FILES[dialect]).read_text(encoding="utf-8")
    prog = be.load(be.compile(source, entry, CompileOptions(include_dirs=(str(FIXTURE),)), device), device)
    assert prog.warp_size == wave
    return prog


def rows(
    be: CpuBackend, prog: CpuProgram, nrows: int, *inputs: object, block=(BLOCK,), seed: int | None = None
):
    n = int(np.prod(block))
    out = be.to_device(np.full(nrows * n, -7, np.int64))
    kwargs = {} if seed is None else {"seed": seed}
    prog(*inputs, out, grid=(1,), block=block, **kwargs)
    return be.to_host(out, np.int64, (nrows, n))


def bits(flags) -> int:
    return sum(1 << k for k, f in enumerate(flags) if f)


def signed64(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


# --------------------------------------------------------------------------- tiles within a warp


def expected_tile_ops(n: int, size: int) -> np.ndarray:
    out = []
    for t in range(n):
        r, base = t % size, t - t % size
        v = 1000 + t
        members = range(base, base + size)
        out.append(
            [
                r,
                t // size,
                n // size,
                size + 1000 * size,
                1000 + base + size - 1,
                v - 1 if r >= 1 else v,
                v + 2 if r + 2 < size else v,
                1000 + base + (r ^ (size // 2)),
                int(any(m % 3 == 0 for m in members)),
                int(all(m % 3 != 1 for m in members)),
                signed64(bits(m % 3 == 0 for m in members)),
                signed64(bits(m // 3 == t // 3 for m in members)),
                signed64(bits(True for _ in members)),
                1,
                r + 100 * size,
            ]
        )
    return np.array(out, np.int64).T


# every size as CUDA; HIP's header (hip/hip_cooperative_groups.h) for a few
OPS_CASES = [(s, "cuda") for s in (1, 2, 4, 8, 16, 32, 64)] + [(s, "hip") for s in (8, 32, 64)]


@pytest.mark.parametrize("wave", WIDTHS)
@pytest.mark.parametrize(("size", "dialect"), OPS_CASES)
def test_every_operation_of_a_tile_within_a_warp(be: CpuBackend, wave: int, size: int, dialect: str) -> None:
    if size > wave:
        pytest.skip("a tile of 64 is within a warp at 64 lanes only (tile_big covers it at 32)")
    prog = build(be, f"tile_ops<{size}>", wave, dialect)
    got = rows(be, prog, 15)
    assert np.array_equal(got, expected_tile_ops(BLOCK, size))


@pytest.mark.parametrize("wave", WIDTHS)
def test_ranks_of_a_two_dimensional_block_run_x_fastest(be: CpuBackend, wave: int) -> None:
    got = rows(be, build(be, "tile_ops<8>", wave), 15, block=(16, 16))
    assert np.array_equal(got, expected_tile_ops(BLOCK, 8))


# --------------------------------------------------------------------------- tiles of any size


@pytest.mark.parametrize("wave", WIDTHS)
@pytest.mark.parametrize("size", [32, 64, 128, 256])
def test_tiles_over_several_warps_synchronise_and_exchange(be: CpuBackend, wave: int, size: int) -> None:
    prog = build(be, f"tile_big<{size}>", wave)
    t = np.arange(BLOCK)
    base = t - t % size
    holds_77 = (base <= 77) & (base + size > 77)  # the tile of thread 77
    want = np.array(
        [
            1000 + base + (t % size + 37) % size,
            1000 + base + size - 1,
            holds_77,
            ~holds_77,
            [sum(range(1000 + b, 1000 + b + size)) for b in base],
            t % size,
            t // size,
            np.full(BLOCK, BLOCK // size),
        ],
        np.int64,
    )
    want[3] &= 1
    for seed in (1, 2, 3):  # a thread reads another warp's write only after the tile's barrier
        assert np.array_equal(rows(be, prog, 8, seed=seed), want)


def expected_reduce(values: np.ndarray, size: int) -> np.ndarray:
    out = []
    for t in range(len(values)):
        r, base = t % size, t - t % size
        tile = values[base : base + size].tolist()
        before, upto = tile[:r], tile[: r + 1]
        u = [x & 0xFFFFFFFF for x in tile]
        land, lor, lxor = u[0], 0, 0
        for x in u:
            land, lor, lxor = land & x, lor | x, lxor ^ x
        out.append(
            [
                sum(tile),
                min(tile),
                max(tile),
                land,
                lor,
                lxor,
                max(tile, key=abs),
                sum(upto),
                sum(before),
                max(upto),
                min(before) if before else 0,
                sum(tile),
            ]
        )
    return np.array(out, np.int64).T


@pytest.mark.parametrize("wave", WIDTHS)
@pytest.mark.parametrize(
    ("size", "dialect"), [(s, "cuda") for s in (1, 4, 32, 64, 256)] + [(32, "hip"), (128, "hip")]
)
def test_reduce_and_scans_with_every_operator(be: CpuBackend, wave: int, size: int, dialect: str) -> None:
    rng = np.random.default_rng(size)
    magnitudes = rng.permutation(np.arange(1, 5 * BLOCK))[:BLOCK]  # distinct: the largest |v| is one value
    values = (magnitudes * rng.choice([-1, 1], BLOCK)).astype(np.int32)
    prog = build(be, f"tile_reduce<{size}>", wave, dialect)
    got = rows(be, prog, 12, be.to_device(values))
    assert np.array_equal(got, expected_reduce(values, size))


@pytest.mark.parametrize("wave", WIDTHS)
def test_tiles_of_a_tile_count_within_their_parent(be: CpuBackend, wave: int) -> None:
    got = rows(be, build(be, "sub_tiles", wave), 4, block=(128,))
    t = np.arange(128)
    assert np.array_equal(got, np.array([t % 16, (t % 32) // 16, np.full(128, 2), t - t % 16]))


@pytest.mark.parametrize("wave", WIDTHS)
def test_tiles_of_a_wavefront_are_separate_groups(be: CpuBackend, wave: int) -> None:
    out = be.to_device(np.zeros(128, np.int64))
    build(be, "even_tiles", wave)(out, grid=(1,), block=(128,))
    got = be.to_host(out, np.int64, (128,))
    t = np.arange(128)
    tile_sum = np.array([sum(range(b, b + 32)) for b in t - t % 32])
    down = np.where(t % 32 < 31, t + 1, t)
    want = np.where((t // 32) % 2 == 0, tile_sum + 100000 * down, -1)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("wave", WIDTHS)
def test_a_shuffle_moves_values_wider_than_8_bytes(be: CpuBackend, wave: int) -> None:
    out = be.to_device(np.zeros(64 * 3, np.float64))
    build(be, "shfl_struct", wave)(out, grid=(1,), block=(64,))
    got = be.to_host(out, np.float64, (64, 3))
    src = (np.arange(64) - np.arange(64) % 16 + 5).astype(np.float64)
    assert np.array_equal(got, np.stack([src, 2 * src, 3 * src], axis=1))


@pytest.mark.parametrize("wave", WIDTHS)
def test_threads_that_exited_are_not_waited_for(be: CpuBackend, wave: int) -> None:
    out = be.to_device(np.full(256, -1, np.int64))
    build(be, "tile_after_exits", wave)(out, grid=(1,), block=(256,))
    got = be.to_host(out, np.int64, (256,))
    t = np.arange(256)
    sums = np.array([sum(range(b, b + 128, 2)) for b in t - t % 128])
    assert np.array_equal(got, np.where(t % 2 == 0, sums, -1))


@pytest.mark.parametrize("wave", WIDTHS)
def test_a_tile_barrier_not_every_thread_reaches_is_a_reported_deadlock(be: CpuBackend, wave: int) -> None:
    out = be.to_device(np.zeros(128, np.int32))
    with pytest.raises(
        LaunchError, match=r"deadlock .*64 threads wait at __syncthreads.*64 at a cooperative"
    ):
        build(be, "tile_deadlock", wave)(out, grid=(1,), block=(128,))


# --------------------------------------------------------------------------- what stays refused


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        ("cg::this_grid().sync();", "grid / multi-grid synchronisation"),
        ("cg::grid_group g = cg::this_grid();", "grid / multi-grid synchronisation"),
        ("cg::this_multi_grid().sync();", "grid / multi-grid synchronisation"),
        ("cg::coalesced_group g = cg::coalesced_threads();", "coalesced groups"),
        ("cg::thread_group g = cg::tiled_partition(cg::this_thread_block(), 32);", "run-time size"),
        (
            "auto g = cg::labeled_partition(cg::tiled_partition<32>(cg::this_thread_block()), 1);",
            "partitions",
        ),
    ],
)
@pytest.mark.parametrize("wave", WIDTHS)
def test_grid_coalesced_and_partitioned_groups_stay_refused(
    be: CpuBackend, wave: int, snippet: str, what: str
) -> None:
    src = (
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
        f"__global__ void k(int* p)\n{{\n    {snippet}\n}}\n"
    )
    device = be.devices()[0] if wave == 32 else be.wavefront_device(64)
    with pytest.raises(CannotEmulate, match=rf"^cannot emulate: cooperative groups .*{what}.*line 5"):
        be.compile(src, "k", CompileOptions(), device)


# --------------------------------------------------------------------------- whole programs


def program_toolchain(name: str):
    return next(tc for tc in get_backend("cpu").program_toolchains() if tc.name == name)


@pytest.mark.parametrize(
    ("unit", "language", "toolchain"),
    [
        ("main.cu", "cuda", "cpu-runtime"),
        ("main.hip", "hip", "cpu-runtime"),
        ("main.hip", "hip", "cpu-runtime-wave64"),
    ],
)
def test_programs_with_tiles_run_on_the_cpu_runtime(
    tmp_path: Path, unit: str, language: str, toolchain: str
) -> None:
    tc = program_toolchain(toolchain)
    src = ProgramSource(tree=FIXTURE, units=(unit,), include_dirs=(), defines=(), language=language)
    built = tc.build(src, tmp_path / "build")
    assert built.ok, f"{built.reason}\n{built.log}"
    env = {**os.environ, **built.env}
    run = subprocess.run(
        [built.executables[unit]], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"warpSize {64 if toolchain.endswith('64') else 32}"
    assert "FAIL" not in run.stdout and lines[-1] == "PASS", run.stdout
