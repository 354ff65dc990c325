"""`porter lift` on the loop-nest collection (samples/python/loop_nests.py) at large sizes on an NVIDIA GPU:
each lifted function's kernels against a CuPy expression of the same computation (cuBLAS / cuSOLVER where
the computation is a library routine -- the lifted matrix products are expected to lose to cuBLAS -- and
slice expressions per step for the stencils and time loops), NumPy on the CPU and the Python itself.

    python bench/lift_collection_gpu.py [--repeat 10] [--only gemm,jacobi_2d] [--scale 1.0] [--json OUT.json]
    python bench/lift_collection_gpu.py --check-cpu     # no GPU, no CuPy: the references checked first

The machinery is bench/lift_gpu.py's: the lifted kernels compiled with CuPy's RawModule and launched as
porter's plan says, the arrays already on the GPU, both sides timed with CUDA events (median after
warm-up), the lifted result checked against the CuPy one (every array the function writes) before any
time is printed; NumPy runs the same expression (written once here, ``xp`` = cupy or numpy) on the CPU;
the Python runs at a small size and its time is scaled by the work (n^3 for a product, n * steps for a
1-D time loop, ...).  A refused function gets a row with porter's reason.  Each function has a soft time
limit (``--limit`` s): past it the remaining repeats are skipped.  ``--scale`` multiplies the element
count of the largest arrays (step counts stay).

``--check-cpu`` runs, for every function at its small size, the collection's Python and the expression
with NumPy on the same drawn inputs and compares every written array, and runs porter's plan (launches
resolved, buffers allocated, CUDA text written) -- all but the compile -- so that device time is spent
only on references known to be right.  Markdown on stdout (for docs/BENCHMARKS.md); ``--json`` rewrites
its file as each row finishes, so a cut-off run keeps what it measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
import traceback
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLLECTION = ROOT / "samples" / "python" / "loop_nests.py"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import lift_gpu  # noqa: E402  (bench/ is no package: its sibling by path)

from porter.lift.ir import Refusal  # noqa: E402

TOL = 1e-9  # max |lifted - reference| over max(1, max |reference|): float64, sums of a few thousand terms


@cache
def collection() -> ModuleType:
    """samples/python/loop_nests.py, imported (its Python functions and SHIFT)."""
    spec = importlib.util.spec_from_file_location("loop_nests", COLLECTION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shift_diagonal(xp: Any, A: Any) -> Any:
    """A[i, i] += SHIFT * n, as lu and cholesky begin."""
    d = xp.arange(A.shape[0])
    A[d, d] += collection().SHIFT * A.shape[0]
    return A


def _library(xp: Any, name: str) -> Callable[..., Any] | None:
    """SciPy's (NumPy) or cupyx.scipy's (CuPy) `name` from scipy.linalg, None where it is not installed."""
    try:
        if xp is np:
            import scipy.linalg as sl  # type: ignore[import-not-found, import-untyped, unused-ignore]
        else:
            import cupyx.scipy.linalg as sl  # type: ignore[import-not-found, unused-ignore]
    except Exception:  # not installed, or a SciPy / CUDA library that will not load
        return None
    return getattr(sl, name, None)


def _triangular_solve(xp: Any, M: Any, b: Any, lower: bool) -> Any:
    """M^-1 b for triangular M: trsm/trsv where SciPy / cupyx is there, else a general solve."""
    solve = _library(xp, "solve_triangular")
    if solve is None:
        return xp.linalg.solve(M, b)
    return solve(M, b, lower=lower)


# ----------------------------------------------------------------------------- the references


def _gemm(xp: Any, alpha: float, beta: float, A: Any, B: Any, C: Any) -> dict[str, Any]:
    return {"C": alpha * (A @ B) + beta * C}


def _matvec_reset(xp: Any, A: Any, x: Any, y: Any) -> dict[str, Any]:
    return {"y": A @ x}


def _gesummv(xp: Any, alpha: float, beta: float, A: Any, B: Any, x: Any, y: Any, tmp: Any) -> dict[str, Any]:
    tmp = A @ x
    return {"tmp": tmp, "y": alpha * tmp + beta * (B @ x)}


def _gemver(xp: Any, alpha: float, beta: float, A: Any, u1: Any, v1: Any, u2: Any, v2: Any, w: Any,
            x: Any, y: Any, z: Any) -> dict[str, Any]:  # fmt: skip
    A = A + xp.outer(u1, v1) + xp.outer(u2, v2)
    x = x + beta * (A.T @ y) + z
    return {"A": A, "x": x, "w": w + alpha * (A @ x)}


def _two_mm(xp: Any, alpha: float, beta: float, A: Any, B: Any, C: Any, D: Any, tmp: Any) -> dict[str, Any]:
    tmp = alpha * (A @ B)
    return {"tmp": tmp, "D": beta * D + tmp @ C}


def _three_mm(xp: Any, A: Any, B: Any, C: Any, D: Any, E: Any, F: Any, G: Any) -> dict[str, Any]:
    E, F = A @ B, C @ D
    return {"E": E, "F": F, "G": E @ F}


def _syrk(xp: Any, alpha: float, beta: float, A: Any, C: Any) -> dict[str, Any]:
    return {"C": xp.tril(alpha * (A @ A.T) + beta * C) + xp.triu(C, 1)}


def _syr2k(xp: Any, alpha: float, beta: float, A: Any, B: Any, C: Any) -> dict[str, Any]:
    return {"C": xp.tril(alpha * (A @ B.T + B @ A.T) + beta * C) + xp.triu(C, 1)}


def _trmm(xp: Any, alpha: float, A: Any, B: Any) -> dict[str, Any]:
    return {"B": alpha * (B + xp.tril(A, -1).T @ B)}


def _atax(xp: Any, A: Any, x: Any, y: Any, tmp: Any) -> dict[str, Any]:
    tmp = A @ x
    return {"tmp": tmp, "y": A.T @ tmp}


def _bicg(xp: Any, A: Any, p: Any, r: Any, q: Any, s: Any) -> dict[str, Any]:
    return {"q": A @ p, "s": A.T @ r}


def _mvt(xp: Any, A: Any, x1: Any, x2: Any, y1: Any, y2: Any) -> dict[str, Any]:
    return {"x1": x1 + A @ y1, "x2": x2 + A.T @ y2}


def _doitgen(xp: Any, A: Any, C4: Any, out: Any) -> dict[str, Any]:
    return {"out": (A.reshape(-1, A.shape[2]) @ C4).reshape(A.shape)}


def _covariance(xp: Any, data: Any, mean: Any, cov: Any) -> dict[str, Any]:
    n = data.shape[0]
    mean = data.sum(axis=0) / n
    data = data - mean
    return {"data": data, "mean": mean, "cov": (data.T @ data) / (n - 1.0)}


def _correlation(xp: Any, data: Any, mean: Any, stddev: Any, corr: Any) -> dict[str, Any]:
    n = data.shape[0]
    mean = data.sum(axis=0) / n
    d = data - mean
    stddev = xp.sqrt((d * d).sum(axis=0) / n)
    stddev = xp.where(stddev <= 0.1, 1.0, stddev)
    data = d / (math.sqrt(n) * stddev)
    return {"data": data, "mean": mean, "stddev": stddev, "corr": data.T @ data}


def _jacobi_1d(xp: Any, steps: int, a: Any, b: Any) -> dict[str, Any]:
    for _ in range(steps):
        b[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0
        a[1:-1] = (b[:-2] + b[1:-1] + b[2:]) / 3.0
    return {"a": a, "b": b}


def _jacobi_2d(xp: Any, steps: int, a: Any, b: Any) -> dict[str, Any]:
    def sweep(src: Any, dst: Any) -> None:
        c = src[1:-1, 1:-1]
        dst[1:-1, 1:-1] = 0.2 * (c + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1])

    for _ in range(steps):
        sweep(a, b)
        sweep(b, a)
    return {"a": a, "b": b}


def _heat_3d(xp: Any, steps: int, a: Any, b: Any) -> dict[str, Any]:
    def sweep(s: Any, dst: Any) -> None:
        c = s[1:-1, 1:-1, 1:-1]
        dst[1:-1, 1:-1, 1:-1] = c + 0.125 * (
            s[2:, 1:-1, 1:-1] - 2.0 * c + s[:-2, 1:-1, 1:-1]
            + s[1:-1, 2:, 1:-1] - 2.0 * c + s[1:-1, :-2, 1:-1]
            + s[1:-1, 1:-1, 2:] - 2.0 * c + s[1:-1, 1:-1, :-2]
        )  # fmt: skip

    for _ in range(steps):
        sweep(a, b)
        sweep(b, a)
    return {"a": a, "b": b}


def _fdtd_2d(xp: Any, steps: int, ex: Any, ey: Any, hz: Any, fict: Any) -> dict[str, Any]:
    for t in range(steps):
        ey[0, :] = fict[t]
        ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {"ex": ex, "ey": ey, "hz": hz}


def _adi(xp: Any, steps: int, u: Any, v: Any, p: Any, q: Any) -> dict[str, Any]:
    """Every column i at once, the sweeps over j in order (a vector operation per j)."""
    n = u.shape[0]
    a, b = -0.5, 2.0
    for _ in range(steps):
        v[0, 1:-1] = 1.0
        p[1:-1, 0] = 0.0
        q[1:-1, 0] = v[0, 1:-1]
        for j in range(1, n - 1):
            den = a * p[1:-1, j - 1] + b
            p[1:-1, j] = -a / den
            q[1:-1, j] = (u[j, 1:-1] - a * q[1:-1, j - 1]) / den
        v[n - 1, 1:-1] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, 1:-1] = p[1:-1, j] * v[j + 1, 1:-1] + q[1:-1, j]
    return {"v": v, "p": p, "q": q}


def _fronts(
    xp: Any, shape: tuple[int, int], rows: range, cols: range, weight: int
) -> tuple[Any, list[slice]]:
    """The flat indices (into an array of `shape`) of the cells rows x cols, sorted by the diagonal
    ``weight * i + j``, and a slice of them per diagonal, in order: a wavefront's fronts."""
    i, j = np.meshgrid(np.arange(rows.start, rows.stop), np.arange(cols.start, cols.stop), indexing="ij")
    d, flat = (weight * i + j).ravel(), (i * shape[1] + j).ravel()
    order = np.argsort(d, kind="stable")
    cuts = [0, *(np.flatnonzero(np.diff(d[order])) + 1).tolist(), len(flat)]
    return xp.asarray(flat[order]), [slice(a, b) for a, b in zip(cuts, cuts[1:], strict=False)]


def _seidel_2d(xp: Any, steps: int, a: Any) -> dict[str, Any]:
    """The in-place sweep as a wavefront over the diagonals 2 i + j (what each cell reads of its row
    above and its left neighbour is on an earlier one): per front, its cells' nine neighbours gathered
    at once and summed."""
    n = a.shape[0]
    flat = a.reshape(-1)
    cells, fronts = _fronts(xp, a.shape, range(1, n - 1), range(1, n - 1), 2)
    near = cells[None, :] + xp.asarray([di * n + dj for di in (-1, 0, 1) for dj in (-1, 0, 1)])[:, None]
    for _ in range(steps):
        for f in fronts:
            flat[cells[f]] = flat[near[:, f]].sum(axis=0) / 9.0
    return {"a": a}


def _gauss_seidel(xp: Any, steps: int, A: Any, b: Any, x: Any) -> dict[str, Any]:
    """An i at a time (x[i] reads the x[j] of earlier i), each a dot product."""
    n = A.shape[0]
    diag = xp.diag(A) + collection().SHIFT * n
    for _ in range(steps):
        for i in range(n):
            x[i] = (b[i] - (A[i] @ x - A[i, i] * x[i])) / diag[i]
    return {"x": x}


def _nonnegative(args: dict[str, Any]) -> None:
    """Edge weights >= 0 (a shortest-path problem; no negative cycle): path[k, k] stays >= 0."""
    args["path"] = np.abs(args["path"])


def _floyd_warshall(xp: Any, path: Any) -> dict[str, Any]:
    """A step per k, all (i, j) at once: exact when path[k, k] >= 0 (row and column k keep their
    values in the step), as _nonnegative's weights keep it."""
    if bool((xp.diag(path) < 0).any()):
        raise ValueError("the reference needs path[k, k] >= 0 (weights >= 0)")
    for k in range(path.shape[0]):
        path = xp.minimum(path, path[:, k : k + 1] + path[k : k + 1, :])
    return {"path": path}


def _alignment_score(xp: Any, a: Any, b: Any, H: Any) -> dict[str, Any]:
    """The borders, then a wavefront over the anti-diagonals i + j: per front, the three neighbours
    gathered at once, each with its score (the match table computed for all cells first)."""
    n, m = a.shape[0], b.shape[0]
    H[:, 0] = -1.0 * xp.arange(n + 1)
    H[0, :] = -1.0 * xp.arange(m + 1)
    flat, w = H.reshape(-1), m + 1
    cells, fronts = _fronts(xp, H.shape, range(1, n + 1), range(1, m + 1), 1)
    near = cells[None, :] - xp.asarray([w + 1, w, 1])[:, None]
    match = xp.where(xp.abs(a[:, None] - b[None, :]) < 0.5, 1.0, -1.0).reshape(-1)
    i, j = cells // w, cells % w
    gain = xp.stack([match[(i - 1) * m + j - 1], xp.full(cells.shape, -1.0), xp.full(cells.shape, -1.0)])
    for f in fronts:
        flat[cells[f]] = (flat[near[:, f]] + gain[:, f]).max(axis=0)
    return {"H": H}


def _lu(xp: Any, A: Any) -> dict[str, Any]:
    """getrf (cuSOLVER / LAPACK through lu_factor) where cupyx / SciPy is there -- A + SHIFT n I is
    column diagonally dominant, so partial pivoting swaps no rows -- else a blocked right-looking LU."""
    A = _shift_diagonal(xp, A)
    factor = _library(xp, "lu_factor")
    if factor is not None:
        return {"A": factor(A, overwrite_a=True, check_finite=False)[0]}
    n, nb = A.shape[0], 64
    for k0 in range(0, n, nb):
        k1 = min(k0 + nb, n)
        for k in range(k0, k1):  # the panel, unblocked
            A[k + 1 :, k] /= A[k, k]
            A[k + 1 :, k + 1 : k1] -= xp.outer(A[k + 1 :, k], A[k, k + 1 : k1])
        if k1 < n:
            unit_lower = xp.tril(A[k0:k1, k0:k1], -1) + xp.eye(k1 - k0)
            A[k0:k1, k1:] = _triangular_solve(xp, unit_lower, A[k0:k1, k1:], lower=True)
            A[k1:, k1:] -= A[k1:, k0:k1] @ A[k0:k1, k1:]
    return {"A": A}


def _cholesky(xp: Any, A: Any) -> dict[str, Any]:
    S = _shift_diagonal(xp, xp.tril(A) + xp.tril(A, -1).T)
    return {"A": xp.linalg.cholesky(S) + xp.triu(A, 1)}


def _gram_schmidt(xp: Any, A: Any, Q: Any, R: Any) -> dict[str, Any]:
    """Householder QR with R's diagonal made positive (what modified Gram-Schmidt gives); A is left
    holding R[k, k] Q[:, k]; R's strict lower triangle is never written."""
    Qh, Rh = xp.linalg.qr(A)
    s = xp.sign(xp.diag(Rh))
    Qh, Rh = Qh * s, Rh * s[:, None]
    return {"A": Qh * xp.diag(Rh), "Q": Qh, "R": xp.triu(Rh) + xp.tril(R, -1)}


def _forward_solve(xp: Any, L: Any, x: Any) -> dict[str, Any]:
    return {"x": _triangular_solve(xp, _shift_diagonal(xp, xp.tril(L)), x, lower=True)}


def _back_solve_rows(xp: Any, U: Any, x: Any) -> dict[str, Any]:
    return {"x": _triangular_solve(xp, _shift_diagonal(xp, xp.triu(U)), x, lower=False)}


def cases(scale: float) -> dict[str, dict[str, Any]]:
    """Per function: its large sizes, the small sizes the Python (and --check-cpu) runs at, the reference
    (``lib``, returning every array the function writes, by name), ``work`` (what the Python's time
    scales with) and ``what`` (the reference, in a few words)."""
    n1 = int(2**24 * scale)  # 1-D
    nm = int(4096 * scale**0.5)  # 2-D, O(n^2) work
    mv = int(8192 * scale**0.5)  # matrix-vector
    mm = int(2048 * scale**0.5)  # O(n^3) work
    nc = int(256 * scale ** (1 / 3))  # 3-D
    blas, slices = "matmul (cuBLAS)", "slices per step"

    def sq(n: int, *names: str) -> dict[str, int]:
        return dict.fromkeys(names or ("n",), n)

    return {
        "gemm": dict(sizes=sq(mm, "n", "p", "m"), small=sq(48, "n", "p", "m"), lib=_gemm, what=blas,
                     work=lambda s: s["n"] * s["m"] * s["p"]),
        "matvec_reset": dict(sizes=sq(mv, "n", "m"), small=sq(256, "n", "m"), lib=_matvec_reset, what=blas,
                             work=lambda s: s["n"] * s["m"]),
        "gesummv": dict(sizes=sq(mv), small=sq(192), lib=_gesummv, what=blas, work=lambda s: s["n"] ** 2),
        "gemver": dict(sizes=sq(mv), small=sq(128), lib=_gemver, what="outer + matmul (cuBLAS)",
                       work=lambda s: s["n"] ** 2),
        "two_mm": dict(sizes=sq(mm, "n", "m"), small=sq(40, "n", "m"), lib=_two_mm, what=blas,
                       work=lambda s: s["n"] * s["m"] ** 2),
        "three_mm": dict(sizes=sq(mm), small=sq(32), lib=_three_mm, what=blas, work=lambda s: s["n"] ** 3),
        "syrk": dict(sizes=sq(mm, "n", "m", "C.shape[1]"), small=sq(48, "n", "m", "C.shape[1]"), lib=_syrk,
                     what="matmul (cuBLAS) + tril", work=lambda s: s["n"] ** 2 * s["m"]),
        "syr2k": dict(sizes=sq(mm, "n", "m", "C.shape[1]"), small=sq(48, "n", "m", "C.shape[1]"), lib=_syr2k,
                      what="matmul (cuBLAS) + tril", work=lambda s: s["n"] ** 2 * s["m"]),
        "trmm": dict(sizes=sq(mm, "n", "m"), small=sq(48, "n", "m"), lib=_trmm, what=blas,
                     work=lambda s: s["n"] ** 2 * s["m"]),
        "atax": dict(sizes=sq(mv, "n", "m"), small=sq(256, "n", "m"), lib=_atax, what=blas,
                     work=lambda s: s["n"] * s["m"]),
        "bicg": dict(sizes=sq(mv, "n", "m"), small=sq(256, "n", "m"), lib=_bicg, what=blas,
                     work=lambda s: s["n"] * s["m"]),
        "mvt": dict(sizes=sq(mv), small=sq(192), lib=_mvt, what=blas, work=lambda s: s["n"] ** 2),
        "doitgen": dict(sizes=sq(nc, "nr", "nq", "np_"), small=sq(16, "nr", "nq", "np_"), lib=_doitgen,
                        what=blas, work=lambda s: s["nr"] * s["nq"] * s["np_"] ** 2),
        "covariance": dict(sizes=sq(mm), small=sq(48), lib=_covariance, what="sum + matmul (cuBLAS)",
                           work=lambda s: s["n"] ** 3),
        "correlation": dict(sizes=sq(mm), small=sq(32), lib=_correlation, what="sum + matmul (cuBLAS)",
                            work=lambda s: s["n"] ** 3),
        "jacobi_1d": dict(sizes={"n": n1, "steps": 20}, small={"n": 2**14, "steps": 4}, lib=_jacobi_1d,
                          what=slices, work=lambda s: s["n"] * s["steps"]),
        "jacobi_2d": dict(sizes={"n": nm, "steps": 20}, small={"n": 64, "steps": 4}, lib=_jacobi_2d,
                          what=slices, work=lambda s: s["n"] ** 2 * s["steps"]),
        "heat_3d": dict(sizes={"n": nc, "steps": 10}, small={"n": 16, "steps": 2}, lib=_heat_3d,
                        what=slices, work=lambda s: s["n"] ** 3 * s["steps"]),
        "fdtd_2d": dict(sizes={"n": nm, "m": nm, "fict.shape[0]": 20, "steps": 20},
                        small={"n": 64, "m": 64, "fict.shape[0]": 4, "steps": 4}, lib=_fdtd_2d,
                        what=slices, work=lambda s: s["n"] * s["m"] * s["steps"]),
        "adi": dict(sizes={"n": int(1024 * scale**0.5), "steps": 5}, small={"n": 64, "steps": 2}, lib=_adi,
                    what="a vector op per j, per step", work=lambda s: s["n"] ** 2 * s["steps"]),
        "seidel_2d": dict(sizes={"n": int(1024 * scale**0.5), "steps": 2}, small={"n": 64, "steps": 2}, lib=_seidel_2d,
                          what="a gather per diagonal 2i+j", work=lambda s: s["n"] ** 2 * s["steps"]),
        "gauss_seidel": dict(sizes={"n": mm, "steps": 2}, small={"n": 64, "steps": 2}, lib=_gauss_seidel,
                             what="a dot product per i", work=lambda s: s["n"] ** 2 * s["steps"]),
        "floyd_warshall": dict(sizes=sq(int(1024 * scale ** (1 / 3))), small=sq(32), lib=_floyd_warshall,
                               prepare=_nonnegative, what="minimum per k (weights >= 0)",
                               work=lambda s: s["n"] ** 3),
        "alignment_score": dict(sizes=sq(nm, "n", "m"), small=sq(128, "n", "m"), lib=_alignment_score,
                                what="a gather per anti-diagonal", work=lambda s: s["n"] * s["m"]),
        "lu": dict(sizes=sq(mm), small=sq(64), lib=_lu, what="lu_factor (cuSOLVER getrf)", needs="lu_factor",
                   work=lambda s: s["n"] ** 3),
        "cholesky": dict(sizes=sq(mm), small=sq(64), lib=_cholesky, what="linalg.cholesky (cuSOLVER)",
                         work=lambda s: s["n"] ** 3),
        "gram_schmidt": dict(sizes={"n": 2 * mm, "m": mm // 4}, small={"n": 128, "m": 32}, lib=_gram_schmidt,
                             what="linalg.qr (cuSOLVER)", work=lambda s: s["n"] * s["m"] ** 2),
        "forward_solve": dict(sizes=sq(nm), small=sq(512), lib=_forward_solve, needs="solve_triangular",
                              what="solve_triangular (cuBLAS trsv)", work=lambda s: s["n"] ** 2),
        "back_solve_rows": dict(sizes=sq(nm), small=sq(512), lib=_back_solve_rows, needs="solve_triangular",
                                what="solve_triangular (cuBLAS trsv)", work=lambda s: s["n"] ** 2),
    }  # fmt: skip


# ----------------------------------------------------------------------------- shared by both modes


def copies(xp: Any, args: dict[str, Any]) -> dict[str, Any]:
    """`args` with every array copied (the references and the Python write in place)."""
    return {k: v.copy() if isinstance(v, xp.ndarray) else v for k, v in args.items()}


def compare(xp: Any, got: dict[str, Any], want: dict[str, Any]) -> str:
    """'ok', or which arrays differ and by how much (relative to the largest reference value)."""
    bad = []
    for k, w in want.items():
        g = got[k]
        if tuple(g.shape) != tuple(w.shape):
            bad.append(f"{k} shape {tuple(g.shape)} != {tuple(w.shape)}")
            continue
        err = float(xp.abs(g - w).max()) / max(1.0, float(xp.abs(w).max())) if w.size else 0.0
        if not err <= TOL:  # NaN too
            bad.append(f"{k} off by {err:.2g}")
    return "ok" if not bad else "MISMATCH: " + "; ".join(bad)


def written(p: Any) -> set[str]:
    """The arrays porter's plan leaves results in."""
    return {r for r in p.results if not r.startswith("scalar:")}


def ordered(analysis: Any) -> list[tuple[str, Any]]:
    """Every function of the collection, in file order: (name, its Lifted or its Refusal)."""
    items = [(f.line, f.function, f) for f in analysis.lifted] + [
        (r.line, r.function, r) for r in analysis.refused
    ]
    first = {n: i for i, n in enumerate(collection().__dict__)}
    return [(name, x) for _, name, x in sorted(items, key=lambda t: (first.get(t[1], 1 << 30), t[0]))]


def sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def duration(ms: float) -> str:
    if ms < 1000.0:
        return f"{ms:.3g} ms"
    s = ms / 1000.0
    return f"{s:.3g} s" if s < 600 else (f"{s / 60:.3g} min" if s < 36000 else f"{s / 3600:.3g} h")


class Rows:
    """The rows so far, rewritten to `path` (JSON) after each."""

    def __init__(self, path: str, meta: dict[str, Any]) -> None:
        self.path, self.meta, self.rows = path, meta, list[dict[str, Any]]()

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if self.path:
            tmp = Path(self.path + ".tmp")
            tmp.write_text(json.dumps({**self.meta, "rows": self.rows}, indent=1, default=str))
            tmp.replace(self.path)


# ----------------------------------------------------------------------------- --check-cpu


def check_cpu(analysis: Any, table: dict[str, dict[str, Any]], only: set[str], rows: Rows) -> int:
    """Python vs the NumPy reference at the small sizes, and porter's plan, for every function."""
    from porter.lift import inputs
    from porter.lift.hostexpr import evaluate

    py = collection()
    print("| function | small size | Python vs NumPy reference | written arrays | plan launches | "
          "large size | large arrays |")  # fmt: skip
    print("|---|---|---|---|---:|---|---:|")
    failed = 0
    for name, f in ordered(analysis):
        if only and name not in only:
            continue
        if isinstance(f, Refusal):
            print(f"| `{name}` | | refused: {f.reason} | | | | |")
            rows.add({"function": name, "check": f"refused: {f.reason}"})
            continue
        case = table.get(name)
        try:
            if case is None:
                raise KeyError(f"no case for {name} in bench/lift_collection_gpu.py")
            small = inputs.default_sizes(f, case["small"])
            args = inputs.draw(f, small, seed=3)
            case.get("prepare", lambda _: None)(args)
            py_args = copies(np, args)
            t0 = time.perf_counter()
            getattr(py, name)(**py_args)
            t_py = (time.perf_counter() - t0) * 1000.0
            want = case["lib"](np, **copies(np, args))
            verdict = compare(np, py_args, want)
            p, source = lift_gpu.lifted_plan(f, args)
            outs = written(p)
            if set(want) != outs:
                verdict += f"; reference gives {sorted(want)}, porter writes {sorted(outs)}"
            missing = [k for k in p.kernels if k not in source]
            stray = {a for la in p.launches for a in la.args if isinstance(a, str) and a not in p.buffers}
            if missing or stray:
                verdict += f"; plan: kernels {missing} not in the CUDA text, buffers {sorted(stray)} unknown"
            large = inputs.default_sizes(f, case["sizes"])
            gib = (
                sum(
                    math.prod(large[d] if d in large else int(evaluate(d, large)) for d in q.shape)
                    * np.dtype(q.dtype).itemsize
                    for q in f.params
                    if q.kind == "array"
                )
                / 2**30
            )
            ok = verdict == "ok"
            verdict += f" ({duration(t_py)} Python)"
        except Exception as err:  # one function failing must not stop the rest
            traceback.print_exc(file=sys.stderr)
            print(f"| `{name}` | | error: {type(err).__name__}: {str(err)[:200]} | | | | |")
            rows.add({"function": name, "check": f"error: {type(err).__name__}: {err}"})
            failed += 1
            continue
        failed += not ok
        print(
            f"| `{name}` | {sizes_text(small)} | {verdict} | {', '.join(sorted(outs))} | {len(p.launches)} | "
            f"{sizes_text(large)} | {gib:.2f} GiB |",
            flush=True,
        )
        rows.add({"function": name, "small": small, "check": verdict, "written": sorted(outs),
                  "launches_small": len(p.launches), "sizes": large, "array_gib": gib})  # fmt: skip
    print(f"\n{'all references agree' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


# ----------------------------------------------------------------------------- the GPU run


def measure(cp: Any, f: Any, case: dict[str, Any], repeat: int, limit: float) -> dict[str, Any]:
    """One lifted function's row: check first, then the lifted kernels, CuPy, NumPy and the Python."""
    from statistics import median

    from porter.lift import inputs

    deadline = time.perf_counter() + limit
    sizes = inputs.default_sizes(f, case["sizes"])
    host = inputs.draw(f, sizes, seed=11)
    case.get("prepare", lambda _: None)(host)
    run = lift_gpu.lifted_run(cp, f, host)
    run.refresh()
    run.run()
    cp.cuda.Device().synchronize()
    dev = {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in host.items()}
    want = case["lib"](cp, **copies(cp, dev))
    check = compare(cp, run.work, want)
    if set(want) != written(run.plan):
        check += f"; reference gives {sorted(want)}, porter writes {sorted(written(run.plan))}"
    t_lift = lift_gpu.gpu_times(cp, run.run, repeat, run.refresh, deadline)
    fresh: dict[str, Any] = {}

    def refill(xp: Any, args: dict[str, Any]) -> Callable[[], None]:
        def again() -> None:
            fresh.clear()
            fresh.update(copies(xp, args))

        return again

    t_lib = lift_gpu.gpu_times(cp, lambda: case["lib"](cp, **fresh), repeat, refill(cp, dev), deadline)
    launches = len(run.plan.launches)
    del run, dev, want
    fresh.clear()
    cp.get_default_memory_pool().free_all_blocks()
    t_np = lift_gpu.cpu_times(lambda: case["lib"](np, **fresh), min(repeat, 3), refill(np, host), deadline)
    fresh.clear()
    small = inputs.default_sizes(f, case["small"])
    t_py = lift_gpu.python_ms(getattr(collection(), f.function), f, small)
    t_py *= float(case["work"](sizes)) / float(case["work"](small))
    cut = len(t_lift) < repeat or len(t_lib) < repeat
    if cut:
        check += f" (soft limit: {len(t_lift)}/{len(t_lib)} of {repeat} repeats)"
    lift_ms, lib_ms = median(t_lift), median(t_lib)
    what = case["what"]
    if "needs" in case and _library(cp, case["needs"]) is None:
        what += f" -- no cupyx.scipy.linalg.{case['needs']} here: the xp fallback"
    return {"function": f.function, "sizes": case["sizes"], "lifted_ms": lift_ms, "cupy_ms": lib_ms,
            "speedup_vs_cupy": lib_ms / lift_ms, "numpy_ms": median(t_np), "python_ms_scaled": t_py,
            "check": check, "launches": launches,
            "what": what, "patterns": list(f.patterns)}  # fmt: skip


def markdown(row: dict[str, Any]) -> str:
    name = f"`{row['function']}`"
    if "lifted_ms" not in row:
        return f"| {name} | {sizes_text(row.get('sizes') or {})} | | | | | | {row['check']} | | |"
    return (
        f"| {name} | {sizes_text(row['sizes'])} | {row['lifted_ms']:.3f} ms | {row['cupy_ms']:.3f} ms | "
        f"{row['speedup_vs_cupy']:.2f}x | {duration(row['numpy_ms'])} | {duration(row['python_ms_scaled'])} | "
        f"{row['check']} | {row['launches']} | {row['what']} |"
    )


def gpu(analysis: Any, table: dict[str, dict[str, Any]], only: set[str], args: Any, rows: Rows) -> int:
    import cupy as cp

    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    rows.meta["gpu"] = name
    print(f"GPU: {name}; repeat {args.repeat}; soft limit {args.limit:.0f} s a function\n")
    print("| function | size | lifted kernels (GPU) | CuPy (GPU) | speed-up vs CuPy | NumPy (CPU) | "
          "Python (scaled) | check | launches | CuPy expression |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---|---:|---|")
    t_all = time.perf_counter()
    for fname, f in ordered(analysis):
        if only and fname not in only:
            continue
        if isinstance(f, Refusal):
            row: dict[str, Any] = {"function": fname, "check": f"refused: {f.reason}"}
        elif fname not in table:
            row = {"function": fname, "check": "error: no case here"}
        else:
            try:
                row = measure(cp, f, table[fname], args.repeat, args.limit)
            except Exception as err:  # one function failing must not stop the rest
                traceback.print_exc(file=sys.stderr)
                msg = " ".join(f"{type(err).__name__}: {err}".split())[:300]
                row = {"function": fname, "sizes": table[fname]["sizes"], "check": f"error: {msg}"}
            finally:
                cp.get_default_memory_pool().free_all_blocks()
        row["check"] = str(row["check"]).replace("|", "\\|")
        rows.add(row)
        print(markdown(row), flush=True)
    print(f"\n{time.perf_counter() - t_all:.0f} s in all")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--only", default="", help="functions, comma-separated")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--limit", type=float, default=15.0, help="soft time limit of one function (s)")
    ap.add_argument("--json", default="", help="rows as they finish")
    ap.add_argument("--check-cpu", action="store_true", help="no GPU: the references and plans checked")
    args = ap.parse_args()
    from porter.lift.analyze import analyze

    analysis = analyze(str(COLLECTION), COLLECTION.read_text())
    table = cases(args.scale)
    only = {s for s in args.only.split(",") if s}
    rows = Rows(args.json, {"collection": str(COLLECTION.relative_to(ROOT)), "repeat": args.repeat,
                            "scale": args.scale, "mode": "check-cpu" if args.check_cpu else "gpu"})  # fmt: skip
    if args.check_cpu:
        return check_cpu(analysis, table, only, rows)
    return gpu(analysis, table, only, args, rows)


if __name__ == "__main__":
    sys.exit(main())
