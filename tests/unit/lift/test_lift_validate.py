"""porter.lift.validate: which of a function's argument sets a simulator (Oclgrind) runs."""

from __future__ import annotations

import numpy as np

from porter.lift.validate import smallest


def test_the_checker_runs_the_set_with_the_fewest_elements_held_back_or_not() -> None:
    visible = ("size n=600", {"x": np.zeros(600), "n": 600}, None)
    larger = ("hidden size 1", {"x": np.zeros(1203), "n": 1203}, None)
    fewer = ("hidden size 2", {"x": np.zeros(595), "n": 595}, None)
    assert smallest([visible, larger, fewer])[0] == "hidden size 2"
    grid = ("size", {"a": np.zeros((4, 5)), "b": np.zeros(30)}, None)  # 50 elements in all
    assert smallest([("flat", {"a": np.zeros(51)}, None), grid])[0] == "size"
    assert smallest([visible, ("same", {"x": np.zeros(600), "n": 7}, None)])[0] == "size n=600"  # the first
