"""No code outside ``backends/`` branches on a device's ``kind``: it asks the device's role
(``times``, ``checks``, ``native``, ``host_cores``, ``size_class``), which the backends define."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from porter.backends import Device

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"gpu", "cpu", "emulator", "checker"}


def _kind_branches(path: Path) -> list[str]:
    return _kind_branches_at(path, ROOT)


def _kind_branches_at(path: Path, root: Path) -> list[str]:
    """`x.kind == "gpu"`, `x.kind in ("gpu", "cpu")` and the like in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        reads_kind = any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides)
        literals = {
            c.value
            for s in sides
            for c in ([s] if isinstance(s, ast.Constant) else getattr(s, "elts", []))
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
        if reads_kind and literals & KINDS:
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_branch_on_a_device_kind_outside_backends() -> None:
    found = [hit for p in sorted((ROOT / "porter").rglob("*.py")) for hit in _kind_branches(p)]
    assert not found, "ask the device's role instead: " + ", ".join(found)


def test_the_check_finds_a_branch_on_kind(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('def f(d):\n    return d.kind in ("gpu", "cpu") or d.kind != "checker"\n')
    found = [hit.rsplit(":", 1)[1] for hit in _kind_branches_at(planted, tmp_path)]
    assert found == ["2", "2"]


@pytest.mark.parametrize(
    ("kind", "role", "times", "checks", "native", "size_class"),
    [
        ("gpu", "times", True, False, True, "gpu"),
        ("cpu", "runs", False, False, True, "cpu"),
        ("emulator", "runs", False, False, False, "cpu"),
        ("checker", "checks", False, True, False, "cpu"),
    ],
)
def test_each_kind_has_its_role(
    kind: str, role: str, times: bool, checks: bool, native: bool, size_class: str
) -> None:
    d = Device("b", "n", "a", kind)
    assert (d.role, d.times, d.checks, d.native, d.size_class) == (role, times, checks, native, size_class)
    assert d.host_cores == (d.facts.multiprocessors if kind == "cpu" else None)


# The targets' names, which only a target's own folder may compare against (the source language, "cuda",
# is what a file is written in: checking it is allowed).
TARGET_NAMES = {"hip", "opencl", "cpu"}


def _name_branches_at(path: Path, root: Path) -> list[str]:
    """`x == "hip"`, `t in ("hip", "opencl")` and the like in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        literals = {
            c.value
            for s in [node.left, *node.comparators]
            for c in ([s] if isinstance(s, ast.Constant) else getattr(s, "elts", []))
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
        kind = any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in [node.left, *node.comparators])
        if literals & TARGET_NAMES and not kind:  # a device's kind ("cpu") is the roles' business
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_branch_on_a_target_name_outside_its_folder() -> None:
    """porter/ and the shared modules of backends/ ask the registry (``runs``, ``single_source``, a
    Backend's abilities), never compare a target's name."""
    shared = sorted((ROOT / "backends").glob("*.py"))
    found = [
        hit for p in [*sorted((ROOT / "porter").rglob("*.py")), *shared] for hit in _name_branches_at(p, ROOT)
    ]
    assert not found, "ask the registry instead of naming a target: " + ", ".join(found)


def test_the_check_finds_a_branch_on_a_target_name(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('def f(t, lang):\n    return t in ("hip",) or lang == "cuda" or t != "opencl"\n')
    assert [hit.rsplit(":", 1)[1] for hit in _name_branches_at(planted, tmp_path)] == ["2", "2"]
