"""porter.harness.evaluate: the one evaluator of model-written code (port --model and optimize)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from porter.backends import CompileOptions, get_backend

from porter.harness.evaluate import Evaluator, static_shared
from porter.harness.spec import CPU_ELEMENTS, timing_size
from porter.harness.validate import ValidateOptions
from porter.model import ArgSpec, KernelSpec, Role, Variant
from porter.plan import make_plan
from porter.records import Screened
from porter.scan import scan_source

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"


def _spec(n: int, bench: dict[str, int] | None = None) -> KernelSpec:
    return KernelSpec(
        kernel="k",
        args=(
            ArgSpec("x", "float32", Role.IN, ("n",)),
            ArgSpec("y", "float32", Role.OUT, ("n",)),
            ArgSpec("n", "int32", Role.SCALAR, value="n"),
        ),
        grid=("(n + 255) / 256",),
        block=("256",),
        sizes=({"n": n},),
        bench_sizes=(bench,) if bench else (),
    )


def test_timing_size_follows_one_rule_for_every_workflow() -> None:
    small, large = _spec(300), _spec(100_000)
    assert timing_size(small, "cpu") == {"n": 300}  # small enough: the spec's own size
    assert timing_size(large, "cpu")["n"] <= CPU_ELEMENTS  # scaled down on CPU devices
    assert timing_size(small, "gpu", gpu_elements=1 << 20)["n"] > 300_000  # scaled up on a GPU
    assert timing_size(_spec(300, {"n": 4096}), "gpu") == {"n": 4096}  # the spec's bench size wins
    assert timing_size(large, "gpu", {"n": 7}) == {"n": 7}  # and an override over all


def test_static_shared_counts_fixed_arrays_and_gives_up_on_unknown_sizes() -> None:
    code = (
        "__global__ void k(float* y) {\n"
        "  __shared__ float a[128]; __shared__ double b[2 * B]; extern __shared__ int dyn[];\n"
        "  y[0] = a[0] + b[0] + dyn[0];\n}\n"
    )
    kernel = scan_source(code.encode(), "k.cu").kernels[0]
    assert static_shared(kernel, {"B": 128}) == 128 * 4 + 256 * 8  # B: a size symbol
    unknown = replace(kernel, shared=(*kernel.shared[:1], replace(kernel.shared[0], size="m")))
    assert static_shared(kernel, {}) is None  # B unknown: no figure rather than a wrong one
    assert static_shared(unknown, {"B": 1}) == 0 or static_shared(unknown, {"B": 1}) is None


@pytest.mark.integration
def test_validates_then_times_beside_the_original_and_rejects_a_wrong_rewrite(tmp_path: Path) -> None:
    try:
        devices = [d for d in get_backend("cpu").devices() if d.kind != "checker"]
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"CPU emulator unavailable: {err}")
    if not devices:
        pytest.skip("CPU emulator unavailable (g++ missing)")
    src = tmp_path / "vector_add.cu"
    shutil.copy(SAMPLES / "vector_add.cu", src)
    shutil.copy(SAMPLES / "common.cuh", tmp_path)
    shutil.copy(ROOT / "tests" / "fixtures" / "specs" / "vector_add.cu.porter.toml", tmp_path)
    plan = make_plan(str(src), "optimize")
    original = plan.original("vector_add", "file")
    spec = plan.spec("vector_add")
    evaluator = Evaluator(
        spec=spec,
        reference=plan.reference("vector_add", (), devices),
        devices=devices,
        options=ValidateOptions(compile=CompileOptions(include_dirs=plan.compile_dirs)),
        template=Variant(
            kernel="vector_add", target="cuda", source="", entry="vector_add", provenance="llm:t"
        ),
        scan=plan.scan,
        must_time=True,
    )
    kernel = plan.scan.kernels[0]
    good = evaluator(Screened(original.source, kernel))
    assert good.ok and good.stage == "done", good.reason
    assert good.timings and good.timings[0]["baseline_ms"] is not None  # the original, same device
    assert set(evaluator.known_baselines()) == {devices[0].label}
    wrong = original.source.replace("a[i] + b[i]", "a[i] - b[i]")
    assert wrong != original.source
    bad = evaluator(Screened(wrong, kernel))
    assert not bad.ok and bad.stage != "done"
    assert not bad.timings  # nothing is timed that did not validate
