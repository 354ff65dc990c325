"""porter.program with a CMake build's compile_commands.json: `porter port --cmake-target NAME` keeps the
units of one target (CMake writes each unit's object as .../CMakeFiles/<target>.dir/...), issue #33."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.program import cmake_target_of, cmake_targets, discover

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "cmake_tests"
DB = FIXTURE / "cmake-build" / "compile_commands.json"
PROJECT = FIXTURE / "project"


@pytest.mark.parametrize(
    ("output", "target"),
    [
        ("CMakeFiles/bump.dir/bump/main.cu.o", "bump"),
        ("src/CMakeFiles/vec_add.dir/vec_add.cu.o", "vec_add"),
        ("sub/CMakeFiles/sum.x.dir/__/src/sum.cpp.o", "sum.x"),  # a target name with a dot
        ("/home/dev/build/CMakeFiles/k.dir/k.cu.o", "k"),
        ("sub\\CMakeFiles\\win.dir\\win.cu.obj", "win"),  # Windows' separators
        ("main.o", ""),  # not CMake's
        ("", ""),
    ],
)
def test_the_target_of_an_object_is_its_cmakefiles_folder(output: str, target: str) -> None:
    assert cmake_target_of(output) == target


def _database(folder: Path, *entries: dict[str, object]) -> Path:
    db = folder / "compile_commands.json"
    db.write_text(json.dumps(list(entries)))
    return db


def test_an_entry_without_output_names_its_target_by_the_o_of_its_command(tmp_path: Path) -> None:
    d = str(tmp_path)
    db = _database(
        tmp_path,
        {
            "directory": d,
            "file": "a.cu",
            "command": "nvcc -odir x -optf o.txt -c a.cu -o CMakeFiles/a.dir/a.cu.o",
        },
        {"directory": d, "file": "b.cu", "arguments": ["g++", "-c", "b.cu", "-oCMakeFiles/b.dir/b.cu.o"]},
        {"directory": d, "file": "c.cu", "command": "nvcc -c c.cu --output-file=CMakeFiles/c.dir/c.cu.o"},
        {
            "directory": d,
            "file": "d.cu",
            "arguments": ["cl.exe", "/c", "d.cu", "/FoCMakeFiles\\d.dir\\d.cu.obj"],
        },
        # `output` wins over the command's -o
        {
            "directory": d,
            "file": "e.cu",
            "command": "nvcc -c e.cu -o x.o",
            "output": "CMakeFiles/e.dir/e.cu.o",
        },
        {"directory": d, "file": "f.cu", "command": "nvcc -c f.cu -o f.o"},  # no CMake object: no target
    )
    assert cmake_targets(db) == {name: (tmp_path / f"{name}.cu",) for name in "abcde"}


def test_the_fixture_build_holds_two_targets() -> None:
    assert cmake_targets(DB) == {
        "bump": (PROJECT / "bump" / "main.cu",),
        "warp_sum": (PROJECT / "warp_sum" / "main.cu",),
    }


def test_a_cmake_target_keeps_its_units_and_leaves_the_other_targets_out() -> None:
    program = discover([DB, PROJECT], cmake_target="bump")
    assert program.root == FIXTURE
    assert [str(u.rel) for u in program.units] == ["project/bump/main.cu"]
    names = {str(f.rel) for f in program.files}
    assert "project/warp_sum/main.cu" not in names  # another target's unit: no part of this program
    assert {"project/CMakeLists.txt", "project/tests/check_format.sh"} <= names  # the project's other files
    assert program.defines == () and program.flags_from == "compile_commands.json (CMake target bump)"
    assert any("1 unit(s) of other targets left out (CMake target bump)" in s for s in program.skipped)

    program = discover([DB, PROJECT], cmake_target="warp_sum")  # its entry: `arguments`, no `output`
    assert [str(u.rel) for u in program.units] == ["project/warp_sum/main.cu"]
    assert program.defines == ("BLOCK=256",)  # its own -D only
    assert "project/bump/main.cu" not in {str(f.rel) for f in program.files}

    # without a target every unit is the program's, as before
    assert [str(u.rel) for u in discover([DB, PROJECT]).units] == [
        "project/bump/main.cu",
        "project/warp_sum/main.cu",
    ]


def test_the_target_reaches_the_ports_discovery_through_its_build_flags() -> None:
    """`porter port --cmake-target` gives it in BuildFlags, which the port's workflow hands to discover()."""
    from porter.defines import BuildFlags

    flags = BuildFlags(cmake_target="warp_sum")
    assert [str(u.rel) for u in discover([DB, PROJECT], cmake_target=flags.cmake_target).units] == [
        "project/warp_sum/main.cu"
    ]
    assert len(discover([DB, PROJECT]).units) == 2


def test_another_targets_unit_that_a_unit_includes_comes_back_as_a_header(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (tmp_path / "main.cu").write_text('#include "k.cu"\nint main() { return 0; }\n')
    d = str(tmp_path)
    db = _database(
        tmp_path,
        {"directory": d, "file": "main.cu", "command": "nvcc -c main.cu", "output": "CMakeFiles/app.dir/m.o"},
        {"directory": d, "file": "k.cu", "command": "nvcc -c k.cu", "output": "CMakeFiles/lib.dir/k.o"},
    )
    program = discover([db], cmake_target="app")
    assert {str(f.rel): f.kind for f in program.files if f.kind != "other"} == {
        "main.cu": "source",
        "k.cu": "header",
    }


def test_a_target_without_units_or_without_a_database_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        discover([DB, PROJECT], cmake_target="nope")
    assert err.value.exit_code == 2 and str(err.value).startswith(f"{DB}: --cmake-target nope: no unit")
    assert "its CMake targets: bump, warp_sum" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UsageError) as err:
        discover([PROJECT], cmake_target="bump")
    assert str(err.value).startswith(f"{PROJECT}: --cmake-target bump picks a target's units")
    shutil.copy(PROJECT / "bump" / "main.cu", tmp_path / "main.cu")
    db = _database(tmp_path, {"directory": str(tmp_path), "file": "main.cu", "command": "nvcc -c main.cu"})
    with pytest.raises(UsageError, match="no entry's object is CMake's"):
        discover([db], cmake_target="main")
    db.write_text(json.dumps([{"directory": str(tmp_path), "file": "main.cu", "command": "nvcc 'x"}]))
    with pytest.raises(UsageError, match="entry 1: its command cannot be split"):
        discover([db])


def test_port_refuses_a_bad_cmake_target_before_writing_anything(tmp_path: Path) -> None:
    """Through the command line (in process): one line naming the file, exit 2, no output folder."""
    from typer.testing import CliRunner

    from porter.cli import app

    out = tmp_path / "out"
    cases = [
        ([str(PROJECT), "--cmake-target", "bump"], f"{PROJECT}: --cmake-target bump picks"),
        ([str(DB), str(PROJECT), "--cmake-target", "nope"], f"{DB}: --cmake-target nope: no unit"),
        ([str(PROJECT / "bump" / "main.cu"), "--cmake-target", "bump"], "--cmake-target bump picks"),
        (["--suite", str(FIXTURE / "suite.toml"), "--cmake-target", "bump"], "not --suite"),
    ]
    for args, words in cases:
        result = CliRunner().invoke(app, ["port", *args, "--translate-only", "--out", str(out)])
        assert isinstance(result.exception, UsageError), result.output
        assert result.exception.exit_code == 2 and words in str(result.exception), str(result.exception)
        assert not out.exists()


@pytest.mark.integration
def test_port_with_a_cmake_target_ports_that_targets_units(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from porter.cli import app

    out = tmp_path / "out"
    args = ["port", str(DB), str(PROJECT), "--cmake-target", "warp_sum", "--translate-only", "--json"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code in (0, 1), result.output  # 1: its __activemask has no OpenCL form
    doc = json.loads((out / "report.json").read_text())
    assert doc["program"]["build"]["flags_from"] == "compile_commands.json (CMake target warp_sum)"
    assert (out / "hip" / "project" / "warp_sum" / "main.cu").is_file()
    assert not (out / "hip" / "project" / "bump" / "main.cu").exists()
