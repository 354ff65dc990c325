"""Static cost estimate of a kernel: bytes it must move and floating-point operations it performs.

An *estimate*, computed before anything runs, from the source, the spec and a problem size:

* **Bytes** are the compulsory DRAM traffic: every array argument read once if the kernel reads
  it (role ``in``/``inout``) and written once if it writes it (role ``out``/``inout``, or the scan
  saw a store through the pointer).  An ``inout`` array counts twice (read and written).
  Re-reads that caches serve and scattered partial-line accesses are not counted, so the real
  traffic is at least this (unless the kernel skips part of its data).
* **FLOPs** are counted on the kernel's syntax tree (tree-sitter, through :mod:`porter.grammars`):
  every ``+ - * /`` and compound assignment whose operands are floating point (declared float
  variables, float arrays, float literals, float-returning math calls), math functions by the
  weights of ``cost.toml`` (an FMA is 2), ``__device__`` helpers inlined at their call sites.
  The per-thread count is multiplied by the trip count of each enclosing ``for`` loop whose
  bounds evaluate from the size symbols, the scalar arguments, ``#define``s and the launch
  geometry (thread 0's view: ``threadIdx``/``blockIdx`` are 0, so a grid-stride loop runs
  ``n / (gridDim * blockDim)`` times), then by the number of launched threads.  An ``if`` counts
  its heavier branch for every thread.  Integer arithmetic (index computations) is not counted.
  A matmul's K loop gives ``2*M*N*K``.

Loops whose trip count cannot be evaluated count once and leave a note.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np

from porter.harness.inputs import element_count, scalar_value
from porter.harness.spec import geometry
from porter.model import ArgSpec, FileScan, Kernel, KernelSpec, Role
from porter.results import KernelCost
from porter.scan import work

# --------------------------------------------------------------------------- bytes


def count_bytes(
    spec: KernelSpec, size: Mapping[str, int], kernel: Kernel | None = None
) -> tuple[int, int, list[str]]:
    """(bytes read, bytes written, notes) of the compulsory traffic at `size`."""
    read = written = 0
    notes: list[str] = []
    params = {p.name: p for p in kernel.params} if kernel is not None else {}
    for arg in spec.args:
        if arg.role is Role.SCALAR:
            continue
        nbytes = element_count(arg, size) * np.dtype(arg.dtype).itemsize
        param = params.get(arg.name)
        reads = arg.role in (Role.IN, Role.INOUT)
        writes = arg.role in (Role.OUT, Role.INOUT) or bool(
            param is not None and param.written and not param.const
        )
        if reads:
            read += nbytes
        if writes:
            written += nbytes
        if reads and writes:
            notes.append(f"{arg.name} is read and written: counted twice ({nbytes} bytes each way)")
    return read, written, notes


# --------------------------------------------------------------------------- FLOPs


def _scalar(arg: ArgSpec, size: Mapping[str, int]) -> int | float:
    value: int | float = scalar_value(arg, size).item()
    return value


def count_flops(
    source: str,
    kernel: str,
    spec: KernelSpec,
    size: Mapping[str, int],
    scan: FileScan | None = None,
    warp_size: int = 32,
) -> tuple[dict[str, float], list[str]]:
    """Floating-point operations per thread by dtype, and notes, for `kernel` in `source` at `size`:
    the values of thread 0 at this launch, bound for :func:`porter.scan.work.count_flops`."""
    env: dict[str, int | float] = dict(size)
    grid, block, _ = geometry(spec, size)
    for axis, (g, b) in enumerate(zip((*grid, 1, 1)[:3], (*block, 1, 1)[:3], strict=True)):
        c = "xyz"[axis]
        env.update({f"gridDim_{c}": g, f"blockDim_{c}": b, f"threadIdx_{c}": 0, f"blockIdx_{c}": 0})
    env["warpSize"] = warp_size
    k = next((k for k in (scan.kernels if scan else ()) if k.name == kernel), None)
    template: list[tuple[str, str]] = []
    if k is not None and k.template_params and spec.template_args:
        template = list(zip(k.template_params, spec.template_args, strict=False))
    scalars = [
        (arg.name, functools.partial(_scalar, arg, size)) if arg.role is Role.SCALAR else None
        for arg in spec.args
    ]
    return work.count_flops(source, kernel, scan, env=env, template=template, scalar_args=scalars)


def estimate(
    source: str,
    spec: KernelSpec,
    size: Mapping[str, int],
    scan: FileScan | None = None,
    *,
    kernel: str | None = None,
    warp_size: int = 32,
) -> KernelCost:
    """The static cost of launching the spec's kernel at `size` (see the module docstring).
    UsageError when the kernel is nested too deeply for the recursive walk of its body."""
    name = (kernel or spec.kernel).split("<")[0]
    k = next((x for x in (scan.kernels if scan else ()) if x.name == name), None)
    read, written, notes = count_bytes(spec, size, k)
    grid, block, _ = geometry(spec, size)
    threads = math.prod(grid) * math.prod(block)
    try:
        per_thread, flop_notes = count_flops(source, name, spec, size, scan, warp_size)
    except RecursionError:
        from porter.errors import too_deeply_nested

        raise too_deeply_nested(scan.path if scan else None, k.line if k else None) from None
    tensor = any(m in source for m in work.data()["tensor_markers"]["markers"])
    return KernelCost(
        kernel=spec.kernel,
        size=dict(size),
        threads=threads,
        bytes_read=read,
        bytes_written=written,
        flops={d: n * threads for d, n in per_thread.items()},
        flops_per_thread=per_thread,
        tensor=tensor,
        notes=tuple(notes + flop_notes),
    )
