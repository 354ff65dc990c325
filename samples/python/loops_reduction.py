"""Reduction loops: scalar accumulators and scattered accumulation into cells.

Expected loop classes (for porter's loop scanner):

- ``total``: *reduction* (``s += x[i]``, operator +).
- ``dot``: *reduction* (``s += x[i] * y[i]``, operator +).
- ``maximum``: *reduction* (``m = max(m, x[i])``, operator max).
- ``count_cells``: *histogram* / scatter-accumulate (``hist[x[i]] += 1``): the
  written index comes from data, so a GPU version needs atomics or privatisation.
"""

import numpy as np


def total(x: np.ndarray) -> float:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s


def dot(x: np.ndarray, y: np.ndarray) -> float:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    return s


def maximum(x: np.ndarray) -> float:
    m = -float("inf")
    for i in range(x.shape[0]):
        m = max(m, x[i])
    return m


def count_cells(x: np.ndarray, hist: np.ndarray) -> None:
    for i in range(x.shape[0]):
        hist[x[i]] += 1


def _check() -> bool:
    rng = np.random.default_rng(1)
    ok = True

    x = rng.standard_normal(20_000)
    y = rng.standard_normal(20_000)
    ok &= bool(np.isclose(total(x), np.sum(x), rtol=1e-9, atol=1e-9))
    ok &= bool(np.isclose(dot(x, y), np.dot(x, y), rtol=1e-9, atol=1e-9))
    ok &= bool(maximum(x) == np.max(x))

    data = rng.integers(0, 64, size=50_000)
    hist = np.zeros(64, dtype=np.int64)
    count_cells(data, hist)
    ok &= bool(np.array_equal(hist, np.bincount(data, minlength=64)))
    return ok


if __name__ == "__main__":
    if _check():
        print("PASS")
    else:
        print("FAIL")
        raise SystemExit(1)
