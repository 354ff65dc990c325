"""Warp shuffles that read lanes CUDA leaves undefined on the CPU emulator (porter_emu.h undefined_read):
a source lane outside the caller's mask, exited, or past the block's last thread reads 0 (as NVIDIA GPUs
do), each such read is counted and the first described (CpuProgram.undefined_reads), and on request they
read a poison pattern instead (CpuProgram.set_undefined_lanes), which is how the harness tells a result
that depends on them (porter.harness.checks.check_defined) from one that discards them."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from porter.backends import CompileOptions
from porter.backends.cpu import CpuBackend, CpuProgram

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
]

SUMS = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ int full_warp_sum(unsigned mask, int v) {
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(mask, v, offset);
    return v;
}
__global__ void unguarded(const int* in, int* out) {
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    unsigned mask = __ballot_sync(0xffffffffu, 1);
    v = full_warp_sum(mask, v);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
__global__ void guarded(const int* in, int* out) {
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    unsigned mask = __ballot_sync(0xffffffffu, 1);
    for (int offset = blockDim.x / 2; offset > 0; offset /= 2) v += __shfl_down_sync(mask, v, offset);
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}
__global__ void in_range(const int* in, int* out) {
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int offset = 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xfu, v, offset, 4);
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
__global__ void tile_sum(const float* in, float* out) {
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cg::this_thread_block());
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) v += tile.shfl_down(v, offset);
    if (tile.thread_rank() == 0) out[blockIdx.x] = v;
}
"""
LINE = {
    name: 1 + next(i for i, text in enumerate(SUMS.splitlines()) if text.strip().startswith(call))
    for name, call in (
        ("unguarded", "v += __shfl_down_sync"),
        ("tile_sum", "for (int offset = 16; offset > 0; offset /= 2) v += tile"),
    )
}
BLOCKS, THREADS = 8, 4


@pytest.fixture(scope="module")
def be() -> CpuBackend:
    return CpuBackend()


def run(
    be: CpuBackend, entry: str, poison: bool = False, dtype: type = np.int32
) -> tuple[CpuProgram, np.ndarray]:
    prog = be.load(be.compile(SUMS, entry, CompileOptions()), be.devices()[0])
    prog.set_undefined_lanes(poison)
    x = (np.arange(BLOCKS * THREADS) % 7 + 1).astype(dtype)
    n = BLOCKS * THREADS if entry == "in_range" else BLOCKS
    out = be.alloc(n * 4)
    prog(be.to_device(x), out, grid=(BLOCKS,), block=(THREADS,), seed=11)
    return prog, be.to_host(out, dtype, (n,))


def test_a_full_warp_reduction_in_a_block_of_4_reads_lanes_past_the_block_and_says_where(
    be: CpuBackend,
) -> None:
    prog, got = run(be, "unguarded")
    x = np.arange(BLOCKS * THREADS) % 7 + 1
    assert list(got) == list(x.reshape(BLOCKS, THREADS).sum(axis=1))  # they read 0, as on NVIDIA GPUs
    said = prog.undefined_reads
    assert said.startswith("lane 0 of warp 0 in block ("), said
    assert (
        "reads lane 16 through __shfl_down_sync with mask 0xf: outside its mask and beyond the block's last "
        f"thread, source line {LINE['unguarded']}"
    ) in said, said
    assert said.endswith("such reads in the launch)"), said
    # poisoned, the sums change: lane 0 depends on them
    _, poisoned = run(be, "unguarded", poison=True)
    assert not np.array_equal(poisoned, got)


def test_reads_whose_values_are_discarded_are_counted_and_change_nothing(be: CpuBackend) -> None:
    prog, got = run(be, "guarded")
    x = np.arange(BLOCKS * THREADS) % 7 + 1
    assert list(got) == list(x.reshape(BLOCKS, THREADS).sum(axis=1))
    assert "reads lane 4 through __shfl_down_sync with mask 0xf" in prog.undefined_reads  # lane 2 or 3
    _, poisoned = run(be, "guarded", poison=True)
    assert np.array_equal(poisoned, got)


def test_shuffles_within_the_mask_and_width_read_nothing_undefined(be: CpuBackend) -> None:
    prog, got = run(be, "in_range")
    x = np.arange(BLOCKS * THREADS) % 7 + 1
    assert list(got) == list(np.repeat(x.reshape(BLOCKS, THREADS).sum(axis=1), THREADS))
    assert prog.undefined_reads == ""


def test_a_tile_shuffle_past_the_block_is_an_undefined_read_at_the_callers_line(be: CpuBackend) -> None:
    prog, got = run(be, "tile_sum", dtype=np.float32)
    x = np.arange(BLOCKS * THREADS) % 7 + 1
    assert list(got) == list(x.reshape(BLOCKS, THREADS).sum(axis=1).astype(np.float32))
    assert "reads lane 16 through __shfl_down_sync" in prog.undefined_reads, prog.undefined_reads
    assert f"source line {LINE['tile_sum']}" in prog.undefined_reads, prog.undefined_reads
    _, poisoned = run(be, "tile_sum", poison=True, dtype=np.float32)
    assert np.all(np.isnan(poisoned))  # the poison pattern is a NaN as a float
