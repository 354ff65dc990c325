"""Inputs for validation runs: seeded random arrays suited to each type, poison, near-constant checks.

* Floats are drawn uniformly from the argument's range (default [-1, 1)), so negative values are
  always present and an all-zero draw is impossible (checked, and redrawn if it ever happened).
* Integers default to small non-negative values (see ``dtypes.toml``) so an int array used as an
  index stays in bounds; a spec file can set ``low``/``high``.
* Outputs are filled with *poison* (a NaN with a distinctive payload for floats, a sentinel for
  integers, also in ``dtypes.toml``) before every run; an element still holding poison afterwards
  was never written.
* ``__constant__`` symbols of the spec (``KernelSpec.constants``) get random contents per trial
  (:func:`make_constants`), drawn from their own stream.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from porter.model import ArgSpec, KernelSpec, Role
from porter.scan import cexpr


@cache
def _data() -> dict[str, Any]:
    return tomllib.loads(
        resources.files("porter.harness").joinpath("dtypes.toml").read_text(encoding="utf-8")
    )


def ctype_info(ctype: str) -> tuple[str, int] | None:
    """(numpy dtype name, lanes) for a C scalar or vector type name, None when unknown."""
    entry = _data()["ctypes"].get(" ".join(ctype.split()))
    if entry is None:
        return None
    return str(entry["dtype"]), int(entry.get("lanes", 1))


def ctype_size(ctype: str) -> int | None:
    """sizeof(ctype) in bytes for scalar and vector types, None when unknown."""
    info = ctype_info(ctype)
    if info is None:
        return None
    return np.dtype(info[0]).itemsize * info[1]


def is_float(dtype: str) -> bool:
    return np.dtype(dtype).kind == "f"


def poison_value(dtype: str) -> np.ndarray:
    """The poison as a 0-d array of `dtype` (bit pattern from dtypes.toml)."""
    return _pattern(dtype, int(_data()["poison"][np.dtype(dtype).name]))


def guard_value(dtype: str, k: int) -> np.ndarray:
    """The guard fill after array argument number `k` (distinct per argument and from poison)."""
    return _pattern(dtype, int(_data()["guard"][np.dtype(dtype).name]) + (k % 64))


def _pattern(dtype: str, bits: int) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        as_int = np.array(bits, dtype=f"uint{dt.itemsize * 8}")
        return as_int.view(dt)
    return np.array(bits, dtype=np.uint64).astype(dt)


def poisoned(dtype: str, count: int) -> np.ndarray:
    return np.full(count, poison_value(dtype), dtype=np.dtype(dtype))


def is_poison(arr: np.ndarray) -> np.ndarray:
    """Elementwise: does this element hold the poison bit pattern?"""
    dt = arr.dtype
    p = poison_value(dt.name)
    if dt.kind == "f":
        view = f"uint{dt.itemsize * 8}"
        return arr.view(view) == p.view(view)
    return arr == p


def value_range(arg: ArgSpec) -> tuple[float, float]:
    low, high = _data()["ranges"][np.dtype(arg.dtype).name]
    return (
        float(arg.low) if arg.low is not None else float(low),
        float(arg.high) if arg.high is not None else float(high),
    )


def random_array(arg: ArgSpec, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` random values for an input argument; never all zeros, negatives when the range allows."""
    dt = np.dtype(arg.dtype)
    low, high = value_range(arg)
    for _ in range(16):
        if dt.kind == "f":
            arr = rng.uniform(low, high, size=count).astype(dt)
            if low < 0 < high and count >= 2:  # guarantee both signs are present
                arr[0] = dt.type(-abs(arr[0]) if arr[0] != 0 else low / 2)
                arr[-1] = dt.type(abs(arr[-1]) if arr[-1] != 0 else high / 2)
        else:
            info = np.iinfo(dt)
            lo, hi = max(int(low), info.min), min(int(high), info.max)
            arr = rng.integers(lo, hi, size=count, endpoint=True, dtype=np.int64).astype(dt)
        if count == 0 or np.any(arr != 0):
            return arr
    raise ValueError(f"cannot draw non-zero values for {arg.name} in [{low}, {high}]")


def shape_of(arg: ArgSpec, size: Mapping[str, int]) -> tuple[int, ...]:
    """The concrete shape of an array argument at a problem size."""
    dims = []
    for expr in arg.shape:
        value = cexpr.eval_text(expr, size, _sizeof)
        try:
            dims.append(int(value))
        except (OverflowError, ValueError):  # a float infinity or NaN
            raise ValueError(
                f"the shape of {arg.name} ({expr}) is {value}, not a number of elements"
            ) from None
    return tuple(dims)


def element_count(arg: ArgSpec, size: Mapping[str, int]) -> int:
    """The elements of an array argument at a problem size (exact: Python integers, no wrap-around)."""
    return math.prod(shape_of(arg, size)) if arg.shape else 1


def known_dtype(name: str) -> bool:
    """Is ``name`` a NumPy dtype porter can fill, poison and compare (the types of dtypes.toml)?"""
    return name in _data()["poison"]


def scalar_value(arg: ArgSpec, size: Mapping[str, int]) -> np.generic:
    """The value of a scalar argument at a problem size, as the NumPy scalar type of its dtype;
    ValueError when its type cannot hold a value that depends on the size (``n = 99999999999999``
    for an ``int``: a size that would overflow the kernel's indexing).  A constant the program passes
    (``#define PATTERN 0xDEADBEEF`` to an ``int``) is converted as C converts it: modulo 2**bits."""
    if arg.value is None:
        raise ValueError(f"scalar argument {arg.name} has no value")
    value = cexpr.eval_text(arg.value, size, _sizeof)
    dt = np.dtype(arg.dtype)
    if dt.kind in "iu" and isinstance(value, int):
        info = np.iinfo(dt)
        if not info.min <= value <= info.max and not _uses_sizes(arg.value, size):
            bits = 8 * dt.itemsize
            value %= 1 << bits
            if dt.kind == "i" and value > info.max:
                value -= 1 << bits
        if not info.min <= value <= info.max:
            raise ValueError(
                f"scalar argument {arg.name} ({dt.name}) cannot hold {value} (range {info.min} to {info.max})"
            )
    try:
        return dt.type(value)
    except (OverflowError, ValueError) as err:  # a float infinity or NaN for an integer type
        raise ValueError(f"scalar argument {arg.name} ({dt.name}) cannot hold {value}: {err}") from None


def _uses_sizes(text: str, size: Mapping[str, int]) -> bool:
    try:
        return bool(cexpr.names(cexpr.parse(text)) & set(size))
    except cexpr.ExprError:
        return True


def _sizeof(text: str) -> int:
    size = ctype_size(text.replace("const", "").strip())
    if size is None:
        raise cexpr.ExprError(f"sizeof({text}) is unknown")
    return size


def make_args(spec: KernelSpec, size: Mapping[str, int], seed: int) -> list[np.ndarray | np.generic]:
    """One value per spec argument: random inputs (in/inout), poisoned outputs, scalars."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray | np.generic] = []
    for arg in spec.args:
        if arg.role is Role.SCALAR:
            out.append(scalar_value(arg, size))
            continue
        count = element_count(arg, size)
        if count <= 0:
            raise ValueError(f"argument {arg.name} has {count} elements at size {dict(size)}")
        if arg.role is Role.OUT:
            out.append(poisoned(arg.dtype, count))
        else:
            out.append(random_array(arg, count, rng))
    return out


CONSTANTS_STREAM = 0xC0457  # mixed into the seed: constants never shift the arguments' random stream


def make_constants(spec: KernelSpec, size: Mapping[str, int], seed: int) -> dict[str, np.ndarray]:
    """Random contents for the spec's `__constant__` symbols (inputs, like `in` arrays), by name."""
    rng = np.random.default_rng([seed, CONSTANTS_STREAM])
    out: dict[str, np.ndarray] = {}
    for const in spec.constants:
        count = element_count(const, size)
        if count <= 0:
            raise ValueError(f"constant {const.name} has {count} elements at size {dict(size)}")
        out[const.name] = random_array(const, count, rng)
    return out


def near_constant(arr: np.ndarray, atol: float = 0.0) -> bool:
    """True when the array cannot discriminate a right kernel from a wrong one: every element
    (ignoring poison) equal within `atol` of the largest magnitude, or a lone value that is zero."""
    values = arr[~is_poison(arr)] if arr.size else arr
    if values.size == 0:
        return True
    if np.issubdtype(values.dtype, np.floating):
        finite = values[np.isfinite(values)].astype(np.float64)
        if finite.size == 0:
            return True
        scale = float(np.max(np.abs(finite)))
        if scale == 0.0:
            return True
        if finite.size == 1:
            return False
        return float(np.max(finite) - np.min(finite)) <= max(atol, 1e-12) * scale
    ints = values.astype(np.int64)
    if ints.size == 1:
        return bool(ints[0] == 0)
    return bool(np.all(ints == ints[0]))
