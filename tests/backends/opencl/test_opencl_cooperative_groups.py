"""Cooperative groups in the CUDA -> OpenCL translation: the thread block's methods, tiles of a warp (the
32-wide sub-group), of part of a warp and of several warps, cg::reduce, and function templates handed a
group.  Kernels written for these tests from the CUDA C++ Programming Guide's chapter on cooperative
groups; translated, and run on every OpenCL CPU device here against NumPy (a device without 32-wide
sub-groups is skipped with what it lacks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from opencl_launch import launch_translated
from porter.backends.opencl.translate import tables, translate_to_opencl

from porter.model import Severity, TranslatedKernel, Translation

HEAD = "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\nnamespace cg = cooperative_groups;\n"

# The block's methods: no sub-group needed, so every OpenCL device runs it.
BLOCK = (
    HEAD
    + """
__global__ void block_facts(unsigned int* out)
{
    cg::thread_block block = cg::this_thread_block();
    unsigned int r = block.thread_rank();
    unsigned int base = (blockIdx.x * block.size() + r) * 6;
    out[base + 0] = r;
    out[base + 1] = block.num_threads();
    out[base + 2] = block.group_index().x;
    out[base + 3] = block.thread_index().y;
    out[base + 4] = block.dim_threads().x + 100 * block.group_dim().y;
    block.sync();
    out[base + 5] = cg::thread_rank(block) + 1000 * cg::group_size(block);
}
"""
)

# A warp-sized tile: the 32-wide sub-group.
WARP = (
    HEAD
    + """
template <typename T, typename Group> __device__ T tile_sum(Group& g, T v)
{
    return cg::reduce(g, v, cg::plus<T>());
}

__global__ void warp_tile(const float* in, float* sums, int* facts, float* reduced, int* maxima)
{
    cg::thread_block block = cg::this_thread_block();
    int other = 0;
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    unsigned int i = blockIdx.x * block.size() + block.thread_rank();
    float v = in[i];
    for (int offset = tile.size() / 2; offset > 0; offset /= 2) {
        v += tile.shfl_down(v, offset);
    }
    sums[i] = v;
    facts[4 * i + 0] = tile.thread_rank();
    facts[4 * i + 1] = tile.meta_group_rank() + 100 * tile.meta_group_size();
    facts[4 * i + 2] = tile.any(in[i] > 1.5f) + 2 * tile.all(in[i] > -10.0f);
    facts[4 * i + 3] = tile.shfl(tile.thread_rank(), 5) + 100 * tile.shfl_xor(tile.thread_rank(), 1);
    tile.sync();
    reduced[i] = tile_sum(tile, in[i]);
    maxima[i] = cg::reduce(tile, (int)(in[i] * 100.0f), cg::greater<int>());
}
"""
)

# Tiles of part of a warp: width-limited shuffles, clustered reductions and votes.
PARTIAL = (
    HEAD
    + """
__global__ void small_tiles(const int* in, int* out)
{
    auto block = cg::this_thread_block();
    auto t8 = cg::tiled_partition<8>(block);
    cg::thread_block_tile<16> t16 = cg::tiled_partition<16>(block);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    int butterfly = v;
    for (int m = 4; m > 0; m >>= 1) butterfly += t8.shfl_xor(butterfly, m);
    out[6 * i + 0] = butterfly;
    out[6 * i + 1] = t16.shfl_down(v, 3);
    out[6 * i + 2] = t16.shfl_up(v, 2);
    out[6 * i + 3] = cg::reduce(t16, v, cg::plus<int>());
    out[6 * i + 4] = t8.thread_rank() + 10 * t8.meta_group_rank() + 1000 * t8.any(v == 7);
    out[6 * i + 5] = __shfl_sync(0xffffffff, v, 9, 16);
}
"""
)

# A tile of several warps (what multi-warp tiles allow: rank arithmetic, sync, reduce), reached by
# every work-item; the reduction also through a function template handed the tile.
MULTI = (
    HEAD
    + """
template <typename Group> __device__ float group_total(float v, Group& g)
{
    return cg::reduce(g, v, cg::plus<float>());
}

template <unsigned int Tile>
__global__ void multi_warp(const float* in, float* out, unsigned int* facts)
{
    __shared__ cg::block_tile_memory<256> scratch;
    auto block = cg::this_thread_block(scratch);
    auto tile = cg::tiled_partition<Tile>(block);
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float total = group_total(in[i], tile);
    tile.sync();
    out[2 * i] = total;
    out[2 * i + 1] = cg::reduce(tile, in[i], cg::less<float>());
    facts[i] = tile.thread_rank() + 1000 * tile.meta_group_rank() + 100000 * tile.meta_group_size();
}

int main() { float* a; unsigned int* f; multi_warp<64><<<2, 256>>>(a, a, f); return 0; }
"""
)


def _kernel(tr: Translation, name: str) -> TranslatedKernel:
    found = [k for k in tr.kernels if k.name == name]
    assert found, f"no kernel {name} in {[k.name for k in tr.kernels]}"
    return found[0]


def _errors(tr: Translation) -> list[str]:
    return [f"{d.line}: {d.construct}: {d.reason}" for d in tr.diagnostics if d.severity == Severity.ERROR]


# --------------------------------------------------------------------------- translation


def test_block_methods_are_work_item_functions() -> None:
    tr = translate_to_opencl(BLOCK, "block.cu")
    assert not _errors(tr), _errors(tr)
    k = _kernel(tr, "block_facts")
    assert k.requires == ()  # the work-group needs no sub-group
    rank = tables()["cooperative_groups"]["rank"]
    size = tables()["cooperative_groups"]["size"]
    assert f"unsigned int r = {rank};" in tr.text
    assert f"out[base + 1] = {size};" in tr.text
    assert "out[base + 2] = ((uint)get_group_id(0));" in tr.text
    assert "out[base + 3] = ((uint)get_local_id(1));" in tr.text
    assert "((uint)get_local_size(0)) + 100 * ((uint)get_local_size(1))" in tr.text
    assert "/* porter: block: the work-group */" in tr.text
    assert "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);" in tr.text


def test_a_warp_tile_is_the_32_wide_sub_group() -> None:
    tr = translate_to_opencl(WARP, "warp.cu")
    assert not _errors(tr), _errors(tr)
    k = _kernel(tr, "warp_tile")
    assert k.requires == (
        "subgroups",
        "subgroup_shuffle",
        "subgroup_shuffle_relative",
        "reqd_sub_group_size_32",
    )
    text = tr.text
    assert "/* porter: tile: a tile of 32 threads */" in text
    assert "for (int offset = 32u / 2; offset > 0; offset /= 2)" in text
    assert "v += porter_shuffle_down(v, (uint)(offset));" in text
    assert "% 32u)" in text and "/ 32u)" in text  # thread_rank, meta_group_rank
    assert "sub_group_any((in[i] > 1.5f) != 0)" in text and "sub_group_all(" in text
    assert "sub_group_shuffle_xor(" in text and "sub_group_shuffle(" in text
    assert "sub_group_barrier(CLK_LOCAL_MEM_FENCE);" in text
    assert "sub_group_reduce_max((int)(in[i] * 100.0f))" in text
    # the function template is instantiated for (float, the tile); the handle is dropped on both sides
    assert "float tile_sum_float_tile32(float v)" in text
    assert "return sub_group_reduce_add(v);" in text
    assert "reduced[i] = tile_sum_float_tile32(in[i]);" in text
    assert "attribute__((intel_reqd_sub_group_size(32)))" in text


def test_tiles_smaller_than_a_warp_shuffle_within_their_segment() -> None:
    tr = translate_to_opencl(PARTIAL, "partial.cu")
    assert not _errors(tr), _errors(tr)
    k = _kernel(tr, "small_tiles")
    assert set(k.requires) == {
        "subgroups",
        "subgroup_shuffle",
        "subgroup_clustered_reduce",
        "reqd_sub_group_size_32",
    }
    text = tr.text
    assert "butterfly += sub_group_shuffle(butterfly, porter_lane_xor((uint)(m), 8u));" in text
    assert "sub_group_shuffle(v, porter_lane_down((uint)(3), 16u))" in text
    assert "sub_group_shuffle(v, porter_lane_up((uint)(2), 16u))" in text
    assert "sub_group_clustered_reduce_add(v, 16u)" in text
    assert "sub_group_clustered_reduce_logical_or((v == 7) != 0, 8u)" in text
    assert "sub_group_shuffle(v, porter_lane_idx((uint)(9), 16u))" in text  # __shfl_sync with a width
    assert "static inline uint porter_lane_down(uint d, uint width)" in text


def test_a_tile_of_several_warps_reduces_through_local_memory() -> None:
    tr = translate_to_opencl(MULTI, "multi.cu")
    assert not _errors(tr), _errors(tr)
    k = _kernel(tr, "multi_warp<64>")
    assert set(k.requires) == {"subgroups", "reqd_sub_group_size_32"}
    text = tr.text
    assert "__local ulong porter_cg_scratch[32];" in text
    assert "block_tile_memory<256> scratch; dropped" in text
    assert "float group_total_tile64(float v, __local ulong* porter_cg_scratch)" in text
    assert "float total = group_total_tile64(in[i], porter_cg_scratch);" in text
    assert "porter_tile_reduce_plus_float(v, 64u, (__local float*)porter_cg_scratch)" in text
    assert "porter_tile_reduce_less_float(in[i], 64u, (__local float*)porter_cg_scratch)" in text
    assert "static float porter_tile_reduce_less_float(float v, uint n, __local float* scratch)" in text
    assert "r = min(r, scratch[w]);" in text
    # tile.sync() of a tile of several warps every work-item reaches: the work-group's barrier
    assert "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);" in text


def _refusals(source: str) -> list[str]:
    tr = translate_to_opencl(HEAD + source, "refused.cu")
    assert all(k.untranslatable for k in tr.kernels)
    return _errors(tr)


def test_a_multi_warp_collective_not_every_work_item_reaches_is_refused() -> None:
    errors = _refusals(
        "__global__ void k(float* p) {\n"
        "    cg::thread_block b = cg::this_thread_block();\n"
        "    cg::thread_block_tile<64> t = cg::tiled_partition<64>(b);\n"
        "    if (p[0] > 0.0f) {\n"
        "        p[b.thread_rank()] = cg::reduce(t, p[b.thread_rank()], cg::plus<float>());\n"
        "        t.sync();\n"
        "    }\n"
        "}\n"
    )
    assert errors == [
        "8: cg::reduce: cg::reduce over a tile of 64 threads that not every work-item reaches: its sub-groups "
        "are combined behind work-group barriers",
        "9: t.sync: sync of a 64-thread tile that not every work-item reaches: OpenCL's only barrier of "
        "several sub-groups is the work-group's",
    ]


def test_what_cuda_tiles_lack_or_porter_cannot_tell_is_refused_with_its_reason() -> None:
    errors = _refusals(
        "__global__ void k(float* p, int n) {\n"
        "    cg::thread_block b = cg::this_thread_block();\n"
        "    auto big = cg::tiled_partition<128>(b);\n"
        "    p[0] = big.shfl_down(p[0], 1);\n"
        "}\n"
        "template <int N> __global__ void g(float* p, int n) {\n"
        "    cg::thread_block_tile<N> t = cg::tiled_partition<N>(cg::this_thread_block());\n"
        "    p[t.thread_rank()] = 0.0f;\n"
        "}\n"
        "__global__ void h(float* p, int n) {\n"
        "    cg::thread_group t = cg::tiled_partition(cg::this_thread_block(), n);\n"
        "    p[0] = cg::reduce(cg::tiled_partition<32>(cg::this_thread_block()), p[0], cg::multiplies<float>());\n"
        "}\n"
        "int main() { float* p; g<48><<<1, 64>>>(p, 1); return 0; }\n"
    )
    assert errors == [
        "7: big.shfl_down: shfl_down on a tile of 128 threads: CUDA offers it on tiles of a warp or less",
        "10: cg::tiled_partition<N>(cg::this_thread_block()): tile size 48: CUDA's tiles are powers of two up to "
        "1024 threads",
        "14: cg::tiled_partition(cg::this_thread_block(), n): tile size n is not a constant porter can evaluate",
        "15: cg::reduce with cg::multiplies<float>(): porter translates the operations cg::plus, cg::less, "
        "cg::greater, cg::bit_and, cg::bit_or and cg::bit_xor",
    ]


def test_a_shuffle_width_porter_cannot_evaluate_is_refused() -> None:
    tr = translate_to_opencl(
        "__global__ void k(float* p, int w) { p[0] = __shfl_xor_sync(0xffffffff, p[0], 1, w); }", "w.cu"
    )
    assert _errors(tr) == [
        "1: __shfl_xor_sync width w: shuffles over part of a warp are translated for a constant power-of-two "
        "width only"
    ]


def test_without_subgroups_tiles_are_refused_but_the_block_is_not() -> None:
    tr = translate_to_opencl(WARP + BLOCK.replace(HEAD, ""), "off.cu", subgroups=False)
    assert _kernel(tr, "warp_tile").untranslatable
    assert not _kernel(tr, "block_facts").untranslatable
    assert any("tile.shfl_down: needs OpenCL sub-groups" in e for e in _errors(tr))


# --------------------------------------------------------------------------- runs on the devices here


def _devices() -> list[Any]:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return []
    from porter.backends.opencl import OpenCLBackend

    return [d for d in OpenCLBackend().devices() if d.kind != "checker"]


DEVICES = _devices()


@pytest.fixture(params=DEVICES or [None], ids=lambda d: d.label if d is not None else "none")
def device(request: pytest.FixtureRequest) -> Any:
    if request.param is None:
        pytest.skip("no OpenCL device (install pocl-opencl-icd, or pip install intel-opencl-rt)")
    return request.param


def _run(device: Any, tr: Translation, name: str, args: list[Any], grid: Any, block: Any) -> list[Any]:
    """Build kernel `name` for `device` (skipped, naming what it lacks, where it cannot) and run it;
    the arrays come back in argument order."""
    from porter.backends.opencl import OpenCLBackend, missing_requirements

    k = _kernel(tr, name)
    assert not k.untranslatable, k.untranslatable
    lacks = missing_requirements(device, k.requires)
    if lacks:
        from porter.backends.opencl.devices import capabilities

        broken = sorted(capabilities(device).broken & set(lacks))
        why = f"it failed porter's probe of {', '.join(broken)}" if broken else "pip install intel-opencl-rt"
        pytest.skip(f"{device.label} lacks {', '.join(lacks)} (needed by {name}): {why}")
    return launch_translated(OpenCLBackend(), device, tr.text, k, args, grid, block)


@pytest.mark.integration
def test_run_block_methods(device: Any) -> None:
    bx, by, blocks = 8, 4, 3
    threads = bx * by
    tr = translate_to_opencl(BLOCK, "block.cu")
    out = _run(device, tr, "block_facts", [np.zeros(blocks * threads * 6, np.uint32)], (blocks,), (bx, by))[0]
    facts = out.reshape(blocks, threads, 6)
    rank = np.arange(threads)
    for b in range(blocks):
        np.testing.assert_array_equal(facts[b, :, 0], rank)
        np.testing.assert_array_equal(facts[b, :, 1], threads)
        np.testing.assert_array_equal(facts[b, :, 2], b)
        np.testing.assert_array_equal(facts[b, :, 3], rank // bx)  # threadIdx.y
        np.testing.assert_array_equal(facts[b, :, 4], bx + 100 * by)
        np.testing.assert_array_equal(facts[b, :, 5], rank + 1000 * threads)


@pytest.mark.integration
def test_run_warp_tile(device: Any) -> None:
    block, blocks = 96, 2  # three warps a block
    n = block * blocks
    rng = np.random.default_rng(5)
    x = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    x[40] = 1.75  # the second warp of block 0 has a value over 1.5
    tr = translate_to_opencl(WARP, "warp.cu")
    out = _run(
        device,
        tr,
        "warp_tile",
        [
            x,
            np.zeros(n, np.float32),
            np.zeros(4 * n, np.int32),
            np.zeros(n, np.float32),
            np.zeros(n, np.int32),
        ],
        (blocks,),
        (block,),
    )
    sums, facts, reduced, maxima = out[1], out[2].reshape(n, 4), out[3], out[4]
    warps = x.reshape(-1, 32)
    lane = np.arange(n) % 32
    np.testing.assert_allclose(sums[lane == 0], warps.sum(axis=1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(facts[:, 0], lane)
    np.testing.assert_array_equal(facts[:, 1], (np.arange(n) % block) // 32 + 100 * (block // 32))
    any_ = np.repeat((warps > 1.5).any(axis=1), 32)
    np.testing.assert_array_equal(facts[:, 2], any_.astype(np.int32) + 2)
    np.testing.assert_array_equal(facts[:, 3], 5 + 100 * (lane ^ 1))
    np.testing.assert_allclose(
        reduced, np.repeat(warps.sum(axis=1, dtype=np.float64), 32), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_array_equal(maxima, np.repeat((warps * 100.0).astype(np.int32).max(axis=1), 32))


def _segment_shfl(v: np.ndarray, width: int, src: np.ndarray) -> np.ndarray:
    """CUDA's shuffles over segments of `width` lanes: the value at `src`, or the caller's own where
    `src` leaves its segment (past its end, or before its start)."""
    lane = np.arange(v.size)
    start = lane - lane % width
    inside = (src >= start) & (src < start + width)
    return np.where(inside, v[np.clip(src, 0, v.size - 1)], v)


@pytest.mark.integration
def test_run_small_tiles(device: Any) -> None:
    block, blocks = 64, 2
    n = block * blocks
    rng = np.random.default_rng(7)
    x = rng.integers(-50, 50, n).astype(np.int32)
    x[9] = 7  # one 8-thread tile holds a 7
    tr = translate_to_opencl(PARTIAL, "partial.cu")
    out = _run(device, tr, "small_tiles", [x, np.zeros(6 * n, np.int32)], (blocks,), (block,))[1].reshape(
        n, 6
    )
    lane = np.arange(n)
    np.testing.assert_array_equal(out[:, 0], np.repeat(x.reshape(-1, 8).sum(axis=1), 8))
    np.testing.assert_array_equal(out[:, 1], _segment_shfl(x, 16, lane + 3))
    np.testing.assert_array_equal(out[:, 2], _segment_shfl(x, 16, lane - 2))
    np.testing.assert_array_equal(out[:, 3], np.repeat(x.reshape(-1, 16).sum(axis=1), 16))
    t8 = (
        (lane % block) % 8
        + 10 * ((lane % block) // 8)
        + 1000 * np.repeat((x.reshape(-1, 8) == 7).any(axis=1), 8)
    )
    np.testing.assert_array_equal(out[:, 4], t8)
    np.testing.assert_array_equal(out[:, 5], x[lane - lane % 16 + 9])


@pytest.mark.integration
def test_run_multi_warp_tile(device: Any) -> None:
    block, blocks, tile = 256, 2, 64
    n = block * blocks
    rng = np.random.default_rng(11)
    x = rng.uniform(0.5, 1.5, n).astype(np.float32)
    tr = translate_to_opencl(MULTI, "multi.cu")
    out = _run(
        device,
        tr,
        "multi_warp<64>",
        [x, np.zeros(2 * n, np.float32), np.zeros(n, np.uint32)],
        (blocks,),
        (block,),
    )
    totals, facts = out[1].reshape(n, 2), out[2]
    tiles = x.reshape(-1, tile)
    np.testing.assert_allclose(totals[:, 0], np.repeat(tiles.sum(axis=1, dtype=np.float64), tile), rtol=1e-5)
    np.testing.assert_array_equal(totals[:, 1], np.repeat(tiles.min(axis=1), tile))
    rank = np.arange(n) % block
    np.testing.assert_array_equal(facts, rank % tile + 1000 * (rank // tile) + 100000 * (block // tile))


@pytest.mark.integration
def test_a_program_build_without_cl_std_keeps_the_tiles_on_intel(device: Any) -> None:
    """A program's own build of its .cl file passes no -cl-std (OpenCL C 1.2): on Intel's runtimes
    cl_intel_subgroups gives the sub-group built-ins there, so the tile kernels stay in the program (those
    needing what the device failed porter's probe of are left out by their guards, as they should)."""
    from porter.backends import CompileOptions
    from porter.backends.opencl import OpenCLBackend, missing_requirements
    from porter.backends.opencl.devices import capabilities

    if "cl_intel_subgroups" not in capabilities(device).extensions:
        pytest.skip(f"{device.label} has no cl_intel_subgroups")
    tr = translate_to_opencl(WARP + PARTIAL.replace(HEAD, "") + MULTI.replace(HEAD, ""), "all.cu")
    backend = OpenCLBackend()
    built = 0
    for k in tr.kernels:
        assert not k.untranslatable, k.untranslatable
        if not missing_requirements(device, k.requires):
            backend.compile(tr.text, k.entry, CompileOptions(), device=device)  # raises with the log
            built += 1
    if not built:
        pytest.skip(f"{device.label} failed porter's probe of {sorted(capabilities(device).broken)}")


def test_a_declared_extension_the_probe_found_broken_is_defined_away() -> None:
    """A device that lists cl_intel_required_subgroup_size but whose 32-wide sub-groups gave a wrong sum in porter's
    probe builds with -DPORTER_NO_SUBGROUP_32, which the guard of every kernel needing them tests."""
    from porter.backends.opencl.requirements import Capabilities, disabled

    declared = frozenset({"cl_khr_subgroups", "cl_intel_subgroups", "cl_intel_required_subgroup_size"})
    assert disabled(Capabilities(extensions=declared, sub_group_sizes=frozenset({8, 16}))) == (
        "-DPORTER_NO_SUBGROUP_32",
    )
    assert disabled(Capabilities(extensions=declared, sub_group_sizes=frozenset({16, 32}))) == ()
    assert (
        disabled(Capabilities(extensions=frozenset({"cl_khr_subgroups"}))) == ()
    )  # never declared: the guard does
