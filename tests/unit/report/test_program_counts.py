"""Reports that add up (issue #29): one verdict per kernel instance and variant, counted in report.json,
report.md and on the terminal."""

from __future__ import annotations

from porter.report.program_view import markdown
from porter.results import KernelReplay, ProgramKernel, ProgramReport


def test_the_counts_per_variant_add_up_with_one_verdict_per_instance() -> None:
    """An instance judged on two devices counts once (failed on any wins); reasons grouped."""
    rows = [
        KernelReplay("original", "cpu:cpu-emulator", "validated", instance="scale<float>"),
        KernelReplay("hip", "cpu:cpu-emulator", "validated", instance="scale<float>"),
        KernelReplay(
            "hip", "cpu:cpu-emulator-wave64", "failed", "matches-reference: arg1[3]", instance="scale<float>"
        ),
        KernelReplay(
            "original", "", "not-replayable", "no launch to replay: none of the program's runs launched it"
        ),
        KernelReplay(
            "hip", "", "not-replayable", "no launch to replay: none of the program's runs launched it"
        ),
        KernelReplay("opencl", "opencl:pthread", "validated", instance="scale<float>"),
        KernelReplay(
            "opencl", "", "not-replayable", "no launch to replay: none of the program's runs launched it"
        ),
    ]
    report = ProgramReport(
        "prog", "prog.ported", ("hip", "opencl"),
        kernels=[ProgramKernel("scale", "k.cuh", 3, replays=rows[:3] + rows[5:6]),
                 ProgramKernel("unused", "k.cuh", 9, replays=[rows[3], rows[4], rows[6]])],
    )  # fmt: skip
    counts = report.kernel_counts()
    assert list(counts) == ["original", "hip", "opencl"]
    assert counts["hip"] == {
        "instances": 2, "failed": 1, "validated": 0, "compiled": 0, "not-replayable": 1, "unlaunched": 1,
        "reasons": {"matches-reference": 1, "no launch to replay": 1},
    }  # fmt: skip
    assert report.document()["kernel_counts"] == counts
    text = markdown(report)
    assert text.rstrip().endswith(
        "- opencl: 1 of 2 kernel instances validated (1 of 1 launched by the runs), 1 not replayable "
        "(1 no launch to replay)"
    )
    assert (
        "- hip: 0 of 2 kernel instances validated (0 of 1 launched by the runs), 1 failed, 1 not replayable"
        in text
    )


def test_a_reason_is_grouped_by_what_it_says_not_by_which_launch_said_it() -> None:
    from porter.results import _reason_kind

    assert (
        _reason_kind(
            "not replayable: launch 1 (run 1): its allocations exceed the capture limit (PORTER_CAPTURE_MIB)"
        )
        == "its allocations exceed the capture limit"
    )
    assert _reason_kind("run: the variant cannot be emulated: cannot emulate: textures") == (
        "the variant cannot be emulated"
    )
    assert _reason_kind("none of the program's runs launched it (no captured launch)") == (
        "none of the program's runs launched it"
    )


def test_a_ports_stages_are_clocked_in_order_and_summed_over_entries() -> None:
    """report.json's stages: the ``with`` bodies' wall time per stage, added up when a stage is entered again
    (also when its body raises), written in the order of the port; an unknown stage name is a bug."""
    import time

    import pytest

    report = ProgramReport("prog", "prog.ported", ("hip",))
    with report.clock("replay"):
        time.sleep(0.02)
    with pytest.raises(RuntimeError), report.clock("replay"):
        time.sleep(0.02)
        raise RuntimeError("a stage that fails still took its time")
    with report.clock("plan"):
        pass
    assert report.stages["replay"] >= 0.04
    assert list(report.document()["stages"]) == ["plan", "replay"]
    assert "## Where the time went" in markdown(report)
    with pytest.raises(ValueError, match="unknown stage"), report.clock("compile"):
        pass


def test_units_a_compiler_checked_are_counted_per_target_with_the_first_failure_named() -> None:
    """A program's HIP verdict comes from porter's own headers (CPU runtime, HIP on NVIDIA); whether AMD's
    compiler takes each unit is said on its own line (rodinia's hybridsort matched while bucketsort.cu did
    not compile for gfx90a)."""
    from porter.report.program_view import unit_lines
    from porter.results import FileTarget, ProgramFileResult

    tc = "hipcc:/usr/bin/hipcc:hip-5.2|gfx90a"
    files = [
        ProgramFileResult("mergesort.cu", "source", {"hip": FileTarget("m", "compiled", "compiles for hip:gfx90a (x)", toolchain=tc)}),
        ProgramFileResult(
            "bucketsort.cu", "source",
            {"hip": FileTarget("b", "failed", "does not compile for hip:gfx90a: helper_cuda.h:118:14: error: use of undeclared identifier 'cudaErrorInvalidHostPointer'", toolchain=tc)},
        ),
        ProgramFileResult("kernel.cu", "source", {"hip": FileTarget("k", "translated")}),  # included, not a unit
        ProgramFileResult("README", "other", {"hip": FileTarget("r", "copied")}),
    ]  # fmt: skip
    report = ProgramReport("prog", "prog.ported", ("hip",), files=files)
    (line,) = unit_lines(report)
    assert line.startswith("hip: 1 of 2 units compile as device code (hip:gfx90a); bucketsort.cu does not: ")
    assert "helper_cuda.h:118:14: error: use of undeclared identifier" in line
    assert "- " + line in markdown(report)
    # nothing checked (no compiler here): no line
    unchecked = ProgramReport("prog", "prog.ported", ("hip",), files=files[2:])
    assert unit_lines(unchecked) == []
