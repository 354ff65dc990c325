"""The checks on a variant's outputs, each a small function that raises :class:`Reject` with the
reason, in the order the validate loop applies them (see :mod:`porter.harness.validate`), and the
per-dtype tolerances (``tolerances.toml``) the comparisons use.

Outputs whose element order the original itself does not fix (a stream compaction or a work queue
filled through atomics: its own runs put the same elements in other places) are compared by what
stays the same, an :class:`Unordered` comparison named in every message: as a multiset (every element
with its count, bit for bit), or as a count and a set (a one-element counter compared exactly, the
elements between its value before and after the launch as a multiset, the rest element by element).
A port that drops, duplicates or changes one element still fails.

Outputs whose stores race in the original (two blocks storing to one element in no fixed order, so its own
runs leave one value or another there) are compared element by element except at those elements, where the
port's value must be one the original's runs left there (a :class:`Raced` comparison, named likewise)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from porter.harness.inputs import guard_value, is_poison, near_constant
from porter.harness.trial import Instance, Reject
from porter.model import RACED_WORDS, KernelSpec, Role


@cache
def tolerances() -> dict[str, Any]:
    return tomllib.loads(
        resources.files("porter.harness").joinpath("tolerances.toml").read_text(encoding="utf-8")
    )


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    ulps: int


def tolerance_for(dtype: str, spec: KernelSpec | None = None) -> Tolerance:
    data = tolerances()
    dt = np.dtype(dtype)
    row = data.get(dt.name) if dt.kind == "f" else data["int"]
    row = row or data["float32"]
    rtol, atol, ulps = float(row["rtol"]), float(row["atol"]), int(row["ulps"])
    if spec is not None:
        if spec.float_atomics and dt.kind == "f":
            factor = float(data.get("atomics_factor", 1.0))
            rtol, atol = rtol * factor, atol * factor
        rtol = spec.rtol if spec.rtol is not None else rtol
        atol = spec.atol if spec.atol is not None else atol
    return Tolerance(rtol, atol, ulps)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs: float
    max_rel: float
    bad: int = 0  # elements out of tolerance
    index: int = -1  # the first of them
    got: Any = None
    expected: Any = None


def _ordered(a: np.ndarray) -> np.ndarray:
    """Floats mapped to integers whose order and spacing follow the floats' (for ULP distances)."""
    bits = a.dtype.itemsize * 8
    i = a.view(f"int{bits}").astype(np.int64 if bits < 64 else np.float64)
    low = float(-(2 ** (bits - 1))) if bits == 64 else -(2 ** (bits - 1))
    return np.where(i < 0, low - i, i).astype(np.float64)


def compare(got: np.ndarray, expected: np.ndarray, tol: Tolerance, floor: float = 0.0) -> Comparison:
    """Every element of `got` against `expected` (same dtype and size).  `floor`: an absolute
    difference every element may have besides the tolerance (the original's own spread on this device
    against a capture made on another, :func:`cross_device_spread`); integers then differ by at most
    that much, never more."""
    got, expected = got.ravel(), expected.ravel()
    if got.dtype.kind != "f":
        diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        bad = np.flatnonzero(diff > floor) if floor > 0 else np.flatnonzero(got != expected)
        max_abs = float(diff.max()) if diff.size else 0.0
        nz = np.abs(expected.astype(np.float64))
        max_rel = float((diff[nz > 0] / nz[nz > 0]).max()) if np.any(nz > 0) else 0.0
        if bad.size:
            i = int(bad[0])
            return Comparison(False, max_abs, max_rel, int(bad.size), i, got[i].item(), expected[i].item())
        return Comparison(True, max_abs, max_rel)
    g64, e64 = got.astype(np.float64), expected.astype(np.float64)
    gp, ep = is_poison(got), is_poison(expected)
    gnan, enan = np.isnan(g64), np.isnan(e64)
    finite = np.isfinite(g64) & np.isfinite(e64)
    scale = float(np.max(np.abs(e64[np.isfinite(e64)]))) if np.any(np.isfinite(e64)) else 0.0
    diff = np.where(finite, np.abs(g64 - e64), 0.0)
    allowed = tol.atol * scale + tol.rtol * np.abs(np.where(finite, e64, 0.0))
    ok = np.where(finite, (diff <= allowed) | (diff <= floor), False)
    if tol.ulps and np.any(finite & ~ok):
        ulp = np.abs(_ordered(got) - _ordered(expected))
        ok |= finite & (ulp <= tol.ulps)
    # Non-finite: poison only matches poison, NaN only NaN, inf only the same inf.
    same_special = (gp == ep) & np.where(gp | ep, True, (gnan & enan) | (~gnan & ~enan & (g64 == e64)))
    ok = np.where(finite, ok & ~gp & ~ep, same_special)
    max_abs = float(diff.max()) if diff.size else 0.0
    nz = finite & (e64 != 0)
    max_rel = float((diff[nz] / np.abs(e64[nz])).max()) if np.any(nz) else 0.0
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        return Comparison(False, max_abs, max_rel, int(bad.size), i, got[i].item(), expected[i].item())
    return Comparison(True, max_abs, max_rel)


def cross_device_spread(got: np.ndarray, expected: np.ndarray, tol: Tolerance) -> float | None:
    """How far the original's output on one device (`got`) is from a capture made on another
    (`expected`), as a tolerance floor: 0.0 within the usual tolerance; the largest absolute difference
    when it is slight (``[cross_device]`` of tolerances.toml: floats within a fraction of the array's
    largest magnitude, every NaN and infinity where the capture has it; integers and bytes by a few
    units); None when it is more than that (no floor: the difference is not the device's)."""
    cmp = compare(got, expected, tol)
    if cmp.ok:
        return 0.0
    bounds = tolerances().get("cross_device", {})
    g, e = got.ravel(), expected.ravel()
    if g.dtype.kind != "f":
        spread = float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))))
        return spread if spread <= float(bounds.get("int_abs", 0)) else None
    g64, e64 = g.astype(np.float64), e.astype(np.float64)
    finite = np.isfinite(g64) & np.isfinite(e64)
    if np.any(is_poison(g) | is_poison(e)) or not np.all(finite | bits_equal(g, e)):
        return None  # a special value on one side only: not a rounding
    scale = float(np.max(np.abs(e64[finite]))) if np.any(finite) else 0.0
    spread = float(np.max(np.abs(g64[finite] - e64[finite]))) if np.any(finite) else 0.0
    rel = float(bounds.get("float_rel", {}).get(g.dtype.name, 0.0))
    return spread if spread <= rel * max(scale, np.finfo(g.dtype).tiny) else None


def guard_touched(guard: np.ndarray, k: int) -> int:
    """Index of the first guard element that changed, -1 when the guard is intact."""
    if guard.size == 0:
        return -1
    expected = np.full(guard.size, guard_value(guard.dtype.name, k), dtype=guard.dtype)
    changed = ~bits_equal(guard, expected)
    return int(np.flatnonzero(changed)[0]) if np.any(changed) else -1


def bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    view = f"uint{a.dtype.itemsize * 8}"
    return a.ravel().view(view) == b.ravel().view(view)


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.9g}"
    return str(v)


@dataclass(frozen=True)
class Unordered:
    """Output arrays compared by what the original's own runs keep, not element by element.

    ``members``: the spec indices of the arrays compared together, as one multiset of rows (element
    ``j`` of each member together: a compaction writing a key and a value at one slot keeps them
    paired).  ``counter``: the spec index of a one-element integer array (None: none); the members'
    elements from its value before the launch to its value after are the set, the others compared
    element by element, and the counter itself exactly (as any output)."""

    members: tuple[int, ...]
    counter: int | None = None

    def describe(self, spec: KernelSpec) -> str:
        names = " and ".join(spec.args[i].name for i in self.members)
        if self.counter is None:
            return f"{names} compared as a multiset"
        return f"{names} compared as a count ({spec.args[self.counter].name}) and a set"


_NO_RACE = (np.zeros(0, np.int64), np.zeros((0, 0)))


@dataclass(frozen=True, eq=False)
class Raced:
    """An output whose stores race in the original: its own runs on one input leave some elements
    differently (blocks storing to one element in no fixed order).  At those elements a port may hold any
    value one of the original's runs left there -- the runs are taken until each such value was seen in
    at least two of them (:func:`porter.harness.replay.settle`), so the set is not one draw short -- and
    every other element is compared as any output is (its tolerance, its floor; bit for bit between a
    port's own two runs).

    ``choices``: by instance label, the racing elements' indices and the values the original's runs left
    there (one row per run); ``seen``: one such element in words, for the verdict."""

    member: int
    choices: Mapping[str, tuple[np.ndarray, np.ndarray]]
    seen: str = ""

    @property
    def members(self) -> tuple[int, ...]:
        return (self.member,)

    @property
    def counter(self) -> int | None:
        return None

    def racing(self) -> int:
        """The most elements that race at one launch."""
        return max((idx.size for idx, _ in self.choices.values()), default=0)

    def describe(self, spec: KernelSpec) -> str:
        return (
            f"{spec.args[self.member].name} compared element by element except at the {self.racing()} element(s) "
            f"{RACED_WORDS} ({self.seen}), which hold one of the values the original's runs "
            "left there"
        )

    def nearest(self, label: str, got: np.ndarray, want: np.ndarray) -> np.ndarray:
        """`want` with each racing element replaced by the value the original's runs left there that is
        nearest `got`'s (the same bits first): what `got` is held to."""
        idx, rows = self.choices.get(label, _NO_RACE)
        if not idx.size:
            return want
        g = got.ravel()[idx]
        view = f"uint{g.dtype.itemsize * 8}"
        same = rows.view(view) == g.view(view)[None, :]
        with np.errstate(invalid="ignore", over="ignore"):
            far = np.abs(rows.astype(np.float64) - g.astype(np.float64)[None, :])
        far = np.where(same, -1.0, np.where(np.isnan(far), np.inf, far))
        pick = np.argmin(far, axis=0)
        held = want.ravel().copy()
        held[idx] = rows[pick, np.arange(idx.size)]
        return held.reshape(want.shape)


def by_kind(unordered: Sequence[Unordered | Raced]) -> tuple[list[Unordered], dict[int, Raced]]:
    """The :class:`Unordered` comparisons of `unordered`, and its :class:`Raced` ones by output index."""
    return [o for o in unordered if isinstance(o, Unordered)], {
        o.member: o for o in unordered if isinstance(o, Raced)
    }


def _rows(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """One opaque value per element index: the bytes of that element in each array, side by side."""
    n = arrays[0].size
    cols = [np.ascontiguousarray(a.ravel()).view(np.uint8).reshape(n, a.dtype.itemsize) for a in arrays]
    joined = np.ascontiguousarray(np.hstack(cols)) if cols else np.zeros((n, 0), np.uint8)
    return joined.view(f"V{joined.shape[1]}").ravel() if joined.shape[1] else np.zeros(n, "V1")


def _show(arrays: Sequence[np.ndarray], j: int) -> str:
    values = [fmt(a[j].item()) for a in arrays]
    return values[0] if len(values) == 1 else "(" + ", ".join(values) + ")"


def _span(
    order: Unordered, before: Sequence[Any], after: Mapping[int, np.ndarray], n: int
) -> tuple[int, int]:
    """The element range an unordered output's set occupies: its counter's value before and after."""
    if order.counter is None:
        return 0, n
    lo, hi = int(np.asarray(before[order.counter]).ravel()[0]), int(after[order.counter].ravel()[0])
    lo = min(max(lo, 0), n)
    return lo, min(max(hi, lo), n)


def unordered_difference(
    spec: KernelSpec,
    order: Unordered,
    before: Sequence[Any],
    got: Mapping[int, np.ndarray],
    want: Mapping[int, np.ndarray],
) -> str:
    """ "" when `got` holds what `want` does under `order`; else what differs, in a sentence.
    `before`: the instance's inputs (spec order: the counter's value on entry)."""
    name = order.describe(spec)
    if order.counter is not None:
        c = order.counter
        g, w = int(got[c].ravel()[0]), int(want[c].ravel()[0])
        if g != w:
            return f"{name}: the count {spec.args[c].name}[0] is {g}, expected {w}"
    n = int(want[order.members[0]].size)
    lo, hi = _span(order, before, want, n)
    for m in order.members:  # outside the set: element by element
        for part in (slice(0, lo), slice(hi, n)):
            same = bits_equal(got[m][part], want[m][part])
            if not np.all(same):
                j = int(np.flatnonzero(~same)[0]) + (part.start or 0)
                return (
                    f"{name}: {spec.args[m].name}[{j}] = {fmt(got[m][j].item())}, expected "
                    f"{fmt(want[m][j].item())} (outside the set, elements {lo} to {hi - 1})"
                )
    g_arrays = [got[m][lo:hi] for m in order.members]
    w_arrays = [want[m][lo:hi] for m in order.members]
    g_rows, w_rows = _rows(g_arrays), _rows(w_arrays)
    g_vals, g_counts = np.unique(g_rows, return_counts=True)
    w_vals, w_counts = np.unique(w_rows, return_counts=True)
    if g_vals.size == w_vals.size and np.array_equal(g_vals, w_vals) and np.array_equal(g_counts, w_counts):
        return ""
    have = dict(zip(g_vals.tolist(), g_counts.tolist(), strict=True))
    need = dict(zip(w_vals.tolist(), w_counts.tolist(), strict=True))
    missing = sum(max(k - have.get(v, 0), 0) for v, k in need.items())
    extra = sum(max(k - need.get(v, 0), 0) for v, k in have.items())
    first = next((v for v in need if have.get(v, 0) < need[v]), None)  # a missing one first
    if first is not None:
        j = w_rows.tolist().index(first)
        what, times, wanted = _show(w_arrays, j), have.get(first, 0), need[first]
    else:
        first = next(v for v in have if have[v] > need.get(v, 0))
        j = g_rows.tolist().index(first)
        what, times, wanted = _show(g_arrays, j), have[first], need.get(first, 0)
    return (
        f"{name}: {missing} element(s) missing and {extra} extra among {hi - lo} "
        f"(value {what} appears {times} time(s), expected {wanted})"
    )


@dataclass(frozen=True)
class Undefined:
    """A run whose warp shuffles read lanes CUDA leaves undefined -- a source lane outside the caller's
    mask, exited, or beyond the block's last thread -- which the CPU emulator reads as 0 (as NVIDIA GPUs
    do) and other devices as whatever the lane last held: `first`, the first such read in words (lane,
    warp, block, intrinsic, mask, source line), and the same launch (same inputs, same schedule) run
    again with those reads returning a poison pattern: its arrays by spec index (guard included), or
    `failed`, why that run did not finish."""

    first: str
    poisoned: Mapping[int, np.ndarray] | None = None
    failed: str = ""


def check_instance(
    spec: KernelSpec,
    inst: Instance,
    runs: list[dict[int, np.ndarray]],
    expected: Sequence[np.ndarray | None],
    stats: dict[str, float],
    unordered: Sequence[Unordered | Raced] = (),
    floor: Mapping[int, float] | None = None,
    undefined: Undefined | None = None,
    expected_poisoned: Sequence[np.ndarray | None] | None = None,
) -> None:
    """Raise Reject for the first check the variant's outputs fail: every array returned, ``guard``,
    ``inputs-unchanged``, ``all-written``, ``deterministic``, ``undefined`` (with `undefined`: the
    outputs do not change when the undefined shuffle lanes read poison -- or, with `expected_poisoned`,
    the original's outputs when its own undefined lanes read the same poison, spec order like `expected`:
    an original whose result depends on them, judged as a function of what they return), ``matches-reference``.

    `expected`: the reference's content of each array argument (spec order); None for an array the
    reference has no counterpart of (scratch a lifted function's kernels use): its guard and its
    determinism are checked, not its contents.  `unordered`: outputs compared by what the original's
    own runs keep (:class:`Unordered`, :class:`Raced`) in ``deterministic`` and ``matches-reference``.  `floor`: per
    output (spec index) the absolute difference it may have besides the tolerance in
    ``matches-reference`` (a capture made on another device: the original's own spread here)."""
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    exp = dict(zip(array_idx, expected, strict=True))
    check_covered(spec, runs, array_idx)
    bodies = check_guard(spec, inst, runs, array_idx)
    check_inputs_unchanged(spec, inst, bodies, array_idx)
    check_all_written(spec, inst, bodies[0], exp)
    if len(bodies) > 1:
        check_deterministic(spec, inst, bodies[0], bodies[1], array_idx, unordered)
    if undefined is not None and expected_poisoned is not None:
        check_same_undefined(
            spec, inst, undefined, dict(zip(array_idx, expected_poisoned, strict=True)), floor
        )
    elif undefined is not None:
        check_defined(spec, inst, runs[0], undefined, array_idx)
    check_matches_reference(spec, inst, bodies[0], exp, stats, unordered, floor)


def check_covered(spec: KernelSpec, runs: list[dict[int, np.ndarray]], array_idx: list[int]) -> None:
    """Every array argument of the spec came back from every run."""
    for run in runs:
        missing = [spec.args[i].name for i in array_idx if i not in run]
        if missing:
            raise Reject("run", f"the variant's arguments do not cover {', '.join(missing)}")


def check_guard(
    spec: KernelSpec, inst: Instance, runs: list[dict[int, np.ndarray]], array_idx: list[int]
) -> list[dict[int, np.ndarray]]:
    """``guard``: nothing written past the end of any array; the arrays without their guards."""
    bodies: list[dict[int, np.ndarray]] = []
    for r, run in enumerate(runs):
        body: dict[int, np.ndarray] = {}
        for i in array_idx:
            n = inst.length(i)
            arr = run[i]
            j = guard_touched(arr[n:], i)
            if j >= 0:
                raise Reject(
                    "guard",
                    f"out-of-bounds write: {spec.args[i].name}[{n + j}] written past its {n} elements "
                    f"(run {r + 1}, {inst.label})",
                )
            body[i] = arr[:n]
        bodies.append(body)
    return bodies


def check_inputs_unchanged(
    spec: KernelSpec, inst: Instance, bodies: list[dict[int, np.ndarray]], array_idx: list[int]
) -> None:
    """``inputs-unchanged``: arrays of role ``in`` bit-identical after every run."""
    for i in array_idx:
        if spec.args[i].role is not Role.IN:
            continue
        for r, body in enumerate(bodies):
            same = bits_equal(body[i], inst.values[i])  # type: ignore[arg-type]
            if not np.all(same):
                j = int(np.flatnonzero(~same)[0])
                raise Reject(
                    "inputs-unchanged",
                    f"input {spec.args[i].name} was modified: element {j} was {fmt(inst.values[i][j].item())}, "  # type: ignore[index]
                    f"now {fmt(body[i][j].item())} (run {r + 1}, {inst.label})",
                )


def check_all_written(
    spec: KernelSpec, inst: Instance, body: dict[int, np.ndarray], exp: Mapping[int, np.ndarray | None]
) -> None:
    """``all-written``: no ``out`` element still holds poison where the reference wrote one."""
    for i, want in exp.items():
        if spec.args[i].role is not Role.OUT or want is None:
            continue
        unwritten = is_poison(body[i]) & ~is_poison(want)
        if np.any(unwritten):
            idx = np.flatnonzero(unwritten)
            raise Reject(
                "all-written",
                f"output {spec.args[i].name}: {idx.size} of {unwritten.size} elements never written "
                f"(first: element {int(idx[0])}, still poison; expected {fmt(want[int(idx[0])].item())}) "
                f"at {inst.label}",
            )


def check_deterministic(
    spec: KernelSpec,
    inst: Instance,
    a_run: dict[int, np.ndarray],
    b_run: dict[int, np.ndarray],
    array_idx: list[int],
    unordered: Sequence[Unordered | Raced] = (),
) -> None:
    """``deterministic``: two runs on the same inputs bit-identical (within tolerance with float
    atomics; under the :class:`Unordered` comparison for outputs whose order the original does not
    fix; at the elements a :class:`Raced` output's stores race on, each run a value the original's runs
    left there): catches races and reads of uninitialised memory."""
    orders, raced = by_kind(unordered)
    for order in orders:
        why = unordered_difference(spec, order, inst.values, b_run, a_run)
        if why:
            raise Reject(
                "deterministic",
                f"two runs on the same input differ at {inst.label}: {why} (a race or a read of "
                "uninitialised memory)",
            )
    members = {m for order in orders for m in order.members}
    for i in array_idx:
        if spec.args[i].role is Role.IN or i in members:
            continue
        a, b = a_run[i], b_run[i]
        if spec.float_atomics and a.dtype.kind == "f":
            cmp = compare(b, a, tolerance_for(a.dtype.name, spec))
            if not cmp.ok:
                raise Reject(
                    "deterministic",
                    f"{spec.args[i].name}[{cmp.index}] differs between two runs on the same input beyond "
                    f"the float-atomics tolerance ({fmt(cmp.expected)} vs {fmt(cmp.got)}) at {inst.label}: a race "
                    "or a read of uninitialised memory",
                )
            continue
        same = bits_equal(a, b)
        if i in raced and not np.all(same):
            same = same | _both_raced(raced[i], inst.label, a, b, tolerance_for(a.dtype.name, spec))
        if not np.all(same):
            j = int(np.flatnonzero(~same)[0])
            raise Reject(
                "deterministic",
                f"{spec.args[i].name}[{j}] differs between two runs on the same input "
                f"({fmt(a[j].item())} vs {fmt(b[j].item())}; {int((~same).sum())} elements differ) at {inst.label}: "
                "a race or a read of uninitialised memory"
                + (f" ({raced[i].describe(spec)})" if i in raced else ""),
            )


def _both_raced(order: Raced, label: str, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> np.ndarray:
    """Per element: True where it races in the original and both runs hold a value its runs left there
    (within the tolerance)."""
    idx, _rows = order.choices.get(label, _NO_RACE)
    ok = np.zeros(a.size, dtype=bool)
    if idx.size:
        a_ok = _near(a.ravel()[idx], order.nearest(label, a, a).ravel()[idx], tol)
        b_ok = _near(b.ravel()[idx], order.nearest(label, b, b).ravel()[idx], tol)
        ok[idx] = a_ok & b_ok
    return ok


def _near(got: np.ndarray, want: np.ndarray, tol: Tolerance) -> np.ndarray:
    """Per element: `got` within the tolerance of `want` (bit for bit for integers)."""
    return np.array([compare(got[k : k + 1], want[k : k + 1], tol).ok for k in range(got.size)], dtype=bool)


def undefined_difference(
    spec: KernelSpec,
    inst: Instance,
    run: Mapping[int, np.ndarray],
    undefined: Undefined,
    array_idx: Sequence[int],
) -> str:
    """How the run with the undefined shuffle lanes poisoned differs from `run` (the same launch with
    them reading 0), "" when it does not: the first element that changed, a write past an array's end,
    or how the poisoned run failed."""
    if undefined.failed:
        return f"with them reading a poison pattern instead, {undefined.failed}"
    poisoned = undefined.poisoned or {}
    for i in array_idx:
        if spec.args[i].role is Role.IN or i not in run or i not in poisoned:
            continue
        a, b = run[i], poisoned[i]
        try:
            same = bits_equal(a, b)
        except (ValueError, TypeError):  # an element size without an unsigned view: its bytes
            same = np.frombuffer(a.tobytes(), np.uint8) == np.frombuffer(b.tobytes(), np.uint8)
        if np.all(same):
            continue
        j = int(np.flatnonzero(~same)[0])
        name, n = spec.args[i].name, inst.length(i)
        if j >= n and a.dtype.itemsize == b.dtype.itemsize and same.size == a.size:
            return f"with them reading a poison pattern instead, it writes {name}[{j}], past its {n} elements"
        if same.size != a.size:
            return f"{name} changes when they read a poison pattern instead of 0"
        return (
            f"{name}[{j}] is {fmt(a[j].item())} when they read 0 and {fmt(b[j].item())} when they read a "
            f"poison pattern ({int((~same).sum())} element(s) change)"
        )
    return ""


def check_defined(
    spec: KernelSpec,
    inst: Instance,
    run: Mapping[int, np.ndarray],
    undefined: Undefined,
    array_idx: Sequence[int],
) -> None:
    """``undefined``: a result that changes when the warp-shuffle lanes CUDA leaves undefined read a
    poison pattern instead of 0 depends on what the device returns there -- 0 on NVIDIA GPUs and the
    CPU emulator, a stale value elsewhere -- so no port can be judged against it.  Reads whose values
    are discarded change nothing and pass."""
    why = undefined_difference(spec, inst, run, undefined, array_idx)
    if why:
        raise Reject(
            "undefined",
            f"reads shuffle lanes CUDA leaves undefined ({undefined.first}); its result depends on what the "
            f"device returns there: {why} at {inst.label}",
        )


def check_same_undefined(
    spec: KernelSpec,
    inst: Instance,
    undefined: Undefined,
    exp: Mapping[int, np.ndarray | None],
    floor: Mapping[int, float] | None = None,
) -> None:
    """``undefined`` for an original whose result depends on the warp-shuffle lanes CUDA leaves undefined:
    the variant's run with those lanes reading the poison pattern matches the original's run with its own
    reading the same (`exp`, spec index -> array), as its run reading 0 matches the capture -- so it computes
    what the original computes from whatever the lanes hold, and a port that computes anything else fails."""
    if undefined.failed:
        raise Reject(
            "undefined",
            f"reads shuffle lanes CUDA leaves undefined ({undefined.first}); with them reading a poison pattern, as "
            f"the original was run, {undefined.failed} at {inst.label}",
        )
    bodies = {i: np.asarray(a)[: inst.length(i)] for i, a in (undefined.poisoned or {}).items()}
    try:
        check_matches_reference(
            spec, inst, bodies, {i: w for i, w in exp.items() if i in bodies}, {}, (), floor
        )
    except Reject as rej:
        raise Reject(
            "undefined",
            f"with the shuffle lanes CUDA leaves undefined ({undefined.first}) reading a poison pattern, as the "
            f"original was run, its outputs differ from the original's: {rej.reason}",
        ) from None


def check_matches_reference(
    spec: KernelSpec,
    inst: Instance,
    body: dict[int, np.ndarray],
    exp: Mapping[int, np.ndarray | None],
    stats: dict[str, float],
    unordered: Sequence[Unordered | Raced] = (),
    floor: Mapping[int, float] | None = None,
) -> None:
    """``matches-reference``: every output element within the per-dtype tolerance of the
    reference's (outputs whose order the original does not fix: under their :class:`Unordered`
    comparison; at the elements a :class:`Raced` output's stores race on, the value the original's runs
    left there nearest the port's; outputs with a `floor`: within that absolute difference too); the
    largest errors go to `stats`."""
    orders, raced = by_kind(unordered)
    members = {m for order in orders for m in order.members}
    for order in orders:
        want_all = {
            m: exp[m] for m in (*order.members, *((order.counter,) if order.counter is not None else ()))
        }
        if any(w is None for w in want_all.values()):
            continue
        why = unordered_difference(
            spec, order, inst.values, body, {m: w for m, w in want_all.items() if w is not None}
        )
        if why:
            raise Reject("matches-reference", f"{why} at {inst.label}")
    for i, want in exp.items():
        if spec.args[i].role is Role.IN or want is None or i in members:
            continue
        got = body[i]
        if i in raced:
            want = raced[i].nearest(inst.label, got, want)
        allowed = (floor or {}).get(i, 0.0)
        cmp = compare(got, want, tolerance_for(got.dtype.name, spec), allowed)
        stats["max_abs"] = max(stats.get("max_abs", 0.0), cmp.max_abs)
        stats["max_rel"] = max(stats.get("max_rel", 0.0), cmp.max_rel)
        if not cmp.ok:
            raise Reject(
                "matches-reference",
                f"{spec.args[i].name}[{cmp.index}] = {fmt(cmp.got)}, expected {fmt(cmp.expected)} "
                f"({cmp.bad} of {got.size} elements out of tolerance; max abs error {cmp.max_abs:.3g}, "
                f"max rel error {cmp.max_rel:.3g})"
                + (f" beyond the floor of ±{fmt_floor(allowed)}" if allowed else "")
                + f" at {inst.label}"
                + (f" ({raced[i].describe(spec)})" if i in raced else ""),
            )


def fmt_floor(value: float) -> str:
    """A floor as a verdict names it: ``1`` for integers, ``3.05e-05`` for floats."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def discriminating(spec: KernelSpec, inst: Instance, expected: Sequence[np.ndarray | None]) -> bool:
    """False when every output of the reference is near-constant (or an inout left as it was)."""
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    outputs = 0
    for i, exp in zip(array_idx, expected, strict=True):
        arg = spec.args[i]
        if arg.role is Role.IN or exp is None:
            continue
        outputs += 1
        tol = tolerance_for(arg.dtype, spec)
        if arg.role is Role.INOUT and np.all(bits_equal(exp, inst.values[i])):  # type: ignore[arg-type]
            continue
        if not near_constant(exp, tol.atol):
            return True
    return outputs == 0
