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


CTYPES = {"float32": "float", "uint8": "unsigned char"}


def _capture(folder: Path, x: np.ndarray, y_before: np.ndarray, y_after: np.ndarray, device: str) -> list:
    return _launch(folder, "to_bytes", [(x, x), (y_before, y_after)], device)


def _launch(folder: Path, kernel: str, arrays: list[tuple[np.ndarray, np.ndarray]], device: str) -> list:
    """One captured launch of `kernel` (pointer parameters in order, each (before, after): const where they
    are the same array, then an int `n`), as made on `device`."""
    (folder / "arrays").mkdir(parents=True)
    (folder / "launches").mkdir()
    allocations, args = [], []
    for k, (before, after) in enumerate(arrays):
        names = [f"arrays/a{k}-{w}.bin" for w in ("before", "after")]
        (folder / names[0]).write_bytes(before.tobytes())
        (folder / names[1]).write_bytes(after.tobytes())
        allocations.append({"index": k, "bytes": before.nbytes, "before": names[0], "after": names[1]})
        const, element = after is before, CTYPES[before.dtype.name]
        args.append(
            {"index": k, "ctype": f"{'const ' if const else ''}{element}*", "kind": "pointer", "element": element,
             "element_bytes": before.itemsize, "dtype": before.dtype.name, "const": const, "allocation": k,
             "offset": 0}
        )  # fmt: skip
    n = arrays[0][0].size
    args.append({"index": len(arrays), "ctype": "int", "kind": "scalar", "dtype": "int32", "bytes": 4,
                 "hex": np.int32(n).tobytes().hex()})  # fmt: skip
    record = {
        "kernel": kernel, "kernel_index": 0, "launch": 1, "sequence": 1, "grid": [(n + 127) // 128, 1, 1],
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


def _contracting() -> tuple:
    """The CPU emulator, able to build a kernel that contracts a*b+c, and the OpenCL devices whose compilers
    contract (the checker left out); the test is skipped where either is missing."""
    from porter.backends import get_backend

    (emulator,) = _cpu()
    if not get_backend("cpu").contracting_flags(emulator):
        pytest.skip("this CPU has no fused multiply-add for the emulator to build with")
    fusing = [d for d in run_devices("opencl") if d.contracts and not d.checks]
    if not fusing:
        pytest.skip("no OpenCL device here (pocl-opencl-icd)")
    return emulator, fusing


RESIDUAL = """__global__ void residual(const float* a, const float* b, const float* c, const float* d, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] * b[i] - c[i] * d[i];
}
"""
RESIDUAL_CL = """__kernel void residual(__global const float* a, __global const float* b, __global const float* c,
                       __global const float* d, __global float* y, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a[i] * b[i] - c[i] * d[i];
}
"""


@pytest.mark.integration
def test_a_port_on_a_contracting_device_is_judged_with_the_originals_own_spread_under_contraction(
    tmp_path: Path,
) -> None:
    """The CPU runtime's capture (ISO C++: no FMA) of a*b - c*d, products near 2**11 that cancel to about 1
    -- or to 0 where c*d is b*a, where a compiler that fuses computes the product's rounding error instead
    (OpenCL C contracts by default): far beyond the usual tolerance of an array of magnitude 2.  The OpenCL
    port on such a device is judged with the original's own spread when the emulator builds it to contract,
    named; a port off by more than that still fails."""
    emulator, fusing = _contracting()
    rng = np.random.default_rng(7)
    n = 512
    a, b = (rng.uniform(32.0, 64.0, n).astype(np.float32) for _ in range(2))
    c, d = a.copy(), b - np.float32(1 / 32)
    c[::2], d[::2] = b[::2], a[::2]
    y = a * b - c * d  # numpy: each product rounded, as the emulator computes it
    assert np.all(y[::2] == 0) and 0.5 < np.abs(y).max() < 4
    launches = _launch(tmp_path / "cap", "residual", [(a, a), (b, b), (c, c), (d, d), (np.zeros_like(y), y)],
                       emulator.label)  # fmt: skip
    original = replay.Original(
        Variant("residual", "cuda", RESIDUAL, "residual", "original"), CompileOptions(), (emulator,)
    )
    base = replay.build("residual", launches)
    # no contracting device among the ports': the strict rules, nothing measured
    assert not replay.cross_device_floors(base, original, emulator.label).floors
    rep = replay.cross_device_floors(base, original, emulator.label, fusing)
    assert set(rep.floors) == {replay.physical(dev.label) for dev in fusing}, rep.spread
    floor = next(iter(rep.floors.values()))
    ((index, name, dtype, spread),) = floor.spread
    assert (index, name, dtype) == (4, "arg4", "float32")
    # the fused products' rounding errors: above the usual tolerance (1e-5 of the magnitude), below an ulp
    # of the largest product (2**12 * 2**-23)
    assert 1e-5 * np.abs(y).max() < spread <= 2.0**-11, spread
    assert "built to contract a*b+c" in floor.said() and floor.captured_on == emulator.label

    def judged(source: str, rep: replay.Replay = rep) -> dict[str, tuple[Status, str]]:
        verdicts = replay.replay(Variant("residual", "opencl", source, "residual", "user"), rep, fusing,
                                 ValidateOptions())  # fmt: skip
        return {v.device: (v.status, v.reason) for v in verdicts}

    # held to the capture strictly, the port fails where its compiler fused (as PoCL and Intel's do here)
    strict = judged(RESIDUAL_CL, base)
    assert any(status is Status.FAILED for status, _ in strict.values()), strict
    for status, reason in judged(RESIDUAL_CL).values():
        assert status is Status.VALIDATED and "built to contract a*b+c" in reason, reason
    # one product off by a few units in the last place at every element: beyond contraction's spread
    wrong = RESIDUAL_CL.replace("a[i] * b[i]", "a[i] * b[i] * 1.000001f")
    for status, reason in judged(wrong).values():
        assert status is Status.FAILED and "beyond the floor of" in reason, reason


@pytest.mark.integration
def test_an_original_that_contraction_moves_beyond_a_rounding_judges_no_port_on_a_contracting_device(
    tmp_path: Path,
) -> None:
    """a*b - c*d where c*d is b*a everywhere: exactly 0 in the capture, the products' rounding errors when
    contracted -- beyond any rounding of an array of zeros.  No floor then; a port that fails its comparison on a
    contracting device is not replayable there, naming the original's own spread (not failed), while a failure
    of another check, or on a device that does not contract, stays failed."""
    from porter.results import KernelReplay
    from porter.workflows.program_replay import _unstable_there

    emulator, fusing = _contracting()
    rng = np.random.default_rng(11)
    a, b = (rng.uniform(32.0, 64.0, 256).astype(np.float32) for _ in range(2))
    y = a * b - b * a
    assert not y.any()
    launches = _launch(tmp_path / "cap", "residual", [(a, a), (b, b), (b, b), (a, a), (np.ones_like(y), y)],
                       emulator.label)  # fmt: skip
    original = replay.Original(
        Variant("residual", "cuda", RESIDUAL, "residual", "original"), CompileOptions(), (emulator,)
    )
    rep = replay.cross_device_floors(replay.build("residual", launches), original, emulator.label, fusing)
    assert not rep.floors and set(rep.unstable) == {replay.physical(d.label) for d in fusing}, rep.spread
    why = next(iter(rep.unstable.values()))
    assert "built to contract a*b+c" in why and "arg4 differs by more than a device's rounding" in why, why
    verdicts = replay.replay(Variant("residual", "opencl", RESIDUAL_CL, "residual", "user"), rep, fusing,
                             ValidateOptions())  # fmt: skip
    failed = [v for v in verdicts if v.status is Status.FAILED]
    assert failed and all(v.reason.startswith("matches-reference") for v in failed), verdicts
    rows = [KernelReplay("opencl", v.device, "failed", v.reason) for v in failed]
    rows += [
        KernelReplay("opencl", fusing[0].label, "failed", "run: the child crashed"),
        KernelReplay("opencl", emulator.label, "failed", "matches-reference: arg4[0] = 1, expected 0"),
    ]
    judged = _unstable_there(rows, rep)
    for row in judged[: len(failed)]:
        assert (
            row.status == "not-replayable"
            and "the original itself, on cpu:cpu-emulator built to" in row.reason
        )
        assert "(this port: matches-reference" in row.reason, row.reason
    assert [r.status for r in judged[len(failed) :]] == ["failed", "failed"]


TO_BYTES_CL = """__kernel void to_bytes(__global const float* x, __global unsigned char* y, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = (unsigned char)(x[i] * 255.0f + 0.5f);
}
"""


def _other_compilers() -> list:
    """The OpenCL devices (their drivers' compilers build none of the original's replays), the checker left out."""
    devices = [d for d in run_devices("opencl") if not d.checks]
    if not devices:
        pytest.skip("no OpenCL device here (pocl-opencl-icd)")
    return devices


@pytest.mark.integration
def test_a_port_built_by_another_compiler_is_judged_with_the_originals_spread_between_its_compilers(
    tmp_path: Path,
) -> None:
    """A GPU's capture, the original replayed on the emulator only (one unit off at every seventh byte there):
    an OpenCL port on a device whose compiler built none of the original's replays gets that spread as its
    floor, named with why; a port two units off still fails; HIP on the emulator keeps the emulator's own."""
    x, cpu, gpu = _inputs()
    launches = _capture(tmp_path / "cap", x, np.zeros_like(cpu), gpu, GPU)
    original = replay.Original(
        Variant("to_bytes", "cuda", TO_BYTES, "to_bytes", "original"), CompileOptions(), _cpu()
    )
    ports = _other_compilers()
    base = replay.build("to_bytes", launches)
    rep = replay.cross_device_floors(base, original, GPU, [*_cpu(), *ports])
    for d in ports:
        floor = rep.floor_on(d.label)
        assert floor is not None and floor.spread == ((1, "arg1", "uint8", 1.0),), rep.floors
        assert floor.measured_on == "cpu:cpu-emulator" and d.label in floor.why
    assert rep.floor_on("cpu:cpu-emulator-wave64") is rep.floors[replay.physical("cpu:cpu-emulator")]

    def judged(source: str, on: replay.Replay) -> dict[str, tuple[Status, str]]:
        verdicts = replay.replay(Variant("to_bytes", "opencl", source, "to_bytes", "user"), on, ports,
                                 ValidateOptions())  # fmt: skip
        return {v.device: (v.status, v.reason) for v in verdicts}

    # held to the capture strictly, the port fails (it computes what the emulator computes)
    assert all(status is Status.FAILED for status, _ in judged(TO_BYTES_CL, base).values())
    for status, reason in judged(TO_BYTES_CL, rep).values():
        assert status is Status.VALIDATED and "is built by a compiler the original was not" in reason, reason
        assert "own spread on cpu:cpu-emulator vs the capture on cuda:NVIDIA H200: arg1 ±1 (uint8)" in reason
    for status, reason in judged(TO_BYTES_CL.replace("+ 0.5f", "+ 2.5f"), rep).values():
        assert status is Status.FAILED and "beyond the floor of ±1" in reason, reason


@pytest.mark.integration
def test_an_original_off_its_capture_on_another_compiler_judges_no_port_built_by_a_third(
    tmp_path: Path,
) -> None:
    """The emulator's bytes nine units off the GPU's capture: no floor anywhere; a port on an OpenCL device that
    fails its comparison is not replayable there, naming the original's own distance, while another check's
    failure stays failed."""
    from porter.results import KernelReplay
    from porter.workflows.program_replay import _unstable_there

    x, cpu, gpu = _inputs(off=9)
    launches = _capture(tmp_path / "cap", x, np.zeros_like(cpu), gpu, GPU)
    original = replay.Original(
        Variant("to_bytes", "cuda", TO_BYTES, "to_bytes", "original"), CompileOptions(), _cpu()
    )
    ports = _other_compilers()
    rep = replay.cross_device_floors(replay.build("to_bytes", launches), original, GPU, [*_cpu(), *ports])
    assert not rep.floors and set(rep.unstable) == {d.label for d in ports}, rep.unstable
    assert not rep.unstable_on("cpu:cpu-emulator")  # the original's own device: its replay simply fails
    verdicts = replay.replay(Variant("to_bytes", "opencl", TO_BYTES_CL, "to_bytes", "user"), rep, ports,
                             ValidateOptions())  # fmt: skip
    rows = [KernelReplay("opencl", v.device, "failed", v.reason) for v in verdicts]
    assert all(r.reason.startswith("matches-reference") for r in rows), rows
    rows.append(KernelReplay("opencl", ports[0].label, "failed", "run: the child crashed"))
    judged = _unstable_there(rows, rep)
    for row in judged[:-1]:
        assert row.status == "not-replayable", row
        assert "the original itself is off the capture on cpu:cpu-emulator" in row.reason, row.reason
        assert "(arg1 differs by more than a device's rounding" in row.reason, row.reason
        assert "(this port: matches-reference" in row.reason, row.reason
    assert judged[-1].status == "failed"
