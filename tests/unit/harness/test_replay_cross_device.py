"""porter.harness.replay: a capture made on one device replayed on another accepts the differences the
original itself shows between the two devices, and nothing more.

The capture is written by hand (docs/CAPTURE_FORMAT.md) and marked as made on a GPU; its bytes differ by
one unit from what the CPU emulator computes at some elements (a float-to-byte conversion rounding the
other way there)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from porter.backends import CompileOptions

from porter import capture
from porter.harness import replay
from porter.harness.checks import Tolerance, compare, cross_device_spread
from porter.harness.trial import ValidateOptions
from porter.model import Status, Variant
from porter.plan import run_devices

GPU = "cuda:NVIDIA H200"
TO_BYTES = """__global__ void to_bytes(const float* x, unsigned char* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (unsigned char)(x[i] * 255.0f + 0.5f);
}
"""


def test_the_spread_of_a_device_is_a_floor_only_when_it_is_slight() -> None:
    exact = Tolerance(0.0, 0.0, 0)
    y = np.array([10, 20, 30, 40], np.uint8)
    assert cross_device_spread(y, y, exact) == 0.0
    assert cross_device_spread(y + np.array([0, 1, 0, 0], np.uint8), y, exact) == 1.0
    assert cross_device_spread(y + 9, y, exact) is None  # not a rounding: no floor
    x = np.linspace(-2, 2, 50, dtype=np.float32)
    near = x + np.float32(1e-4)
    assert cross_device_spread(near, x, Tolerance(1e-5, 1e-5, 4)) == pytest.approx(1e-4, rel=1e-2)
    assert cross_device_spread(x + 1.0, x, Tolerance(1e-5, 1e-5, 4)) is None
    nan = x.copy()
    nan[3] = np.nan
    assert cross_device_spread(nan, x, Tolerance(1e-5, 1e-5, 4)) is None
    # a floor of 1: one unit passes, two never do
    assert compare(y + np.array([1, 0, 0, 0], np.uint8), y, exact, 1.0).ok
    assert not compare(y + np.array([2, 0, 0, 0], np.uint8), y, exact, 1.0).ok


def _capture(folder: Path, x: np.ndarray, y_before: np.ndarray, y_after: np.ndarray, device: str) -> list:
    (folder / "arrays").mkdir(parents=True)
    (folder / "launches").mkdir()
    allocations = []
    for k, (before, after) in enumerate(((x, x), (y_before, y_after))):
        names = [f"arrays/a{k}-{w}.bin" for w in ("before", "after")]
        (folder / names[0]).write_bytes(before.tobytes())
        (folder / names[1]).write_bytes(after.tobytes())
        allocations.append({"index": k, "bytes": before.nbytes, "before": names[0], "after": names[1]})
    args = [
        {"index": 0, "ctype": "const float*", "kind": "pointer", "element": "float", "element_bytes": 4,
         "dtype": "float32", "const": True, "allocation": 0, "offset": 0},
        {"index": 1, "ctype": "unsigned char*", "kind": "pointer", "element": "unsigned char",
         "element_bytes": 1, "dtype": "uint8", "const": False, "allocation": 1, "offset": 0},
        {"index": 2, "ctype": "int", "kind": "scalar", "dtype": "int32", "bytes": 4,
         "hex": np.int32(x.size).tobytes().hex()},
    ]  # fmt: skip
    record = {
        "kernel": "to_bytes", "kernel_index": 0, "launch": 1, "sequence": 1, "grid": [4, 1, 1],
        "block": [128, 1, 1], "shared_bytes": 0, "stream": None, "args": args, "allocations": allocations,
        "status": 0,
    }  # fmt: skip
    (folder / "launches" / "k0-s1.json").write_text(json.dumps(record))
    capture.finish(folder, "./prog", 1, 0, device=device)
    return capture.load(folder).launches


def _cpu() -> tuple:
    devices = tuple(d for d in run_devices("cuda") if d.backend == "cpu")
    if not devices:
        pytest.skip("the CPU emulator is not available here")
    return devices


def _inputs(off: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y as the kernel computes it on the CPU, and y as "the GPU" left it: `off` units more at every
    seventh element."""
    n = 500
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)
    cpu = (x * np.float32(255.0) + np.float32(0.5)).astype(np.uint8)
    gpu = cpu.copy()
    gpu[::7] = np.minimum(gpu[::7].astype(np.int32) + off, 255).astype(np.uint8)
    return x, cpu, gpu


def _judge(source: str, rep: replay.Replay, provenance: str = "user"):
    (verdict,) = replay.replay(
        Variant("to_bytes", "cuda", source, "to_bytes", provenance), rep, _cpu(), ValidateOptions()
    )
    return verdict


@pytest.mark.integration
def test_a_gpu_capture_on_the_emulator_is_judged_with_the_originals_own_spread_as_floor(
    tmp_path: Path,
) -> None:
    x, cpu, gpu = _inputs()
    launches = _capture(tmp_path / "cap", x, np.zeros_like(cpu), gpu, GPU)
    assert launches[0].device == GPU
    original = replay.Original(
        Variant("to_bytes", "cuda", TO_BYTES, "to_bytes", "original"), CompileOptions(), _cpu()
    )
    rep = replay.cross_device_floors(replay.build("to_bytes", launches), original, launches[0].device)
    (floor,) = rep.floors.values()
    assert floor.spread == ((1, "arg1", "uint8", 1.0),)
    said = (
        "tolerance floor from the original's own spread on cpu:cpu-emulator vs the capture on "
        "cuda:NVIDIA H200: arg1 ±1 (uint8)"
    )
    good = _judge(TO_BYTES, rep, "original")
    assert good.status is Status.VALIDATED and said in good.reason, good.reason
    assert "cross-device-floor" in good.checks
    # a port computing what the original computes on this device: validated, the floor named
    port = TO_BYTES.replace("x[i] * 255.0f + 0.5f", "0.5f + 255.0f * x[i]")
    ok = _judge(port, rep)
    assert ok.status is Status.VALIDATED and said in ok.reason, ok.reason
    # one rounding two units up: more than the original's own spread, never accepted
    off_by_two = TO_BYTES.replace("+ 0.5f", "+ 2.5f")
    bad = _judge(off_by_two, rep)
    assert bad.status is Status.FAILED and bad.reason.startswith("matches-reference"), bad.reason
    assert "beyond the floor of ±1" in bad.reason and said in bad.reason, bad.reason
    # truncating instead of rounding: one unit down at half the elements, two below the capture where
    # the GPU rounded up -- the floor is the largest difference, not a licence for any of its size
    truncating = TO_BYTES.replace(" + 0.5f", "")
    assert _judge(truncating, rep).status is Status.FAILED
    # the same bytes as the emulator's own capture: no floor, the strict rules
    same = tmp_path / "same"
    launches = _capture(same, x, np.zeros_like(cpu), gpu, "cpu:cpu-emulator")
    strict = replay.cross_device_floors(replay.build("to_bytes", launches), original, launches[0].device)
    assert not strict.floors
    assert _judge(TO_BYTES, strict, "original").status is Status.FAILED


@pytest.mark.integration
def test_a_spread_larger_than_a_rounding_is_no_floor(tmp_path: Path) -> None:
    x, cpu, gpu = _inputs(off=9)
    launches = _capture(tmp_path / "cap", x, np.zeros_like(cpu), gpu, GPU)
    original = replay.Original(
        Variant("to_bytes", "cuda", TO_BYTES, "to_bytes", "original"), CompileOptions(), _cpu()
    )
    rep = replay.cross_device_floors(replay.build("to_bytes", launches), original, GPU)
    assert not rep.floors and rep.spread and "no tolerance floor" in rep.spread[0], rep.spread
    verdict = _judge(TO_BYTES, rep, "original")
    assert verdict.status is Status.FAILED and verdict.reason.startswith("matches-reference"), verdict.reason
    assert any("no tolerance floor" in line for line in verdict.logs)
