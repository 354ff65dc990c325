"""CUDA kernels, and the launches that run them, for each loop pattern :mod:`porter.lift.analyze` finds.

* **map / stencil / histogram** (:func:`parallel`): one thread per iteration of up to three parallel
  loops (grid-stride in each dimension), the loop whose variable is the last index of what the nest
  writes on ``x`` so neighbouring threads touch neighbouring elements; loops beyond those, or whose
  bounds depend on another loop's variable, run inside the thread.  A histogram's scattered
  ``h[k] += v`` is an atomic add.
* **reduction** into scalars (:func:`reduction`): each thread accumulates a grid-stride share of the
  flattened iteration space, blocks combine in shared memory, and a second one-block kernel combines the
  blocks' partials in a fixed order into the result buffer (which holds the initial value).
* **row reduction** (:func:`rows`): a map over the outer loops with reductions inside: one block per
  outer iteration, its threads striding over each inner loop; an accumulator's partials meet in shared
  memory and every thread continues with the total; statements that write arrays run on thread 0.
* **scan** (:func:`scan`): a prefix over one loop with an associative operator: per-chunk totals, one
  block scanning the totals from the seed, then each chunk scanned tile by tile from its offset.

A function's kernels make one CUDA file (:func:`unit`: :data:`porter.lift.emit.PRELUDE`, then each kernel,
``extern "C"`` entry points), so the same text builds with NVRTC, runs on the CPU emulator and goes
through porter's HIP and OpenCL translators unchanged in meaning.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from porter.lift.emit import PRELUDE, Body, Scope, Unliftable, cname, dim, range_of
from porter.lift.ir import Arg, Kernel, Launch, Local
from porter.lift.types import C_TYPES, T, combine, identity


@cache
def settings() -> dict[str, Any]:
    """Block shapes and grid caps (lift.toml beside this module)."""
    return tomllib.loads((Path(__file__).parent / "lift.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class PLoop:
    """A loop run in parallel: its variable and host expressions for start, step and iteration count."""

    var: str
    start: str
    step: str
    count: str
    nonneg: bool


@dataclass
class Built:
    """What one pattern adds to the function: kernels, launches, and device buffers it needs."""

    kernels: list[Kernel] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    temporaries: list[Local] = field(default_factory=list)


def ploop(s: ast.For) -> PLoop:
    var, start, stop, step = range_of(s)
    a, b, c = ast.unparse(start), ast.unparse(stop), ast.unparse(step)
    nonneg = isinstance(start, ast.Constant) and isinstance(start.value, int) and start.value >= 0
    nonneg = nonneg and isinstance(step, ast.Constant) and isinstance(step.value, int) and step.value > 0
    return PLoop(var, a, c, f"len(range({a}, {b}, {c}))", nonneg)


def _params(scope: Scope, extra: list[str]) -> tuple[list[str], list[Arg], list[tuple[str, str]]]:
    """The kernel's C parameters, the launch's arguments and the Kernel's parameter list, for everything
    the translated body used, then `extra` (C declarations whose arguments the caller appends)."""
    decls: list[str] = []
    args: list[Arg] = []
    params: list[tuple[str, str]] = []
    for name in scope.used_arrays:
        a = scope.arrays[name]
        decls.append(f"{C_TYPES[a.dtype]}* {cname(name)}")
        args.append(Arg("array", name))
        params.append((name, "array"))
        for k in range(a.ndim):
            decls.append(f"long long {dim(name, k)}")
            args.append(Arg("scalar", f"{name}.shape[{k}]", "int64"))
            params.append((dim(name, k), "scalar:int64"))
    for name in scope.used_host:
        t = scope.host[name]
        decls.append(f"{t.c} {cname(name)}")
        args.append(Arg("scalar", name, t.dtype))
        params.append((name, f"scalar:{t.dtype}"))
    for name in scope.used_device:
        buffer, t = scope.device[name]
        decls.append(f"{t.c}* {cname(buffer)}")
        args.append(Arg("array", buffer))
        params.append((buffer, "array"))
    return decls + extra, args, params


def _loop_params(loops: list[PLoop]) -> tuple[list[str], list[Arg]]:
    decls, args = [], []
    for k, lp in enumerate(loops):
        decls += [f"long long p_s{k}", f"long long p_t{k}", f"long long p_c{k}"]
        args += [
            Arg("scalar", lp.start, "int64"),
            Arg("scalar", lp.step, "int64"),
            Arg("scalar", lp.count, "int64"),
        ]
    return decls, args


def _unit(name: str, decls: list[str], body: list[str]) -> str:
    """One kernel's text (a function's kernels share one file, :data:`PRELUDE` first)."""
    sig = ",\n    ".join(decls)
    return f'extern "C" __global__ void {name}(\n    {sig})\n{{\n' + "\n".join(body) + "\n}\n"


def unit(kernels: list[Kernel] | tuple[Kernel, ...]) -> str:
    """The CUDA file of a function's kernels."""
    return PRELUDE + "".join("\n" + k.source for k in kernels)


def _grid(count: str, block: int, cap: int) -> str:
    return f"max(1, min({cap}, ({count} + {block - 1}) // {block}))"


# --------------------------------------------------------------------------- map / stencil / histogram


@dataclass(frozen=True)
class Skew:
    """A wavefront's cell: the thread's loop variable `outer` and the diagonal `diagonal` (a host
    expression: the host loop's variable) give ``inner = diagonal - factor * outer``."""

    inner: str
    outer: str
    factor: int
    diagonal: str
    nonneg: bool


def parallel(
    name: str,
    pattern: str,
    loops: list[PLoop],
    body: list[ast.stmt],
    scope: Scope,
    function: str,
    line: int,
    skew: Skew | None = None,
) -> Built:
    """One thread per iteration of `loops` (at most three: the caller keeps the rest in `body`); `loops[0]`
    is on x.  `skew`: a wavefront's diagonal -- one more loop variable computed from the thread's."""
    cfg = settings()
    for lp in loops:
        scope.loop_vars.add(lp.var)
        if lp.nonneg:
            scope.nonneg.add(lp.var)
    if skew is not None:
        scope.loop_vars.add(skew.inner)
        if skew.nonneg:
            scope.nonneg.add(skew.inner)
    # a histogram into one small 1-D array of int32/float32: bins per block in shared memory, merged once
    private = [
        a for a in scope.atomic if scope.arrays[a].ndim == 1 and scope.arrays[a].dtype in ("int32", "float32")
    ]
    priv = private[0] if len(scope.atomic) == 1 and private else None
    cap = int(cfg["hist_private_bins"])
    if priv is not None:
        scope.private = priv
    em = Body(scope, function)
    decl_locals = em.declare(body)
    lines = em.stmts(body, "        ")
    loop_decls, loop_args = _loop_params(loops)
    skew_params: list[tuple[str, str]] = []
    if skew is not None:
        loop_decls.append("long long p_w")
        loop_args.append(Arg("scalar", skew.diagonal, "int64"))
        skew_params.append(("p_w", "scalar:int64"))
    decls, args, params = _params(scope, loop_decls)
    dims = "xyz"
    out: list[str] = []
    shared = "0"
    if priv is not None:
        ct = C_TYPES[scope.arrays[priv].dtype]
        nb = dim(priv, 0)
        out += [
            f"    extern __shared__ {ct} porter_bins[];",
            f"    const bool porter_priv = {nb} <= {cap};",
            "    const int porter_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);",
            "    const int porter_nt = blockDim.x * blockDim.y * blockDim.z;",
            f"    if (porter_priv) for (long long b = porter_t; b < {nb}; b += porter_nt) porter_bins[b] = 0;",
            "    __syncthreads();",
        ]
        size = np.dtype(scope.arrays[priv].dtype).itemsize
        shared = f"({priv}.shape[0] if {priv}.shape[0] <= {cap} else 0) * {size}"
    for k in reversed(range(len(loops))):
        d = dims[k]
        out.append(
            f"    for (long long k{k} = (long long)blockIdx.{d} * blockDim.{d} + threadIdx.{d}; k{k} < p_c{k}; "
            f"k{k} += (long long)gridDim.{d} * blockDim.{d})"
        )
    out[-1] += " {"
    for k, lp in enumerate(loops):
        out.append(f"        long long {cname(lp.var)} = p_s{k} + k{k} * p_t{k};")
    if skew is not None:
        out.append(f"        long long {cname(skew.inner)} = p_w - {skew.factor}LL * {cname(skew.outer)};")
    out += ["        " + d for d in decl_locals] + lines + ["    }"]
    if priv is not None:
        ct = C_TYPES[scope.arrays[priv].dtype]
        out += [
            "    __syncthreads();",
            f"    if (porter_priv) for (long long b = porter_t; b < {dim(priv, 0)}; b += porter_nt) {{",
            f"        {ct} c = porter_bins[b];",
            f"        if (c != 0) atomicAdd(&{cname(priv)}[b], c);",
            "    }",
        ]
    block = tuple(cfg["block"][f"d{len(loops)}"])
    caps = list(cfg["grid_cap"])
    if scope.atomic:  # each block merges its bins once: a few blocks per multiprocessor are enough
        caps[0] = min(caps[0], int(cfg["hist_blocks"]))
    grid = tuple(_grid(lp.count, block[k], caps[k]) for k, lp in enumerate(loops))
    kernel = Kernel(name, pattern, _unit(name, decls, out), tuple(params + [(f"p_{c}{k}", "scalar:int64") for k in range(len(loops)) for c in "stc"] + skew_params), line)  # fmt: skip
    return Built([kernel], [Launch(name, grid, block, tuple(args + loop_args), shared)])


# --------------------------------------------------------------------------- reductions


@dataclass(frozen=True)
class Acc:
    """A scalar accumulated over a loop: its name, operator, dtype, and the buffer holding its value."""

    name: str
    op: str
    dtype: str
    buffer: str


def _block_reduce(sh: str, acc: Acc, value: str, indent: str) -> list[str]:
    c = combine(acc.op, f"{sh}[threadIdx.x]", f"{sh}[threadIdx.x + w]", acc.dtype)
    return [
        f"{indent}{sh}[threadIdx.x] = {value};",
        f"{indent}__syncthreads();",
        f"{indent}for (int w = blockDim.x / 2; w > 0; w >>= 1) {{",
        f"{indent}    if (threadIdx.x < w) {sh}[threadIdx.x] = {c};",
        f"{indent}    __syncthreads();",
        f"{indent}}}",
    ]


def reduction(
    name: str,
    loops: list[PLoop],
    body: list[ast.stmt],
    accs: list[Acc],
    scope: Scope,
    function: str,
    line: int,
) -> Built:
    """Scalars accumulated over every iteration of `loops` (flattened); their buffers hold the initial
    values and receive the results."""
    cfg = settings()
    threads = int(cfg["block"]["reduce"])
    cap = int(cfg["reduce_blocks"])
    for lp in loops:
        scope.loop_vars.add(lp.var)
        if lp.nonneg:
            scope.nonneg.add(lp.var)
    for a in accs:
        scope.locals[a.name] = T(a.dtype)
    em = Body(scope, function)
    decl_locals = [d for d in em.declare(body) if not any(f" {cname(a.name)} " in f" {d} " for a in accs)]
    lines = em.stmts(body, "        ")
    loop_decls, loop_args = _loop_params(loops)
    part_decls = [f"{C_TYPES[a.dtype]}* part_{k}" for k, a in enumerate(accs)]
    decls, args, params = _params(scope, loop_decls + part_decls)
    total = " * ".join(f"p_c{k}" for k in range(len(loops)))
    out = [f"    __shared__ {C_TYPES[a.dtype]} sh_{k}[{threads}];" for k, a in enumerate(accs)]
    out += [f"    {C_TYPES[a.dtype]} {cname(a.name)} = {identity(a.op, a.dtype)};" for a in accs]
    out.append(f"    long long total = {total};")
    out.append(
        "    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total; "
        "k += (long long)gridDim.x * blockDim.x) {"
    )
    out.append("        long long rest = k;")
    for k, lp in enumerate(loops):  # loops[0] varies fastest
        out.append(f"        long long {cname(lp.var)} = p_s{k} + (rest % p_c{k}) * p_t{k}; rest /= p_c{k};")
    out += ["        " + d for d in decl_locals] + lines + ["    }"]
    for k, a in enumerate(accs):
        out += _block_reduce(f"sh_{k}", a, cname(a.name), "    ")
        out.append(f"    if (threadIdx.x == 0) part_{k}[blockIdx.x] = sh_{k}[0];")
    partial = Kernel(name + "_blocks", "reduction", _unit(name + "_blocks", decls, out), tuple(params), line)
    count = " * ".join(f"({lp.count})" for lp in loops)
    blocks = f"max(1, min({cap}, ({count} + {threads - 1}) // {threads}))"
    temps = [Local(f"__part_{name}_{k}", a.dtype, (str(cap),), "zeros", line) for k, a in enumerate(accs)]
    launches = [
        Launch(
            partial.name,
            (blocks,),
            (threads,),
            tuple(args + loop_args + [Arg("array", t.name) for t in temps]),
        )
    ]
    kernels = [partial]
    for k, a in enumerate(accs):
        fin = f"{name}_final_{k}"
        ct = C_TYPES[a.dtype]
        body_f = [f"    __shared__ {ct} sh[{threads}];", f"    {ct} a = {identity(a.op, a.dtype)};"]
        body_f.append(
            "    for (long long k = threadIdx.x; k < n; k += blockDim.x) a = "
            + combine(a.op, "a", "part[k]", a.dtype)
            + ";"
        )
        body_f += _block_reduce("sh", a, "a", "    ")
        body_f.append(
            "    if (threadIdx.x == 0) result[0] = " + combine(a.op, "result[0]", "sh[0]", a.dtype) + ";"
        )
        kernels.append(Kernel(fin, "reduction", _unit(fin, [f"const {ct}* part", f"{ct}* result", "long long n"], body_f),
                              ((temps[k].name, "array"), (a.buffer, "array"), ("n", "scalar:int64")), line))  # fmt: skip
        launches.append(Launch(fin, ("1",), (threads,), (Arg("array", temps[k].name), Arg("array", a.buffer), Arg("scalar", blocks, "int64"))))  # fmt: skip
    return Built(kernels, launches, temps)


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Segment:
    """One statement of a row's body: an inner loop (its threads stride over it; `accs`: the locals it
    accumulates, with their operators), or straight-line statements."""

    stmts: tuple[ast.stmt, ...]
    loop: ast.For | None = None
    accs: tuple[tuple[str, str], ...] = ()


def rows(
    name: str, outer: list[PLoop], segments: list[Segment], scope: Scope, function: str, line: int
) -> Built:
    """A block per iteration of the `outer` loops (flattened), its threads sharing each inner loop."""
    cfg = settings()
    threads = int(cfg["block"]["rows"])
    cap = int(cfg["rows_blocks"])
    for lp in outer:
        scope.loop_vars.add(lp.var)
        if lp.nonneg:
            scope.nonneg.add(lp.var)
    em = Body(scope, function)
    every = [s for seg in segments for s in ((seg.loop,) if seg.loop is not None else seg.stmts)]
    for s in every:  # the variables of the loops inside a row, for typing its locals
        for n in ast.walk(s):
            if isinstance(n, ast.For):
                scope.loop_vars.add(range_of(n)[0])
    decl_locals = em.declare(every)
    inner: list[str] = []
    shared: dict[str, str] = {}  # dtype -> shared array for its accumulators
    writes = _writes_arrays
    for seg in segments:
        if seg.loop is None:
            for s in seg.stmts:
                if writes(s):
                    inner += [
                        "        if (threadIdx.x == 0) {",
                        *em.stmt(s, "            "),
                        "        }",
                        "        __syncthreads();",
                    ]
                else:
                    inner += em.stmt(s, "        ")
            continue
        var, start, stop, step = range_of(seg.loop)
        if not (isinstance(step, ast.Constant) and isinstance(step.value, int) and step.value > 0):
            raise Unliftable(seg.loop.lineno, "an inner loop whose step is not a positive integer constant")
        cs, _ = em.expr(start)
        ce, _ = em.expr(stop)
        scope.loop_vars.add(var)
        if isinstance(start, ast.Constant) and isinstance(start.value, int) and start.value >= 0:
            scope.nonneg.add(var)
        keep = []
        for acc, op in seg.accs:
            t = scope.locals[acc]
            keep.append(f"        {t.c} seed_{acc} = {cname(acc)}; {cname(acc)} = {identity(op, t.dtype)};")
        body = em.stmts(seg.loop.body, "            ")
        v = cname(var)
        inner += keep
        inner.append(
            f"        for (long long {v} = ({cs}) + (long long)threadIdx.x * {step.value}; {v} < ({ce}); "
            f"{v} += (long long)blockDim.x * {step.value}) {{"
        )
        inner += body + ["        }"]
        for acc, op in seg.accs:
            t = scope.locals[acc]
            sh = shared.setdefault(t.dtype, f"sh_{t.dtype}")
            inner += _block_reduce(sh, Acc(acc, op, t.dtype, ""), cname(acc), "        ")
            inner.append(f"        {cname(acc)} = {combine(op, f'seed_{acc}', f'{sh}[0]', t.dtype)};")
            inner.append("        __syncthreads();")
        if any(_writes_arrays(s) for s in seg.loop.body):
            inner.append("        __syncthreads();")
    loop_decls, loop_args = _loop_params(outer)
    decls, args, params = _params(scope, loop_decls)
    out = [f"    __shared__ {C_TYPES[dt]} {sh}[{threads}];" for dt, sh in shared.items()]
    total = " * ".join(f"p_c{k}" for k in range(len(outer)))
    out.append(f"    for (long long k = blockIdx.x; k < {total}; k += gridDim.x) {{")
    out.append("        long long rest = k;")
    for k, lp in enumerate(outer):
        out.append(f"        long long {cname(lp.var)} = p_s{k} + (rest % p_c{k}) * p_t{k}; rest /= p_c{k};")
    out += ["        " + d for d in decl_locals] + inner + ["        __syncthreads();", "    }"]
    kernel = Kernel(name, "row-reduction", _unit(name, decls, out), tuple(params), line)
    count = " * ".join(f"({lp.count})" for lp in outer)
    grid = (f"max(1, min({cap}, {count}))",)
    return Built([kernel], [Launch(name, grid, (threads,), tuple(args + loop_args))])


def _writes_arrays(s: ast.stmt) -> bool:
    for n in ast.walk(s):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = list(n.targets)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        if any(isinstance(t, ast.Subscript) for t in targets):
            return True
    return False


# --------------------------------------------------------------------------- scan


@dataclass(frozen=True)
class Recurrence:
    """What a scan computes: ``out[v] = out[v - step] op term(v)`` into `out_array` (of `dtype`), from
    `seed` -- ("element", host index of out's element before the first) or ("value", host expression);
    `final`: a buffer that receives the last value (None: none)."""

    out_array: str
    term: ast.expr
    op: str
    dtype: str
    seed: tuple[str, str]
    final: str | None = None


def scan(name: str, loop: PLoop, rec: Recurrence, scope: Scope, function: str, line: int) -> Built:
    """`rec` over `loop` (or an accumulator's running value written to ``out[v]``): an inclusive scan of
    its terms from its seed."""
    out_array, term, op, dtype, seed, final = rec.out_array, rec.term, rec.op, rec.dtype, rec.seed, rec.final
    cfg = settings()
    threads = int(cfg["block"]["scan"])
    chunks = int(cfg["scan_chunks"])
    scope.loop_vars.add(loop.var)
    if loop.nonneg:
        scope.nonneg.add(loop.var)
    em = Body(scope, function)
    code, t = em.expr(term)
    ct = C_TYPES[dtype]
    want = T(dtype)
    from porter.lift.emit import cast

    value = cast(code, t, want)
    loop_decls, loop_args = _loop_params([loop])
    decls, args, params = _params(scope, loop_decls)
    if out_array not in scope.used_arrays:
        scope.use(scope.used_arrays, out_array)
        decls, args, params = _params(scope, loop_decls)
    ident = identity(op, dtype)
    # 1: each chunk's total
    k1 = [
        f"    __shared__ {ct} sh[{threads}];",
        "    long long chunk = (p_c0 + gridDim.x - 1) / gridDim.x;",
        "    long long lo = blockIdx.x * chunk, hi = min(lo + chunk, p_c0);",
        f"    {ct} a = {ident};",
        "    for (long long k0 = lo + threadIdx.x; k0 < hi; k0 += blockDim.x) {",
        f"        long long {cname(loop.var)} = p_s0 + k0 * p_t0;",
        f"        a = {combine(op, 'a', value, dtype)};",
        "    }",
        *_block_reduce("sh", Acc("a", op, dtype, ""), "a", "    "),
        "    if (threadIdx.x == 0) sums[blockIdx.x] = sh[0];",
    ]
    n1 = f"{name}_chunks"
    sums = Local(f"__scan_{name}_sums", dtype, (str(chunks),), "zeros", line)
    seed_kind, seed_value = seed
    # 2: the chunks' offsets from the seed -- an exclusive scan of at most `chunks` totals by one block,
    # `per` totals a thread (one thread walking them serially waited on memory for each: 0.3 ms on a GPU)
    seed_decl = (
        [f"const {ct}* seed_array", "long long seed_index"] if seed_kind == "element" else [f"{ct} seed"]
    )
    seed_read = "seed_array[seed_index]" if seed_kind == "element" else "seed"
    per = (chunks + threads - 1) // threads
    k2 = [
        f"    __shared__ {ct} part[{threads}];",
        "    const int t = threadIdx.x;",
        f"    {ct} mine[{per}];",
        f"    {ct} run = {ident};",
        f"    for (int j = 0; j < {per}; ++j) {{",
        f"        long long b = (long long)t * {per} + j;",
        f"        mine[j] = b < n ? sums[b] : {ident};",
        f"        run = {combine(op, 'run', 'mine[j]', dtype)};",
        "    }",
        "    part[t] = run;",
        "    __syncthreads();",
        f"    for (int w = 1; w < {threads}; w <<= 1) {{",
        f"        {ct} y = t >= w ? part[t - w] : {ident};",
        "        __syncthreads();",
        f"        part[t] = {combine(op, 'y', 'part[t]', dtype)};",
        "        __syncthreads();",
        "    }",
        f"    {ct} seed_value = {seed_read};",
        f"    {ct} before = t > 0 ? {combine(op, 'seed_value', 'part[t - 1]', dtype)} : seed_value;",
        f"    for (int j = 0; j < {per}; ++j) {{",
        f"        long long b = (long long)t * {per} + j;",
        "        if (b < n) sums[b] = before;",
        f"        before = {combine(op, 'before', 'mine[j]', dtype)};",
        "    }",
        *([f"    if (t == {threads - 1}) final_value[0] = before;"] if final else []),
    ]
    n2 = f"{name}_offsets"
    # 3: each chunk scanned from its offset, a tile of `items` elements per thread at a time: loaded
    # coalesced into shared memory, each thread scans its run of `items`, the threads' totals are scanned
    # (Hillis-Steele), and the tile goes back out coalesced
    items = int(cfg["scan_items"])
    width = threads * items
    v = cname(loop.var)

    def at(i: str) -> str:  # a tile index skewed by one word per 32: a thread's run of `items` consecutive
        return f"tile[({i}) + (({i}) >> 5)]"  # elements would otherwise fall in a few banks

    k3 = [
        f"    __shared__ {ct} tile[{width + width // 32}];",
        f"    __shared__ {ct} part[{threads}];",
        f"    __shared__ {ct} carry;",
        "    const int t = threadIdx.x;",
        "    long long chunk = (p_c0 + gridDim.x - 1) / gridDim.x;",
        "    long long lo = blockIdx.x * chunk, hi = min(lo + chunk, p_c0);",
        "    if (t == 0) carry = sums[blockIdx.x];",
        "    __syncthreads();",
        f"    for (long long base = lo; base < hi; base += {width}) {{",
        f"        for (int j = 0; j < {items}; ++j) {{",
        f"            long long k0 = base + j * {threads} + t;",
        f"            {ct} x = {ident};",
        "            if (k0 < hi) {",
        f"                long long {v} = p_s0 + k0 * p_t0;",
        f"                x = {value};",
        "            }",
        f"            {at(f'j * {threads} + t')} = x;",
        "        }",
        "        __syncthreads();",
        f"        {ct} run = {ident};",
        f"        for (int j = 0; j < {items}; ++j) {{",
        f"            run = {combine(op, 'run', at(f't * {items} + j'), dtype)};",
        f"            {at(f't * {items} + j')} = run;",
        "        }",
        "        part[t] = run;",
        "        __syncthreads();",
        f"        for (int w = 1; w < {threads}; w <<= 1) {{",
        f"            {ct} y = t >= w ? part[t - w] : {ident};",
        "            __syncthreads();",
        f"            part[t] = {combine(op, 'y', 'part[t]', dtype)};",
        "            __syncthreads();",
        "        }",
        f"        {ct} before = t > 0 ? {combine(op, 'carry', 'part[t - 1]', dtype)} : carry;",
        f"        for (int j = 0; j < {items}; ++j)",
        f"            {at(f't * {items} + j')} = {combine(op, 'before', at(f't * {items} + j'), dtype)};",
        "        __syncthreads();",
        f"        for (int j = 0; j < {items}; ++j) {{",
        f"            long long k0 = base + j * {threads} + t;",
        "            if (k0 < hi) {",
        f"                long long {v} = p_s0 + k0 * p_t0;",
        f"                {cname(out_array)}[{_index_of(scope, out_array, loop.var)}] = {at(f'j * {threads} + t')};",
        "            }",
        "        }",
        f"        if (t == 0) carry = {at(str(width - 1))};",
        "        __syncthreads();",
        "    }",
    ]
    n3 = f"{name}_apply"
    blocks = f"max(1, min({chunks}, ({loop.count} + {threads - 1}) // {threads}))"
    kernels = [
        Kernel(n1, "scan", _unit(n1, decls + [f"{ct}* sums"], k1), tuple(params), line),
        Kernel(n2, "scan", _unit(n2, [f"{ct}* sums", "long long n", *seed_decl, *([f"{ct}* final_value"] if final else [])], k2), (), line),
        Kernel(n3, "scan", _unit(n3, decls + [f"const {ct}* sums"], k3), tuple(params), line),
    ]  # fmt: skip
    seed_args = (
        [Arg("array", out_array), Arg("scalar", seed_value, "int64")]
        if seed_kind == "element"
        else [Arg("scalar", seed_value, dtype)]
    )
    launches = [
        Launch(n1, (blocks,), (threads,), tuple(args + loop_args + [Arg("array", sums.name)])),
        Launch(n2, ("1",), (threads,), (Arg("array", sums.name), Arg("scalar", blocks, "int64"), *seed_args,
                                  *([Arg("array", final)] if final else []))),
        Launch(n3, (blocks,), (threads,), tuple(args + loop_args + [Arg("array", sums.name)])),
    ]  # fmt: skip
    return Built(kernels, launches, [sums])


def _index_of(scope: Scope, array: str, var: str) -> str:
    a = scope.arrays[array]
    if a.ndim != 1:
        raise Unliftable(0, f"a scan into {array}, which is not one-dimensional")
    return cname(var)


# --------------------------------------------------------------------------- single statements


def single(name: str, stmts: list[ast.stmt], scope: Scope, function: str, line: int) -> Built:
    """Statements outside any loop (``out[0] = x[0]``): one thread."""
    em = Body(scope, function)
    decl_locals = em.declare(stmts)
    lines = em.stmts(stmts, "    ")
    decls, args, params = _params(scope, [])
    body = [
        "    if (blockIdx.x != 0 || threadIdx.x != 0) return;",
        *["    " + d for d in decl_locals],
        *lines,
    ]
    kernel = Kernel(name, "statements", _unit(name, decls, body), tuple(params), line)
    return Built([kernel], [Launch(name, ("1",), (1,), tuple(args))])
