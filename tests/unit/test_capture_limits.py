"""The capture's size limits: a kernel's first launch kept whole up to --capture-first-mib, later ones up to
--capture-mib, a skipped launch never replacing one kept whole, and each skip saying which limit and how big."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from porter import capture
from porter.workflows.capture import capture_program
from porter.workflows.program_run import ProgramRuns

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "programs" / "capture_sizes"
pytestmark = pytest.mark.integration  # builds and runs a program with g++


@pytest.fixture(scope="module")
def sizes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found (apt-get install g++)")
    root = tmp_path_factory.mktemp("sizes")
    shutil.copytree(FIXTURE, root / "prog")
    report = capture_program(
        [str(root / "prog")],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 4)),
        out_dir=str(root / "cap"),
    )
    assert report.build == "built" and report.exit_code == 0, report
    return root / "cap" / "run-1"


def test_the_first_launch_of_a_kernel_is_kept_whole_over_the_per_launch_limit(sizes: Path) -> None:
    got = {(la.kernel, la.launch): la for la in capture.load(sizes).launches}
    first = got[("stamp", 1)]
    assert not first.skipped and first.allocations[0].bytes == 3 << 20
    assert len(first.array(0, "before")) == 3 << 20 and set(first.array(0, "after")) == {4}


def test_later_launches_over_the_limit_are_skipped_saying_which_limit(sizes: Path) -> None:
    got = {(la.kernel, la.launch): la for la in capture.load(sizes).launches}
    second = got[("stamp", 2)]
    assert "--capture-mib" in second.skipped and "(3 MiB)" in second.skipped
    assert second.allocations[0].before is None
    wide = got[("wide", 1)]  # 6 MiB: over the first launch's limit too
    assert "--capture-first-mib" in wide.skipped and "(6 MiB)" in wide.skipped


def test_a_skipped_launch_never_replaces_one_kept_whole_in_the_last_slot(sizes: Path) -> None:
    manifest = json.loads((sizes / capture.MANIFEST).read_text())
    assert manifest["kernels"]["stamp"] == [1, 2, 3]  # launch 4 (3 MiB, skipped) left launch 3 in place
    third = {(la.kernel, la.launch): la for la in capture.load(sizes).launches}[("stamp", 3)]
    assert not third.skipped and set(third.array(0, "after")) == {7}


def test_capture_env_never_sets_the_first_launch_limit_below_the_per_launch_one() -> None:
    env = capture.capture_env(Path("c"), 3, 100, 10)
    assert (env[capture.ENV_MIB], env[capture.ENV_FIRST_MIB]) == ("100", "100")
