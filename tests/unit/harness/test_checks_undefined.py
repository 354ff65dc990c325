"""The ``undefined`` check (porter.harness.checks.check_defined) on crafted outputs, and what the program
verdict says when a port's program differs where an original kernel's replay found such a dependence
(porter.results.ProgramReport.verdicts).  No compiler: the poisoned run is built here as a child returns
it."""

from __future__ import annotations

import numpy as np
import pytest

from porter.harness.checks import Undefined, check_defined, check_instance
from porter.harness.trial import Instance, Reject
from porter.model import RACED_WORDS, ArgSpec, KernelSpec, Role
from porter.results import KernelReplay, ProgramKernel, ProgramReport, ProgramRun, RunResult

N = 8
SPEC = KernelSpec(
    kernel="sums",
    args=(
        ArgSpec("x", "int32", Role.IN, ("n",)),
        ArgSpec("y", "int32", Role.OUT, ("n",)),
        ArgSpec("n", "int32", Role.SCALAR, value="n"),
    ),
    grid=("1",),
    block=("4",),
    sizes=({"n": N},),
)
ARRAYS = [0, 1]
FIRST = (
    "lane 0 of warp 0 in block (0,0,0) reads lane 16 through __shfl_down_sync with mask 0xf: outside its mask"
)


@pytest.fixture
def inst() -> Instance:
    return Instance.draw(SPEC, {"n": N}, "launch 1 of run 1", seed=3, guard=16)


def _run(inst: Instance) -> dict[int, np.ndarray]:
    x, y = (np.asarray(inst.guarded[i]).copy() for i in ARRAYS)
    y[:N] = 2 * x[:N]
    return {0: x, 1: y}


def test_a_result_that_changes_with_the_lanes_poisoned_depends_on_them(inst: Instance) -> None:
    run = _run(inst)
    poisoned = {i: a.copy() for i, a in run.items()}
    poisoned[1][2] += 2143346349
    with pytest.raises(Reject) as err:
        check_defined(SPEC, inst, run, Undefined(FIRST, poisoned), ARRAYS)
    assert err.value.check == "undefined"
    assert err.value.reason == (
        f"reads shuffle lanes CUDA leaves undefined ({FIRST}); its result depends on what the device returns "
        f"there: y[2] is {run[1][2]} when they read 0 and {poisoned[1][2]} when they read a poison pattern "
        "(1 element(s) change) at launch 1 of run 1"
    )


def test_reads_discarded_pass_and_a_poisoned_run_that_fails_or_writes_past_the_end_does_not(
    inst: Instance,
) -> None:
    run = _run(inst)
    check_defined(SPEC, inst, run, Undefined(FIRST, {i: a.copy() for i, a in run.items()}), ARRAYS)
    past = {i: a.copy() for i, a in run.items()}
    past[1][N + 1] = 0
    with pytest.raises(Reject, match=rf"it writes y\[{N + 1}\], past its {N} elements"):
        check_defined(SPEC, inst, run, Undefined(FIRST, past), ARRAYS)
    with pytest.raises(Reject, match="instead, the variant crashed at launch 1"):
        check_defined(SPEC, inst, run, Undefined(FIRST, failed="the variant crashed at launch 1"), ARRAYS)


def test_with_the_originals_poisoned_outputs_a_variant_must_compute_what_it_computes_from_those_lanes(
    inst: Instance,
) -> None:
    # the original's result depends on the lanes (y[2] moves by the poison): a variant whose poisoned run
    # moves the same way matches it; one that moves otherwise, or whose poisoned run failed, does not
    run = _run(inst)
    expected = [np.asarray(inst.values[0]).copy(), run[1][:N].copy()]
    theirs = [expected[0], expected[1].copy()]
    theirs[1][2] += 2143346349

    def check(undefined: Undefined | None) -> None:
        check_instance(
            SPEC, inst, [run, _run(inst)], expected, {}, undefined=undefined, expected_poisoned=theirs
        )

    def moved(by: int) -> dict[int, np.ndarray]:
        out = {i: a.copy() for i, a in run.items()}
        out[1][2] += by
        return out

    check(Undefined(FIRST, moved(2143346349)))
    other = moved(7)
    with pytest.raises(Reject) as err:
        check(Undefined(FIRST, other))
    assert err.value.check == "undefined"
    assert err.value.reason.startswith(
        f"with the shuffle lanes CUDA leaves undefined ({FIRST}) reading a poison pattern, as the original was run, "
        f"its outputs differ from the original's: y[2] = {other[1][2]}, expected {theirs[1][2]}"
    ), err.value.reason
    with pytest.raises(Reject, match="as the original was run, the variant crashed"):
        check(Undefined(FIRST, failed="the variant crashed"))
    # a variant that reads no undefined lane (none reported) is compared with the capture as ever
    check(None)


def test_it_comes_after_determinism_and_before_the_comparison(inst: Instance) -> None:
    run = _run(inst)
    poisoned = {i: a.copy() for i, a in run.items()}
    poisoned[1][0] = -1
    expected = [np.asarray(inst.values[0]).copy(), np.zeros(N, np.int32)]  # would fail matches-reference
    with pytest.raises(Reject) as err:
        check_instance(SPEC, inst, [run, _run(inst)], expected, {}, undefined=Undefined(FIRST, poisoned))
    assert err.value.check == "undefined"


def test_a_program_that_differs_names_the_original_kernels_that_depend_on_undefined_lanes() -> None:
    report = ProgramReport(root="r", out_dir="o", targets=("opencl",))
    report.kernels = [ProgramKernel("reduce7", "reduction_kernel.cu", 1)]
    report.kernels[0].replays = [
        KernelReplay("original", "cpu:cpu-emulator", "failed", f"undefined: reads shuffle lanes ({FIRST})",
                     instance="reduce7<int, 4u, true>"),
        KernelReplay("original", "cpu:cpu-emulator", "validated", "matches", instance="reduce7<int, 8u, true>"),
    ]  # fmt: skip
    differs = RunResult("opencl", "opencl", "opencl:Intel", "differs", differences=["verdict: FAIL vs PASS"])
    report.runs = [ProgramRun("", "x", variants=[differs])]
    assert report.verdicts()["opencl"] == {
        "status": "differs",
        "detail": "on opencl:Intel: verdict: FAIL vs PASS (the original's reduce7<int, 4u, true> depends on "
        "warp-shuffle lanes CUDA leaves undefined, which a device may read otherwise: see the kernel replays)",
    }


def test_a_program_that_differs_names_the_original_kernels_that_race() -> None:
    """Rodinia's huffman: pack2 mixes plain stores with neighbours' atomicOr on one word, so its original gives
    two results on one input; the OpenCL program that differs by one line says so."""
    report = ProgramReport(root="r", out_dir="o", targets=("opencl",))
    report.kernels = [ProgramKernel("pack2", "pack_kernels.cu", 1)]
    report.kernels[0].replays = [
        KernelReplay("original", "cpu:cpu-emulator", "failed",
                     "deterministic: arg3[114] differs between two runs on the same input", instance="pack2"),
    ]  # fmt: skip
    differs = RunResult("opencl", "opencl", "opencl:PoCL", "differs", differences=["stdout line 9: missing"])
    report.runs = [ProgramRun("", "x", variants=[differs])]
    assert report.verdicts()["opencl"]["detail"] == (
        "on opencl:PoCL: stdout line 9: missing (the original's pack2 gives different results in two runs on one "
        "input, a race or an uninitialised read, so its program's output may differ from run to run: see the "
        "kernel replays)"
    )


def test_a_program_that_differs_names_the_original_kernels_judged_by_their_racing_stores() -> None:
    """The same, where pack2's replay is validated by what its racing stores leave (checks.Raced): its program's
    output still moves with the race, and the verdict says so."""
    report = ProgramReport(root="r", out_dir="o", targets=("opencl",))
    report.kernels = [ProgramKernel("pack2", "pack_kernels.cu", 1)]
    report.kernels[0].replays = [
        KernelReplay("original", "cpu:cpu-emulator", "validated",
                     "matches what the original's run left at 1 captured launch(es); judged by what the original's "
                     f"own runs keep: arg3 compared element by element except at the 1 element(s) {RACED_WORDS} "
                     "(arg3[114] left 1466587046 or 3622829990 at launch 1 of run 1)", instance="pack2"),
    ]  # fmt: skip
    differs = RunResult("opencl", "opencl", "opencl:PoCL", "differs", differences=["stdout line 127: Diff"])
    report.runs = [ProgramRun("", "x", variants=[differs])]
    assert report.verdicts()["opencl"]["detail"].startswith(
        "on opencl:PoCL: stdout line 127: Diff (the original's pack2 gives different results in two runs on one "
    )
