"""porter.harness.replay / checks: an original whose stores race (two blocks storing to one element in no
fixed order, as Rodinia's myocyte `kernel` does) is judged by what its own runs keep -- every other element as
usual, and at the racing ones a value one of its runs left there (checks.Raced).

settle() is given the original's runs by a stand-in (what a GPU's runs would show: which block stored last
varies from run to run), so what races is chosen by the test; the ports are then judged for real on the
CPU emulator against the settled replay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes.replays import by_hand as _capture
from fakes.replays import cpu_emulators as _cpu
from fakes.replays import judge as _judge

from porter.harness import replay
from porter.harness.checks import Raced, Reject, check_deterministic, check_matches_reference
from porter.harness.trial import Instance
from porter.model import ArgSpec, KernelSpec, Role, Status

# block 0 stores 7 into out[0] and block 1 stores 9 there: which one lands is the order the blocks ran in;
# every other element is each thread's own
RACE = """__global__ void race(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i > 0) out[i] = in[i] * 2.0f;
    if (threadIdx.x == 0) out[0] = blockIdx.x == 0 ? 7.0f : 9.0f;
}
"""
N = 256


class _Runs:
    """The original's runs, as given: ``outputs_of`` hands out `first` on the first call and `more` on the
    next (settle() asks again when a racing element's value was left by only one run)."""

    def __init__(
        self, first: list[dict[int, np.ndarray]], more: list[dict[int, np.ndarray]] | None = None
    ) -> None:
        self.calls: list[int] = []
        self.first, self.more = first, more if more is not None else first

    def outputs_of(self, spec, insts, runs=1, every_device=False):  # noqa: ANN001, ANN201 - as Original's
        self.calls.append(runs)
        return [self.first if len(self.calls) == 1 else self.more for _ in insts]


def _race_replay(tmp_path: Path) -> tuple[replay.Replay, np.ndarray, np.ndarray]:
    x = np.linspace(1.0, 2.0, N, dtype=np.float32)
    before = np.zeros(N, np.float32)
    after = before.copy()
    after[1:] = x[1:] * 2.0
    after[0] = 9.0  # block 1 stored last in the captured run
    launches = _capture(
        tmp_path / "cap",
        "race",
        [{"grid": 2, "block": 128, "args": [("ptr", x, x), ("ptr", before, after), ("int", N)]}],
    )
    rep = replay.build("race", launches, written={1})
    assert rep.spec is not None, rep.problem
    return rep, x, after


def _outs(x: np.ndarray, after: np.ndarray, first: float) -> dict[int, np.ndarray]:
    out = after.copy()
    out[0] = first
    return {0: x, 1: out}


@pytest.mark.integration
def test_racing_stores_are_judged_by_the_values_the_originals_runs_left(tmp_path: Path) -> None:
    _cpu()
    rep, x, after = _race_replay(tmp_path)
    # the capture and four runs: 9, 7, 9, 7 -- each value left by at least two of them
    runs = _Runs([_outs(x, after, v) for v in (9.0, 7.0, 9.0, 7.0)])
    settled = replay.settle(rep, runs)  # type: ignore[arg-type]
    assert runs.calls == [2], runs.calls  # enough runs already: none taken again
    (race,) = settled.unordered
    assert isinstance(race, Raced) and race.member == 1 and race.racing() == 1
    assert settled.compared == (
        "arg1 compared element by element except at the 1 element(s) its stores race on in the original "
        "(arg1[0] left 7 or 9 at launch 1 of run 1), which hold one of the values the original's runs left there",
    )
    # the original itself on the emulator, and ports that store either value there
    for name, source in {
        "original": RACE,
        "block 0 last": RACE.replace("blockIdx.x == 0 ? 7.0f : 9.0f", "7.0f"),
        "block 1 last": RACE.replace("blockIdx.x == 0 ? 7.0f : 9.0f", "9.0f"),
    }.items():
        verdict = _judge(source, "race", settled, "original" if name == "original" else "user")
        assert verdict.status is Status.VALIDATED, (name, verdict.reason)
        assert "its stores race on in the original" in verdict.reason, verdict.reason
        assert any(c.startswith("compared:arg1 compared element by element except") for c in verdict.checks)
    # a value no run of the original left at the racing element, and a wrong element where nothing races
    planted = {
        "stores 8 where 7 or 9 race": RACE.replace("blockIdx.x == 0 ? 7.0f : 9.0f", "8.0f"),
        "a wrong element elsewhere": RACE.replace("in[i] * 2.0f", "(i == 5 ? 0.0f : in[i] * 2.0f)"),
    }
    for what, source in planted.items():
        verdict = _judge(source, "race", settled)
        assert verdict.status is Status.FAILED, (what, verdict.reason)
        assert "its stores race on in the original" in verdict.reason, (what, verdict.reason)
    assert "arg1[0] = 8, expected 9" in _judge(planted["stores 8 where 7 or 9 race"], "race", settled).reason


def test_a_value_left_by_one_run_only_takes_more_runs_and_is_refused_if_it_stays_alone(
    tmp_path: Path,
) -> None:
    spec = KernelSpec(
        "race", (ArgSpec("in", "float32", Role.IN, shape=("n",)), ArgSpec("out", "float32", Role.INOUT, shape=("n",))),
        ("1",), ("1",),
    )  # fmt: skip
    x, after = np.ones(N, np.float32), np.full(N, 2.0, np.float32)
    inst = Instance.given(spec, {}, "launch 1 of run 1", [x, np.zeros(N, np.float32)])
    after[0] = 9.0
    rep = replay.Replay("race", spec, (inst,), {inst.label: [x, after]})
    # the capture 9, the runs 7 and 7: 9 seen once -- more runs, which leave 9 twice more: it holds
    runs = _Runs([_outs(x, after, 7.0)] * 2, [_outs(x, after, v) for v in (9.0, 7.0, 9.0)])
    settled = replay.settle(rep, runs)  # type: ignore[arg-type]
    assert runs.calls == [2, replay.RACE_RUNS], runs.calls
    assert isinstance(settled.unordered[0], Raced), settled.unsettled
    # 9 stays alone (the more runs leave 7 and 5): the set may lack values, so no comparison is made
    runs = _Runs([_outs(x, after, 7.0)] * 2, [_outs(x, after, v) for v in (7.0, 5.0, 5.0)])
    refused = replay.settle(rep, runs)  # type: ignore[arg-type]
    assert not refused.unordered
    assert refused.unsettled.endswith(
        "or stores that race (out[0] held 9 in only one of the original's 6 runs at launch 1 of run 1)"
    ), refused.unsettled
    # more than a tenth of the output differs between the runs: not a race on a few elements
    spread = after.copy()
    spread[: N // 5] = 3.0
    wide = replay.settle(rep, _Runs([{0: x, 1: spread}] * 2))  # type: ignore[arg-type]
    assert not wide.unordered and "more than a tenth" in wide.unsettled, wide.unsettled


def test_a_ports_two_runs_may_differ_only_where_the_original_races() -> None:
    spec = KernelSpec("k", (ArgSpec("out", "int32", Role.INOUT, shape=("n",)),), ("1",), ("1",))
    inst = Instance.given(spec, {}, "launch 1 of run 1", [np.zeros(8, np.int32)])
    rows = np.array([[3, 40], [5, 40], [3, 41]], np.int32)  # elements 2 and 6 race: 3 or 5, 40 or 41
    race = Raced(0, {inst.label: (np.array([2, 6]), rows)}, "out[2] left 3 or 5")
    base = np.arange(8, dtype=np.int32)
    a, b = base.copy(), base.copy()
    a[[2, 6]], b[[2, 6]] = (3, 40), (5, 41)
    check_deterministic(spec, inst, {0: a}, {0: b}, [0], (race,))
    stats: dict[str, float] = {}
    check_matches_reference(spec, inst, {0: b}, {0: a}, stats, (race,))
    # a racing element holding a value no run left, and a difference where nothing races
    for bad in ({2: 4}, {1: 9}):
        c = b.copy()
        for j, v in bad.items():
            c[j] = v
        with pytest.raises(Reject) as err:
            check_deterministic(spec, inst, {0: a}, {0: c}, [0], (race,))
        assert "its stores race on in the original" in err.value.reason, err.value.reason
        with pytest.raises(Reject):
            check_matches_reference(spec, inst, {0: c}, {0: a}, stats, (race,))
    # another launch: nothing races there, so element by element
    other = Instance.given(spec, {}, "launch 2 of run 1", [np.zeros(8, np.int32)])
    with pytest.raises(Reject):
        check_deterministic(spec, other, {0: a}, {0: b}, [0], (race,))
