"""Suite files (`porter port --suite`, issue #33): defaults under each entry, paths from `root`, and every
mistake a one-line error at the line of the key or table at fault (exit 2), before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.workflows.suite_file import SUITE_NAME, key_lines, load_suite

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = ROOT / "tests" / "fixtures" / "programs"

GOOD = f"""# three programs of the fixtures
root = "{PROGRAMS}"
ignore = ["gpu_runs"]

[defaults]
runs = [""]
timeout = 600
targets = "hip,opencl"

[programs.warp_sum]
path = "warp_sum"
gpu_runs = ["--n=1000000"]      # another tool's key, skipped

[programs.unity_types]
path = "unity_types"
runs = ["./prog",
        "-x --y=1"]
define = ["N=4"]
include = ["unity_types/kernel"]
timeout = 30
run_timeout = 5.5
targets = ["hip"]
toolchains = "cpu-runtime"
"""


def _suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(tmp_path: Path, text: str) -> UsageError:
    path = _suite(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_suite(path)
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith(f"{path}:"), str(caught.value)
    assert "\n" not in str(caught.value)
    return caught.value


def test_entries_take_the_defaults_and_their_paths_are_read_from_root(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path, GOOD))
    warp, unity = suite.programs
    assert (warp.name, warp.line, unity.line) == ("warp_sum", 10, 14)
    assert warp.paths == (str(PROGRAMS / "warp_sum"),) and warp.runs == ("",)
    assert (warp.timeout, warp.targets, warp.toolchains) == (600.0, ("hip", "opencl"), None)
    assert unity.runs == ("./prog", "-x --y=1") and unity.timeout == 30.0 and unity.targets == ("hip",)
    assert unity.include == (str(PROGRAMS / "unity_types" / "kernel"),)
    args = unity.port_args()
    assert args[:3] == [str(PROGRAMS / "unity_types"), "--to", "hip"]
    assert "--run=-x --y=1" in args  # a run beginning with "-" stays one argument of --run
    assert args[args.index("-D") + 1] == "N=4" and args[args.index("--timeout") + 1] == "5.5"
    assert args[args.index("--toolchains") + 1] == "cpu-runtime"


def test_a_folder_holding_suite_toml_is_its_suite(tmp_path: Path) -> None:
    (tmp_path / SUITE_NAME).write_text(GOOD, encoding="utf-8")
    assert [p.name for p in load_suite(tmp_path).programs] == ["warp_sum", "unity_types"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="holds no suite.toml"):
        load_suite(empty)


def test_a_path_that_does_not_exist_is_named_at_its_line(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD.replace('path = "unity_types"', 'path = "no_such_program"'))
    assert err.line == 15 and "'no_such_program' does not exist" in str(err)


def test_a_program_named_twice_is_named_at_its_second_table(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD + '\n[programs.warp_sum]\npath = "warp_sum"\n')
    assert err.line == 25 and "program 'warp_sum' is named twice" in str(err)


@pytest.mark.parametrize(
    ("edit", "line", "words"),
    [
        (("timeout = 30", "timeout = 30\ntimout = 5"), 21, "unknown key 'timout' in [programs.unity_types]"),
        (("timeout = 600", "timeout = 600\nretries = 2"), 8, "unknown key 'retries' in [defaults]"),
        (('ignore = ["gpu_runs"]', 'ignore = ["gpu_runs"]\njobs = 4'), 4, "unknown key 'jobs'"),
        (('ignore = ["gpu_runs"]', "ignore = []"), 12, "unknown key 'gpu_runs'"),
        (('path = "warp_sum"', 'paht = "warp_sum"'), 11, "unknown key 'paht'"),
    ],
)
def test_an_unknown_key_is_named_at_its_line(
    tmp_path: Path, edit: tuple[str, str], line: int, words: str
) -> None:
    err = _error(tmp_path, GOOD.replace(*edit, 1))
    assert err.line == line and words in str(err), str(err)


@pytest.mark.parametrize(
    ("edit", "line", "words"),
    [
        (("timeout = 30", 'timeout = "soon"'), 20, "`timeout` must be seconds"),
        (("timeout = 600", "timeout = 0"), 7, "`timeout` must be seconds"),  # from [defaults]: its line
        (('targets = ["hip"]', 'targets = ["cuda"]'), 22, "unknown target(s) cuda"),
        (('runs = [""]', "runs = [1]"), 6, "`runs` must be a list of argument strings"),
        (('include = ["unity_types/kernel"]', 'include = ["nope"]'), 19, "include 'nope' is not a folder"),
        (('path = "warp_sum"\n', ""), 10, "program 'warp_sum' has no `path`"),
        (("[programs.warp_sum]", "[programs.'warp sum']"), 10, "cannot be a folder name"),
        (("[programs.warp_sum]", "[programs.'summary.json']"), 10, "cannot be a folder name"),
        ((f'root = "{PROGRAMS}"', 'root = "/no/such/folder"'), 2, "`root`"),
    ],
)
def test_a_bad_value_is_named_at_its_line(
    tmp_path: Path, edit: tuple[str, str], line: int, words: str
) -> None:
    err = _error(tmp_path, GOOD.replace(*edit, 1))
    assert err.line == line and words in str(err), str(err)


def test_a_suite_without_programs_or_not_toml_is_refused(tmp_path: Path) -> None:
    assert "at least one [programs.NAME]" in str(_error(tmp_path, "[defaults]\nruns = []\n"))
    err = _error(tmp_path, "[programs.a]\npath = \n")
    assert err.line == 2 and "not a valid suite file" in str(err)


def test_key_lines_skip_what_multi_line_values_hold() -> None:
    text = 'a = 1\n[t."x.y"]\nruns = [\n  "k = 2",\n  "[not.a.table]",\n]\nb = """\nc = 3\n"""\nd = 4\n'
    lines = key_lines(text)
    assert lines == {
        ("a",): 1,
        ("t", "x.y"): 2,
        ("t", "x.y", "runs"): 3,
        ("t", "x.y", "b"): 7,
        ("t", "x.y", "d"): 10,
    }


def test_port_suite_refuses_a_bad_suite_before_anything_runs(tmp_path: Path) -> None:
    """Through the command line (in process): the suite file's line, exit 2, nothing written."""
    from typer.testing import CliRunner

    from porter.cli import app

    path = _suite(tmp_path, GOOD.replace("timeout = 30", "timeout = 30\ntimout = 5"))
    result = CliRunner().invoke(app, ["port", "--suite", str(path), "--out", str(tmp_path / "out")])
    assert isinstance(result.exception, UsageError), result.output
    assert str(result.exception).startswith(f"{path}:21: unknown key 'timout'")
    assert not (tmp_path / "out").exists()
    result = CliRunner().invoke(app, ["port", "--suite", str(path), str(PROGRAMS / "warp_sum")])
    assert isinstance(result.exception, UsageError) and "give no PATHS" in str(result.exception)
    result = CliRunner().invoke(app, ["port", "-j", "2", str(PROGRAMS / "warp_sum")])
    assert isinstance(result.exception, UsageError) and "goes with --suite" in str(result.exception)
