"""Launch-side facts for the CUDA -> OpenCL translation.

* :func:`launch_geometry`: OpenCL NDRange sizes for a CUDA ``<<<grid, block>>>``.
* :func:`instance_entry`: the OpenCL kernel name of one instantiation (``axpby_float``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def launch_geometry(
    grid: Sequence[int] | int, block: Sequence[int] | int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(global_size, local_size) for a CUDA launch: global = grid * block per dimension, local = block.

    Scalars are one-dimensional launches; a shorter grid or block is padded with 1s.
    """
    g = [int(grid)] if isinstance(grid, int) else [int(x) for x in grid]
    b = [int(block)] if isinstance(block, int) else [int(x) for x in block]
    dims = max(len(g), len(b), 1)
    if dims > 3:
        raise ValueError(f"a launch has at most 3 dimensions, got grid {g} and block {b}")
    g += [1] * (dims - len(g))
    b += [1] * (dims - len(b))
    if min(g + b) < 1:
        raise ValueError(f"grid {tuple(g)} and block {tuple(b)} must be positive")
    return tuple(x * y for x, y in zip(g, b, strict=True)), tuple(b)


def instance_entry(kernel: str, args: Sequence[str]) -> str:
    """`axpby` + (`float`,) -> `axpby_float`; `block_sum` + (`256`,) -> `block_sum_256`."""
    parts = [kernel]
    for arg in args:
        text = arg.replace("-", "m").replace("*", "ptr").replace("::", "_")
        text = re.sub(r"\W+", "_", text).strip("_")
        parts.append(text or "x")
    return "_".join(parts)
