"""No verdict without evidence: an original that fails is judged first, and nothing is compared with it
(issue #36); every kernel of a --run report has a row saying why it has no verdict."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from porter.sandbox import jail as program_jail
from porter.workflows.program import Hooks, port_program
from porter.workflows.program_run import ProgramRuns

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++"),
]

ROOT = Path(__file__).resolve().parents[3]
NEEDS_INPUT = ROOT / "tests" / "fixtures" / "programs" / "needs_input"


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    shutil.copytree(NEEDS_INPUT, tmp_path / "needs_input")
    return tmp_path / "needs_input"


def _cpu(*runs: str, expect_exit: int = 0) -> ProgramRuns:
    return ProgramRuns(runs=runs, toolchains=("cpu-runtime",), expect_exit=expect_exit)


def test_an_original_that_fails_for_a_missing_input_is_no_evidence(prog: Path, tmp_path: Path) -> None:
    """Original and port both exit 1 ("input.dat doesn't exist"): that used to read `matches`."""
    report = port_program([str(prog)], ["hip", "opencl"], out_dir=str(tmp_path / "out"), run=_cpu(""))
    original = report.runs[0].original
    assert original is not None and original.status == "failed" and original.exit == 1
    assert original.reason.startswith(
        'the original failed (exit 1: "ERROR: The input file input.dat doesn\'t exist.")'
    ), original.reason
    # the hint names the file: from the run strace watched where this machine has it, else the error line
    assert (
        "it tried to open 'input.dat', which the run did not find" in original.reason
        or not program_jail.tracer()
    ), original.reason
    assert "'input.dat' is not in the program's folder" in original.reason
    verdict = report.verdicts()["hip"]
    assert verdict["status"] == "not-run" and "the original failed" in verdict["detail"]
    # its one kernel was never launched: a row for the original and each target, with the reason
    rows = {r.variant: r for k in report.kernels for r in k.replays}
    assert set(rows) == {"original", "hip", "opencl"}
    assert all(
        r.status == "not-replayable" and "run 1: the original failed" in r.reason for r in rows.values()
    )
    assert not any("give --run" in n for n in report.notes)  # --run was given: no hint to give it


def _rewritten(prog: Path, old: str, new: str) -> Path:
    main = prog / "main.cu"
    text = main.read_text()
    assert old in text
    main.write_text(text.replace(old, new))
    return prog


@pytest.mark.skipif(not program_jail.tracer(), reason="strace is missing here, or cannot trace")
def test_the_file_a_program_tried_to_open_is_named_though_its_message_does_not(
    prog: Path, tmp_path: Path
) -> None:
    """Its error line names no file: the run watched from outside the jail does."""
    _rewritten(prog, '"ERROR: The input file %s doesn\'t exist.\\n", name', '"ERROR: no input\\n"')
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu("values.dat"))
    original = report.runs[0].original
    assert original is not None and original.status == "failed"
    assert original.reason.startswith('the original failed (exit 1: "ERROR: no input")'), original.reason
    assert "it tried to open 'values.dat'" in original.reason
    assert "'values.dat' is at data/values.dat, but the run starts in" in original.reason
    assert report.verdicts()["hip"]["status"] == "not-run"


def test_a_usage_text_with_exit_0_is_no_evidence(prog: Path, tmp_path: Path) -> None:
    """Many research codes print their usage and return 0 when the arguments are wrong."""
    _rewritten(
        prog,
        "int main(int argc, char** argv) {",
        'int main(int argc, char** argv) {\n    if (argc < 2) { printf("Usage: %s <file> [n]\\n", argv[0]); return 0; }',
    )
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu(""))
    original = report.runs[0].original
    assert original is not None and original.status == "failed" and original.exit == 0
    assert original.reason.startswith('the original exited 0 but printed "Usage: ./main <file> [n]"'), (
        original.reason
    )
    assert report.verdicts()["hip"]["status"] == "not-run"


def test_an_open_error_on_stderr_with_exit_0_is_no_evidence(prog: Path, tmp_path: Path) -> None:
    _rewritten(prog, "return 1;", "return 0;")
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu(""))
    original = report.runs[0].original
    assert original is not None and original.status == "failed" and original.exit == 0
    assert "doesn't exist." in original.reason and "did not do its work" in original.reason


def test_a_file_that_lies_elsewhere_in_the_program_is_named_with_where_it_is(
    prog: Path, tmp_path: Path
) -> None:
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu("values.dat"))
    original = report.runs[0].original
    assert original is not None and original.status == "failed"
    assert "'values.dat' is at data/values.dat, but the run starts in" in original.reason


def test_the_same_program_given_its_input_is_compared_and_its_kernel_replayed(
    prog: Path, tmp_path: Path
) -> None:
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu("data/values.dat"))
    assert report.verdicts()["hip"]["status"] == "matches"
    assert {r.status for k in report.kernels for r in k.replays} == {"validated"}


def test_an_original_failing_on_purpose_is_compared_when_the_user_says_so(prog: Path, tmp_path: Path) -> None:
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu("", expect_exit=1))
    original = report.runs[0].original
    assert original is not None and original.status == "ran" and original.exit == 1
    assert report.verdicts()["hip"]["status"] == "matches"
    assert any("expected to exit 1 (--expect-exit)" in n for n in report.notes)
    # a run that exits otherwise than expected is no evidence either
    other = port_program(
        [str(prog)], ["hip"], out_dir=str(tmp_path / "o2"), run=_cpu("data/values.dat", expect_exit=1)
    )
    assert other.runs[0].original is not None and other.runs[0].original.status == "failed"
    assert (
        "exit 0" in other.runs[0].original.reason
        and "expected 1 (--expect-exit)" in other.runs[0].original.reason
    )


def test_an_original_that_prints_nothing_and_writes_nothing_is_no_evidence(tmp_path: Path) -> None:
    src = tmp_path / "quiet"
    src.mkdir()
    (src / "main.cu").write_text(
        "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
        "int main() { float* d; cudaMalloc(&d, 64 * sizeof(float)); k<<<1, 64>>>(d); cudaFree(d);\n"
        '    puts("done"); return 0; }\n'
    )
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu(""))
    original = report.runs[0].original
    assert original is not None and original.status == "failed"
    assert original.reason.startswith("nothing to compare: the original printed no number"), original.reason
    assert report.verdicts()["hip"]["status"] == "not-run"


def test_a_capturing_build_that_fails_is_said_and_every_kernel_says_why(
    prog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instrumented build failing (a launch line the rewriter broke) falls back to the program as
    written: that is a note and a terminal line naming the compiler's first error, and every kernel is
    `not-replayable` with it -- never a silent plain build and empty rows."""
    from dataclasses import replace

    from porter.backends.cpu.program import CpuProgramToolchain

    real = CpuProgramToolchain.build

    def without_capture(self, source, out):  # type: ignore[no-untyped-def]
        built = real(self, source, out)
        if not source.capture:
            return built
        # what DriverToolchain.build hands back when its instrumented copy does not compile
        why = "main.cu does not compile with cpu-runtime; capture/main.cu:27:5: error: expected ';' before 'twice'"
        return replace(built, captures=False, fallback=why)

    monkeypatch.setattr(CpuProgramToolchain, "build", without_capture)
    said: list[str] = []
    report = port_program(
        [str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu("data/values.dat"),
        hooks=Hooks(progress=said.append),
    )  # fmt: skip
    note = next(n for n in report.notes if "capturing build of the original failed" in n)
    assert "error: expected ';' before 'twice'" in note and note in said
    rows = [r for k in report.kernels for r in k.replays]
    assert rows and all(r.status == "not-replayable" and "capturing build" in r.reason for r in rows)
    assert report.verdicts()["hip"]["status"] == "matches"  # the program itself still ran and compared


def test_a_crashed_run_names_its_command_device_and_toolchain_and_keeps_its_last_output(
    prog: Path, tmp_path: Path
) -> None:
    _rewritten(prog, "return 1;", "abort();")
    report = port_program([str(prog)], ["hip"], out_dir=str(tmp_path / "out"), run=_cpu("missing.dat"))
    original = report.runs[0].original
    assert original is not None and original.status == "failed" and original.exit in (-6, 134)
    assert original.reason.startswith("killed by signal 6 (SIGABRT")
    assert " running ./main missing.dat on cpu:cpu-emulator, driver g++ " in original.reason, original.reason
    assert "(built by g++ " in original.reason and "porter cpu runtime" in original.reason
    assert "ERROR: The input file missing.dat doesn't exist." in original.stderr_tail
    assert report.verdicts()["hip"]["status"] == "not-run"


def test_a_capture_that_could_not_write_an_array_is_not_the_program_giving_up(tmp_path: Path) -> None:
    """porter's capture layer says on the program's stderr when it cannot read back or write an array (seen on
    the H100 with srad at 2048x2048): that line is porter's, not an input the program could not open."""
    from porter.harness.outputs import RunOutput
    from porter.program import discover
    from porter.results import RunResult
    from porter.workflows.program_run import original_failure

    (tmp_path / "main.cu").write_text("int main() { return 0; }\n")
    program = discover([str(tmp_path)])
    ran = RunResult("original", "nvcc", "cuda:NVIDIA H100", "ran", exit=0)
    ours = "porter capture: cannot read /tmp/run/capture/arrays/k0-1-a0-after.bin\n"
    ran.stderr_tail = ours
    assert original_failure(ran, RunOutput(0, "Computation Done 1.5 s\n"), 0, program, Path(".")) == ""
    # the program's own line of the same kind still is
    ran.stderr_tail = ours + "cannot read image.pgm\n"
    why = original_failure(ran, RunOutput(0, "Computation Done 1.5 s\n"), 0, program, Path("."))
    assert why.startswith('the original exited 0 but printed "cannot read image.pgm"'), why
