"""The project's habits hold: CI runs exactly the README's test command (lint, format, types, then the
tests, stopping at the first failure), markers are registered and strict, mypy sees `backends/` under its
import name, and pre-commit runs the venv's own tools."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def readme_test_command() -> str:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    commands = [b.strip() for b in blocks if "pytest" in b]
    assert len(commands) == 1, "the README has one test command"
    return commands[0]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    assert readme_test_command() in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_test_command_lints_formats_and_type_checks_before_the_tests_and_stops_at_a_failure() -> None:
    command = readme_test_command()
    assert ";" not in command and "||" not in command and "\n" not in command
    steps = [step.strip() for step in command.split("&&")]
    assert steps[-4:-1] == [".venv/bin/ruff check .", ".venv/bin/ruff format --check .", ".venv/bin/mypy"]
    assert steps[-1].startswith(".venv/bin/python -m pytest -q")
    assert " -m " not in steps[-1].removeprefix(".venv/bin/python -m pytest"), "every tier runs in CI"


def test_the_dev_extra_installs_every_tool_the_command_runs() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    dev = {re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0] for req in extras["dev"]}
    assert {"pytest", "ruff", "mypy"} <= dev
    if " -n " in readme_test_command():  # workers: pytest-xdist
        assert "pytest-xdist" in dev
    assert any("dev" in req for req in extras["all"])


def test_markers_are_strict_and_both_tiers_registered(request: pytest.FixtureRequest) -> None:
    ini = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in ini["addopts"].split()
    assert request.config.getoption("strict_markers"), "this run refuses unknown markers"
    assert {"gpu", "integration"} <= {marker.split(":")[0].strip() for marker in ini["markers"]}


def test_mypy_checks_porter_and_backends_under_their_import_names() -> None:
    config = PYPROJECT["tool"]["mypy"]
    assert config["python_version"] == "3.11"
    assert "porter" in config["files"]
    for link, folder in ((".mypy/porter/backends", "backends"), (".mypy/porter/grammars", "grammars")):
        assert link in config["files"]
        assert (ROOT / link).resolve() == (ROOT / folder).resolve(), f"{link} links to {folder}/"
    assert (ROOT / ".mypy" / "porter" / "__init__.pyi").is_file()


def test_pre_commit_runs_ruff_ruff_format_and_mypy_from_the_venv() -> None:
    text = (ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    assert re.findall(r"- id: (\S+)", text) == ["ruff", "ruff-format", "mypy"]
    entries = re.findall(r"entry: (\S+)", text)
    assert entries == [".venv/bin/ruff", ".venv/bin/ruff", ".venv/bin/mypy"]


def test_gpu_tests_count_as_integration_tests() -> None:
    spec = importlib.util.spec_from_file_location("tests_root_conftest", ROOT / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    class Item:
        def __init__(self, *marks: str) -> None:
            self.keywords: dict[str, object] = dict.fromkeys(marks, True)

        def add_marker(self, mark: pytest.MarkDecorator) -> None:
            self.keywords[mark.name] = mark

    gpu, plain = Item("gpu"), Item("slow")
    conftest.mark_tiers([gpu, plain])
    assert "integration" in gpu.keywords
    assert "integration" not in plain.keywords
