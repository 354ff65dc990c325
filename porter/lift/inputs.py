"""Arguments for a lifted function: its sizes (``--sizes``, an ``--example``, or lift.toml's defaults),
the held-back sizes, and seeded random arrays and scalars of the dtypes the analysis found.

Arrays of floats are drawn in [-1, 1) (negatives included, never all zeros); ints in [-50, 50), except
an int array whose values index another array, drawn in [0, that size); bools half true.  A float
scalar parameter is drawn in [0.5, 2); an int scalar parameter that bounds a loop is a size like the
others (``steps: int`` of a time loop), named in ``--sizes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from porter.lift.ir import Lifted
from porter.lift.kernels import settings


def base(label: str) -> tuple[str, int]:
    """A dimension's label as (the size it names, the constant added): ``n + 1`` -> ("n", 1); a size
    itself -> (it, 0)."""
    name, plus, offset = label.partition(" + ")
    if plus and offset.isdigit():
        return name, int(offset)
    return label, 0


def extent(label: str, sizes: Mapping[str, int]) -> int:
    """A dimension's extent at `sizes` (``n + 1`` at n = 40: 41)."""
    name, offset = base(label)
    return int(sizes[name]) + offset


def size_names(lifted: Lifted) -> list[str]:
    """Every size a call needs, in order of first appearance: the labels of the array dimensions (the
    size of ``n + 1``: n), then int scalar parameters."""
    names: list[str] = []
    for p in lifted.params:
        for label in p.shape:
            name = base(label)[0]
            if name not in names:
                names.append(name)
    for p in lifted.params:
        if p.kind == "scalar" and p.dtype in ("int32", "int64") and p.name not in names:
            names.append(p.name)
    return names


def sizes_of_args(lifted: Lifted, args: Mapping[str, Any]) -> dict[str, int]:
    """The sizes a call's arguments have, by size name: each array's extents under its dimensions' names,
    and the int scalar parameters (an example's arguments, or those drawn at some sizes)."""
    sizes: dict[str, int] = {}
    for p in lifted.params:
        value = args.get(p.name)
        if p.kind == "array" and isinstance(value, np.ndarray):
            for label, have in zip(p.shape, value.shape, strict=False):
                name, offset = base(label)
                sizes.setdefault(name, int(have) - offset)
        elif p.kind == "scalar" and p.dtype in ("int32", "int64") and value is not None:
            sizes[p.name] = int(value)
    return sizes


def default_sizes(lifted: Lifted, given: Mapping[str, int]) -> dict[str, int]:
    """`given`, completed from lift.toml's defaults (by order: the first size 600, the next 70, ...;
    an int scalar parameter 5)."""
    defaults = list(settings()["default_sizes"])
    out: dict[str, int] = {}
    k = 0
    for name in size_names(lifted):
        if name in given:
            out[name] = int(given[name])
            continue
        is_scalar = any(p.name == name and p.kind == "scalar" for p in lifted.params)
        if is_scalar:
            out[name] = 5
        else:
            out[name] = int(defaults[min(k, len(defaults) - 1)])
            k += 1
    unknown = sorted(set(given) - set(out))
    if unknown:
        raise KeyError(
            f"--sizes names {', '.join(unknown)}, which {lifted.function} does not have (sizes: {', '.join(out) or 'none'})"
        )
    return out


def hidden_sizes(sizes: Mapping[str, int]) -> list[dict[str, int]]:
    """Sizes held back from any model: each size scaled and shifted (lift.toml's hidden_scale)."""
    out = []
    for factor, offset in settings()["hidden_scale"]:
        scaled = {k: max(2, v * int(factor) + int(offset)) if v > 2 else v for k, v in sizes.items()}
        if scaled != dict(sizes):
            out.append(scaled)
    return out


def timing_sizes(lifted: Lifted, sizes: Mapping[str, int], elements: int) -> dict[str, int]:
    """`sizes` with every array dimension scaled alike so that the largest array holds about `elements`
    (never smaller than given); int scalars that are no array's dimension (a step count) keep theirs."""
    arrays = [p.shape for p in lifted.params if p.kind == "array" and p.shape]
    if not arrays:
        return dict(sizes)
    largest = max(arrays, key=lambda shape: int(np.prod([extent(d, sizes) for d in shape])))
    now = int(np.prod([extent(d, sizes) for d in largest]))
    if now >= elements:
        return dict(sizes)
    scale = (elements / now) ** (1.0 / len(largest))
    dims = {base(d)[0] for shape in arrays for d in shape}
    return {k: max(v, int(round(v * scale))) if k in dims else v for k, v in sizes.items()}


def draw(lifted: Lifted, sizes: Mapping[str, int], seed: int) -> dict[str, Any]:
    """Seeded arguments at `sizes`, by parameter name."""
    rng = np.random.default_rng(seed)
    args: dict[str, Any] = {}
    for p in lifted.params:
        if p.kind == "array":
            shape = tuple(extent(label, sizes) for label in p.shape)
            if p.index_bound is not None:
                high = max(1, int(sizes.get(p.index_bound, 1)))
                args[p.name] = rng.integers(0, high, size=shape).astype(p.dtype)
            elif p.dtype in ("float32", "float64"):
                args[p.name] = rng.uniform(-1.0, 1.0, size=shape).astype(p.dtype)
            elif p.dtype == "bool":
                args[p.name] = rng.random(size=shape) < 0.5
            else:
                args[p.name] = rng.integers(-50, 50, size=shape).astype(p.dtype)
        elif p.name in sizes:
            args[p.name] = _scalar(p.dtype, p.weak, sizes[p.name])
        elif p.dtype in ("float32", "float64"):
            args[p.name] = _scalar(p.dtype, p.weak, float(rng.uniform(0.5, 2.0)))
        elif p.dtype == "bool":
            args[p.name] = _scalar(p.dtype, p.weak, bool(rng.random() < 0.5))
        else:
            args[p.name] = _scalar(p.dtype, p.weak, int(rng.integers(1, 8)))
    return args


def _scalar(dtype: str, weak: bool, value: Any) -> Any:
    """A Python number for a weak (``float``/``int``-annotated) parameter, else a NumPy scalar."""
    if weak:
        return {"float64": float, "int64": int, "bool": bool}.get(dtype, float)(value)
    return np.dtype(dtype).type(value)
