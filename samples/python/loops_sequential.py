"""Sequential loops: each iteration depends on an earlier one (loop-carried).

Expected loop classes (for porter's loop scanner): *sequential* -- none of
these may be turned naively into one-thread-per-element kernels.

- ``prefix_sum``: ``out[i] = out[i - 1] + x[i]`` (a scan; parallelisable only
  with a scan algorithm, not as a map).
- ``recurrence``: first-order linear recurrence ``y[i] = a * y[i - 1] + b * x[i]``.
- ``smooth_in_place``: in-place update that reads the neighbour it just wrote,
  ``v[i] = 0.5 * (v[i - 1] + v[i])`` (Gauss-Seidel style; differs from a stencil).
"""

import numpy as np


def prefix_sum(x: np.ndarray, out: np.ndarray) -> None:
    n = x.shape[0]
    out[0] = x[0]
    for i in range(1, n):
        out[i] = out[i - 1] + x[i]


def recurrence(a: float, b: float, x: np.ndarray, y: np.ndarray) -> None:
    n = x.shape[0]
    y[0] = b * x[0]
    for i in range(1, n):
        y[i] = a * y[i - 1] + b * x[i]


def smooth_in_place(v: np.ndarray) -> None:
    n = v.shape[0]
    for i in range(1, n):
        v[i] = 0.5 * (v[i - 1] + v[i])


def _check() -> bool:
    rng = np.random.default_rng(3)
    ok = True

    x = rng.standard_normal(10_000)
    out = np.empty_like(x)
    prefix_sum(x, out)
    ok &= bool(np.allclose(out, np.cumsum(x), rtol=1e-9, atol=1e-9))

    a, b = 0.9, 0.1
    y = np.empty_like(x)
    recurrence(a, b, x, y)
    # Closed form: y[i] = b * sum_k a^(i-k) x[k], truncated where a^(i-k) is negligible.
    ref = np.empty_like(x)
    window = 400  # a^400 < 1e-18, older terms are negligible
    for i in range(x.shape[0]):
        lo = max(0, i - window)
        ref[i] = b * np.dot(a ** (i - np.arange(lo, i + 1)), x[lo : i + 1])
    ok &= bool(np.allclose(y, ref, rtol=1e-9, atol=1e-12))

    v = rng.standard_normal(2_000)
    expected = v.copy()
    # Closed form of e[i] = 0.5 * e[i-1] + 0.5 * v0[i]:
    # e[i] = 0.5^i * v0[0] + sum_{k=1..i} 0.5^(i-k+1) * v0[k].
    weights = 0.5 ** np.arange(v.shape[0] - 1, 0, -1)
    for i in range(1, v.shape[0]):
        expected[i] = 0.5**i * v[0] + np.dot(weights[-i:], v[1 : i + 1])
    smooth_in_place(v)
    ok &= bool(np.allclose(v, expected, rtol=1e-9, atol=1e-12))
    return ok


if __name__ == "__main__":
    if _check():
        print("PASS")
    else:
        print("FAIL")
        raise SystemExit(1)
