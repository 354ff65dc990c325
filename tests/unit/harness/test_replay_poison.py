"""porter.harness.replay: launches that changed nothing, run again on poisoned arrays, and originals
whose own runs put their outputs in another order (a compaction through atomicAdd).

Each capture here is written by hand, as docs/CAPTURE_FORMAT.md describes it, so what the program
"left" is chosen by the test: memory that already held the result, or a compaction's elements in an
order the emulator's runs do not repeat."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes.children import ChildJobs
from fakes.replays import by_hand as _capture
from fakes.replays import judge as _judge
from fakes.replays import original as _original

from porter import capture
from porter.harness import replay
from porter.harness.checks import Unordered, unordered_difference
from porter.model import ArgSpec, KernelSpec, Role, Status, Variant

ZERO = """__global__ void zero(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.0f;
}
"""


@pytest.mark.integration
def test_a_zero_fill_into_zeroed_memory_is_judged_on_poisoned_memory(tmp_path: Path) -> None:
    z = np.zeros(300, np.float32)
    launches = _capture(
        tmp_path / "cap", "zero", [{"grid": 3, "block": 128, "args": [("ptr", z, z), ("int", 300)]}]
    )
    # as before: without the original to ask, the launch proves nothing
    assert "changed any array" in replay.build("zero", launches).problem
    rep = replay.build("zero", launches, written={0}, original=_original(ZERO, "zero"))
    assert rep.spec is not None, rep.problem
    assert rep.spec.args[0].role is Role.INOUT and not rep.left_out
    (inst,) = rep.instances
    assert inst.label == "launch 1 of run 1 (poisoned)"
    assert not np.any(inst.values[0] == 0)  # the poisoned memory is not what the kernel writes
    assert np.array_equal(rep.recorded[inst.label][0], z)  # the original zeroed every element of it
    assert any("wrote 300 of 300 elements of arg0" in n for n in rep.spec.notes)
    good = _judge(ZERO, "zero", rep, "original")
    assert good.status is Status.VALIDATED and "poisoned" in good.reason, good.reason
    # a port that leaves the memory as it found it (zeroed, as captured) no longer passes
    idle = ZERO.replace("x[i] = 0.0f;", "(void)x;")
    bad = _judge(idle, "zero", rep)
    assert bad.status is Status.FAILED and bad.reason.startswith("matches-reference"), bad.reason
    half = ZERO.replace("if (i < n)", "if (i < n / 2)")
    assert _judge(half, "zero", rep).status is Status.FAILED


SQUARE = """__global__ void square(float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
"""


@pytest.mark.integration
def test_a_second_identical_launch_is_an_instance_of_its_own(tmp_path: Path) -> None:
    x = np.linspace(-2, 2, 200, dtype=np.float32)
    y0, y1 = np.zeros(200, np.float32), x * x
    launches = _capture(
        tmp_path / "cap",
        "square",
        [
            {"grid": 2, "block": 128, "args": [("ptr", x, x), ("ptr", y0, y1), ("int", 200)]},
            {"grid": 2, "block": 128, "args": [("ptr", x, x), ("ptr", y1, y1), ("int", 200)]},  # again
        ],
    )
    # x is declared writable but only read: the scan says which arguments the kernel stores through
    rep = replay.build("square", launches, written={1}, original=_original(SQUARE, "square"))
    assert rep.spec is not None and [i.label for i in rep.instances] == [
        "launch 1 of run 1",
        "launch 2 of run 1 (poisoned)",
    ]
    assert rep.spec.args[0].role is Role.IN and rep.spec.args[1].role is Role.INOUT
    second = rep.instances[1]
    assert np.array_equal(second.values[0], x)  # only the written array is poisoned
    assert not np.array_equal(second.values[1], y1)
    assert _judge(SQUARE, "square", rep, "original").status is Status.VALIDATED
    cube = SQUARE.replace("x[i] * x[i]", "x[i] * x[i] * x[i]")
    assert _judge(cube, "square", rep).status is Status.FAILED


@pytest.mark.integration
def test_launches_that_changed_nothing_are_run_poisoned_in_one_child(
    tmp_path: Path, child_jobs: ChildJobs
) -> None:
    """The launches after the first write what was already there: the original runs all of them poisoned
    in one child (a job carrying the others, Job.sets), and each is an instance of its own."""
    x = np.linspace(-2, 2, 200, dtype=np.float32)
    y0, y1 = np.zeros(200, np.float32), x * x
    again = {"grid": 2, "block": 128, "args": [("ptr", x, x), ("ptr", y1, y1), ("int", 200)]}
    first = {"grid": 2, "block": 128, "args": [("ptr", x, x), ("ptr", y0, y1), ("int", 200)]}
    launches = _capture(tmp_path / "cap", "square", [first, again, again])
    rep = replay.build("square", launches, written={1}, original=_original(SQUARE, "square"))
    assert child_jobs.sets == [1]  # the two poisoned launches, one child
    assert rep.spec is not None and [i.label for i in rep.instances] == [
        "launch 1 of run 1",
        "launch 2 of run 1 (poisoned)",
        "launch 3 of run 1 (poisoned)",
    ]
    for inst in rep.instances[1:]:
        assert np.array_equal(rep.recorded[inst.label][1], y1)  # what the original wrote over the poison


CLAMP = """__global__ void clamp01(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fminf(fmaxf(x[i], 0.0f), 1.0f);
}
"""


@pytest.mark.integration
def test_an_idempotent_in_place_clamp_is_judged_where_it_clamps(tmp_path: Path) -> None:
    x = np.linspace(0.05, 0.95, 256, dtype=np.float32)  # already within [0, 1]: the clamp changes nothing
    launches = _capture(
        tmp_path / "cap", "clamp01", [{"grid": 2, "block": 128, "args": [("ptr", x, x), ("int", 256)]}]
    )
    rep = replay.build("clamp01", launches, written={0}, original=_original(CLAMP, "clamp01"))
    assert rep.spec is not None, rep.problem
    expected = rep.recorded[rep.instances[0].label][0]
    assert np.any(expected == 0.0) and np.any(expected == 1.0)  # the poisoned values were clamped
    assert _judge(CLAMP, "clamp01", rep, "original").status is Status.VALIDATED
    # ports that agree with it on the captured data (every value already in range) and not elsewhere
    for wrong in ("fminf(fmaxf(x[i], 0.0f), 2.0f)", "fmaxf(x[i], 0.0f)", "x[i]"):
        port = CLAMP.replace("fminf(fmaxf(x[i], 0.0f), 1.0f)", wrong)
        verdict = _judge(port, "clamp01", rep)
        assert verdict.status is Status.FAILED and "matches-reference" in verdict.reason, (
            wrong,
            verdict.reason,
        )


NOTHING = """__global__ void probe(float* x, int* hits, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && n < 0) { x[i] = 1.0f; hits[i] = 1; }
}
"""


@pytest.mark.integration
def test_a_kernel_that_truly_writes_nothing_says_so_with_the_evidence(tmp_path: Path) -> None:
    x, h = np.ones(64, np.float32), np.zeros(64, np.int32)
    launches = _capture(
        tmp_path / "cap",
        "probe",
        [{"grid": 1, "block": 64, "args": [("ptr", x, x), ("ptr", h, h), ("int", 64)]}] * 2,
    )
    rep = replay.build("probe", launches, written={0, 1}, original=_original(NOTHING, "probe"))
    assert rep.spec is None
    assert rep.problem.startswith(
        "no captured launch changed any array: it changed no element of any array even when poisoned"
    )
    assert "2 launch(es)" in rep.problem and "arg0, arg1 were poisoned" in rep.problem, rep.problem
    assert all("changed no element of any array even when" in w for w in rep.left_out)
    (verdict,) = replay.replay(Variant("probe", "cuda", NOTHING, "probe", "original"), rep, [])
    assert verdict.reason.startswith(
        "not replayable: no captured launch changed any array: it changed no element"
    )


# Ours: the first block's thread 0 sums the per-block partial sums into the first -- with one block, what the
# first element already holds, whatever it holds (the shape of Rodinia particlefilter's sum_kernel at few particles)
SUM_FIRST = """__global__ void sum_first(float* partial, int blocks) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float s = 0.0f;
        for (int b = 0; b < blocks; ++b) s += partial[b];
        partial[0] = s;
    }
}
"""


@pytest.mark.integration
def test_a_kernel_that_stores_only_what_each_element_holds_is_judged_by_changing_nothing(
    tmp_path: Path,
) -> None:
    """Poisoning cannot make it change anything (it sums one element into itself), but the original's launch,
    its buffers' pages watched, stores into arg0: the launches are judged -- a port must leave every array as it
    was -- where a kernel that stores nothing at all (NOTHING above) stays unjudged; a port that writes a
    different value into the first element fails."""
    p = np.array([2.5, 7.0, -1.0, 4.0], np.float32)
    launches = _capture(
        tmp_path / "cap", "sum_first", [{"grid": 1, "block": 32, "args": [("ptr", p, p), ("int", 1)]}] * 2
    )
    rep = replay.build("sum_first", launches, written={0}, original=_original(SUM_FIRST, "sum_first"))
    assert rep.spec is not None, rep.problem
    assert not rep.left_out and len(rep.instances) == 2, rep.left_out
    assert (
        "though it stores into arg0 (element 0)" in rep.unchanged
        and "a port must change none" in rep.unchanged
    )
    good = _judge(SUM_FIRST, "sum_first", rep, "original")
    assert good.status is Status.VALIDATED and rep.unchanged in good.reason, good.reason
    assert (
        _judge(SUM_FIRST.replace("s += partial[b]", "s += 2.0f * partial[b]"), "sum_first", rep).status
        is Status.FAILED
    )
    assert _judge(SUM_FIRST.replace("b < blocks", "b <= blocks"), "sum_first", rep).status is Status.FAILED


COMPACT = """__global__ void keep_positive(int* in, int* out, int* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && in[i] > 0) {
        int k = atomicAdd(count, 1);
        out[k] = in[i];
    }
}
"""


def _compaction(tmp: Path) -> list[capture.Launch]:
    values = np.array([(i * 37) % 23 - 9 for i in range(512)], np.int32)
    kept = values[values > 0]
    out0 = np.full(512, -1, np.int32)
    out1 = out0.copy()
    out1[: kept.size] = kept[::-1]  # the order a GPU's run happened to leave: not one the emulator repeats
    c0, c1 = np.zeros(1, np.int32), np.array([kept.size], np.int32)
    return _capture(
        tmp / "cap",
        "keep_positive",
        [
            {
                "grid": 4,
                "block": 128,
                "args": [("ptr", values, values), ("ptr", out0, out1), ("ptr", c0, c1), ("int", 512)],
            }
        ],
    )


@pytest.mark.integration
def test_a_compaction_through_atomics_is_compared_as_a_count_and_a_set(tmp_path: Path) -> None:
    launches = _compaction(tmp_path)
    original = _original(COMPACT, "keep_positive")
    rep = replay.build("keep_positive", launches, written={1, 2}, original=original)
    assert rep.spec is not None and not rep.unordered
    # compared element by element, the original does not reproduce its own run
    plain = _judge(COMPACT, "keep_positive", rep, "original")
    assert plain.status is Status.FAILED, plain.reason
    assert plain.reason.startswith(("deterministic", "matches-reference")), plain.reason
    settled = replay.settle(rep, original)
    assert settled.unordered == (Unordered((1,), 2),), settled.unsettled
    assert settled.compared == ("arg1 compared as a count (arg2) and a set",)
    good = _judge(COMPACT, "keep_positive", settled, "original")
    assert good.status is Status.VALIDATED, good.reason
    assert "arg1 compared as a count (arg2) and a set" in good.reason
    assert "compared:arg1 compared as a count (arg2) and a set" in good.checks
    # the port that writes the elements in index order (a prefix sum instead of atomics) is right too
    ordered = """__global__ void keep_positive(int* in, int* out, int* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        int k = 0;
        for (int j = 0; j < n; ++j) if (in[j] > 0) out[k++] = in[j];
        *count = k;
    }
}
"""
    assert _judge(ordered, "keep_positive", settled).status is Status.VALIDATED
    planted = {
        # one element dropped, the count kept: its slot keeps what it held
        "drops": COMPACT.replace("out[k] = in[i];", "if (i != 1) out[k] = in[i];"),
        # one element dropped with its count
        "drops and counts": COMPACT.replace("in[i] > 0)", "in[i] > 0 && i != 1)"),
        # one element written twice in place of another
        "duplicates": COMPACT.replace("out[k] = in[i];", "out[k] = i == 1 ? in[2] : in[i];"),
        # one element written past the set
        "past the set": COMPACT.replace("out[k] = in[i];", "out[i == 1 ? k + 1 : k] = in[i];"),
    }
    for what, source in planted.items():
        verdict = _judge(source, "keep_positive", settled)
        assert verdict.status is Status.FAILED, (what, verdict.reason)
        assert "compared as a count (arg2) and a set" in verdict.reason, (what, verdict.reason)


def _spec(*args: ArgSpec) -> KernelSpec:
    return KernelSpec("k", args, ("1",), ("1",))


def test_a_multiset_comparison_fails_on_one_element_dropped_or_duplicated() -> None:
    spec = _spec(
        ArgSpec("out", "float32", Role.INOUT, shape=("n",)), ArgSpec("idx", "int32", Role.INOUT, shape=("n",))
    )
    want = {0: np.array([1.5, 2.5, 3.5, 4.5], np.float32), 1: np.array([7, 8, 9, 10], np.int32)}
    order = Unordered((0,))
    before = [np.zeros(4, np.float32), np.zeros(4, np.int32)]
    shuffled = {0: want[0][[2, 0, 3, 1]], 1: want[1]}
    assert unordered_difference(spec, order, before, shuffled, want) == ""
    dup = {0: np.array([1.5, 2.5, 2.5, 4.5], np.float32), 1: want[1]}
    why = unordered_difference(spec, order, before, dup, want)
    assert "out compared as a multiset: 1 element(s) missing and 1 extra among 4" in why, why
    assert "value 3.5 appears 0 time(s), expected 1" in why
    # two outputs that move together are compared as rows: a pairing that changed is caught
    rows = Unordered((0, 1))
    assert (
        unordered_difference(spec, rows, before, {0: want[0][[1, 0, 2, 3]], 1: want[1][[1, 0, 2, 3]]}, want)
        == ""
    )
    assert unordered_difference(spec, rows, before, {0: want[0][[1, 0, 2, 3]], 1: want[1]}, want)


def test_a_count_and_a_set_compares_the_rest_element_by_element() -> None:
    spec = _spec(
        ArgSpec("out", "int32", Role.INOUT, shape=("n",)), ArgSpec("count", "int32", Role.INOUT, shape=("1",))
    )
    before = [np.full(6, -1, np.int32), np.array([1], np.int32)]  # a queue that already held one element
    want = {0: np.array([5, 3, 4, -1, -1, -1], np.int32), 1: np.array([3], np.int32)}
    order = Unordered((0,), 1)
    assert (
        unordered_difference(
            spec, order, before, {0: np.array([5, 4, 3, -1, -1, -1], np.int32), 1: want[1]}, want
        )
        == ""
    )
    # element 0 was there before the launch: not part of the set
    moved = {0: np.array([3, 5, 4, -1, -1, -1], np.int32), 1: want[1]}
    assert "outside the set" in unordered_difference(spec, order, before, moved, want)
    short = {0: np.array([5, 3, 4, -1, -1, -1], np.int32), 1: np.array([2], np.int32)}
    assert "the count count[0] is 2, expected 3" in unordered_difference(spec, order, before, short, want)


class _Runs:
    """An original whose runs are given: what settle() would see from a GPU whose order varies."""

    def __init__(self, runs: list[dict[int, np.ndarray]]) -> None:
        self.runs = runs

    def outputs(self, spec, inst, runs=1, every_device=False):  # noqa: ANN001, ANN201 - as Original's
        return self.runs

    def outputs_of(self, spec, insts, runs=1, every_device=False):  # noqa: ANN001, ANN201 - as Original's
        return [self.runs for _ in insts]


def test_settle_names_what_holds_and_says_why_when_nothing_does() -> None:
    spec = _spec(
        ArgSpec("in", "float32", Role.IN, shape=("n",)),
        ArgSpec("sum", "float32", Role.INOUT, shape=("1",)),
        ArgSpec("out", "int32", Role.INOUT, shape=("n",)),
    )
    from porter.harness.trial import Instance

    inst = Instance.given(
        spec,
        {},
        "launch 1 of run 1",
        [np.ones(4, np.float32), np.zeros(1, np.float32), np.zeros(4, np.int32)],
    )
    recorded = [np.ones(4, np.float32), np.array([1.0], np.float32), np.array([4, 3, 2, 1], np.int32)]
    rep = replay.Replay("k", spec, (inst,), {inst.label: recorded})
    runs = [
        {0: recorded[0], 1: np.array([1.0000001], np.float32), 2: np.array([1, 2, 3, 4], np.int32)},
        {0: recorded[0], 1: np.array([1.0], np.float32), 2: np.array([2, 1, 4, 3], np.int32)},
    ]
    settled = replay.settle(rep, _Runs(runs))  # type: ignore[arg-type]
    assert settled.unordered == (Unordered((2,)),)
    assert settled.compared == (
        "out compared as a multiset",
        "sum compared within the order-aware float tolerance",
    )
    assert settled.spec is not None and settled.spec.float_atomics
    # runs that agree with the capture: nothing to settle
    same = replay.settle(rep, _Runs([dict(enumerate(recorded))]))  # type: ignore[arg-type]
    assert not same.unordered and "leave what the capture recorded" in same.unsettled
    # an output that changes value, not place: no comparison holds
    other = [{0: recorded[0], 1: recorded[1], 2: np.array([4, 3, 2, 0], np.int32)}]
    bad = replay.settle(rep, _Runs(other))  # type: ignore[arg-type]
    assert not bad.unordered and bad.unsettled.startswith("out differs between the original's own runs"), (
        bad.unsettled
    )
