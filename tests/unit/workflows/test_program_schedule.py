"""A program whose output depends on the order its blocks run in (issue #29, #30).  Porter's CPU runtime runs
the blocks of every launch in one seeded order, so an original racing between blocks printed the same in both of
its runs and every port on another runtime "differed" by the race.  The original's second run now has its blocks
and threads in another order: what the race decides varies between its two runs and is left out of the
comparison, said with the verdict; what the blocks' order does not change is still compared, and a port that
gets it wrong differs.  A comparison left with nothing the original determines is no match."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from porter.harness.outputs import RunOutput, Unstable, also_varies, compare, nothing_compared, unstable
from porter.model import UNCOMPARED
from porter.results import ProgramReport
from porter.workflows.program_run import REORDERED, ProgramRuns
from porter.workflows.verify import verify_program

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "verify"
ORIGINAL = HERE / "last_block_cuda"
NARROW = "cpu:cpu-emulator"
LINE_1 = "stdout line 1 varies between two runs of the original: not compared"

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU runtime needs g++")


def _verify(port: str, tmp_path: Path, args: str = "") -> ProgramReport:
    return verify_program(
        [str(HERE / port)], [str(ORIGINAL)], out_dir=str(tmp_path / "out"),
        run=ProgramRuns(runs=(args,), toolchains=("cpu-runtime",)),
    )  # fmt: skip


@pytest.mark.integration
@needs_gxx
def test_the_cpu_runtime_runs_blocks_in_another_order_under_porter_schedule(tmp_path: Path) -> None:
    """The runtime's order is fixed without PORTER_SCHEDULE (two runs agree) and another with it."""
    from porter.backends import get_backend

    chain = next(c for c in get_backend("cpu").program_toolchains() if c.name == "cpu-runtime")
    assert chain.reorder_env() == {"PORTER_SCHEDULE": "1"}
    report = _verify("last_block_hip", tmp_path)
    exe = next(
        Path(b.executables[k]) for b in report.builds for k in b.executables if b.variant == "original"
    )
    env = {k: v for k, v in os.environ.items() if k != "PORTER_SCHEDULE"}

    def last(extra: dict[str, str]) -> str:
        done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[0]

    assert last({}) == last({})
    assert last({}) != last(chain.reorder_env())


@pytest.mark.integration
@needs_gxx
def test_a_port_of_an_original_racing_between_blocks_matches_on_what_the_race_does_not_decide(
    tmp_path: Path,
) -> None:
    report = _verify("last_block_hip", tmp_path)
    original = report.runs[0].original
    assert original is not None and original.varies == [LINE_1, REORDERED]
    port = {v.device: v for r in report.runs for v in r.variants}[NARROW]
    assert port.status == "matches" and port.reason == f"{UNCOMPARED} 1 stdout line(s)", port
    verdict = report.verdicts()["hip"]
    assert verdict["status"] == "matches" and verdict["detail"].endswith(f"({UNCOMPARED} 1 stdout line(s))")


@pytest.mark.integration
@needs_gxx
def test_a_port_wrong_where_the_blocks_order_does_not_matter_differs(tmp_path: Path) -> None:
    report = _verify("last_block_hip_wrong", tmp_path)
    verdict = report.verdicts()["hip"]
    assert verdict["status"] == "differs", verdict
    assert verdict["detail"].startswith(
        f"on {NARROW}: stdout line 2: original 'sum 6112', port 'sum 6048'"
    ), verdict


@pytest.mark.integration
@needs_gxx
def test_a_program_whose_whole_output_varies_is_no_match(tmp_path: Path) -> None:
    report = _verify("last_block_hip", tmp_path, "only")
    port = {v.device: v for r in report.runs for v in r.variants}[NARROW]
    assert port.status == "not-run", port
    assert port.reason.startswith(
        "nothing compared: the 1 stdout line(s) it prints are all left out (they vary between two runs of the "
        "original"
    ), port
    assert report.verdicts()["hip"]["status"] == "not-run"


# ------------------------------------------------------------------------------ the comparison, by hand


def _out(stdout: str, files: dict[str, bytes] | None = None, exit: int = 0) -> RunOutput:
    return RunOutput(exit=exit, stdout=stdout, files=dict(files or {}))


def test_what_varies_is_named_in_one_clause() -> None:
    varies = unstable(_out("a 1\nb 2\n", {"x.txt": b"1"}), _out("a 1\nb 3\n", {"x.txt": b"2"}))
    assert varies.uncompared() == f"{UNCOMPARED} 1 stdout line(s), file x.txt"
    assert Unstable().uncompared() == ""
    assert Unstable(stdout=True, count=40, exit=True).uncompared() == f"{UNCOMPARED} stdout, the exit code"


def test_nothing_compared_only_when_every_output_the_original_has_varies() -> None:
    first, second = _out("last 3\n", {"o.txt": b"1"}), _out("last 9\n", {"o.txt": b"2"})
    varies = unstable(first, second)
    port = _out("last 0\n", {"o.txt": b"5"})
    assert compare(first, port, varies=varies) == []
    assert nothing_compared(first, varies=varies) == (
        "nothing compared: the 1 stdout line(s) it prints, file o.txt are all left out (they vary between two runs "
        "of the original, or report the device a run was on), so nothing it determines is left to compare a port with"
    )
    # one line the blocks' order does not change: that is compared, and is evidence
    steady = unstable(_out("last 3\nsum 7\n"), _out("last 9\nsum 7\n"))
    assert nothing_compared(_out("last 3\nsum 7\n"), varies=steady) == ""
    assert compare(_out("last 3\nsum 7\n"), _out("last 0\nsum 8\n"), varies=steady) == [
        "stdout line 2: original 'sum 7', port 'sum 8'"
    ]
    # a program whose whole output is its exit code: that is compared
    assert nothing_compared(_out(""), varies=Unstable(exit=False)) == ""


def test_what_varies_on_another_device_is_left_out_on_every_device() -> None:
    """The original on a GPU may run its blocks in one order twice; on porter's CPU runtime its second run has
    them in another.  What varies there -- a file, the exit code, stdout lines where both outputs have as many
    -- varies in the program, and is left out of a comparison with the GPU's run too."""
    gpu = _out("last 63\nsum 6112\n", {"o.txt": b"63"})
    gpu_varies = unstable(gpu, _out("last 63\nsum 6112\n", {"o.txt": b"63"}))
    assert gpu_varies.uncompared() == ""
    cpu = _out("last 12\nsum 6112\n", {"o.txt": b"12"})
    cpu_varies = unstable(cpu, _out("last 40\nsum 6112\n", {"o.txt": b"40"}))
    merged = also_varies(gpu_varies, gpu, [(cpu_varies, cpu)])
    assert merged is not None and merged.uncompared() == f"{UNCOMPARED} 1 stdout line(s), file o.txt"
    port = _out("last 0\nsum 6112\n", {"o.txt": b"0"})
    assert compare(gpu, port, varies=merged) == []
    assert compare(gpu, _out("last 0\nsum 6048\n", {"o.txt": b"0"}), varies=merged) == [
        "stdout line 2: original 'sum 6112', port 'sum 6048'"
    ]
    # another device's output with more lines: its files still count, its line numbers do not
    longer = _out("last 12\nsum 6112\nextra\n", {"o.txt": b"12"})
    merged = also_varies(gpu_varies, gpu, [(unstable(longer, _out("last 40\nsum 6112\nextra\n")), longer)])
    assert merged is not None and merged.uncompared() == f"{UNCOMPARED} file o.txt"
    assert also_varies(None, gpu, []) is None
