"""plain_console's width: COLUMNS when set, the terminal's on a terminal, and unbounded into a pipe or a
file, where rich would cut table cells at 80 columns."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from porter.report import PIPED_WIDTH, plain_console

NAME = "a_very_long_kernel_name_that_describes_exactly_what_it_computes_" + "x" * 60


def _table() -> Table:
    table = Table()
    for column in ("kernel", "target", "device", "status"):
        table.add_column(column, no_wrap=True)
    table.add_row(NAME, "opencl", "opencl:pthread-skylake-avx512-AMD EPYC", "validated")
    return table


def test_into_a_pipe_nothing_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = plain_console(file=out)
    assert console.width == PIPED_WIDTH
    console.print(_table())
    console.print(f"{NAME} opencl: failed: " + "why " * 40)
    lines = out.getvalue().splitlines()
    assert any(NAME in ln and "validated" in ln and "AMD EPYC" in ln for ln in lines), lines
    assert lines[-1].startswith(NAME) and lines[-1].rstrip().endswith("why")  # one line, not wrapped
    assert max(len(ln) for ln in lines) < 500  # nothing padded to the console's width


def test_columns_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out = io.StringIO()
    console = plain_console(file=out)
    assert console.width == 200
    console.print(_table())
    assert NAME in out.getvalue()
    monkeypatch.setenv("COLUMNS", "60")
    assert plain_console(file=io.StringIO()).width == 60  # asked for: narrow it is


def test_an_explicit_width_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert plain_console(file=io.StringIO(), width=100).width == 100
