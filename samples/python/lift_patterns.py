"""Plain Python loop nests, one per pattern `porter lift` turns into GPU kernels, written as people write
them (NumPy arrays, explicit loops, no decorators).  Each function is its own reference: porter runs it
on seeded inputs and compares every kernel with what it computed.

    porter lift samples/python/lift_patterns.py --to cuda,hip,opencl

The last three functions are refused, each for a reason porter names with its line.
"""

import math

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def saxpy(a: float, x: npt.NDArray[np.float32], y: npt.NDArray[np.float32]) -> None:
    """map 1-D: y = a * x + y, in place."""
    n = x.shape[0]
    for i in range(n):
        y[i] = a * x[i] + y[i]


def blend_2d(alpha: float, a: npt.NDArray[np.float32], b: npt.NDArray[np.float32], out: npt.NDArray[np.float32]) -> None:
    """map 2-D with a branch: clamp a blend into [-1, 1]."""
    rows, cols = a.shape
    for i in range(rows):
        for j in range(cols):
            v = alpha * a[i, j] + (1.0 - alpha) * b[i, j]
            if v > 1.0:
                v = 1.0
            elif v < -1.0:
                v = -1.0
            out[i, j] = v


def gaussian_3d(grid: npt.NDArray[np.float64], out: npt.NDArray[np.float64], sigma: float) -> None:
    """map 3-D calling math functions."""
    nz, ny, nx = grid.shape
    for k in range(nz):
        for j in range(ny):
            for i in range(nx):
                v = grid[k, j, i]
                out[k, j, i] = math.exp(-(v * v) / (2.0 * sigma * sigma)) + math.sqrt(abs(v))


def sum_of_squares(x: npt.NDArray[np.float64]) -> float:
    """reduction into a scalar (+)."""
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return s


def peak(x: npt.NDArray[np.float32]) -> float:
    """reduction into a scalar (max)."""
    m = -math.inf
    for i in range(x.shape[0]):
        m = max(m, abs(x[i]))
    return m


def matvec(a: npt.NDArray[np.float64], x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> None:
    """per-row reduction: y[i] += sum_j a[i, j] * x[j] (a map over i with a reduction inside)."""
    n, m = a.shape
    for i in range(n):
        for j in range(m):
            y[i] += a[i, j] * x[j]


def softmax_rows(x: npt.NDArray[np.float32], out: npt.NDArray[np.float32]) -> None:
    """per-row reductions and a map, fused: row max, sum of exponentials, normalise."""
    n, m = x.shape
    for i in range(n):
        top = -math.inf
        for j in range(m):
            top = max(top, x[i, j])
        total = 0.0
        for j in range(m):
            total += math.exp(x[i, j] - top)
        for j in range(m):
            out[i, j] = math.exp(x[i, j] - top) / total


def heat_step(u: npt.NDArray[np.float64], out: npt.NDArray[np.float64], r: float) -> None:
    """stencil 2-D: one explicit step of the heat equation (the boundary is left as it is)."""
    ny, nx = u.shape
    for y in range(1, ny - 1):
        for x in range(1, nx - 1):
            out[y, x] = u[y, x] + r * (u[y - 1, x] + u[y + 1, x] + u[y, x - 1] + u[y, x + 1] - 4.0 * u[y, x])


def byte_histogram(data: npt.NDArray[np.int32], counts: npt.NDArray[np.int32]) -> None:
    """histogram: counts[data[i]] += 1 (data's values index counts)."""
    for i in range(data.shape[0]):
        counts[data[i]] += 1


def diffuse(u: npt.NDArray[np.float32], tmp: npt.NDArray[np.float32], steps: int) -> None:
    """time stepping: a 1-D diffusion run for `steps` steps, the two buffers trading places each step."""
    n = u.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            tmp[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        tmp[0] = u[0]
        for i in range(n - 1, n):
            tmp[i] = u[i]
        u, tmp = tmp, u


def running_total(x: npt.NDArray[np.int64], out: npt.NDArray[np.int64]) -> None:
    """prefix sum (a scan): out[i] = out[i - 1] + x[i]."""
    n = x.shape[0]
    out[0] = x[0]
    for i in range(1, n):
        out[i] = out[i - 1] + x[i]


def decay(a: float, x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> None:
    """refused: a first-order recurrence, not an associative operator on y[i - 1]."""
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + x[i]


def noisy_scale(x: npt.NDArray[np.float64], out: npt.NDArray[np.float64]) -> None:
    """refused: a call with a side effect inside the loop."""
    for i in range(x.shape[0]):
        if x[i] > 0.99:
            print("large value at", i)
        out[i] = 2.0 * x[i]


def collect_positive(x: npt.NDArray[np.float64], found: list) -> None:
    """refused: it builds a Python list."""
    for i in range(x.shape[0]):
        if x[i] > 0:
            found.append(i)


def _check() -> bool:
    """Each function against a NumPy expression of the same computation."""
    rng = np.random.default_rng(4)
    ok = True
    x = rng.standard_normal(500).astype(np.float32)
    y = rng.standard_normal(500).astype(np.float32)
    want = np.float32(1.5) * x + y
    saxpy(1.5, x, y)
    ok &= bool(np.allclose(y, want, rtol=1e-6))

    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((20, 30)).astype(np.float32)
    out = np.empty_like(a)
    blend_2d(0.3, a, b, out)
    ok &= bool(np.allclose(out, np.clip(np.float32(0.3) * a + np.float32(0.7) * b, -1, 1), rtol=1e-6))

    g = rng.standard_normal((4, 5, 6))
    o3 = np.empty_like(g)
    gaussian_3d(g, o3, 0.7)
    ok &= bool(np.allclose(o3, np.exp(-(g * g) / (2 * 0.7 * 0.7)) + np.sqrt(np.abs(g))))

    v = rng.standard_normal(300)
    ok &= bool(np.isclose(sum_of_squares(v), np.dot(v, v)))
    ok &= bool(peak(x) == np.max(np.abs(x)))

    m = rng.standard_normal((12, 9))
    w = rng.standard_normal(9)
    r = np.zeros(12)
    matvec(m, w, r)
    ok &= bool(np.allclose(r, m @ w))

    s = rng.standard_normal((7, 11)).astype(np.float32)
    so = np.empty_like(s)
    softmax_rows(s, so)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    ok &= bool(np.allclose(so, e / e.sum(axis=1, keepdims=True), rtol=1e-5))

    u = rng.standard_normal((9, 10))
    uo = u.copy()
    heat_step(u, uo, 0.1)
    ref = u.copy()
    ref[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
    ok &= bool(np.allclose(uo, ref))

    data = rng.integers(0, 32, 1000).astype(np.int32)
    counts = np.zeros(32, np.int32)
    byte_histogram(data, counts)
    ok &= bool(np.array_equal(counts, np.bincount(data, minlength=32)))

    d = rng.standard_normal(50).astype(np.float32)
    dt = np.zeros_like(d)
    ref_d = d.copy()
    for _ in range(3):
        nxt = ref_d.copy()
        nxt[1:-1] = ref_d[1:-1] + np.float32(0.25) * (ref_d[:-2] - 2 * ref_d[1:-1] + ref_d[2:])
        ref_d = nxt
    diffuse(d, dt, 3)  # three steps: the last result lands in the caller's tmp
    ok &= bool(np.allclose(dt, ref_d, rtol=1e-5))

    c = rng.integers(-5, 5, 100)
    co = np.empty_like(c)
    running_total(c, co)
    ok &= bool(np.array_equal(co, np.cumsum(c)))
    return ok


if __name__ == "__main__":
    if _check():
        print("PASS")
    else:
        print("FAIL")
        raise SystemExit(1)
