"""porter.workflows.port._SharedUnit: one kernel a compiler rejects fails alone; the others build alone."""

from __future__ import annotations

from typing import Any

import pytest
from porter.backends import Device

from porter.harness.validate import Reference, ValidateOptions
from porter.model import ArgSpec, KernelSpec, Role, Status, Variant, Verdict
from porter.scan.macros import MacroTable
from porter.workflows import port

HIP = """#include <hip/hip_runtime.h>

__device__ float twice(float v) { return 2.0f * v; }

__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = twice(x[i]);
}

__global__ void shift(float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __syncwarp();
    if (i < n) y[i] = y[i] + 1.0f;
}
"""

SPEC = KernelSpec(
    kernel="scale",
    args=(
        ArgSpec(name="x", dtype="float32", role=Role.INOUT, shape=("n",)),
        ArgSpec(name="n", dtype="int32", role=Role.SCALAR, value="n"),
    ),
    grid=("(n + 255) / 256",),
    block=("256",),
    sizes=({"n": 4096},),
    hidden_sizes=({"n": 3001},),
)


def _verdict(variant: Variant, ok: bool, reason: str) -> Verdict:
    return Verdict(
        kernel=variant.kernel,
        target="hip",
        device="",
        backend="hip",
        toolchain="fake",
        compiled=ok,
        executed=False,
        correct=False,
        status=Status.COMPILED if ok else Status.FAILED,
        reason=reason,
        logs=() if ok else ("error: use of undeclared identifier '__syncwarp'",),
    )


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """A fake compiler that rejects any unit holding `__syncwarp`; records (kernel, shared unit?)."""
    seen: list[tuple[str, bool]] = []

    def fake(variant: Variant, spec: KernelSpec, opts: Any = None, backend: str | None = None) -> Verdict:
        seen.append((variant.kernel, "void scale" in variant.source and "void shift" in variant.source))
        if "__syncwarp" in variant.source:
            return _verdict(variant, False, "does not compile: hip: compile failed")
        return _verdict(variant, True, "compiled; no device here can run it")

    monkeypatch.setattr(port, "compile_only", fake)
    return seen


def _variant(kernel: str) -> Variant:
    return Variant(kernel=kernel, target="hip", source=HIP, entry=kernel, provenance="translate")


def test_only_the_culprit_fails(compiles: list[tuple[str, bool]]) -> None:
    unit = port._SharedUnit(HIP, ["scale", "shift"], MacroTable())
    opts = ValidateOptions()
    good = unit.compile(_variant("scale"), SPEC, opts, "hip", "hip:gfx90a")
    bad = unit.compile(_variant("shift"), SPEC, opts, "hip", "hip:gfx90a")
    assert good is not None and good.compiled and good.status is Status.COMPILED
    assert bad is not None and not bad.compiled and "__syncwarp" in bad.logs[0]
    # scale: the shared unit (fails), then alone; shift: straight to its own unit, where it fails
    assert compiles == [("scale", True), ("scale", False), ("shift", False)]


def test_a_kernel_alone_keeps_its_helpers_and_drops_the_others() -> None:
    unit = port._SharedUnit(HIP, ["scale", "shift"], MacroTable())
    alone = unit.alone(_variant("scale")).source
    assert "twice" in alone and "void scale" in alone
    assert "void shift" not in alone and "__syncwarp" not in alone
    assert alone.count("\n") == HIP.count("\n")  # line numbers of the compiler's log still hold


def test_a_single_kernel_is_never_split(compiles: list[tuple[str, bool]]) -> None:
    unit = port._SharedUnit(HIP, ["shift"], MacroTable())
    verdict = unit.compile(_variant("shift"), SPEC, ValidateOptions(), "hip", "hip:gfx90a")
    assert verdict is not None and not verdict.compiled
    assert len(compiles) == 1


def test_validation_falls_back_to_the_kernel_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[bool] = []

    def fake(variant: Variant, spec: Any, ref: Any, devices: Any, opts: Any) -> list[Verdict]:
        runs.append("__syncwarp" in variant.source)
        if "__syncwarp" in variant.source:
            return [_verdict(variant, False, "compile: the variant does not compile: error")]
        return [_verdict(variant, True, "matches the original kernel")]

    monkeypatch.setattr(port, "validate", fake)
    device = Device(backend="cpu", name="cpu-emulator", arch="x86_64", kind="emulator")
    unit = port._SharedUnit(HIP, ["scale", "shift"], MacroTable())
    ref = Reference(original=None)
    (good,) = unit.validate(_variant("scale"), SPEC, ref, device, ValidateOptions())
    (bad,) = unit.validate(_variant("shift"), SPEC, ref, device, ValidateOptions())
    assert good.compiled and not bad.compiled
    assert runs == [True, False, True]
