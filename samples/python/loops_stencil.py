"""Stencil loops: each output reads a fixed neighbourhood of a separate input.

Expected loop classes (for porter's loop scanner): *stencil* -- parallel over
the output index because inputs and outputs are different arrays; the loop
ranges skip the boundary (``range(1, n - 1)``), which a kernel must reproduce.

- ``blur3``: 1D 3-point average, ``out[i] = (a[i-1] + a[i] + a[i+1]) / 3``.
- ``jacobi2d``: one 2D 5-point Jacobi step with nested loops.
"""

import numpy as np


def blur3(a: np.ndarray, out: np.ndarray) -> None:
    n = a.shape[0]
    for i in range(1, n - 1):
        out[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0


def jacobi2d(grid: np.ndarray, out: np.ndarray) -> None:
    ny, nx = grid.shape
    for y in range(1, ny - 1):
        for x in range(1, nx - 1):
            out[y, x] = 0.25 * (grid[y - 1, x] + grid[y + 1, x] + grid[y, x - 1] + grid[y, x + 1])


def _check() -> bool:
    rng = np.random.default_rng(2)
    ok = True

    a = rng.standard_normal(10_001)
    out = np.zeros_like(a)
    blur3(a, out)
    ref = np.zeros_like(a)
    ref[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0
    ok &= bool(np.allclose(out, ref, rtol=1e-12, atol=1e-12))

    g = rng.standard_normal((130, 257))
    out2 = g.copy()
    jacobi2d(g, out2)
    ref2 = g.copy()
    ref2[1:-1, 1:-1] = 0.25 * (g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:])
    ok &= bool(np.allclose(out2, ref2, rtol=1e-12, atol=1e-12))
    return ok


if __name__ == "__main__":
    if _check():
        print("PASS")
    else:
        print("FAIL")
        raise SystemExit(1)
