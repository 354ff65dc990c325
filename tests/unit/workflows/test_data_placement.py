"""Where a run's copy of the program lies so that a --data folder outside the program's folder is at the
same relative position from it (program_run.data_placement), and what the jail lets a run do there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from porter import sandbox
from porter.sandbox import jail
from porter.workflows.program_run import Placement, _placed, data_placement


def _rodinia(tmp_path: Path) -> tuple[Path, Path]:
    program, data = tmp_path / "rod" / "cuda" / "srad" / "srad_v1", tmp_path / "rod" / "data"
    program.mkdir(parents=True)
    (data / "srad").mkdir(parents=True)
    (data / "srad" / "image.pgm").write_text("P2\n")
    return program, data


def test_a_data_folder_three_levels_up_is_three_levels_up_from_the_copy(tmp_path: Path) -> None:
    program, data = _rodinia(tmp_path)
    placement = data_placement(program, [str(data)])
    assert placement == Placement("cuda/srad/srad_v1", (("data", str(data)),))
    base = tmp_path / "runs" / "k" / "tree"
    copy = _placed(base, placement)
    assert copy == base / "cuda" / "srad" / "srad_v1"
    copy.mkdir(parents=True)  # as _staged makes it
    assert (copy / "../../../data/srad/image.pgm").read_text() == "P2\n"  # srad_v1's own path
    assert os.readlink(base / "data") == str(data)
    assert not (data / "srad" / "srad_v1").exists()  # nothing written beside the user's files


def test_a_data_folder_inside_the_program_or_none_keeps_the_plain_copy(tmp_path: Path) -> None:
    program, _data = _rodinia(tmp_path)
    (program / "data").mkdir()
    assert data_placement(program, [str(program / "data")]) == Placement()
    assert data_placement(program, [str(program)]) == Placement()
    assert data_placement(program, []) == Placement()
    base = tmp_path / "tree"
    assert _placed(base, Placement()) == base and not base.exists()


def test_a_data_folder_holding_the_program_is_not_placed_and_the_notes_say_so(tmp_path: Path) -> None:
    program, _data = _rodinia(tmp_path)
    placement = data_placement(program, [str(tmp_path / "rod")])
    assert placement.nest == "" and placement.links == ()
    assert len(placement.notes) == 1 and "holds the program's folder" in placement.notes[0]


def test_several_data_folders_share_the_deepest_nest_and_one_inside_another_is_seen_through_it(
    tmp_path: Path,
) -> None:
    program, data = _rodinia(tmp_path)
    beside = tmp_path / "rod" / "cuda" / "srad" / "inputs"
    beside.mkdir()
    placement = data_placement(program, [str(beside), str(data / "srad"), str(data)])
    assert placement.nest == "cuda/srad/srad_v1"
    assert placement.links == (("data", str(data)), ("cuda/srad/inputs", str(beside)))
    copy = _placed(tmp_path / "tree", placement)
    copy.mkdir(parents=True)
    assert (copy / "../inputs").resolve() == beside.resolve()
    assert (copy / "../../../data/srad").resolve() == (data / "srad").resolve()


def test_positions_are_those_of_the_real_folders(tmp_path: Path) -> None:
    program, data = _rodinia(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(program, tmp_path / "elsewhere" / "srad_v1")  # the program named through a link
    placement = data_placement(tmp_path / "elsewhere" / "srad_v1", [str(data)])
    assert placement.links == (("data", str(data)),) and placement.nest == "cuda/srad/srad_v1"


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["bubblewrap", "landlock"])
def test_the_jail_reads_through_the_link_and_never_writes_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    if mode == "landlock":
        monkeypatch.setenv(sandbox.DISABLE_ENV, "bubblewrap")
    if jail.mode()[0] != mode:
        pytest.skip(f"no {mode} jail here")
    program, data = _rodinia(tmp_path)
    base, home = tmp_path / "runs" / "k" / "tree", tmp_path / "runs" / "k" / "home"
    copy = _placed(base, data_placement(program, [str(data)]))
    copy.mkdir(parents=True)
    home.mkdir()
    script = (
        "cat ../../../data/srad/image.pgm; "
        "echo x > ../../../data/srad/new.txt || echo refused; "
        "rm ../../../data/srad/image.pgm || echo kept; echo y > mine.txt"
    )
    ran = jail.run(
        ["/bin/sh", "-c", script], jail.Jail((str(base),), readable=(str(data),), home=str(home)), copy,
        stdout=tmp_path / "out.txt", timeout=60, max_output=1 << 20,
    )  # fmt: skip
    said = (tmp_path / "out.txt").read_text()
    assert ran.exit == 0, said
    assert "P2" in said and "refused" in said and "kept" in said
    assert not (data / "srad" / "new.txt").exists() and (data / "srad" / "image.pgm").read_text() == "P2\n"
    assert (copy / "mine.txt").read_text() == "y\n"  # its own copy stays writable
