"""Each check of porter.harness.checks on its own: outputs crafted to break exactly one of them.

No compiler or device: a trial's outputs are built here as a child would return them (spec index ->
array with its guard), from the instance the harness draws.
"""

from __future__ import annotations

import numpy as np
import pytest

from porter.harness.checks import (
    check_all_written,
    check_covered,
    check_deterministic,
    check_guard,
    check_inputs_unchanged,
    check_instance,
    check_matches_reference,
    discriminating,
)
from porter.harness.trial import Instance, Reject
from porter.model import ArgSpec, KernelSpec, Role

N = 64
SPEC = KernelSpec(
    kernel="scale",
    args=(
        ArgSpec("x", "float32", Role.IN, ("n",)),
        ArgSpec("y", "float32", Role.OUT, ("n",)),
        ArgSpec("n", "int32", Role.SCALAR, value="n"),
    ),
    grid=("1",),
    block=("64",),
    sizes=({"n": N},),
)
ARRAYS = [0, 1]


@pytest.fixture
def inst() -> Instance:
    return Instance.draw(SPEC, {"n": N}, "size n=64", seed=7, guard=16)


def _expected(inst: Instance) -> list[np.ndarray]:
    x = inst.values[0]
    assert isinstance(x, np.ndarray)
    return [x.copy(), (2 * x).astype(np.float32)]


def _run(inst: Instance) -> dict[int, np.ndarray]:
    """What a correct kernel leaves: x untouched, y = 2x, both guards intact."""
    x, y = (inst.guarded[i].copy() for i in ARRAYS)  # type: ignore[union-attr]
    y[:N] = 2 * x[:N]
    return {0: x, 1: y}


def _reject(fn, *args) -> Reject:  # type: ignore[no-untyped-def]
    with pytest.raises(Reject) as err:
        fn(*args)
    return err.value


def test_a_correct_trial_passes_every_check(inst: Instance) -> None:
    stats: dict[str, float] = {}
    check_instance(SPEC, inst, [_run(inst), _run(inst)], _expected(inst), stats)
    assert stats["max_abs"] == 0.0 and stats["max_rel"] == 0.0


def test_covered_names_the_array_a_run_did_not_return(inst: Instance) -> None:
    run = _run(inst)
    del run[1]
    rej = _reject(check_covered, SPEC, [run], ARRAYS)
    assert rej.check == "run" and "y" in rej.reason


def test_guard_sees_a_write_one_past_the_end(inst: Instance) -> None:
    run = _run(inst)
    run[1][N] = 0.0
    rej = _reject(check_guard, SPEC, inst, [run], ARRAYS)
    assert rej.check == "guard" and f"y[{N}]" in rej.reason


def test_guard_returns_the_arrays_without_their_guards(inst: Instance) -> None:
    (body,) = check_guard(SPEC, inst, [_run(inst)], ARRAYS)
    assert body[0].size == N and body[1].size == N


def test_inputs_unchanged_sees_one_flipped_bit(inst: Instance) -> None:
    (body,) = check_guard(SPEC, inst, [_run(inst)], ARRAYS)
    body[0].view(np.uint32)[5] ^= 1
    rej = _reject(check_inputs_unchanged, SPEC, inst, [body], ARRAYS)
    assert rej.check == "inputs-unchanged" and "element 5" in rej.reason


def test_all_written_sees_an_element_left_poisoned(inst: Instance) -> None:
    run = _run(inst)
    run[1][9] = inst.guarded[1][9]  # type: ignore[index]  # the poison the output arrived with
    (body,) = check_guard(SPEC, inst, [run], ARRAYS)
    exp = dict(zip(ARRAYS, _expected(inst), strict=True))
    rej = _reject(check_all_written, SPEC, inst, body, exp)
    assert rej.check == "all-written" and "element 9" in rej.reason


def test_deterministic_sees_two_runs_that_differ(inst: Instance) -> None:
    a, b = check_guard(SPEC, inst, [_run(inst), _run(inst)], ARRAYS)
    b[1][3] = np.nextafter(b[1][3], np.float32(np.inf))
    rej = _reject(check_deterministic, SPEC, inst, a, b, ARRAYS)
    assert rej.check == "deterministic" and "y[3]" in rej.reason


def test_deterministic_allows_float_atomics_their_tolerance(inst: Instance) -> None:
    from dataclasses import replace

    spec = replace(SPEC, float_atomics=True)
    a, b = check_guard(spec, inst, [_run(inst), _run(inst)], ARRAYS)
    b[1][3] = np.nextafter(b[1][3], np.float32(np.inf))
    check_deterministic(spec, inst, a, b, ARRAYS)  # one ulp apart: accepted


def test_matches_reference_reports_the_first_bad_element(inst: Instance) -> None:
    (body,) = check_guard(SPEC, inst, [_run(inst)], ARRAYS)
    body[1][11] += 1.0
    exp = dict(zip(ARRAYS, _expected(inst), strict=True))
    stats: dict[str, float] = {}
    rej = _reject(check_matches_reference, SPEC, inst, body, exp, stats)
    assert rej.check == "matches-reference" and "y[11]" in rej.reason
    assert stats["max_abs"] == pytest.approx(1.0, rel=1e-3)


def test_the_first_failing_check_names_the_verdict(inst: Instance) -> None:
    """A run that breaks the guard and the result: the guard is reported (the documented order)."""
    run = _run(inst)
    run[1][N + 1] = 0.0
    run[1][0] += 5.0
    rej = _reject(check_instance, SPEC, inst, [run], _expected(inst), {})
    assert rej.check == "guard"


def test_a_near_constant_reference_is_not_discriminating(inst: Instance) -> None:
    assert discriminating(SPEC, inst, _expected(inst))
    flat = [_expected(inst)[0], np.full(N, 3.0, dtype=np.float32)]
    assert not discriminating(SPEC, inst, flat)
