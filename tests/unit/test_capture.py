"""porter.capture and the CPU runtime's launch capture: what a program's run records, and the folder format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from porter import capture
from porter.errors import UsageError
from porter.workflows.capture import capture_program
from porter.workflows.program_run import ProgramRuns

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "programs" / "capture_tour"
pytestmark = pytest.mark.integration  # builds and runs a program with g++


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found (apt-get install g++)")
    root = tmp_path_factory.mktemp("tour")
    shutil.copytree(FIXTURE, root / "tour")
    report = capture_program(
        [str(root / "tour")],
        ProgramRuns(("./main",), capture_limits=(capture.DEFAULT_LAUNCHES, 2, 2)),
        out_dir=str(root / "cap"),
    )
    assert report.build == "built" and report.exit_code == 0, report
    return root / "cap" / "run-1"


def _launches(folder: Path) -> dict[tuple[str, int], capture.Launch]:
    return {(la.kernel, la.launch): la for la in capture.load(folder).launches}


def test_the_manifest_names_the_run_and_the_launches_kept_spread_over_it(tour: Path) -> None:
    manifest = json.loads((tour / capture.MANIFEST).read_text())
    assert (
        manifest["schema"] == capture.SCHEMA
        and manifest["command"] == "./main"
        and manifest["exit_code"] == 0
    )
    # ten launches of scale: the first three, then the last slot taken again at 4 and at 8
    assert manifest["kernels"]["scale"] == [1, 2, 8]
    assert manifest["kernels"]["nothing"] == [1, 2]
    # the arrays of the launches the last slot replaced are gone; every file left is named by a record
    launches = capture.load(tour).launches
    named = {n for la in launches for a in la.allocations for n in (a.before, a.after) if n}
    named |= {n for la in launches for y in la.symbols for n in (y.before, y.after)}
    assert {f"arrays/{p.name}" for p in (tour / "arrays").iterdir()} == named


def test_types_are_the_compilers_and_pointers_resolve_to_their_allocation(tour: Path) -> None:
    got = _launches(tour)
    scale = got[("scale", 8)]
    x, a, n = scale.args
    # typedef float real; #define IDX_T int: resolved by the compiler
    assert (x.kind, x.ctype, x.dtype, x.offset) == ("pointer", "float*", "float32", 0)
    assert (a.kind, a.dtype, float(a.value())) == ("scalar", "float32", 0.5)
    assert (n.dtype, int(n.value())) == ("int32", 256)
    assert scale.grid == (2, 1, 1) and scale.block == (128, 1, 1) and scale.status == 0
    assert scale.allocations[0].bytes == 256 * 4
    # the bytes after the 8th launch are x after eight updates of x = x * 0.5 + 1, from the data before
    import numpy as np

    before = np.frombuffer(scale.array(0, "before"), dtype=np.float32)
    after = np.frombuffer(scale.array(0, "after"), dtype=np.float32)
    np.testing.assert_allclose(after, before * np.float32(0.5) + 1, rtol=1e-6)
    shift = got[("shift", 1)]
    assert shift.args[0].offset == 64 * 4 and shift.args[0].allocation == 0


def test_the_programs_constant_and_device_variables_are_captured_with_every_launch(tour: Path) -> None:
    import numpy as np

    gain = _launches(tour)[("gain", 1)]
    symbols = {y.name: (i, y) for i, y in enumerate(gain.symbols)}
    i, table = symbols["c_gain"]
    assert (table.dtype, table.bytes, table.constant) == ("float32", 16, True)
    assert np.frombuffer(gain.symbol(i, "before"), dtype=np.float32).tolist() == [0.5, 2.0, -1.0, 3.0]
    j, hits = symbols["hits"]
    assert (hits.dtype, hits.constant) == ("int32", False)
    count = _launches(tour)[("count", 1)]
    assert count.symbol(j, "before") != count.symbol(j, "after")  # the counter the kernel bumps


def test_a_launch_through_a_function_pointer_is_named_by_the_kernel_it_ran(tour: Path) -> None:
    through = _launches(tour)[("shift", 2)]
    assert through.written == "chosen" and through.args[0].offset == 0 and int(through.args[1].value()) == 32


def test_what_cannot_be_followed_is_marked_not_guessed(tour: Path) -> None:
    got = _launches(tour)
    span = got[("touch", 1)].args[0]
    assert span.kind == "value" and span.ctype == "Span" and span.holds_device_pointer
    host = got[("nothing", 2)].args[0]
    assert host.allocation is None and host.why == "not a device allocation"
    a, b, _n = got[("accumulate", 1)].args
    assert a.allocation == b.allocation == 0 and (a.const, b.const) == (True, False) and b.offset == 256 * 8
    fill = got[("fill", 1)]
    assert "capture limit" in fill.skipped and fill.allocations[0].before is None
    assert fill.args[1].dtype == "uint64"  # size_t


def test_a_record_damaged_after_the_run_is_refused_and_a_folder_without_manifest_too(
    tour: Path, tmp_path: Path
) -> None:
    """(A record the run itself left damaged is a problem of the capture: test_capture_format.py.)"""
    copy = tmp_path / "cap"
    shutil.copytree(tour, copy)
    (copy / "launches" / "k0-s0.json").write_text("{half a record")
    with pytest.raises(UsageError, match=r"record 0 \(launches/k0-s0.json\): damaged launch record"):
        capture.load(copy)
    with pytest.raises(UsageError, match="not a porter capture"):
        capture.load(tmp_path / "nothing-here")


def test_capture_refuses_a_program_folder_as_its_output_and_needs_a_run(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "tour")
    with pytest.raises(UsageError, match="needs a run"):
        capture_program([str(tmp_path / "tour")], ProgramRuns())
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a porter capture"):
        capture_program([str(tmp_path / "tour")], ProgramRuns(("./main",)), out_dir=str(tmp_path / "taken"))
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"


def test_a_record_naming_a_file_outside_the_capture_is_refused_not_followed(
    tour: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "cap"
    shutil.copytree(tour, copy)
    record = copy / "launches" / "k0-s0.json"
    doc = json.loads(record.read_text())
    doc["allocations"][0]["before"] = "../../../etc/passwd"
    record.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="arrays/<name>.bin") as err:
        capture.load(copy)
    assert err.value.path == str(record)
