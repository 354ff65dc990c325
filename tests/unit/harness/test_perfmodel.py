"""The performance model: device table, occupancy, static cost, roofline floor, suspect detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.harness import perfmodel
from porter.harness.cost import estimate
from porter.harness.perfmodel import assess, device_table, find_device, occupancy, roofline
from porter.model import ArgSpec, KernelSpec, Role
from porter.results import KernelCost

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"

REQUIRED = ("H100", "H200", "A100", "L40S", "RTX4090", "MI250X", "MI300X", "cpu", "cpu-emulator")


# --------------------------------------------------------------------------- the table


def test_table_has_every_required_device_with_its_facts() -> None:
    table = device_table()
    for key in REQUIRED:
        assert key in table, key
    for key in REQUIRED[:7]:
        e = table[key]
        assert e.memory_bandwidth and e.memory_bandwidth > 1e11
        assert e.flops_vector["fp32"] > 1e12 and e.flops_vector["fp64"] > 1e11
        assert e.multiprocessors and e.registers_per_sm and e.shared_per_sm and e.max_threads_per_sm
        assert e.warp_size == (64 if e.vendor == "amd" else 32)
    assert table["H200"].measured_bandwidth == pytest.approx(4.07e12)
    assert table["cpu-emulator"].no_roofline


@pytest.mark.parametrize(
    ("name", "kind", "key"),
    [
        ("NVIDIA H200", "gpu", "H200"),
        ("NVIDIA H100 80GB HBM3", "gpu", "H100"),
        ("NVIDIA A100-SXM4-80GB", "gpu", "A100"),
        ("NVIDIA GeForce RTX 4090", "gpu", "RTX4090"),
        ("NVIDIA L40S", "gpu", "L40S"),
        ("AMD Instinct MI300X", "gpu", "MI300X"),
        ("AMD Instinct MI250X/MI250", "gpu", "MI250X"),
        ("pthread-haswell-AMD EPYC 7B13", "cpu", "cpu"),
        ("cpu-emulator", "emulator", "cpu-emulator"),
    ],
)
def test_find_device_by_runtime_name(name: str, kind: str, key: str) -> None:
    entry = find_device(name, kind)
    assert entry is not None and entry.key == key


def test_unknown_gpu_has_no_entry() -> None:
    assert find_device("NVIDIA GeForce GTX 1080", "gpu") is None


# --------------------------------------------------------------------------- occupancy


def test_occupancy_full_on_h100() -> None:
    # 256 threads = 8 warps; 64 warps/SM -> 8 blocks; 32 regs -> 1024 regs/warp, 16 warps per
    # 16384-register partition -> 64 warps -> 8 blocks.  Full occupancy.
    assert occupancy(device_table()["H100"], 256, 32, 0) == (8, 1.0, "threads")


def test_occupancy_register_limited() -> None:
    # 128 regs -> 4096 regs/warp -> 4 warps per partition -> 16 warps -> 2 blocks of 8 warps: 25%.
    blocks, fraction, limiter = occupancy(device_table()["H100"], 256, 128, 0)
    assert (blocks, limiter) == (2, "registers")
    assert fraction == pytest.approx(0.25)


def test_occupancy_register_granularity_rounds_up() -> None:
    # 33 regs -> 33*32 = 1056 rounded up to 1280 per warp -> 12 warps per partition -> 48 warps -> 6 blocks.
    assert occupancy(device_table()["H100"], 256, 33, 0)[:2] == (6, pytest.approx(0.75))


def test_occupancy_shared_memory_limited() -> None:
    # 100 KiB + 1 KiB reserve per block; 228 KiB per SM -> 2 blocks of 8 warps: 25%.
    blocks, fraction, limiter = occupancy(device_table()["H100"], 256, 32, 100 * 1024)
    assert (blocks, limiter) == (2, "shared")
    assert fraction == pytest.approx(0.25)


def test_occupancy_block_limit_for_tiny_blocks() -> None:
    # 32-thread blocks: 64 by threads, but at most 32 blocks per SM -> 50%.
    assert occupancy(device_table()["H100"], 32, 16, 0) == (32, 0.5, "blocks")


def test_occupancy_amd_wavefronts() -> None:
    # MI300X: 256 threads = 4 waves of 64; 64 VGPRs -> 4096 per wave, 8 waves per SIMD -> 32 waves.
    assert occupancy(device_table()["MI300X"], 256, 64, 0) == (8, 1.0, "threads")
    # 128 VGPRs -> 4 waves per SIMD -> 16 waves -> 4 blocks: 50%.
    assert occupancy(device_table()["MI300X"], 256, 128, 0) == (4, 0.5, "registers")


def test_occupancy_impossible_launches() -> None:
    h100 = device_table()["H100"]
    assert occupancy(h100, 2048, 32, 0)[0] == 0
    assert occupancy(h100, 256, 300, 0) == (0, 0.0, "registers")
    assert occupancy(h100, 256, 32, 300 * 1024) == (0, 0.0, "shared")


# --------------------------------------------------------------------------- roofline


def _cost(read: int, written: int, flops: dict[str, float], tensor: bool = False) -> KernelCost:
    return KernelCost("k", {}, 1, read, written, flops, {}, tensor)


def test_saxpy_floor_hand_computed_on_h100() -> None:
    n = 1 << 26
    cost = _cost(8 * n, 4 * n, {"float32": 2.0 * n})  # x, y read; y written
    h100 = device_table()["H100"]
    roof = roofline(cost, h100)
    # Writes up to the 50 MB L2 may stay in cache when the kernel ends: 4n - 52428800 bytes reach DRAM.
    dram = 8 * n + (4 * n - 52428800)
    assert roof.memory_ms == pytest.approx(dram / 3.35e12 * 1e3)
    assert roof.compute_ms == pytest.approx(2.0 * n / 66.9e12 * 1e3)
    assert roof.bound == "memory"
    assert roof.floor_ms == roof.memory_ms


def test_small_writes_fit_in_cache() -> None:
    cost = _cost(1 << 20, 1 << 20, {})
    roof = roofline(cost, device_table()["H200"])
    assert roof.memory_ms == pytest.approx((1 << 20) / 4.8e12 * 1e3)


def test_matmul_floor_hand_computed_on_h200() -> None:
    m = n = k = 4096
    cost = _cost(2 * 4 * m * k, 4 * m * n, {"float32": 2.0 * m * n * k})
    roof = roofline(cost, device_table()["H200"])
    assert roof.compute_ms == pytest.approx(2.0 * m * n * k / 67e12 * 1e3)  # 2.05 ms
    assert roof.bound == "compute"
    assert roof.floor_ms == pytest.approx(2.0513, rel=1e-3)
    # With tensor-core instructions the TF32 matrix rate applies.
    tensor = roofline(
        _cost(cost.bytes_read, cost.bytes_written, cost.flops, tensor=True), device_table()["H200"]
    )
    assert tensor.compute_ms == pytest.approx(2.0 * m * n * k / 494.7e12 * 1e3)


def test_mixed_dtypes_add_up() -> None:
    cost = _cost(0, 0, {"float32": 67e9, "float64": 34e9})
    roof = roofline(cost, device_table()["H200"])
    assert roof.compute_ms == pytest.approx(2.0)  # 1 ms of fp32 + 1 ms of fp64


def test_no_roofline_for_the_emulator() -> None:
    roof = roofline(_cost(100, 100, {"float32": 10}), device_table()["cpu-emulator"])
    assert roof.floor_ms is None and "emulator" in roof.note


def test_cpu_compute_scales_with_cores() -> None:
    cost = _cost(0, 0, {"float32": 96e9})
    assert roofline(cost, device_table()["cpu"], cores=4).compute_ms == pytest.approx(250.0)


# --------------------------------------------------------------------------- assessment / suspect


def test_assessment_percent_of_peak_bandwidth() -> None:
    n = 1 << 26
    cost = _cost(8 * n, 4 * n, {"float32": 2.0 * n})
    h200 = device_table()["H200"]
    seconds = 12 * n / 3.0e12  # 3 TB/s achieved
    a = assess(cost, h200, seconds * 1e3)
    assert a.achieved_bandwidth == pytest.approx(3.0e12)
    assert a.pct_bandwidth == pytest.approx(100 * 3.0 / 4.8)
    assert a.pct_measured_bandwidth == pytest.approx(100 * 3.0 / 4.07)
    assert a.bound == "memory" and not a.suspect


def test_time_below_the_floor_is_suspect() -> None:
    n = 1 << 26
    cost = _cost(8 * n, 4 * n, {"float32": 2.0 * n})
    h200 = device_table()["H200"]
    floor = roofline(cost, h200).floor_ms
    assert floor is not None
    fast = assess(cost, h200, floor * 0.5)
    assert fast.suspect and "below the physical floor" in fast.reason
    assert not assess(cost, h200, floor * 0.95).suspect  # within the 10% margin
    assert assess(cost, h200, floor * (perfmodel.SUSPECT_FACTOR - 0.01)).suspect


def test_compute_bound_percent() -> None:
    cost = _cost(0, 0, {"float32": 67e12})  # 1 s at peak
    a = assess(cost, device_table()["H200"], 2000.0)
    assert a.bound == "compute"
    assert a.pct_compute == pytest.approx(50.0)


def test_unknown_device_is_never_suspect() -> None:
    a = assess(_cost(100, 100, {}), None, 1e-9)
    assert not a.suspect and a.floor_ms is None


# --------------------------------------------------------------------------- static byte / FLOP counts


def _vector_add_spec() -> KernelSpec:
    return KernelSpec(
        kernel="vector_add",
        args=(
            ArgSpec("a", "float32", Role.IN, ("n",)),
            ArgSpec("b", "float32", Role.IN, ("n",)),
            ArgSpec("c", "float32", Role.OUT, ("n",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ),
        grid=("(n + 255) / 256",),
        block=("256",),
    )


def test_vector_add_sample_counts() -> None:
    from porter.scan import scan_file

    path = SAMPLES / "vector_add.cu"
    cost = estimate(path.read_text(), _vector_add_spec(), {"n": 4096}, scan_file(str(path)))
    assert cost.bytes_read == 2 * 4 * 4096
    assert cost.bytes_written == 4 * 4096
    assert cost.flops_per_thread == {"float32": 1.0}
    assert cost.flops == {"float32": 4096.0}
    assert cost.threads == 4096


def _matmul_spec() -> KernelSpec:
    return KernelSpec(
        kernel="matmul_tiled",
        args=(
            ArgSpec("A", "float32", Role.IN, ("M", "K")),
            ArgSpec("B", "float32", Role.IN, ("K", "N")),
            ArgSpec("C", "float32", Role.OUT, ("M", "N")),
            ArgSpec("M", "int32", Role.SCALAR, value="M"),
            ArgSpec("N", "int32", Role.SCALAR, value="N"),
            ArgSpec("K", "int32", Role.SCALAR, value="K"),
        ),
        grid=("(N + 15) / 16", "(M + 15) / 16"),
        block=("16", "16"),
    )


def test_matmul_sample_counts_2mnk() -> None:
    from porter.scan import scan_file

    path = SAMPLES / "matmul_tiled.cu"
    scan = scan_file(str(path))
    exact = estimate(path.read_text(), _matmul_spec(), {"M": 512, "N": 256, "K": 128}, scan)
    assert exact.flops["float32"] == 2 * 512 * 256 * 128
    assert exact.bytes_read == 4 * (512 * 128 + 128 * 256) and exact.bytes_written == 4 * 512 * 256
    # Sizes that are not tile multiples: every launched thread runs every tile, ~2MNK within a few %.
    ragged = estimate(path.read_text(), _matmul_spec(), {"M": 1000, "N": 777, "K": 513}, scan)
    assert ragged.flops["float32"] == pytest.approx(2 * 1000 * 777 * 513, rel=0.06)


def _one(
    body: str, *, params: str = "const float* x, float* y, int n", size: int = 1024, block: int = 256
) -> KernelCost:
    source = f"__global__ void k({params})\n{{\n{body}\n}}\n"
    spec = KernelSpec(
        kernel="k",
        args=(
            ArgSpec("x", "float32", Role.IN, ("n",)),
            ArgSpec("y", "float32", Role.OUT, ("n",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ),
        grid=(f"(n + {block - 1}) / {block}",),
        block=(str(block),),
    )
    return estimate(source, spec, {"n": size})


def test_index_arithmetic_is_not_counted() -> None:
    cost = _one("int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i];")
    assert cost.flops == {}


def test_grid_stride_loop_covers_n_once() -> None:
    body = (
        "float s = 0.0f;\n"
        "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) { s += x[i] * 2.0f; }\n"
        "y[threadIdx.x] = s;"
    )
    cost = _one(body, size=1 << 16, block=256)
    # 256 blocks x 256 threads = 65536 threads, one iteration each, 2 FLOPs per iteration.
    assert cost.flops == {"float32": 2.0 * (1 << 16)}


def test_halving_loop_and_inlined_device_function() -> None:
    source = (
        "__device__ float warp_sum(float v) {\n"
        "  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffff, v, off);\n"
        "  return v;\n}\n"
        "__global__ void k(const float* x, float* y, int n) { y[threadIdx.x] = warp_sum(x[threadIdx.x]); }\n"
    )
    spec = KernelSpec(
        kernel="k",
        args=(
            ArgSpec("x", "float32", Role.IN, ("n",)),
            ArgSpec("y", "float32", Role.OUT, ("n",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ),
        grid=("1",),
        block=("32",),
    )
    cost = estimate(source, spec, {"n": 32})
    assert cost.flops_per_thread == {"float32": 5.0}  # off = 16, 8, 4, 2, 1


def test_double_precision_and_fma_weights() -> None:
    cost = _one("double d = (double)x[threadIdx.x]; y[threadIdx.x] = (float)(fma(d, d, 1.0) + d);")
    assert cost.flops_per_thread == {"float64": 3.0}


def test_if_counts_the_heavier_branch_and_unknown_loops_leave_a_note() -> None:
    body = (
        "int i = threadIdx.x; float v = x[i];\n"
        "if (v > 0.0f) { v = v * v + v; } else { v = -v; }\n"
        "int j = 0; while (j < n) { v += 1.0f; j++; }\n"
        "y[i] = v;"
    )
    cost = _one(body)
    assert cost.flops_per_thread == {"float32": 3.0}
    assert any("trip count unknown" in note for note in cost.notes)


def test_inout_is_counted_both_ways() -> None:
    spec = KernelSpec(
        kernel="k",
        args=(ArgSpec("y", "float32", Role.INOUT, ("n",)), ArgSpec("n", "int32", Role.SCALAR, value="n")),
        grid=("n / 256",),
        block=("256",),
    )
    cost = estimate("__global__ void k(float* y, int n) { y[threadIdx.x] *= 2.0f; }", spec, {"n": 1024})
    assert (cost.bytes_read, cost.bytes_written) == (4096, 4096)
    assert any("counted twice" in note for note in cost.notes)
