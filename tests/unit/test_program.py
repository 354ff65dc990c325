"""porter.program: the files, units and include folders of a program."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.program import discover
from porter.workflows.resume import is_porter_output

ROOT = Path(__file__).resolve().parents[2]
SMOOTH = ROOT / "samples" / "programs" / "smooth"


@pytest.fixture
def smooth(tmp_path: Path) -> Path:
    shutil.copytree(SMOOTH, tmp_path / "smooth")
    return tmp_path / "smooth"


def test_a_folder_is_its_units_headers_and_other_files(smooth: Path) -> None:
    program = discover([str(smooth)])
    kinds = {str(f.rel): f.kind for f in program.files}
    assert kinds == {
        "Makefile": "other",
        "README.md": "other",
        "data/values.txt": "other",
        "include/smooth_kernels.cuh": "header",
        "include/util.h": "header",
        "src/main.cu": "source",
        "src/util.cpp": "source",
    }
    assert program.root == smooth
    # no -I given: the Makefile's, relative to it
    assert program.include_dirs == (str(smooth / "include"),) and program.flags_from.startswith("Makefile")


def test_earlier_outputs_hidden_folders_and_the_output_folder_are_left_out(smooth: Path) -> None:
    (smooth / ".git").mkdir()
    (smooth / ".git" / "x.cu").write_text("__global__ void k() {}\n")
    old = smooth / "old.ported"
    old.mkdir()
    (old / "report.json").write_text(json.dumps({"schema": "porter-program-report/1"}))
    (old / "copy.cu").write_text("__global__ void k() {}\n")
    out = smooth / "out"
    out.mkdir()
    (out / "y.cu").write_text("__global__ void k() {}\n")
    program = discover([str(smooth)], skip=[out], is_output=is_porter_output)  # as the workflows ask
    names = {str(f.rel) for f in program.files}
    assert not any(n.startswith((".git", "old.ported", "out/")) for n in names), names
    assert any("earlier porter output" in s for s in program.skipped)
    # told nothing of porter's outputs, discover walks every folder that is not hidden or skipped
    assert any(str(f.rel).startswith("old.ported") for f in discover([str(smooth)], skip=[out]).files)


def test_compile_commands_names_the_units_and_brings_their_flags(smooth: Path) -> None:
    db = smooth / "compile_commands.json"
    db.write_text(
        json.dumps(
            [
                {
                    "directory": str(smooth),
                    "file": "src/main.cu",
                    "command": "nvcc -Iinclude -DFAST=1 -c src/main.cu",
                },
                {
                    "directory": str(smooth),
                    "arguments": ["g++", "-I", "include", "-c", "src/util.cpp"],
                    "file": "src/util.cpp",
                },
            ]
        )
    )
    program = discover([str(db)])
    assert [str(u.rel) for u in program.units] == ["src/main.cu", "src/util.cpp"]
    assert program.include_dirs == (str(smooth / "include"),) and program.defines == ("FAST=1",)
    assert program.flags_from == "compile_commands.json"
    # the headers the units reach come with them
    assert {str(f.rel) for f in program.files} >= {"include/smooth_kernels.cuh", "include/util.h"}


def test_nothing_to_port_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(UsageError, match="no translation unit"):
        discover([str(tmp_path)])
    with pytest.raises(UsageError, match="no such file"):
        discover([str(tmp_path / "absent")])
    (tmp_path / "compile_commands.json").write_text("{not json")
    with pytest.raises(UsageError, match="compile_commands.json"):
        discover([str(tmp_path / "compile_commands.json")])


def _database(folder: Path, *entries: dict[str, object]) -> Path:
    db = folder / "compile_commands.json"
    db.write_text(json.dumps(list(entries)))
    return db


def test_a_compilation_database_naming_a_file_outside_the_program_is_refused(tmp_path: Path) -> None:
    """The probe's database: an entry ``../../../etc/passwd`` made the root ``/`` and copied /etc/passwd
    into the output."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "main.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    db = _database(
        proj,
        {"directory": str(proj), "file": "main.cu", "command": "nvcc -c main.cu"},
        {"directory": str(proj), "file": "../../../etc/passwd", "command": "nvcc -c ../../../etc/passwd"},
    )
    with pytest.raises(UsageError) as err:
        discover([str(db)])
    message = str(err.value)
    assert message.startswith(f"{db}: entry 2 (index 1): its file '../../../etc/passwd' lies outside")
    assert err.value.exit_code == 2
    # a link inside the folder to a file outside is outside too
    (proj / "link.cu").symlink_to(tmp_path / "elsewhere.cu")
    (tmp_path / "elsewhere.cu").write_text("__global__ void k2() {}\n")
    db = _database(proj, {"directory": str(proj), "file": "link.cu", "command": "nvcc -c link.cu"})
    with pytest.raises(UsageError, match=r"entry 1 \(index 0\)"):
        discover([str(db)])


def test_folders_and_headers_outside_the_program_are_read_only_when_named(tmp_path: Path) -> None:
    proj, shared = tmp_path / "proj", tmp_path / "shared"
    proj.mkdir()
    shared.mkdir()
    (shared / "k.cuh").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (shared / "secret.h").write_text("#define KEY 1\n")
    (proj / "main.cu").write_text(
        '#include "../shared/k.cuh"\n#include <secret.h>\nint main() { return 0; }\n'
    )
    db = _database(
        proj, {"directory": str(proj), "file": "main.cu", "command": f"nvcc -I{shared} -c main.cu"}
    )
    program = discover([str(db)])
    assert program.root == proj and [str(f.rel) for f in program.files] == ["main.cu"]
    assert program.include_dirs == ()  # the database's -I outside the program is not used
    assert any(f"-I {shared}: outside the program's folder, not read" in s for s in program.skipped)
    assert any(
        s.startswith(f"{shared / 'k.cuh'}: included by the program but outside") for s in program.skipped
    )
    # named on the command line, the folder is read, and its headers the program reaches come with it
    named = discover([str(db)], include_dirs=[str(shared)])
    assert named.root == tmp_path and named.include_dirs == (str(shared),)
    assert {str(f.rel) for f in named.files} == {"proj/main.cu", "shared/k.cuh", "shared/secret.h"}
    assert not any(".." in f.rel.parts for f in named.files)


def test_command_line_defines_replace_and_undefine_a_databases() -> None:
    from porter.defines import merge_defines

    merged, origins = merge_defines(
        ["N=777", "SCALE=2.0f", "FAST"], ["N=640", "EXTRA"], ["SCALE"], "compile_commands.json"
    )
    assert merged == ("N=640", "FAST", "EXTRA")
    assert dict(origins) == {"N": "command line", "FAST": "compile_commands.json", "EXTRA": "command line"}


@pytest.mark.parametrize(
    ("defines", "undefines"), [(["1N=4"], []), (["A B"], []), ([], ["X-Y"]), (["=3"], [])]
)
def test_a_define_or_undefine_that_is_not_a_macro_name_is_refused(
    defines: list[str], undefines: list[str]
) -> None:
    from porter.defines import check_defines

    with pytest.raises(UsageError, match="is not a macro name"):
        check_defines(defines, undefines)
