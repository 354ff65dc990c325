"""Fixtures of the workflow tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.workflows import program_plan


@pytest.fixture
def translated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The ``target:file name`` of every translation a program port actually makes, with a translation
    cache of the test's own (so nothing an earlier test translated is recalled)."""
    calls: list[str] = []
    real = program_plan._translate_job

    def counting(target, text, path, include_dirs, options, scanned=None):  # type: ignore[no-untyped-def]
        calls.append(f"{target}:{Path(path).name}")
        return real(target, text, path, include_dirs, options, scanned)

    monkeypatch.setattr(program_plan, "_translate_job", counting)
    monkeypatch.delenv("PORTER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return calls
