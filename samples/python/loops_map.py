"""Map loops: every output element depends only on inputs at the same index.

Expected loop classes (for porter's loop scanner): all three functions are
embarrassingly parallel *maps* and can become one GPU thread per element.

- ``saxpy``: 1D map over NumPy arrays, ``y[i] = a * x[i] + y[i]`` (in place, same index).
- ``scale_add_2d``: 2D map with nested ``for i`` / ``for j`` loops over a matrix.
- ``gaussian_activation``: 1D map calling ``math`` functions (exp, sqrt, sin).
"""

import math

import numpy as np


def saxpy(a: float, x: np.ndarray, y: np.ndarray) -> None:
    n = x.shape[0]
    for i in range(n):
        y[i] = a * x[i] + y[i]


def scale_add_2d(alpha: float, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    rows, cols = a.shape
    for i in range(rows):
        for j in range(cols):
            out[i, j] = alpha * a[i, j] + b[i, j]


def gaussian_activation(x: np.ndarray, out: np.ndarray, sigma: float) -> None:
    n = x.shape[0]
    for i in range(n):
        v = x[i]
        out[i] = math.exp(-(v * v) / (2.0 * sigma * sigma)) * math.sqrt(abs(v)) + math.sin(v)


def _check() -> bool:
    rng = np.random.default_rng(0)
    ok = True

    n = 10_000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    expected = np.float32(2.5) * x + y
    saxpy(np.float32(2.5), x, y)
    ok &= bool(np.allclose(y, expected, rtol=1e-6, atol=1e-6))

    a = rng.standard_normal((120, 97)).astype(np.float32)
    b = rng.standard_normal((120, 97)).astype(np.float32)
    out = np.zeros_like(a)
    scale_add_2d(np.float32(0.5), a, b, out)
    ok &= bool(np.allclose(out, np.float32(0.5) * a + b, rtol=1e-6, atol=1e-6))

    x = rng.standard_normal(5_000)
    out = np.empty_like(x)
    gaussian_activation(x, out, 0.8)
    ref = np.exp(-(x * x) / (2.0 * 0.8 * 0.8)) * np.sqrt(np.abs(x)) + np.sin(x)
    ok &= bool(np.allclose(out, ref, rtol=1e-12, atol=1e-12))
    return ok


if __name__ == "__main__":
    if _check():
        print("PASS")
    else:
        print("FAIL")
        raise SystemExit(1)
