"""The emulator at 64 lanes against AMD CDNA's wave64 (docs/EMULATOR.md, "The 64-lane model").

One test per rule: kernels of our own, each run on the emulator at 32 and at 64 lanes, with the result
AMD's HIP headers give (amd_warp_functions.h, amd_warp_sync_functions.h) computed here.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from porter.backends import CompileError, CompileOptions, LaunchError
from porter.backends.cpu import CpuBackend, CpuProgram

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
]

WIDTHS = [32, 64]
HIP = "#include <hip/hip_runtime.h>\n"


@pytest.fixture(scope="module")
def be() -> CpuBackend:
    return CpuBackend()


def build(be: CpuBackend, source: str, entry: str, wave: int) -> CpuProgram:
    device = be.devices()[0] if wave == 32 else be.wavefront_device(64)
    assert device is not None
    prog = be.load(be.compile(source, entry, CompileOptions(), device), device)
    assert prog.warp_size == wave
    return prog


def run_ints(prog: CpuProgram, be: CpuBackend, n: int, block: int, *scalars: object, dtype: type = np.int32):
    out = be.to_device(np.zeros(n, dtype))
    prog(out, *scalars, grid=(1,), block=(block,))
    return be.to_host(out, dtype, (n,))


# --------------------------------------------------------------------------- shuffles

SHUFFLES = (
    HIP
    + """
__global__ void shuffles(int* out, int w, int synced)
{
    int t = threadIdx.x, n = blockDim.x, v = 1000 + t;
    if (synced) {
        unsigned long long m = __activemask();
        out[0 * n + t] = __shfl_sync(m, v, 3, w);
        out[1 * n + t] = __shfl_sync(m, v, w + 5, w);      // past the segment: srcLane % width
        out[2 * n + t] = __shfl_sync(m, v, -1, w);
        out[3 * n + t] = __shfl_up_sync(m, v, 5, w);
        out[4 * n + t] = __shfl_down_sync(m, v, 5, w);
        out[5 * n + t] = __shfl_xor_sync(m, v, 1, w);
        out[6 * n + t] = __shfl_xor_sync(m, v, w, w);      // the next segment: own value; the one before: read
    } else {
        out[0 * n + t] = __shfl(v, 3, w);
        out[1 * n + t] = __shfl(v, w + 5, w);
        out[2 * n + t] = __shfl(v, -1, w);
        out[3 * n + t] = __shfl_up(v, 5, w);
        out[4 * n + t] = __shfl_down(v, 5, w);
        out[5 * n + t] = __shfl_xor(v, 1, w);
        out[6 * n + t] = __shfl_xor(v, w, w);
    }
}
"""
)


def amd_shuffles(block: int, wave: int, w: int) -> np.ndarray:
    """amd_warp_functions.h's index arithmetic (a source past the wavefront reads the caller's own lane)."""
    rows = []
    for t in range(block):
        base, lane = t - t % wave, t % wave
        seg = lane & ~(w - 1)

        def at(src: int, t: int = t, base: int = base) -> int:
            return 1000 + base + src

        up = lane - 5 if lane - 5 >= seg else lane
        down = lane if (lane & (w - 1)) + 5 >= w else lane + 5
        x1 = lane ^ 1 if (lane ^ 1) < ((lane + w) & ~(w - 1)) else lane
        xw = lane ^ w if (lane ^ w) < ((lane + w) & ~(w - 1)) else lane
        rows.append(
            [at(seg + (3 & (w - 1))), at(seg + ((w + 5) & (w - 1))), at(seg + (-1 & (w - 1))), at(up), at(down),
             at(x1), at(xw)]
        )  # fmt: skip
    return np.array(rows, np.int32).T.reshape(-1)


@pytest.mark.parametrize(("wave", "w"), [(32, 16), (32, 32), (64, 16), (64, 32), (64, 64)])
@pytest.mark.parametrize("synced", [0, 1])
def test_shuffles_with_a_width_follow_amds_index_rules(
    be: CpuBackend, wave: int, w: int, synced: int
) -> None:
    prog = build(be, SHUFFLES, "shuffles", wave)
    got = run_ints(prog, be, 7 * 128, 128, np.int32(w), np.int32(synced))
    np.testing.assert_array_equal(got, amd_shuffles(128, wave, w))


@pytest.mark.parametrize(("wave", "w"), [(32, 64), (64, 128), (64, 48), (32, 0)])
def test_a_width_that_is_no_power_of_two_up_to_the_wavefront_fails_the_launch(
    be: CpuBackend, wave: int, w: int
) -> None:
    prog = build(be, SHUFFLES, "shuffles", wave)
    with pytest.raises(
        LaunchError, match=rf"__shfl_sync: width {w} is not a power of two from 1 to warpSize \({wave}\)"
    ):
        run_ints(prog, be, 7 * 128, 128, np.int32(w), np.int32(1))


REDEFINED = (
    HIP
    + """
#define warpSize 32   // the program's own, after the header: the built-ins keep the real wavefront
__global__ void redefined(int* out)
{
    int t = threadIdx.x, n = blockDim.x;
    int lane = threadIdx.x % warpSize;
    out[t] = lane;
    out[n + t] = __shfl_down(lane, 16);      // the default width is the wavefront, not the macro
    out[2 * n + t] = warpSize;
    out[3 * n + t] = __lane_id();
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_a_program_that_redefines_warpSize_reads_its_own_value_and_the_builtins_keep_theirs(
    be: CpuBackend, wave: int
) -> None:
    got = run_ints(build(be, REDEFINED, "redefined", wave), be, 4 * 128, 128).reshape(4, 128)
    t = np.arange(128)
    hw = t % wave
    assert (got[0] == t % 32).all() and (got[2] == 32).all() and (got[3] == hw).all()
    src = np.where(hw + 16 < wave, t + 16, t)
    np.testing.assert_array_equal(got[1], src % 32)


# --------------------------------------------------------------------------- ballot, votes, active mask

BALLOT = (
    HIP
    + """
__global__ void ballots(unsigned long long* out)
{
    int t = threadIdx.x, n = blockDim.x;
    int p = t % 2 == 0 || t % 64 >= 40;
    unsigned long long wide = __ballot(p);
    unsigned int narrow = __ballot(p);       // a 32-bit store: lanes 32-63 are lost at 64 lanes
    out[t] = wide;
    out[n + t] = narrow;
    out[2 * n + t] = __popcll(wide) - __popc(narrow);
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_ballot_has_64_bits_and_a_32_bit_store_keeps_lanes_0_to_31(be: CpuBackend, wave: int) -> None:
    got = run_ints(build(be, BALLOT, "ballots", wave), be, 3 * 128, 128, dtype=np.uint64).reshape(3, 128)
    for t in range(128):
        base = t - t % wave
        want = sum(1 << (k - base) for k in range(base, base + wave) if k % 2 == 0 or k % 64 >= 40)
        assert int(got[0][t]) == want and int(got[1][t]) == want & 0xFFFFFFFF
    lost = int(got[2].max())
    # lanes 32, 34, 36, 38 and 40-63 voted: the 32-bit copy lost them
    assert lost == (0 if wave == 32 else 28)


VOTES = (
    HIP
    + """
__global__ void votes(unsigned long long* out, int n)
{
    int t = threadIdx.x;
    if (t >= n) return;                        // lanes n.. exit before the votes
    out[4 * t + 0] = __activemask();
    out[4 * t + 1] = __any(t == n - 1);
    out[4 * t + 2] = __all(t < n);
    out[4 * t + 3] = __all(t % warpSize < 31);
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_activemask_any_and_all_take_the_lanes_still_active(be: CpuBackend, wave: int) -> None:
    n = 50
    got = run_ints(build(be, VOTES, "votes", wave), be, 4 * 64, 64, np.int32(n), dtype=np.uint64)
    got = got.reshape(64, 4)[:n]
    for t in range(n):
        base = t - t % wave
        active = min(n, base + wave) - base
        if wave == 64:  # AMD: __ballot(true), the lanes still active
            assert int(got[t][0]) == (1 << active) - 1
        else:  # CUDA: the lanes not exited when the caller asks (those returning may not have yet)
            assert int(got[t][0]) & ((1 << active) - 1) == (1 << active) - 1
        assert int(got[t][1]) == (1 if base + active == n else 0)
        assert int(got[t][2]) == 1
        assert int(got[t][3]) == (0 if active > 31 else 1)


# --------------------------------------------------------------------------- masks of the *_sync forms

SYNC32 = HIP + "__global__ void k(int* out) { __syncwarp(0xffffffff); out[threadIdx.x] = 1; }\n"
SHFL32 = (
    HIP + "__global__ void k(int* out) { out[threadIdx.x] = __shfl_sync(0xffffffff, (int)threadIdx.x, 0); }\n"
)
SHFL32_ULL = (
    HIP
    + "__global__ void k(int* out) { out[threadIdx.x] = __shfl_sync(0xffffffffull, (int)threadIdx.x, 0); }\n"
)
SYNC32_ULL = HIP + "__global__ void k(int* out) { __syncwarp(0xffffffffull); out[threadIdx.x] = 1; }\n"


@pytest.mark.parametrize("source", [SYNC32, SHFL32])
def test_a_32_bit_mask_type_does_not_build_for_hip_at_64_lanes(be: CpuBackend, source: str) -> None:
    with pytest.raises(CompileError, match="The mask must be a 64-bit integer"):
        build(be, source, "k", 64)
    assert run_ints(build(be, source, "k", 32), be, 64, 64).tolist()[:2] in ([1, 1], [0, 0])


@pytest.mark.parametrize("source", [SYNC32_ULL, SHFL32_ULL])
def test_a_64_bit_mask_of_32_lanes_fails_for_the_lanes_it_leaves_out(be: CpuBackend, source: str) -> None:
    with pytest.raises(
        LaunchError, match=r"mask 0x00000000ffffffff called by lane (3[2-9]|[4-6]\d) .* own lane"
    ):
        run_ints(build(be, source, "k", 64), be, 64, 64)
    run_ints(build(be, source, "k", 32), be, 64, 64)  # HIP at 32 lanes: CUDA's rules, a whole warp


def test_cuda_code_at_64_lanes_keeps_cudas_masks_and_a_32_bit_mask_loses_lanes_32_to_63(
    be: CpuBackend,
) -> None:
    # CUDA's reading: lanes 0-31 complete together; lanes 32-63 (each its own bit added) once 0-31 exited,
    # reading lane 0, which no longer takes part: 0, as AMD reads an inactive lane
    source = "__global__ void k(int* out) { out[threadIdx.x] = __shfl_sync(0xffffffff, 100 + (int)threadIdx.x, 0); }\n"
    assert run_ints(build(be, source, "k", 64), be, 64, 64).tolist() == [100] * 32 + [0] * 32
    assert run_ints(build(be, source, "k", 32), be, 64, 64).tolist() == [100] * 32 + [132] * 32


# --------------------------------------------------------------------------- partial wavefronts

PARTIAL = (
    HIP
    + """
__global__ void partial(unsigned long long* out, int full_mask)
{
    int t = threadIdx.x, n = blockDim.x;
    unsigned long long m = full_mask ? ~0ull : __activemask();
    out[t] = __ballot_sync(m, 1);
    out[n + t] = __activemask();
    out[2 * n + t] = __shfl_down((int)t, 16) ;           // lanes 16-31 of a 32-lane wavefront read nothing
    out[3 * n + t] = __shfl_xor_sync(m, (int)t, 32);
    out[4 * n + t] = __lanemask_gt();
    out[5 * n + t] = __lanemask_lt();
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_a_block_of_96_threads_leaves_a_second_wavefront_of_32_active_lanes(
    be: CpuBackend, wave: int
) -> None:
    prog = build(be, PARTIAL, "partial", wave)
    got = run_ints(prog, be, 6 * 96, 96, np.int32(0), dtype=np.uint64).reshape(6, 96)
    for t in range(96):
        base, lane = t - t % wave, t % wave
        active = min(96, base + wave) - base
        live = (1 << active) - 1
        assert int(got[0][t]) == live and int(got[1][t]) == live
        down = t + 16 if lane + 16 < wave else t
        assert int(got[2][t]) == (down if down - base < active else 0)  # AMD reads 0 from an inactive lane
        xor = lane ^ 32
        assert int(got[3][t]) == (t if xor >= wave else base + xor if xor < active else 0)
        assert int(got[4][t]) == live & ~((2 << lane) - 1)  # HIP: the active lanes above this one
        assert int(got[5][t]) == (1 << lane) - 1
    if wave == 64:  # a full mask names lanes 32-63, which are not there: HIP's __hip_check_mask
        with pytest.raises(LaunchError, match=r"__ballot_sync with mask 0xffffffffffffffff .* not active"):
            prog(be.alloc(6 * 96 * 8), np.int32(1), grid=(1,), block=(96,))
    else:
        prog(be.alloc(6 * 96 * 8), np.int32(1), grid=(1,), block=(96,))


LANES = (
    HIP
    + """
__global__ void lanes(int* out)
{
    int flat = threadIdx.y * blockDim.x + threadIdx.x, n = blockDim.x * blockDim.y;
    out[flat] = __lane_id();
    out[n + flat] = threadIdx.x % warpSize;     // a 2-D block: not the lane
    out[2 * n + flat] = flat / warpSize;
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_lane_ids_count_the_flattened_thread_index(be: CpuBackend, wave: int) -> None:
    prog = build(be, LANES, "lanes", wave)
    out = be.to_device(np.zeros(3 * 128, np.int32))
    prog(out, grid=(1,), block=(16, 8))
    got = be.to_host(out, np.int32, (3, 128))
    flat = np.arange(128)
    np.testing.assert_array_equal(got[0], flat % wave)
    np.testing.assert_array_equal(got[1], (flat % 16) % wave)
    np.testing.assert_array_equal(got[2], flat // wave)


# --------------------------------------------------------------------------- match

MATCH = (
    HIP
    + """
__global__ void match(unsigned long long* out)
{
    int t = threadIdx.x, n = blockDim.x;
    unsigned long long m = __activemask();
    int pred = -1;
    out[t] = __match_any_sync(m, t % 5);
    out[n + t] = __match_all_sync(m, 7.5, &pred);
    out[2 * n + t] = pred;
    out[3 * n + t] = __match_all_sync(m, (long long)(t % warpSize), &pred);
    out[4 * n + t] = pred;
    out[5 * n + t] = __match_any(t / 8);
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_match_any_and_match_all_over_the_wavefront(be: CpuBackend, wave: int) -> None:
    got = run_ints(build(be, MATCH, "match", wave), be, 6 * 96, 96, dtype=np.uint64).reshape(6, 96)
    for t in range(96):
        base = t - t % wave
        lanes = range(base, min(96, base + wave))
        live = (1 << len(lanes)) - 1
        assert int(got[0][t]) == sum(1 << (k - base) for k in lanes if k % 5 == t % 5)
        assert int(got[1][t]) == live and int(got[2][t]) == 1
        assert int(got[3][t]) == 0 and int(got[4][t]) == 0
        assert int(got[5][t]) == sum(1 << (k - base) for k in lanes if k // 8 == t // 8)


def test_match_of_a_16_bit_value_does_not_build(be: CpuBackend) -> None:
    source = (
        HIP + "__global__ void k(int* out) { out[0] = (int)__match_any_sync(__activemask(), (short)1); }\n"
    )
    with pytest.raises(CompileError, match="32- or 64-bit integer"):
        build(be, source, "k", 64)


# --------------------------------------------------------------------------- cooperative-group tiles

TILE = (
    HIP
    + """
#include <hip/hip_cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void tile(int* out)
{
    cg::thread_block_tile<32> t = cg::tiled_partition<32>(cg::this_thread_block());
    out[threadIdx.x] = t.shfl((int)threadIdx.x, 0) + (int)t.ballot(1);
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_tiles_of_32_are_tiles_of_32_in_a_64_lane_wavefront(be: CpuBackend, wave: int) -> None:
    # thread_block_tile<32>: rank 0 of each tile of 32 threads, and a ballot of the tile's 32 threads only
    # (tests/backends/test_cpu_cooperative_groups.py covers the tiles' operations)
    got = run_ints(build(be, TILE, "tile", wave), be, 128, 128)
    assert got.tolist() == [(t & ~31) + (0xFFFFFFFF - (1 << 32)) for t in range(128)]


# --------------------------------------------------------------------------- the arch a HIP port sees

ARCH = (
    HIP
    + """
__global__ void arch(int* out)
{
#if __CUDA_ARCH__ >= 800
    out[threadIdx.x] = __CUDA_ARCH__;
#else
    out[threadIdx.x] = -1;
#endif
}
"""
)


@pytest.mark.parametrize("wave", WIDTHS)
def test_a_hip_port_sees_the_cuda_arch_of_hip_on_nvidia_at_32_lanes_and_none_at_64(
    be: CpuBackend, wave: int
) -> None:
    """HIP at 32 lanes stands for HIP on NVIDIA, whose device pass (nvcc) defines __CUDA_ARCH__ as the emulator
    does for CUDA code (800); at 64 lanes, AMD's HIP-Clang defines none, so the port takes its other branch."""
    got = run_ints(build(be, ARCH, "arch", wave), be, 4, 4)
    assert got.tolist() == ([800] * 4 if wave == 32 else [-1] * 4)
