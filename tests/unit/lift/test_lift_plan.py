"""porter.lift.hostexpr.plan: a lifted function's launches made concrete for given arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from porter.lift.analyze import analyze
from porter.lift.hostexpr import plan
from porter.lift.inputs import default_sizes, draw, hidden_sizes, size_names

PATTERNS = Path(__file__).resolve().parents[3] / "samples" / "python" / "lift_patterns.py"


def _lifted(name: str):
    (f,) = analyze(str(PATTERNS), PATTERNS.read_text(), only=name).lifted
    return f


def test_a_time_loop_is_unrolled_and_its_swaps_alternate_the_buffers() -> None:
    f = _lifted("diffuse")
    args = draw(f, {"n": 40, "steps": 3}, seed=1)
    p = plan(f, args)
    stencil = p.kernels.index("diffuse_stencil1")
    firsts = [la.args[0] for la in p.launches if la.kernel == stencil]  # its first array argument
    assert firsts == ["u", "tmp", "u"]  # tmp[i] = f(u[...]) reads u first; then the two trade places
    assert set(p.results) == {"u", "tmp"}
    assert p.buffers["u"] is not args["u"]  # the caller's arrays are copied


def test_sizes_defaults_hidden_sizes_and_drawn_arguments() -> None:
    f = _lifted("byte_histogram")
    assert size_names(f) == ["data.shape[0]", "counts.shape[0]"]
    sizes = default_sizes(f, {"counts.shape[0]": 16})
    assert sizes == {"data.shape[0]": 600, "counts.shape[0]": 16}
    assert all(h != sizes for h in hidden_sizes(sizes))
    args = draw(f, sizes, seed=3)
    assert args["data"].dtype == np.int32 and args["data"].min() >= 0 and args["data"].max() < 16
    assert args["counts"].shape == (16,)


def test_a_reduction_result_buffer_holds_the_initial_value() -> None:
    f = _lifted("peak")
    p = plan(f, draw(f, {"x.shape[0]": 100}, seed=2))
    assert p.returns == "scalar:__s_m" and p.buffers["__s_m"].tolist() == [-np.inf]
