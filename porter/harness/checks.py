"""The checks on a variant's outputs, each a small function that raises :class:`Reject` with the
reason, in the order the validate loop applies them (see :mod:`porter.harness.validate`), and the
per-dtype tolerances (``tolerances.toml``) the comparisons use."""

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
from porter.model import KernelSpec, Role


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


def compare(got: np.ndarray, expected: np.ndarray, tol: Tolerance) -> Comparison:
    """Every element of `got` against `expected` (same dtype and size)."""
    got, expected = got.ravel(), expected.ravel()
    if got.dtype.kind != "f":
        bad = np.flatnonzero(got != expected)
        diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
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
    ok = np.where(finite, diff <= allowed, False)
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


def check_instance(
    spec: KernelSpec,
    inst: Instance,
    runs: list[dict[int, np.ndarray]],
    expected: Sequence[np.ndarray | None],
    stats: dict[str, float],
) -> None:
    """Raise Reject for the first check the variant's outputs fail: every array returned, ``guard``,
    ``inputs-unchanged``, ``all-written``, ``deterministic``, ``matches-reference``.

    `expected`: the reference's content of each array argument (spec order); None for an array the
    reference has no counterpart of (scratch a lifted function's kernels use): its guard and its
    determinism are checked, not its contents."""
    array_idx = [i for i, a in enumerate(spec.args) if a.role is not Role.SCALAR]
    exp = dict(zip(array_idx, expected, strict=True))
    check_covered(spec, runs, array_idx)
    bodies = check_guard(spec, inst, runs, array_idx)
    check_inputs_unchanged(spec, inst, bodies, array_idx)
    check_all_written(spec, inst, bodies[0], exp)
    if len(bodies) > 1:
        check_deterministic(spec, inst, bodies[0], bodies[1], array_idx)
    check_matches_reference(spec, inst, bodies[0], exp, stats)


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
) -> None:
    """``deterministic``: two runs on the same inputs bit-identical (within tolerance with float
    atomics): catches races and reads of uninitialised memory."""
    for i in array_idx:
        if spec.args[i].role is Role.IN:
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
        if not np.all(same):
            j = int(np.flatnonzero(~same)[0])
            raise Reject(
                "deterministic",
                f"{spec.args[i].name}[{j}] differs between two runs on the same input "
                f"({fmt(a[j].item())} vs {fmt(b[j].item())}; {int((~same).sum())} elements differ) at {inst.label}: "
                "a race or a read of uninitialised memory",
            )


def check_matches_reference(
    spec: KernelSpec,
    inst: Instance,
    body: dict[int, np.ndarray],
    exp: Mapping[int, np.ndarray | None],
    stats: dict[str, float],
) -> None:
    """``matches-reference``: every output element within the per-dtype tolerance of the
    reference's; the largest errors go to `stats`."""
    for i, want in exp.items():
        if spec.args[i].role is Role.IN or want is None:
            continue
        got = body[i]
        cmp = compare(got, want, tolerance_for(got.dtype.name, spec))
        stats["max_abs"] = max(stats.get("max_abs", 0.0), cmp.max_abs)
        stats["max_rel"] = max(stats.get("max_rel", 0.0), cmp.max_rel)
        if not cmp.ok:
            raise Reject(
                "matches-reference",
                f"{spec.args[i].name}[{cmp.index}] = {fmt(cmp.got)}, expected {fmt(cmp.expected)} "
                f"({cmp.bad} of {got.size} elements out of tolerance; max abs error {cmp.max_abs:.3g}, "
                f"max rel error {cmp.max_rel:.3g}) at {inst.label}",
            )


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
