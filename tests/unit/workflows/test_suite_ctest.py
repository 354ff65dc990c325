"""A suite's [ctest] table (issue #33): a CMake build's tests (`ctest --show-only=json-v1`) and its
compile_commands.json make one program per test executable a CMake target builds, its tests its runs; a
test that runs anything else is left out and warned about; every mistake is one line at its line, exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from porter.errors import UsageError
from porter.files import InputWarning
from porter.workflows.suite_file import load_suite

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "cmake_tests"
DB = FIXTURE / "cmake-build" / "compile_commands.json"
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"

SUITE = f"""root = "{FIXTURE}"

[defaults]
toolchains = "cpu-runtime"
timeout = 900

[ctest]
tests = "cmake-build/ctest.json"
compile_commands = "cmake-build/compile_commands.json"
source = "project"
"""
CTEST_LINE = 7


def _suite(folder: Path, text: str) -> Path:
    path = folder / "s.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(folder: Path, text: str) -> UsageError:
    path = _suite(folder, text)
    with pytest.raises(UsageError) as caught:
        load_suite(path)
    message = str(caught.value)
    assert caught.value.exit_code == 2 and message.startswith(f"{path}:") and "\n" not in message, message
    return caught.value


def _ctest(*tests: dict[str, Any]) -> str:
    """A ctest --show-only=json-v1 document holding `tests`."""
    return json.dumps({"kind": "ctestInfo", "version": {"major": 1, "minor": 0}, "tests": list(tests)})


def _build(tmp_path: Path, *tests: dict[str, Any]) -> Path:
    """A copy of the fixture whose ctest.json holds `tests`; its suite file's path."""
    shutil.copytree(FIXTURE, tmp_path / "f")
    (tmp_path / "f" / "cmake-build" / "ctest.json").write_text(_ctest(*tests))
    return _suite(tmp_path, SUITE.replace(str(FIXTURE), str(tmp_path / "f")))


def test_each_test_executable_of_a_target_is_a_program_with_its_tests_as_runs(tmp_path: Path) -> None:
    path = _suite(tmp_path, SUITE)
    with pytest.warns(InputWarning) as warned:
        suite = load_suite(path)
    bump, warp = suite.programs
    assert (bump.name, bump.line, warp.name, warp.line) == ("bump", CTEST_LINE, "warp_sum", CTEST_LINE)
    assert bump.paths == (str(DB), str(FIXTURE / "project")) == warp.paths
    assert bump.runs == ("100", "") and warp.runs == ("",)  # bump_small, bump_default; warp_sum
    assert (bump.cmake_target, warp.cmake_target) == ("bump", "warp_sum")
    assert (bump.toolchains, bump.timeout) == (("cpu-runtime",), 900.0)  # [defaults] apply
    args = bump.port_args()
    assert args[:2] == [str(DB), str(FIXTURE / "project")]
    assert args[args.index("--cmake-target") + 1] == "bump"
    assert [a for a in args if a.startswith("--run=")] == ["--run=100", "--run="]
    # the script test: left out, listed, and warned about at the [ctest] line
    assert len(suite.left_out) == 1 and suite.left_out[0].startswith(
        "'check_format' left out: it runs '/usr/bin/sh'"
    )
    assert [str(w.message) for w in warned] == [f"{path}:{CTEST_LINE}: [ctest] test {suite.left_out[0]}"]


def test_the_committed_fixture_suite_reads_the_same() -> None:
    with pytest.warns(InputWarning):
        suite = load_suite(FIXTURE / "suite.toml")
    assert [(p.name, p.runs) for p in suite.programs] == [("bump", ("100", "")), ("warp_sum", ("",))]


def test_only_keeps_the_tests_named_and_ctest_takes_entry_keys_over_defaults(tmp_path: Path) -> None:
    text = SUITE + 'only = ["^bump_s", "nothing"]\ntargets = "hip"\nrun_timeout = 20\n'
    suite = load_suite(_suite(tmp_path, text))  # the script test is not kept: nothing to warn about
    (bump,) = suite.programs
    assert bump.runs == ("100",) and bump.targets == ("hip",) and bump.run_timeout == 20.0
    assert suite.left_out == ()


def test_runs_are_the_arguments_shell_quoted(tmp_path: Path) -> None:
    exe = "/home/dev/cmake-build/bump"
    path = _build(
        tmp_path,
        {"name": "words", "command": [exe, "two words", "it's"]},
        {"name": "again", "command": [exe, "two words", "it's"]},  # the same run once
        {"name": "a_path", "command": [exe, "/home/dev/data/in.txt", "5"]},  # would be read as the executable
        {"name": "a_unit", "command": [exe, "main"]},  # a unit's name: the same
        {"name": "windows", "command": ["C:\\b\\warp_sum.exe", "-n", "3"]},
        {"name": "off", "command": [exe], "properties": [{"name": "DISABLED", "value": True}]},
        {"name": "unbuilt", "properties": [{"name": "WORKING_DIRECTORY", "value": "/home/dev"}]},
        {"name": "cmake_e", "command": ["/usr/bin/cmake", "-E", "echo", "hi"]},
    )
    with pytest.warns(InputWarning):
        suite = load_suite(path)
    bump, warp = suite.programs
    assert bump.runs == (
        "'two words' 'it'\"'\"'s'",
        "./bump /home/dev/data/in.txt 5",
        "./bump main",
    )
    assert warp.runs == ("-n 3",)
    why = dict(w.split(" left out: ", 1) for w in suite.left_out)
    assert set(why) == {"'off'", "'unbuilt'", "'cmake_e'"}
    assert (
        "disabled" in why["'off'"]
        and "not built" in why["'unbuilt'"]
        and "/usr/bin/cmake" in why["'cmake_e'"]
    )


def test_programs_and_ctest_together_and_a_name_clash(tmp_path: Path) -> None:
    text = SUITE + f'\n[programs.warp]\npath = "{PROGRAMS / "warp_sum"}"\n'
    with pytest.warns(InputWarning):
        suite = load_suite(_suite(tmp_path, text))
    assert [p.name for p in suite.programs] == ["warp", "bump", "warp_sum"]
    err = _error(tmp_path, SUITE + f'\n[programs.bump]\npath = "{PROGRAMS / "argv_size"}"\n')
    clash = "program 'bump' is named twice: [programs.bump] and a test executable of [ctest]"
    assert err.line == 12 and clash in str(err), str(err)
    err = _error(tmp_path, SUITE + f'\n[programs.BUMP]\npath = "{PROGRAMS / "argv_size"}"\n')
    assert err.line == CTEST_LINE and "differ only in case" in str(err)


def test_an_entry_may_name_a_cmake_target_of_its_compile_commands(tmp_path: Path) -> None:
    entry = f'[programs.one]\npath = ["{DB}", "{FIXTURE / "project"}"]\ncmake_target = "warp_sum"\n'
    (one,) = load_suite(_suite(tmp_path, entry)).programs
    assert one.cmake_target == "warp_sum" and one.port_args()[-2:] == ["--cmake-target", "warp_sum"]
    err = _error(tmp_path, entry.replace('"warp_sum"', '"nope"'))
    assert err.line == 3 and "no unit of" in str(err) and "(its targets: bump, warp_sum)" in str(err)
    err = _error(tmp_path, f'[programs.one]\npath = "{PROGRAMS / "warp_sum"}"\ncmake_target = "x"\n')
    assert err.line == 3 and "its `path` names none" in str(err)
    err = _error(tmp_path, entry.replace('"warp_sum"', "3"))
    assert err.line == 3 and "`cmake_target` must be a CMake target" in str(err)


@pytest.mark.parametrize(
    ("edit", "line", "words"),
    [
        (("source = ", "sauce = "), 10, "unknown key 'sauce' in [ctest]"),
        (("source = ", 'runs = ["1"]\nsource = '), 10, "`runs` of a [ctest] program comes from its tests"),
        (("tests = ", "# tests = "), CTEST_LINE, "[ctest] has no `tests`"),
        (
            ('"cmake-build/ctest.json"', '"cmake-build/none.json"'),
            8,
            "tests 'cmake-build/none.json' is not a file",
        ),
        (('"cmake-build/ctest.json"', "4"), 8, "`tests` must be the saved output"),
        (('"cmake-build/ctest.json"', '"project/CMakeLists.txt"'), 8, "not JSON"),
        (('"cmake-build/ctest.json"', '"cmake-build/compile_commands.json"'), 8, "not the output of `ctest"),
        (
            ('"cmake-build/compile_commands.json"', '"cmake-build/ctest.json"'),
            9,
            "must be named compile_commands",
        ),
        (('"cmake-build/compile_commands.json"', '"cmake-build/cc.json"'), 9, "is not a file"),
        (('source = "project"', 'source = "nope"'), 10, "source 'nope' is not a folder"),
        (('source = "project"', ""), CTEST_LINE, "lies outside"),  # the units are not in cmake-build/
        (('source = "project"', 'source = "project"\nonly = "(["'), 11, "is not a regular expression"),
        (
            ('source = "project"', 'source = "project"\nonly = ["^zzz"]'),
            11,
            "`only` keeps none of the 4 tests",
        ),
        (('source = "project"', 'source = "project"\nonly = [1]'), 11, "`only` must be a list of regular"),
        (('source = "project"', 'source = "project"\ntargets = "cuda"'), 11, "unknown target(s) cuda"),
        (("timeout = 900", "timeout = -1"), 5, "`timeout` must be seconds"),  # from [defaults]: its line
        (("[ctest]", "[[ctest]]"), CTEST_LINE, "`ctest` must be a table"),
    ],
)
def test_each_mistake_in_ctest_is_named_at_its_line(
    tmp_path: Path, edit: tuple[str, str], line: int, words: str
) -> None:
    err = _error(tmp_path, SUITE.replace(*edit, 1))
    assert err.line == line and words in str(err), str(err)


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ("[1, 2]", "not the output of `ctest --show-only=json-v1`"),
        (json.dumps({"kind": "ctestInfo", "version": {"major": 2}, "tests": []}), "version 1"),
        (_ctest({"command": ["x"]}), "test 1 has no name"),
        (_ctest({"name": "t", "command": "bump 1"}), "test 't': its command is not a list of strings"),
        (_ctest({"name": "t", "properties": {}}), "test 't': its properties are not a list"),
        (_ctest({"name": "t", "command": ["/usr/bin/sh"]}), "none of the 1 tests"),
        ("\xff", "not UTF-8"),
    ],
)
def test_a_bad_ctest_list_is_named_at_the_tests_line(tmp_path: Path, document: str, words: str) -> None:
    path = _build(tmp_path)
    (tmp_path / "f" / "cmake-build" / "ctest.json").write_bytes(document.encode("latin-1"))
    with pytest.raises(UsageError) as caught:
        load_suite(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:") and "\n" not in message and words in message, message
    assert caught.value.line == (CTEST_LINE if "none of" in words else 8)


def test_a_bad_compile_commands_is_named_at_its_line(tmp_path: Path) -> None:
    path = _build(tmp_path, {"name": "t", "command": ["/x/bump"]})
    (tmp_path / "f" / "cmake-build" / "compile_commands.json").write_text("{not json")
    with pytest.raises(UsageError) as caught:
        load_suite(path)
    assert caught.value.line == 9 and "[ctest] compile_commands: " in str(caught.value)


@pytest.mark.integration
@pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ctest") and shutil.which("c++")),
    reason="cmake, ctest or a C++ compiler is not installed (Debian: apt-get install cmake g++)",
)
def test_the_files_cmake_and_ctest_write_make_the_suite(tmp_path: Path) -> None:
    """The real thing: a tiny CMake project (C++ units: no CUDA needed for the files), configured with
    CMAKE_EXPORT_COMPILE_COMMANDS, built, and its tests listed by ctest --show-only=json-v1."""
    src, build = tmp_path / "proj", tmp_path / "proj" / "build"
    (src / "tools").mkdir(parents=True)
    (src / "vecadd.cpp").write_text("int main(int argc, char** argv) { return argc > 3; }\n")
    (src / "tools" / "sum.cpp").write_text("int main() { return N - 8; }\n")
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(demo CXX)\nenable_testing()\n"
        "add_executable(vecadd vecadd.cpp)\nadd_subdirectory(tools)\n"
        "add_test(NAME vecadd_small COMMAND vecadd 16)\n"
        'add_test(NAME vecadd_words COMMAND vecadd 1024 "two words")\n'
        "add_test(NAME script COMMAND ${CMAKE_COMMAND} -E echo hi)\n"
    )
    (src / "tools" / "CMakeLists.txt").write_text(
        "add_executable(sum.x sum.cpp)\ntarget_compile_definitions(sum.x PRIVATE N=8)\n"
        "add_test(NAME sum_default COMMAND sum.x)\n"
    )

    def run(*argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("cmake", "-S", str(src), "-B", str(build), "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    run("cmake", "--build", str(build))
    (build / "ctest.json").write_text(run("ctest", "--test-dir", str(build), "--show-only=json-v1"))
    path = _suite(
        tmp_path,
        '[ctest]\ntests = "proj/build/ctest.json"\ncompile_commands = "proj/build/compile_commands.json"\n'
        'source = "proj"\n',
    )
    with pytest.warns(InputWarning, match="'script' left out"):
        suite = load_suite(path)
    assert [(p.name, p.runs, p.cmake_target) for p in suite.programs] == [
        ("vecadd", ("16", "1024 'two words'"), "vecadd"),
        ("sum.x", ("",), "sum.x"),
    ]
    from porter.program import discover

    program = discover([build / "compile_commands.json", src], cmake_target="sum.x")
    assert [str(u.rel) for u in program.units] == ["tools/sum.cpp"] and program.defines == ("N=8",)
