"""Classic loop-nest kernels as scientists write them: plain Python loops over NumPy arrays, each written
here from its mathematical definition (not copied from any benchmark suite), for `porter lift`.

Each function says what porter is expected to make of it (``expect: lifted`` with how, or ``expect:
refused`` with the dependence that decides it); bench/lift_collection.py runs ``porter lift`` on this
file and tabulates what happened against these lines.

Sizes: ``n``, ``m``, ``p``, ``q`` (``nr``, ``nq``, ``np_`` of doitgen, ``steps`` of the time loops), as
bench/lift_collection.py names them.
"""

import math

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
DATA_TYPE = np.float64  # a dtype alias, as legacy codes keep one
SHIFT = 4.0  # a module constant


# ----------------------------------------------------------------------------- BLAS-like products


def gemm(alpha: float, beta: float, A: F64, B: F64, C: F64) -> None:
    """C = alpha A B + beta C.  expect: lifted (distributed: the scaling, then k moved inside j)"""
    n, m = C.shape
    p = A.shape[1]
    for i in range(n):
        for j in range(m):
            C[i, j] *= beta
        for k in range(p):
            for j in range(m):
                C[i, j] += alpha * A[i, k] * B[k, j]


def matvec_reset(A: F64, x: F64, y: F64) -> None:
    """y = A x with the accumulator reset before the loop.  expect: lifted (distributed)"""
    n, m = A.shape
    for i in range(n):
        y[i] = 0.0
        for j in range(m):
            y[i] += A[i, j] * x[j]


def gesummv(alpha: float, beta: float, A: F64, B: F64, x: F64, y: F64, tmp: F64) -> None:
    """y = alpha A x + beta B x.  expect: lifted (chained assignment; distributed)"""
    n = A.shape[0]
    for i in range(n):
        tmp[i] = y[i] = 0.0
        for j in range(n):
            tmp[i] += A[i, j] * x[j]
            y[i] += B[i, j] * x[j]
        y[i] = alpha * tmp[i] + beta * y[i]


def gemver(
    alpha: float, beta: float, A: F64, u1: F64, v1: F64, u2: F64, v2: F64, w: F64, x: F64, y: F64, z: F64
) -> None:
    """A += u1 v1' + u2 v2'; x += beta A' y + z; w += alpha A x.  expect: lifted"""
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(n):
        for j in range(n):
            x[i] = x[i] + beta * A[j, i] * y[j]
    for i in range(n):
        x[i] = x[i] + z[i]
    for i in range(n):
        for j in range(n):
            w[i] = w[i] + alpha * A[i, j] * x[j]


def two_mm(alpha: float, beta: float, A: F64, B: F64, C: F64, D: F64, tmp: F64) -> None:
    """D = alpha A B C + beta D.  expect: lifted (each product distributed)"""
    n, m = tmp.shape
    p = A.shape[1]
    q = D.shape[1]
    for i in range(n):
        for j in range(m):
            tmp[i, j] = 0.0
            for k in range(p):
                tmp[i, j] += alpha * A[i, k] * B[k, j]
    for i in range(n):
        for j in range(q):
            D[i, j] *= beta
            for k in range(m):
                D[i, j] += tmp[i, k] * C[k, j]


def three_mm(A: F64, B: F64, C: F64, D: F64, E: F64, F: F64, G: F64) -> None:
    """G = (A B)(C D).  expect: lifted"""
    n, m = E.shape
    p = A.shape[1]
    q = G.shape[1]
    for i in range(n):
        for j in range(m):
            E[i, j] = 0.0
            for k in range(p):
                E[i, j] += A[i, k] * B[k, j]
    for i in range(m):
        for j in range(q):
            F[i, j] = 0.0
            for k in range(p):
                F[i, j] += C[i, k] * D[k, j]
    for i in range(n):
        for j in range(q):
            G[i, j] = 0.0
            for k in range(m):
                G[i, j] += E[i, k] * F[k, j]


def syrk(alpha: float, beta: float, A: F64, C: F64) -> None:
    """Lower triangle of C = alpha A A' + beta C.  expect: lifted (triangular, k moved inside)"""
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]


def syr2k(alpha: float, beta: float, A: F64, B: F64, C: F64) -> None:
    """Lower triangle of C = alpha (A B' + B A') + beta C.  expect: lifted (triangular)"""
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]


def trmm(alpha: float, A: F64, B: F64) -> None:
    """B = alpha A' B, A unit lower triangular, in place.  expect: lifted (i in order on the host)"""
    n, m = B.shape
    for i in range(n):
        for j in range(m):
            for k in range(i + 1, n):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]


def atax(A: F64, x: F64, y: F64, tmp: F64) -> None:
    """y = A' (A x).  expect: lifted (distributed; i moved inside for y)"""
    n, m = A.shape
    for j in range(m):
        y[j] = 0.0
    for i in range(n):
        tmp[i] = 0.0
        for j in range(m):
            tmp[i] += A[i, j] * x[j]
        for j in range(m):
            y[j] += A[i, j] * tmp[i]


def bicg(A: F64, p: F64, r: F64, q: F64, s: F64) -> None:
    """s = A' r, q = A p.  expect: lifted (distributed)"""
    n, m = A.shape
    for j in range(m):
        s[j] = 0.0
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            s[j] += r[i] * A[i, j]
            q[i] += A[i, j] * p[j]


def mvt(A: F64, x1: F64, x2: F64, y1: F64, y2: F64) -> None:
    """x1 += A y1; x2 += A' y2.  expect: lifted"""
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            x1[i] += A[i, j] * y1[j]
    for i in range(n):
        for j in range(n):
            x2[i] += A[j, i] * y2[j]


def doitgen(A: F64, C4: F64, out: F64) -> None:
    """out[r, q, :] = A[r, q, :] C4.  expect: lifted (distributed)"""
    nr, nq, np_ = A.shape
    for r in range(nr):
        for q in range(nq):
            for p in range(np_):
                out[r, q, p] = 0.0
                for s in range(np_):
                    out[r, q, p] += A[r, q, s] * C4[s, p]


# ----------------------------------------------------------------------------- statistics


def covariance(data: F64, mean: F64, cov: F64) -> None:
    """Sample covariance of the columns.  expect: lifted (means, centring, triangular products)"""
    n, m = data.shape
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= n
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = 0.0
            for k in range(n):
                cov[i, j] += data[k, i] * data[k, j]
            cov[i, j] /= n - 1.0
            cov[j, i] = cov[i, j]


def correlation(data: F64, mean: F64, stddev: F64, corr: F64) -> None:
    """Pearson correlation of the columns.  expect: lifted (np dtype conversion, math.sqrt, conditional)"""
    n, m = data.shape
    eps = np.float64(0.1)
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= n
    for j in range(m):
        stddev[j] = 0.0
        for i in range(n):
            stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        stddev[j] = math.sqrt(stddev[j] / n)
        stddev[j] = 1.0 if stddev[j] <= eps else stddev[j]
    for i in range(n):
        for j in range(m):
            data[i, j] = (data[i, j] - mean[j]) / (math.sqrt(n) * stddev[j])
    for i in range(m):
        for j in range(m):
            corr[i, j] = 0.0
            for k in range(n):
                corr[i, j] += data[k, i] * data[k, j]


# ----------------------------------------------------------------------------- stencils and time loops


def jacobi_1d(steps: int, a: F64, b: F64) -> None:
    """Three-point Jacobi, ping-pong between a and b.  expect: lifted (a kernel per nest per step)"""
    n = a.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            b[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
        for i in range(1, n - 1):
            a[i] = (b[i - 1] + b[i] + b[i + 1]) / 3.0


def jacobi_2d(steps: int, a: F64, b: F64) -> None:
    """Five-point Jacobi.  expect: lifted (a kernel per nest per step)"""
    n = a.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = 0.2 * (b[i, j] + b[i, j - 1] + b[i, j + 1] + b[i + 1, j] + b[i - 1, j])


def heat_3d(steps: int, a: F64, b: F64) -> None:
    """Explicit heat equation on a cube.  expect: lifted (a kernel per nest per step)"""
    n = a.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    b[i, j, k] = a[i, j, k] + 0.125 * (
                        a[i + 1, j, k]
                        - 2.0 * a[i, j, k]
                        + a[i - 1, j, k]
                        + a[i, j + 1, k]
                        - 2.0 * a[i, j, k]
                        + a[i, j - 1, k]
                        + a[i, j, k + 1]
                        - 2.0 * a[i, j, k]
                        + a[i, j, k - 1]
                    )
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    a[i, j, k] = b[i, j, k] + 0.125 * (
                        b[i + 1, j, k]
                        - 2.0 * b[i, j, k]
                        + b[i - 1, j, k]
                        + b[i, j + 1, k]
                        - 2.0 * b[i, j, k]
                        + b[i, j - 1, k]
                        + b[i, j, k + 1]
                        - 2.0 * b[i, j, k]
                        + b[i, j, k - 1]
                    )


def fdtd_2d(steps: int, ex: F64, ey: F64, hz: F64, fict: F64) -> None:
    """2-D finite-difference time domain (TE mode).  expect: lifted (t indexes fict; a kernel per nest per step)"""
    n, m = ex.shape
    for t in range(steps):
        for j in range(m):
            ey[0, j] = DATA_TYPE(fict[t])
        for i in range(1, n):
            for j in range(m):
                ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(n):
            for j in range(1, m):
                ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(n - 1):
            for j in range(m - 1):
                hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])


def adi(steps: int, u: F64, v: F64, p: F64, q: F64) -> None:
    """Alternating-direction implicit sweeps (a tridiagonal solve per column, then per row).
    expect: lifted (a row kernel per step: a thread per column i, each running its sweeps over j in
    order; i carries no dependence)"""
    n = u.shape[0]
    a = -0.5
    b = 2.0
    for t in range(steps):
        for i in range(1, n - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, n - 1):
                p[i, j] = -a / (a * p[i, j - 1] + b)
                q[i, j] = (u[j, i] - a * q[i, j - 1]) / (a * p[i, j - 1] + b)
            v[n - 1, i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]


def seidel_2d(steps: int, a: F64) -> None:
    """In-place nine-point Gauss-Seidel sweeps.  expect: lifted (in place: sequential in i and j; a
    wavefront per step -- a[i - 1, j + 1] and a[i + 1, j - 1] put the diagonals at d = 2 i + j, run in
    order on the host, a thread per cell)"""
    n = a.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = (
                    a[i - 1, j - 1]
                    + a[i - 1, j]
                    + a[i - 1, j + 1]
                    + a[i, j - 1]
                    + a[i, j]
                    + a[i, j + 1]
                    + a[i + 1, j - 1]
                    + a[i + 1, j]
                    + a[i + 1, j + 1]
                ) / 9.0


def gauss_seidel(steps: int, A: F64, b: F64, x: F64) -> None:
    """Gauss-Seidel iterations for A x = b (A made diagonally dominant by SHIFT * n on its diagonal).
    expect: refused (x[i] reads x[j] written by an earlier i iteration: sequential in i)"""
    n = A.shape[0]
    for t in range(steps):
        for i in range(n):
            s = b[i]
            for j in range(n):
                if j != i:
                    s -= A[i, j] * x[j]
            x[i] = s / (A[i, i] + SHIFT * n)


# ----------------------------------------------------------------------------- graphs and DP


def floyd_warshall(path: F64) -> None:
    """All-pairs shortest paths.  expect: lifted (k in order on the host; at each k, path[i, k] and
    path[k, j] are written by the step itself, but keep their values when path[k, k] >= 0: one thread
    checks it, then i and j run in parallel off row and column k -- or, on a negative cycle, that thread
    runs the step in order)"""
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])


def alignment_score(a: F64, b: F64, H: F64) -> None:
    """Needleman-Wunsch score table (match +1, mismatch -1, gap -1) of two sequences of codes.
    expect: lifted (the borders as maps; H[i, j] reads H[i, j - 1] and H[i - 1, j]: a wavefront over the
    anti-diagonals d = i + j, a launch each, a thread per cell)"""
    n = a.shape[0]
    m = b.shape[0]
    for i in range(n + 1):
        H[i, 0] = -1.0 * i
    for j in range(m + 1):
        H[0, j] = -1.0 * j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            s = 1.0 if abs(a[i - 1] - b[j - 1]) < 0.5 else -1.0
            H[i, j] = max(H[i - 1, j - 1] + s, H[i - 1, j] - 1.0, H[i, j - 1] - 1.0)


# ----------------------------------------------------------------------------- factorisations and solves


def lu(A: F64) -> None:
    """In-place LU without pivoting (right-looking), of A + SHIFT * n I.
    expect: lifted (k in order on the host; the column and the trailing update parallel per step)"""
    n = A.shape[0]
    for i in range(n):
        A[i, i] += SHIFT * n
    for k in range(n):
        for i in range(k + 1, n):
            A[i, k] /= A[k, k]
            for j in range(k + 1, n):
                A[i, j] -= A[i, k] * A[k, j]


def cholesky(A: F64) -> None:
    """In-place lower Cholesky factor (right-looking) of the symmetric matrix whose lower triangle is
    A's, shifted by SHIFT * n on the diagonal.  expect: lifted (k in order on the host)"""
    n = A.shape[0]
    for i in range(n):
        A[i, i] += SHIFT * n
    for k in range(n):
        A[k, k] = math.sqrt(A[k, k])
        for i in range(k + 1, n):
            A[i, k] /= A[k, k]
        for j in range(k + 1, n):
            for i in range(j, n):
                A[i, j] -= A[i, k] * A[j, k]


def gram_schmidt(A: F64, Q: F64, R: F64) -> None:
    """Modified Gram-Schmidt QR of A's columns (A is overwritten).  expect: lifted (k in order on the host)"""
    n, m = A.shape
    for k in range(m):
        nrm = 0.0
        for i in range(n):
            nrm += A[i, k] * A[i, k]
        R[k, k] = math.sqrt(nrm)
        for i in range(n):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, m):
            R[k, j] = 0.0
            for i in range(n):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(n):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]


def forward_solve(L: F64, x: F64) -> None:
    """Column-oriented forward substitution: x <- (L + SHIFT * n I)^-1 x.
    expect: lifted (j in order on the host; the column update parallel)"""
    n = L.shape[0]
    for j in range(n):
        x[j] /= L[j, j] + SHIFT * n
        for i in range(j + 1, n):
            x[i] -= L[i, j] * x[j]


def back_solve_rows(U: F64, x: F64) -> None:
    """Row-oriented back substitution: x <- (U + SHIFT * n I)^-1 x.
    expect: lifted (i in order on the host, as x[i] reads x[j] written by an earlier i iteration; at each
    i the j loop is a reduction into s, then one thread writes x[i])"""
    n = U.shape[0]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for j in range(i + 1, n):
            s -= U[i, j] * x[j]
        x[i] = s / (U[i, i] + SHIFT * n)


# ----------------------------------------------------------------------------- self-check


def _check() -> bool:
    """A handful of the kernels against NumPy's own formulation of the same mathematics (the collection's
    purpose is what `porter lift` does with each; bench/lift_collection.py validates every one)."""
    rng = np.random.default_rng(5)
    n, m, p = 7, 6, 5
    ok = True
    A, B, C = rng.random((n, p)), rng.random((p, m)), rng.random((n, m))
    want = 1.5 * A @ B + 0.5 * C
    gemm(1.5, 0.5, A, B, C)
    ok &= bool(np.allclose(C, want))
    M, x, y = rng.random((n, m)), rng.random(m), np.empty(n)
    matvec_reset(M, x, y)
    ok &= bool(np.allclose(y, M @ x))
    out, tmp = np.empty(m), np.empty(n)
    atax(M, x, out, tmp)
    ok &= bool(np.allclose(out, M.T @ (M @ x)))
    S = rng.random((n, n))
    F = S.copy()
    lu(F)
    lower, upper = np.tril(F, -1) + np.eye(n), np.triu(F)
    ok &= bool(np.allclose(lower @ upper, S + SHIFT * n * np.eye(n)))
    sym = S + S.T
    G = sym.copy()
    cholesky(G)
    factor = np.tril(G)
    ok &= bool(np.allclose(factor @ factor.T, sym + SHIFT * n * np.eye(n)))
    U, rhs = np.triu(rng.random((n, n))), rng.random(n)
    sol = rhs.copy()
    back_solve_rows(U, sol)
    ok &= bool(np.allclose((U + SHIFT * n * np.eye(n)) @ sol, rhs))
    dist = rng.random((n, n)) * 10
    np.fill_diagonal(dist, 0.0)
    paths = dist.copy()
    floyd_warshall(paths)
    ok &= bool(
        all(
            paths[i, j] <= paths[i, k] + paths[k, j] + 1e-12
            for i in range(n)
            for j in range(n)
            for k in range(n)
        )
    )
    return ok


if __name__ == "__main__":
    if _check():
        print("PASS")
    else:
        print("FAIL")
        raise SystemExit(1)
