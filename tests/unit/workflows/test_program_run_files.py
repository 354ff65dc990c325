"""What a run leaves under runs/<key>/ (porter.workflows.program_run): its stdout and written files stay
on disk, and a re-run reads them back only from there -- run.json is read back, never trusted."""

from __future__ import annotations

import json
from pathlib import Path

from porter.harness.outputs import default_rule, snapshot, written_files
from porter.workflows.program_run import _keep_output, _load_output


def _run_folder(tmp_path: Path) -> Path:
    scratch = tmp_path / "runs" / "0123456789abcdef"
    tree = scratch / "tree"
    (tree / "out").mkdir(parents=True)
    before = snapshot(tree)
    (tree / "out" / "result.txt").write_text("x = 1\n")
    (scratch / "stdout.txt").write_text("PASS\n")
    kept = _keep_output(scratch, 0, written_files(tree, before, default_rule()))
    assert kept.files == {"out/result.txt": scratch / "files" / "out" / "result.txt"}  # moved, not read
    assert not (tree / "out" / "result.txt").exists() and kept.stdout == scratch / "stdout.txt"
    return scratch


def test_a_kept_run_is_read_back_from_its_folder(tmp_path: Path) -> None:
    scratch = _run_folder(tmp_path)
    loaded = _load_output(scratch)
    assert loaded is not None and loaded.exit == 0
    assert loaded.files == {"out/result.txt": scratch / "files" / "out" / "result.txt"}


def test_a_run_json_naming_a_file_outside_its_folder_is_not_read(tmp_path: Path) -> None:
    scratch = _run_folder(tmp_path)
    (tmp_path / "secret.txt").write_text("secret\n")
    for name in ("../../../secret.txt", str(tmp_path / "secret.txt"), "/etc/passwd"):
        meta = json.loads((scratch / "run.json").read_text())
        meta["files"] = [name]
        (scratch / "run.json").write_text(json.dumps(meta))
        assert _load_output(scratch) is None, name  # the run is done again instead
    (scratch / "files" / "out" / "link").symlink_to(tmp_path / "secret.txt")
    meta["files"] = ["out/link"]
    (scratch / "run.json").write_text(json.dumps(meta))
    assert _load_output(scratch) is None


def test_an_executable_named_like_a_folder_of_the_program_is_staged_beside_it(tmp_path: Path) -> None:
    """A CMake project's target `bump` built from `bump/main.cu`: the run folder holds the source folder
    `bump/`, so the executable cannot be `./bump` there; it is `./bump.exe` (for every build alike)."""
    from porter.program import Program, ProgramFile
    from porter.workflows.program_run import _staged

    root = tmp_path / "project"
    (root / "bump").mkdir(parents=True)
    (root / "bump" / "main.cu").write_text("int main() { return 0; }\n")
    (root / "CMakeLists.txt").write_text("add_executable(bump bump/main.cu)\n")
    main = ProgramFile(root / "bump" / "main.cu", Path("bump/main.cu"), "source")
    program = Program(root, (main, ProgramFile(root / "CMakeLists.txt", Path("CMakeLists.txt"), "other")))
    exe = tmp_path / "built"
    exe.write_bytes(b"\x7fELF")
    cwd, name = _staged(tmp_path / "stage", program, root, main, exe, "bump")
    assert (
        name == "bump.exe"
        and (cwd / name).read_bytes() == b"\x7fELF"
        and (cwd / "bump" / "main.cu").is_file()
    )
    cwd, name = _staged(tmp_path / "stage2", program, root, main, exe, "other")
    assert name == "other" and (cwd / "other").is_file()
