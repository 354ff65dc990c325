"""Adversarial self-tests: planted-defect kernels that the validator must reject, 100%, with the
check that should catch them named in the reason -- and no false rejection of the correct kernels.

kernels/<family>.cu is a correct kernel (the reference); kernels/<family>.<defect>.cu plants one
defect; kernels/*.cl are hand-written OpenCL versions of a subset; kernels/porter.toml says how to
run each family.  Runs on the CPU emulator and on OpenCL (PoCL + the Oclgrind checker) in CI, and
on an NVIDIA GPU (gpu-marked).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from porter.backends import Device, get_backend

from porter.harness.spec import load_spec_file
from porter.harness.validate import Reference, ValidateOptions, validate
from porter.model import Status, Variant

KERNELS = Path(__file__).parent / "kernels"
FAMILIES = ("vector_add", "block_sum", "stencil1d")
OPTS = ValidateOptions(trials=2)

# The checks allowed to catch each defect (the verdict's reason starts with one of them).
EXPECTED: dict[str, set[str]] = {
    "noop": {"all-written"},
    "output_reuse": {"all-written", "deterministic"},
    "partial_write": {"all-written"},
    "all_zeros": {"matches-reference"},
    "tail_off_by_one": {"all-written", "matches-reference"},
    "missing_barrier": {"deterministic", "matches-reference", "oclgrind"},
    "oob_write": {"guard", "oclgrind"},
    "input_mutation": {"inputs-unchanged"},
    "hardcoded_size": {"guard", "all-written", "matches-reference"},
    "low_precision": {"matches-reference"},
    "uninit_shared": {"matches-reference", "deterministic", "all-written", "oclgrind"},
}
ALL_DEFECTS = set(EXPECTED)


def _cases(suffix: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for fam in FAMILIES:
        if (KERNELS / f"{fam}{suffix}").exists():
            out.append((fam, None))
        for path in sorted(KERNELS.glob(f"{fam}.*{suffix}")):
            out.append((fam, path.name[len(fam) + 1 : -len(suffix)]))
    return out


CU_CASES = _cases(".cu")
CL_CASES = _cases(".cl")


def _ids(cases):
    return [f"{fam}-{defect or 'correct'}" for fam, defect in cases]


@cache
def _specs():
    return load_spec_file(KERNELS / "porter.toml")


def _variant(fam: str, defect: str | None, suffix: str, target: str) -> Variant:
    name = f"{fam}.{defect}{suffix}" if defect else f"{fam}{suffix}"
    return Variant(fam, target, (KERNELS / name).read_text(), fam, "user", path=str(KERNELS / name))


def _devices(backend: str, kinds: set[str]) -> list[Device]:
    try:
        return [d for d in get_backend(backend).devices() if d.kind in kinds]
    except Exception:  # noqa: BLE001
        return []


@cache
def _emulator() -> Device | None:
    devs = _devices("cpu", {"emulator"})
    return devs[0] if devs else None


def _assert_verdict(v, defect: str | None) -> None:
    if defect is None:
        assert v.status is Status.VALIDATED, f"false rejection on {v.device}: {v.reason}"
        return
    assert v.status is Status.FAILED and not v.correct, f"{defect} passed on {v.device}: {v.reason}"
    check = v.reason.split(":", 1)[0]
    assert check in EXPECTED[defect], (
        f"{defect} on {v.device} rejected by {check!r}, not {EXPECTED[defect]}: {v.reason}"
    )


def test_every_listed_defect_is_planted():
    planted = {defect for _, defect in CU_CASES if defect}
    assert planted == ALL_DEFECTS
    for fam in FAMILIES:
        assert (fam, None) in CU_CASES and fam in _specs()
    assert {d for _, d in CL_CASES if d} >= {
        "noop",
        "partial_write",
        "oob_write",
        "missing_barrier",
        "uninit_shared",
    }


@pytest.mark.parametrize(("fam", "defect"), CU_CASES, ids=_ids(CU_CASES))
@pytest.mark.integration
def test_cuda_on_the_cpu_emulator(fam, defect):
    emu = _emulator()
    if emu is None:
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    ref = Reference(original=_variant(fam, None, ".cu", "cuda"), devices=(emu,))
    (v,) = validate(_variant(fam, defect, ".cu", "cuda"), _specs()[fam], ref, [emu], OPTS)
    _assert_verdict(v, defect)
    if fam == "vector_add" and defect == "hardcoded_size":
        assert "hidden size" in v.reason  # only the size never shown to the author exposes it


@pytest.mark.parametrize(("fam", "defect"), CL_CASES, ids=_ids(CL_CASES))
@pytest.mark.integration
def test_opencl_on_every_opencl_device_and_oclgrind(fam, defect):
    emu = _emulator()
    devices = _devices("opencl", {"cpu", "gpu", "checker"})
    if emu is None or not devices:
        pytest.skip("needs the CPU emulator (reference) and an OpenCL device")
    ref = Reference(original=_variant(fam, None, ".cu", "cuda"), devices=(emu,))
    verdicts = validate(_variant(fam, defect, ".cl", "opencl"), _specs()[fam], ref, devices, OPTS)
    assert len(verdicts) == len(devices)
    for v in verdicts:
        _assert_verdict(v, defect)


@pytest.mark.gpu
@pytest.mark.parametrize(("fam", "defect"), CU_CASES, ids=_ids(CU_CASES))
def test_cuda_on_the_nvidia_gpu(fam, defect):
    gpus = _devices("cuda", {"gpu"})
    if not gpus:
        pytest.skip("the cuda backend lists no GPU")
    ref = Reference(original=_variant(fam, None, ".cu", "cuda"), devices=(gpus[0],))
    (v,) = validate(_variant(fam, defect, ".cu", "cuda"), _specs()[fam], ref, gpus[:1], OPTS)
    if defect is None:
        assert v.status is Status.VALIDATED, v.reason
        return
    assert v.status is Status.FAILED, f"{defect} passed on {v.device}: {v.reason}"
    check = v.reason.split(":", 1)[0]
    assert check in EXPECTED[defect] | {"memcheck", "racecheck"}, v.reason
