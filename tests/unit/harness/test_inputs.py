"""Input generation: seeded, type-suited, never all zeros; poison; near-constant detection."""

from __future__ import annotations

import numpy as np
import pytest

from porter.harness.inputs import (
    ctype_size,
    guard_value,
    is_poison,
    make_args,
    near_constant,
    poison_value,
    poisoned,
    random_array,
)
from porter.model import ArgSpec, KernelSpec, Role

SPEC = KernelSpec(
    kernel="k",
    args=(
        ArgSpec("x", "float32", Role.IN, ("n",)),
        ArgSpec("idx", "int32", Role.IN, ("n",)),
        ArgSpec("bytes", "uint8", Role.IN, ("n",)),
        ArgSpec("y", "float64", Role.INOUT, ("2 * n",)),
        ArgSpec("out", "float32", Role.OUT, ("n",)),
        ArgSpec("a", "float32", Role.SCALAR, value="0.5f"),
        ArgSpec("n", "int32", Role.SCALAR, value="n"),
    ),
    grid=("(n + 255) / 256",),
    block=("256",),
)


def test_seeded_and_different_per_seed():
    a = make_args(SPEC, {"n": 1000}, seed=1)
    b = make_args(SPEC, {"n": 1000}, seed=1)
    c = make_args(SPEC, {"n": 1000}, seed=2)
    for u, v in zip(a, b, strict=True):
        assert np.array_equal(np.asarray(u), np.asarray(v), equal_nan=True)
    assert not np.array_equal(a[0], c[0])


def test_shapes_dtypes_scalars_and_poisoned_outputs():
    x, idx, raw, y, out, alpha, n = make_args(SPEC, {"n": 1000}, seed=3)
    assert x.dtype == np.float32 and x.shape == (1000,)
    assert y.dtype == np.float64 and y.shape == (2000,)
    assert isinstance(alpha, np.float32) and alpha == np.float32(0.5)
    assert isinstance(n, np.int32) and n == 1000
    assert np.all(is_poison(out))
    assert not np.any(is_poison(x)) and not np.any(is_poison(y))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floats_have_both_signs_and_are_never_all_zero(dtype):
    rng = np.random.default_rng(0)
    for count in (2, 3, 100):
        arr = random_array(ArgSpec("x", dtype, Role.IN, ("n",)), count, rng)
        assert np.any(arr < 0) and np.any(arr > 0)
        assert np.all(np.abs(arr.astype(np.float64)) <= 1.0)


def test_integers_are_small_non_negative_by_default_and_spec_ranges_apply():
    rng = np.random.default_rng(0)
    idx = random_array(ArgSpec("i", "int32", Role.IN, ("n",)), 5000, rng)
    assert idx.min() >= 0 and idx.max() <= 255 and np.any(idx != 0)
    wide = random_array(ArgSpec("i", "int32", Role.IN, ("n",), low=-50, high=50), 5000, rng)
    assert wide.min() < 0 < wide.max() and wide.min() >= -50 and wide.max() <= 50


def test_a_range_that_only_holds_zero_is_refused():
    with pytest.raises(ValueError, match="non-zero"):
        random_array(ArgSpec("z", "int32", Role.IN, ("n",), low=0, high=0), 10, np.random.default_rng(0))


@pytest.mark.parametrize(
    "dtype", ["float16", "float32", "float64", "int8", "uint8", "int32", "uint32", "int64"]
)
def test_poison_is_recognised_and_distinct_from_guards_and_computed_nans(dtype):
    p = poisoned(dtype, 4)
    assert np.all(is_poison(p))
    g = np.full(4, guard_value(dtype, 0), dtype=dtype)
    assert not np.any(is_poison(g))
    assert guard_value(dtype, 1).tobytes() != guard_value(dtype, 2).tobytes()
    if np.dtype(dtype).kind == "f":
        assert np.isnan(poison_value(dtype))
        computed = np.array([np.nan], dtype=dtype) * 2  # a NaN arithmetic makes
        assert not np.any(is_poison(computed))


def test_near_constant():
    assert near_constant(np.zeros(100, np.float32))
    assert near_constant(np.full(100, 3.5, np.float32))
    assert near_constant(poisoned("float32", 10))
    assert not near_constant(np.linspace(-1, 1, 100, dtype=np.float32))
    assert near_constant(np.array([0.0], np.float64))
    assert not near_constant(np.array([1.25], np.float64))
    assert near_constant(np.full(10, 7, np.int32)) and not near_constant(np.arange(10, dtype=np.int32))


def test_c_type_sizes():
    assert ctype_size("float") == 4 and ctype_size("unsigned char") == 1 and ctype_size("float4") == 16
    assert ctype_size("struct foo") is None


def test_a_constant_is_converted_as_c_converts_it_but_a_size_that_overflows_is_refused() -> None:
    from porter.harness.inputs import scalar_value
    from porter.model import ArgSpec, Role

    pattern = ArgSpec("pattern", "int32", Role.SCALAR, value="0xDEADBEEF")
    assert int(scalar_value(pattern, {"n": 4})) == 0xDEADBEEF - (1 << 32)  # -559038737, as g++ and nvcc
    assert int(scalar_value(ArgSpec("m", "uint8", Role.SCALAR, value="257"), {})) == 1
    with pytest.raises(ValueError, match="cannot hold"):
        scalar_value(ArgSpec("n", "int32", Role.SCALAR, value="n * 4"), {"n": 1 << 30})
