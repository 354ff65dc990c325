"""porter.lift.validate: a lifted function is judged by the harness, the user's Python function as the
reference (porter.harness.reference's Python-function kind) -- the same checks and reason texts as any
kernel, the same timing -- and which of a function's argument sets a simulator (Oclgrind) runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from porter.backends.isolate import PythonResult

from porter.harness.checks import check_instance
from porter.harness.reference import (
    RETURNED,
    PythonCall,
    PythonRun,
    Reference,
    python_run_outputs,
    ref_name_of,
    reference_outputs,
)
from porter.harness.trial import Reject, ValidateOptions
from porter.lift import inputs, validate
from porter.lift.analyze import analyze
from porter.lift.validate import smallest
from porter.model import Role, Status

SCALE = """import numpy as np
import numpy.typing as npt


def scale(x: npt.NDArray[np.float32], y: npt.NDArray[np.float32]) -> None:
    for i in range(x.shape[0]):
        y[i] = 2.0 * x[i]


def total(x: npt.NDArray[np.float64]) -> float:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return s
"""
BODY = "v_y[v_i] = (((float)(2.0)) * v_x[v_i]);"


def test_the_checker_runs_the_set_with_the_fewest_elements_held_back_or_not() -> None:
    visible = ("size n=600", {"x": np.zeros(600), "n": 600}, None)
    larger = ("hidden size 1", {"x": np.zeros(1203), "n": 1203}, None)
    fewer = ("hidden size 2", {"x": np.zeros(595), "n": 595}, None)
    assert smallest([visible, larger, fewer])[0] == "hidden size 2"
    grid = ("size", {"a": np.zeros((4, 5)), "b": np.zeros(30)}, None)  # 50 elements in all
    assert smallest([("flat", {"a": np.zeros(51)}, None), grid])[0] == "size"
    assert smallest([visible, ("same", {"x": np.zeros(600), "n": 7}, None)])[0] == "size n=600"  # the first


@pytest.fixture(scope="module")
def lifted(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    path = tmp_path_factory.mktemp("lift") / "fns.py"
    path.write_text(SCALE)
    return str(path), {f.function: f for f in analyze(str(path), SCALE).lifted}


def _sets(path: str, f, n: int = 300) -> list:
    sizes = {"x.shape[0]": n}
    hidden = inputs.hidden_sizes(sizes)
    labelled = [(f"size x.shape[0]={n}", sizes)] + [(f"hidden size {i + 1}", h) for i, h in enumerate(hidden)]
    ran = validate.reference_run(path, f, labelled, 7, 60.0)
    assert ran.broken() is None
    return ran.sets


def test_the_spec_is_one_array_per_device_buffer_and_the_reference_names_what_each_is_compared_with(
    lifted,
) -> None:
    path, fs = lifted
    trial = validate.prepare(fs["total"], validate.sources(fs["total"], ["cuda"])["cuda"],
                             [("size x.shape[0]=50", {"x": np.ones(50)})])  # fmt: skip
    roles = {a.name: a.role for a in trial.spec.args}
    assert roles["x"] is Role.IN and all(r is Role.INOUT for n, r in roles.items() if n != "x"), roles
    assert trial.spec.float_atomics  # a float sum changes its order: judged as float atomics are
    (outputs,) = trial.outputs.values()
    assert outputs[0] == "x" and outputs.count(RETURNED) == 1 and None in outputs  # scratch: none
    (inst,) = trial.instances
    assert inst.size == {"x.shape[0]": 50} and inst.guarded[0].size > 50  # guarded as every instance


def _outputs_and_runs(path: str, f):
    """The harness's view of `scale` at one set: the spec, the instance, what the Python function left
    (through the Python-function reference), and two runs of a correct kernel (outputs with guards)."""
    sets = _sets(path, f)[:1]
    label, args, result = sets[0]
    trial = validate.prepare(f, validate.sources(f, ["cuda"])["cuda"], [(label, args)])
    (inst,) = trial.instances
    run = PythonRun((PythonCall(label, args, trial.outputs[label]),), (result,))
    ref = Reference(function=run)
    expected, name = reference_outputs(ref, trial.spec, inst, None, ValidateOptions(), [])  # type: ignore[arg-type]
    assert name == "Python function" and ref_name_of(ref) == "Python function"
    good = {
        0: inst.guarded[0].copy(),
        1: np.concatenate([2.0 * args["x"], inst.guarded[1][inst.length(1) :]]),
    }
    return trial.spec, inst, expected, good


def test_the_python_reference_goes_through_the_harness_checks_with_their_reasons(lifted) -> None:
    path, fs = lifted
    spec, inst, expected, good = _outputs_and_runs(path, fs["scale"])
    stats: dict[str, float] = {}
    check_instance(spec, inst, [good, {k: v.copy() for k, v in good.items()}], expected, stats)
    assert stats["max_rel"] == 0.0

    def reject(*runs: dict) -> Reject:
        with pytest.raises(Reject) as caught:
            check_instance(spec, inst, list(runs), expected, {})
        return caught.value

    changed = {**good, 0: good[0].copy()}
    changed[0][3] = 0.0
    r = reject(changed, good)
    assert r.check == "inputs-unchanged" and r.reason.startswith("input x was modified: element 3 was ")
    other = {**good, 1: good[1].copy()}
    other[1][5] += 1.0
    r = reject(good, other)
    assert r.check == "deterministic" and "y[5] differs between two runs on the same input" in r.reason
    assert r.reason.endswith("at size x.shape[0]=300: a race or a read of uninitialised memory")
    wrong = {**good, 1: good[1].copy()}
    wrong[1][:300] *= 1.5
    r = reject(wrong, {**wrong})
    assert r.check == "matches-reference" and r.reason.startswith("y[0] = ") and ", expected " in r.reason
    past = {**good, 1: good[1].copy()}
    past[1][300] = 1.0
    r = reject(past, good)
    assert (
        r.check == "guard"
        and r.reason
        == "out-of-bounds write: y[300] written past its 300 elements (run 1, size x.shape[0]=300)"
    )


def test_a_python_function_that_failed_or_returned_nothing_is_the_references_failure(lifted) -> None:
    path, fs = lifted
    sets = _sets(path, fs["total"])[:1]
    label, args, result = sets[0]
    trial = validate.prepare(fs["total"], validate.sources(fs["total"], ["cuda"])["cuda"], [(label, args)])
    (inst,) = trial.instances
    outputs = trial.outputs[label]
    failed = PythonRun((PythonCall(label, args, outputs),), (PythonResult(False, error="ZeroDivisionError"),))
    with pytest.raises(Reject, match="the Python function failed at size x.shape"):
        python_run_outputs(failed, trial.spec, inst)
    silent = PythonRun((PythonCall(label, args, outputs),), (replace(result, returned=None),))
    with pytest.raises(Reject, match="the Python function returned None, the variant a value"):
        python_run_outputs(silent, trial.spec, inst)
    want = python_run_outputs(PythonRun((PythonCall(label, args, outputs),), (result,)), trial.spec, inst)
    got = want[outputs.index(RETURNED)]
    assert got is not None and got.dtype == np.float64 and np.isclose(got[0], float(np.sum(args["x"] ** 2)))


@pytest.mark.usefixtures("emulator")
def test_on_the_emulator_kernels_that_change_an_input_race_or_are_wrong_are_rejected_by_the_shared_checks(
    lifted,
) -> None:
    from porter.plan import run_devices

    path, fs = lifted
    f = fs["scale"]
    sets = _sets(path, f)
    src = validate.sources(f, ["cuda"])["cuda"]
    assert BODY in src.text
    device = next(d for d in run_devices("cuda") if d.backend == "cpu")
    v = validate.judge(f, src, device, sets)
    assert v.status is Status.VALIDATED, v.reason
    assert v.reason == "matches the Python function on 1 size(s) + 2 hidden, 1 trial(s) each"
    assert {"guard", "inputs-unchanged", "deterministic", "matches-reference", "hidden-sizes(2)"} <= set(
        v.checks
    )
    defects = {  # the reason's start, and words it holds
        ("inputs-unchanged: input x was modified: element", ""): BODY + " v_x[v_i] = 0.0f;",
        # each of y[0..7] is left by whichever thread the seeded schedule runs last
        ("deterministic: y[", "] differs between two runs on the same input"): BODY
        + " v_y[k0 % 8] = (float)k0;",
        ("matches-reference: y[0] = ", ", expected "): BODY.replace("2.0", "2.5"),
        ("matches-reference: y[300] = ", "at hidden size"): BODY.replace(
            "v_y[v_i] =", "if (v_i < 300) v_y[v_i] ="
        ),
    }
    for (start, words), body in defects.items():
        v = validate.judge(f, replace(src, text=src.text.replace(BODY, body)), device, sets)
        assert v.status is Status.FAILED and v.reason.startswith(start) and words in v.reason, (
            start,
            v.reason,
        )
    timed = validate.bench(f, src, device, sets[0][1], sets[0][0])
    assert timed.ok and timed.timing is not None and timed.timing.median_ms > 0 and timed.timing.runs >= 5


def test_floyd_warshall_is_proven_on_both_of_its_paths_and_a_guard_that_lies_is_caught() -> None:
    """The collection's Floyd-Warshall runs i and j in parallel at each k behind one thread's check of
    path[k, k] >= 0, and the step in order where it is negative: both paths are judged against the Python
    (a matrix of non-negative weights, and one with negative cycles), and a check that always answers
    "parallel" is caught on the negative cycle."""
    from porter.plan import run_devices

    path = str(Path(__file__).resolve().parents[3] / "samples" / "python" / "loop_nests.py")
    (f,) = analyze(path, Path(path).read_text(), only="floyd_warshall").lifted
    src = validate.sources(f, ["cuda"])["cuda"]
    positive = np.random.default_rng(3).random((40, 40))
    negative = positive.copy()
    negative[5, 5], negative[7, 3] = -0.5, -2.0
    ran = validate.reference_run(
        path,
        f,
        [],
        7,
        60.0,
        given=[("non-negative weights", {"path": positive}), ("negative cycles", {"path": negative})],
    )
    assert ran.broken() is None
    device = next(d for d in run_devices("cuda") if d.backend == "cpu")
    v = validate.judge(f, src, device, ran.sets)
    assert v.status is Status.VALIDATED and "matches-reference" in v.checks, v.reason
    check = "< ((double)(0))"
    assert src.text.count(check) == 1
    lying = replace(src, text=src.text.replace(check, "< ((double)(-1e300))"))
    assert (
        validate.judge(f, lying, device, ran.sets[:1]).status is Status.VALIDATED
    )  # no negative weight: same
    v = validate.judge(f, lying, device, ran.sets)
    assert v.status is Status.FAILED and "negative cycles" in v.reason, v.reason
