"""Benchmarking: median / IQR, timing through the isolated child on the CPU emulator and PoCL,
re-validation of the timed outputs, speedup bookkeeping.  No timed assertions: only that results
are positive and structured."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from porter.backends import CompileOptions, Device, get_backend

from porter.harness.bench import BenchPlan, benchmark, summarize
from porter.harness.cost import estimate
from porter.harness.validate import Reference
from porter.model import ArgSpec, KernelSpec, Role, Timing, Variant
from porter.results import BenchResult

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "cuda"
PLAN = BenchPlan(warmup=1, min_runs=4, max_runs=8, max_seconds=2.0, rotate=2, timeout_s=300.0)

CUDA_ADD = """
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

OPENCL_ADD = """
__kernel void vector_add(__global const float* a, __global const float* b, __global float* c, int n)
{
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
"""

# Right on fresh buffers (the poisoned output is NaN), wrong once a buffer is launched on again:
# it "reuses" the result it left there.  Validation of one run passes; re-validation after timing must not.
OPENCL_REUSE = """
__kernel void vector_add(__global const float* a, __global const float* b, __global float* c, int n)
{
    int i = get_global_id(0);
    if (i < n) c[i] = isnan(c[i]) ? a[i] + b[i] : c[i] + 1.0f;
}
"""


def _spec() -> KernelSpec:
    return KernelSpec(
        kernel="vector_add",
        args=(
            ArgSpec("a", "float32", Role.IN, ("n",)),
            ArgSpec("b", "float32", Role.IN, ("n",)),
            ArgSpec("c", "float32", Role.OUT, ("n",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ),
        grid=("(n + 63) / 64",),
        block=("64",),
        sizes=({"n": 1000},),
    )


def _emulator() -> Device:
    devices = get_backend("cpu").devices()
    if not devices:
        pytest.skip("the CPU emulator needs g++")
    return devices[0]


def _pocl() -> Device:
    devices = [d for d in get_backend("opencl").devices() if d.kind == "cpu"]
    if not devices:
        pytest.skip("no CPU OpenCL device (PoCL)")
    return devices[0]


ORIGINAL = Variant("vector_add", "cuda", CUDA_ADD, "vector_add", "original")


# --------------------------------------------------------------------------- statistics


def test_median_and_iqr() -> None:
    assert summarize([5.0, 1.0, 3.0, 2.0, 4.0]) == (3.0, 2.0)
    med, iqr = summarize([1.0, 2.0, 3.0, 4.0])
    assert med == pytest.approx(2.5) and iqr == pytest.approx(1.5)
    assert summarize([7.0]) == (7.0, 0.0)
    with pytest.raises(ValueError):
        summarize([])


def test_timing_rounds_grow_until_the_spread_settles_all_in_one_call() -> None:
    """The child's rounds: the first round's launches, then as many again while the IQR over the median is
    above the target; it stops at the target, once the spread stops moving, at max_runs or past the device
    time budget -- the same rule the parent used to apply round by round, one child each."""
    from porter.backends.isolate import TimingPlan, relative_iqr, timed_rounds

    def noisy_then_steady(noisy: int) -> Callable[[int], float]:
        return lambda i: (1.0 + (i % 2)) if i < noisy else 1.0

    plan = TimingPlan(repeats=10, max_runs=200, target_rel_iqr=0.05, settle=0.0, max_seconds=1e6)
    times, rounds = timed_rounds(plan, lambda i: 1.0)  # steady from the start: one round
    assert (len(times), rounds) == (10, 1)
    times, rounds = timed_rounds(plan, noisy_then_steady(10))  # 10 noisy: 20 (IQR 0.5 of the median), then 40
    assert (len(times), rounds) == (40, 3) and relative_iqr(times) <= 0.05
    times, rounds = timed_rounds(plan, noisy_then_steady(10**6))  # never settles: capped at max_runs
    assert (len(times), rounds) == (200, 6)
    settling = TimingPlan(repeats=10, max_runs=200, target_rel_iqr=0.0, settle=0.01, max_seconds=1e6)
    times, rounds = timed_rounds(settling, noisy_then_steady(10**6))  # the spread stops moving: round 2
    assert (len(times), rounds) == (20, 2)
    times, rounds = timed_rounds(replace(plan, max_seconds=0.025), lambda i: 10.0)  # 25 ms: the 3rd launch
    assert (len(times), rounds) == (3, 1)
    assert timed_rounds(TimingPlan(repeats=7), noisy_then_steady(10**6)) == ([1.0, 2.0] * 3 + [1.0], 1)


# --------------------------------------------------------------------------- end to end on CPU devices


@pytest.mark.integration
def test_benchmark_on_the_cpu_emulator() -> None:
    dev = _emulator()
    spec, size = _spec(), {"n": 1000}
    cost = estimate(CUDA_ADD, spec, size)
    res = benchmark(
        ORIGINAL, spec, dev, size, PLAN, reference=Reference(original=ORIGINAL, devices=(dev,)), cost=cost
    )
    assert res.ok, res.reason
    assert res.timing is not None and res.timing.median_ms > 0 and res.timing.iqr_ms >= 0
    assert res.timing.runs == len(res.times_ms) >= PLAN.min_runs
    assert res.rounds >= 1  # as the child counted them: every round ran in it
    assert all(t > 0 for t in res.times_ms)
    assert res.revalidated is True and "match the reference" in res.revalidation
    assert res.representative is False
    assert any("nothing about GPU speed" in n for n in res.notes)
    assert res.roofline is not None and res.roofline.floor_ms is None  # no roofline for the emulator
    assert res.assessment is not None and not res.assessment.suspect
    assert res.speedup is None


@pytest.mark.integration
def test_benchmark_opencl_on_pocl_with_peak_and_speedup() -> None:
    dev, emu = _pocl(), _emulator()
    spec, size = _spec(), {"n": 1000}
    cost = estimate(CUDA_ADD, spec, size)
    reference = Reference(original=ORIGINAL, devices=(emu,))
    baseline = benchmark(ORIGINAL, spec, emu, size, PLAN, reference=reference, cost=cost)
    assert baseline.ok, baseline.reason
    variant = Variant("vector_add", "opencl", OPENCL_ADD, "vector_add", "user")
    res = benchmark(variant, spec, dev, size, PLAN, reference=reference, cost=cost, baseline=baseline)
    assert res.ok, res.reason
    assert res.backend == "opencl" and res.representative is False
    assert res.revalidated is True
    a = res.assessment
    assert a is not None and a.floor_ms is not None and a.floor_ms > 0
    assert a.achieved_bandwidth is not None and a.achieved_bandwidth > 0
    assert a.pct_bandwidth is not None and a.pct_bandwidth > 0
    assert res.baseline_ms == baseline.timing.median_ms  # type: ignore[union-attr]
    if not a.suspect:
        assert res.speedup is not None and res.speedup > 0


@pytest.mark.integration
def test_revalidation_after_timing_catches_result_reuse() -> None:
    dev, emu = _pocl(), _emulator()
    spec, size = _spec(), {"n": 1000}
    variant = Variant("vector_add", "opencl", OPENCL_REUSE, "vector_add", "user")
    res = benchmark(variant, spec, dev, size, PLAN, reference=Reference(original=ORIGINAL, devices=(emu,)))
    assert not res.ok
    assert res.revalidated is False
    assert "re-validation after timing failed" in res.reason
    # The rotated sets saw different numbers of launches, so either check may fire first.
    assert "matches-reference" in res.reason or "deterministic" in res.reason


@pytest.mark.integration
def test_inout_arguments_are_not_revalidated_after_timing() -> None:
    dev = _emulator()
    source = "__global__ void twice(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= 2.0f; }"
    spec = KernelSpec(
        kernel="twice",
        args=(ArgSpec("y", "float32", Role.INOUT, ("n",)), ArgSpec("n", "int32", Role.SCALAR, value="n")),
        grid=("(n + 63) / 64",),
        block=("64",),
    )
    res = benchmark(Variant("twice", "cuda", source, "twice", "original"), spec, dev, {"n": 256}, PLAN)
    assert res.ok, res.reason
    assert res.revalidated is None and "inout" in res.revalidation


@pytest.mark.integration
def test_failures_are_results_not_exceptions() -> None:
    dev = _emulator()
    broken = Variant(
        "vector_add", "cuda", CUDA_ADD.replace("c[i] =", "c[i] = undefined_name +"), "vector_add", "user"
    )
    res = benchmark(broken, _spec(), dev, {"n": 1000}, PLAN)
    assert not res.ok and "compile" in res.reason
    assert res.timing is None


@pytest.mark.integration
def test_no_speedup_against_a_suspect_baseline() -> None:
    dev = _emulator()
    spec, size = _spec(), {"n": 1000}
    good = benchmark(ORIGINAL, spec, dev, size, replace(PLAN, revalidate=False))
    assert good.ok, good.reason
    assert good.timing is not None
    from porter.results import Assessment

    fake_suspect = BenchResult(
        kernel="vector_add",
        target="cuda",
        provenance="original",
        backend="cpu",
        device=dev.label,
        device_name=dev.name,
        device_kind=dev.kind,
        size=size,
        ok=True,
        timing=Timing(median_ms=good.timing.median_ms * 10, iqr_ms=0.0, runs=1, size=size),
        assessment=Assessment(
            1.0, 2.0, "memory", None, None, None, None, None, None, True, "below the floor"
        ),
    )
    res = benchmark(ORIGINAL, spec, dev, size, replace(PLAN, revalidate=False), baseline=fake_suspect)
    assert res.ok and res.speedup is None
    assert any("reference's time is below the physical floor" in n for n in res.notes)


@pytest.mark.integration
def test_sample_with_include_dirs_on_the_emulator() -> None:
    from porter.scan.extract import device_code

    dev = _emulator()
    source = device_code((SAMPLES / "vector_add.cu").read_text())
    variant = Variant("vector_add", "cuda", source, "vector_add", "original")
    plan = replace(PLAN, compile=CompileOptions(include_dirs=(str(SAMPLES),)))
    res = benchmark(variant, _spec(), dev, {"n": 512}, plan)
    assert res.ok, res.reason
    assert res.revalidated is True and "its own untimed run" in res.revalidation


# --------------------------------------------------------------------------- on an NVIDIA GPU


@pytest.mark.gpu
def test_benchmark_on_an_nvidia_gpu() -> None:
    devices = [d for d in get_backend("cuda").devices() if d.kind == "gpu"]
    if not devices:
        pytest.skip("no CUDA device visible to CuPy")
    dev = devices[0]
    spec, size = _spec(), {"n": 1 << 24}
    cost = estimate(CUDA_ADD, spec, size)
    plan = BenchPlan(min_runs=10, max_runs=50, max_seconds=5.0, rotate=3)
    res = benchmark(
        ORIGINAL, spec, dev, size, plan, reference=Reference(original=ORIGINAL, devices=(dev,)), cost=cost
    )
    assert res.ok, res.reason
    assert res.representative is True
    assert res.revalidated is True
    assert res.timing is not None and res.timing.median_ms > 0
    a = res.assessment
    if a is not None and a.floor_ms is not None:  # the GPU is in the device table
        assert a.pct_bandwidth is not None and a.pct_bandwidth > 0
        assert not a.suspect, a.reason  # a plain vector add cannot beat DRAM bandwidth
    assert res.occupancy is not None and res.occupancy.block_threads == 64
    assert 0 < res.occupancy.fraction <= 1
