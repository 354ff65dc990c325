"""A suite's programs start longest first by what earlier runs here took (issue #33): on the GPU machine the
corpus's longest programs finished alone at the end of the run.  The ports are a stand-in for ``porter port``
that takes as long as its program's name says and records when it began."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from porter.workflows.suite import DURATIONS, STATE_DIR, SuiteOptions, run_suite
from porter.workflows.suite_file import load_suite

PORT = """import json, os, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
began = time.time()
time.sleep({"short": 0.1, "long": 0.9, "middle": 0.4}[os.path.basename(out)])
with open(os.path.join(out, "ran.json"), "w") as fh:
    json.dump({"began": began}, fh)
"""


def _began(out: Path, names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: json.loads((out / n / "ran.json").read_text())["began"])


def test_a_second_run_starts_the_programs_longest_first(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    names = ["short", "long", "middle"]
    text = 'root = "src"\n' + "".join(f'\n[programs.{n}]\npath = "."\nruns = [""]\n' for n in names)
    (tmp_path / "suite.toml").write_text(text, encoding="utf-8")
    (tmp_path / "port.py").write_text(PORT, encoding="utf-8")
    suite = load_suite(tmp_path / "suite.toml")
    out = tmp_path / "out"
    options = SuiteOptions(out, jobs=1, command=(sys.executable, str(tmp_path / "port.py")))
    run_suite(suite, options)
    assert _began(out, names) == names  # a first run: the suite's order
    durations = json.loads((out / STATE_DIR / DURATIONS).read_text())
    assert sorted(durations) == sorted(names) and durations["long"] > durations["middle"] > durations["short"]
    run_suite(suite, options)  # (the stand-in leaves no report: nothing is resumed)
    assert _began(out, names) == ["long", "middle", "short"]
    # a durations file that is not what porter wrote changes nothing but the order, and garbage not even that
    (out / STATE_DIR / DURATIONS).write_text("not json", encoding="utf-8")
    run_suite(suite, options)
    assert _began(out, names) == names


def test_an_interrupted_programs_time_is_a_lower_bound(tmp_path: Path) -> None:
    """Stopped at 540 s, a program took at least that: kept where it is longer than what was known, never
    shortening it; a program that ran to its end replaces what was known."""
    from porter.workflows.suite import SuiteHooks, _Runner

    (tmp_path / "src").mkdir()
    (tmp_path / "suite.toml").write_text(
        'root = "src"\n[programs.p]\npath = "."\nruns = [""]\n', encoding="utf-8"
    )
    out = tmp_path / "out"
    (out / STATE_DIR).mkdir(parents=True)
    runner = _Runner(load_suite(tmp_path / "suite.toml"), SuiteOptions(out, jobs=1), SuiteHooks(), out)
    runner.keep_duration("p", 600.0, lower_bound=False)
    runner.keep_duration("p", 540.0, lower_bound=True)
    assert runner.known_durations() == {"p": 600.0}
    runner.keep_duration("p", 700.0, lower_bound=True)
    assert runner.known_durations() == {"p": 700.0}
    runner.keep_duration("p", 150.0, lower_bound=False)
    assert runner.known_durations() == {"p": 150.0}
