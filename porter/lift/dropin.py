"""The generated module of `porter lift`: each lifted function under its own name and signature, running
its kernels through CuPy (NVIDIA), HIP Python (AMD) or pyopencl, and the original Python, with a
warning, where none finds a device.

The module is plain Python a reader can follow: the kernel sources as strings, a small runtime class per
GPU stack (compile once per process, upload, launch, download), and per function the same statements the
plan has -- its sizes bound by name, its arrays allocated as the original allocates them, each launch with
the host expressions of the user's own code, time loops as Python loops, swaps as swaps -- then the
arrays the function writes copied back into the caller's arrays and its value returned.

``PORTER_LIFT_BACKEND=cupy|hip|opencl|python`` chooses the stack (``python``: the original);
``PORTER_LIFT_DEVICE=gpu`` refuses a CPU OpenCL device (pyopencl prefers a GPU anyway).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from porter.lift.ir import Arg, Launch, Lifted, Local, Repeat

RUNTIME = r'''
import os as _os
import warnings as _warnings

import numpy as _np


class _CuPy:
    name = "cupy"

    def __init__(self):
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
        self.cp = cupy
        self.modules = {}

    def function(self, source, entry):
        mod = self.modules.get(source)
        if mod is None:
            mod = self.modules[source] = self.cp.RawModule(code=source, options=("-std=c++17",))
        return mod.get_function(entry)

    def upload(self, a):
        return self.cp.asarray(_np.ascontiguousarray(a))

    def download(self, buf):
        return self.cp.asnumpy(buf)

    def launch(self, source, entry, grid, block, args, shared=0, argmap=None):
        self.function(source, entry)(tuple(grid), tuple(block), tuple(args), shared_mem=int(shared))


class _Hip:
    name = "hip"

    def __init__(self):
        from hip import hip, hiprtc

        err, count = hip.hipGetDeviceCount()
        if err != hip.hipError_t.hipSuccess or count < 1:
            raise RuntimeError("no HIP device")
        self.hip, self.rtc = hip, hiprtc
        props = hip.hipDeviceProp_t()
        self._ok(hip.hipGetDeviceProperties(props, 0))
        self.arch = props.gcnArchName
        self.functions = {}
        self.modules = []

    def _ok(self, result):
        err = result[0] if isinstance(result, tuple) else result
        if err not in (self.hip.hipError_t.hipSuccess, getattr(self.rtc, "hiprtcResult", None) and self.rtc.hiprtcResult.HIPRTC_SUCCESS):
            raise RuntimeError(f"HIP error {err}")
        return result[1] if isinstance(result, tuple) and len(result) == 2 else result

    def function(self, source, entry):
        key = (source, entry)
        if key not in self.functions:
            rtc = self.rtc
            prog = self._ok(rtc.hiprtcCreateProgram(source.encode(), b"lifted.hip", 0, [], []))
            opts = [b"--offload-arch=" + (self.arch if isinstance(self.arch, bytes) else str(self.arch).encode()), b"-std=c++17"]
            err, = rtc.hiprtcCompileProgram(prog, len(opts), opts)
            if err != rtc.hiprtcResult.HIPRTC_SUCCESS:
                _, size = rtc.hiprtcGetProgramLogSize(prog)
                log = bytearray(size)
                rtc.hiprtcGetProgramLog(prog, log)
                raise RuntimeError(log.decode(errors="replace"))
            size = self._ok(rtc.hiprtcGetCodeSize(prog))
            code = bytearray(size)
            self._ok(rtc.hiprtcGetCode(prog, code))
            module = self._ok(self.hip.hipModuleLoadData(code))
            self.modules.append(module)
            self.functions[key] = self._ok(self.hip.hipModuleGetFunction(module, entry.encode()))
        return self.functions[key]

    def upload(self, a):
        a = _np.ascontiguousarray(a)
        ptr = self._ok(self.hip.hipMalloc(max(1, a.nbytes)))
        self._ok(self.hip.hipMemcpy(ptr, a, a.nbytes, self.hip.hipMemcpyKind.hipMemcpyHostToDevice))
        return (ptr, a.shape, a.dtype)

    def download(self, buf):
        ptr, shape, dtype = buf
        out = _np.empty(shape, dtype)
        self._ok(self.hip.hipMemcpy(out, ptr, out.nbytes, self.hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        return out

    def launch(self, source, entry, grid, block, args, shared=0, argmap=None):
        g = [*grid, 1, 1][:3]
        b = [*block, 1, 1][:3]
        extra = tuple(a[0] if isinstance(a, tuple) else _np.ctypeslib.as_ctypes_type(a.dtype)(a.item()) for a in args)
        self._ok(self.hip.hipModuleLaunchKernel(self.function(source, entry), *g, *b, sharedMemBytes=int(shared),
                                                stream=None, kernelParams=None, extra=extra))
        self._ok(self.hip.hipDeviceSynchronize())


class _OpenCL:
    name = "opencl"

    def __init__(self):
        import pyopencl as cl

        gpus, cpus = [], []
        for platform in cl.get_platforms():
            for d in platform.get_devices():
                (gpus if d.type & cl.device_type.GPU else cpus).append(d)
        if _os.environ.get("PORTER_LIFT_DEVICE") == "gpu":
            cpus = []
        devices = gpus or cpus
        if not devices:
            raise RuntimeError("no OpenCL device")
        self.cl = cl
        self.ctx = cl.Context([devices[0]])
        self.queue = cl.CommandQueue(self.ctx)
        self.programs = {}
        self.kernels = {}

    def function(self, source, entry):
        k = self.kernels.get((source, entry))
        if k is None:
            prog = self.programs.get(source)
            if prog is None:
                prog = self.programs[source] = self.cl.Program(self.ctx, source).build()
            k = self.kernels[(source, entry)] = self.cl.Kernel(prog, entry)
        return k

    def upload(self, a):
        a = _np.ascontiguousarray(a)
        mf = self.cl.mem_flags
        return (self.cl.Buffer(self.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) if a.nbytes else
                self.cl.Buffer(self.ctx, mf.READ_WRITE, 1), a.shape, a.dtype)

    def download(self, buf):
        b, shape, dtype = buf
        out = _np.empty(shape, dtype)
        if out.nbytes:
            self.cl.enqueue_copy(self.queue, out, b)
        return out

    def launch(self, source, entry, grid, block, args, shared=0, argmap=None):
        k = self.function(source, entry)
        values = [a[0] if isinstance(a, tuple) else a for a in args]
        if argmap is not None:  # the OpenCL kernel's own order; None: a __local buffer of the shared bytes
            values = [values[m] if m is not None else self.cl.LocalMemory(max(1, int(shared))) for m in argmap]
        k.set_args(*values)
        g = [*grid, 1, 1][: len(block)]
        self.cl.enqueue_nd_range_kernel(self.queue, k, [int(x) * int(y) for x, y in zip(g, block)], [int(y) for y in block])
        self.queue.finish()


_RUNTIMES = {"cupy": _CuPy, "hip": _Hip, "opencl": _OpenCL}
_CHOSEN = []
_WHY = []


def _runtime():
    """The first GPU stack that finds a device (CuPy, then HIP Python, then pyopencl), once per process."""
    if _CHOSEN:
        return _CHOSEN[0]
    want = _os.environ.get("PORTER_LIFT_BACKEND", "")
    names = [want] if want else list(_RUNTIMES)
    chosen = None
    for name in names:
        make = _RUNTIMES.get(name)
        if make is None:
            continue
        try:
            chosen = make()
            break
        except Exception as err:  # an absent package or device: try the next stack
            _WHY.append(f"{name}: {err}")
    _CHOSEN.append(chosen)
    return chosen


def _fallback(name):
    why = "; ".join(_WHY) or "PORTER_LIFT_BACKEND=python"
    _warnings.warn(f"{name}: no GPU runtime found ({why}); running the original Python", RuntimeWarning, stacklevel=3)
'''


STACKS = (("cupy", "cuda"), ("hip", "hip"), ("opencl", "opencl"))
Entries = Mapping[str, tuple[str, tuple[int | None, ...] | None]]


def module(
    origin: str,
    lifted: tuple[Lifted, ...],
    sources: Mapping[str, Mapping[str, tuple[str, Entries]]],
    imports: tuple[str, ...],
) -> str:
    """The module's text. `sources`: function -> dialect -> (the kernels' text, CUDA kernel -> (its
    entry, its argument order: None for CUDA's own; in it None marks an added ``__local`` buffer))."""
    names = ", ".join(f.function for f in lifted)
    out = [
        f'"""Generated by porter lift from {origin}: {names}, on a GPU.\n\n'
        "Each function keeps the original's name and signature and runs its kernels through CuPy (NVIDIA),\n"
        "HIP Python (AMD) or pyopencl (PORTER_LIFT_BACKEND=cupy|hip|opencl|python chooses); without any of\n"
        "them it runs the original Python with a warning.  Every kernel here was validated against the\n"
        'original by porter (report.json beside this file)."""\n',
        "# ruff: noqa",
        *imports,
        RUNTIME,
    ]
    for f in lifted:
        src = sources.get(f.function, {})
        out.append(f"_SOURCES_{f.function} = {{")
        for stack, dialect in STACKS:
            if dialect in src:
                out.append(f"    {stack!r}: {src[dialect][0]!r},")
        out.append("}")
        out.append(f"_ENTRIES_{f.function} = {{")  # CUDA kernel -> (its entry, its argument order) per stack
        for stack, dialect in STACKS:
            if dialect in src:
                out.append(f"    {stack!r}: {dict(src[dialect][1])!r},")
        out.append("}\n")
        out.append(_original(f))
        out.append(_function(f))
    return "\n".join(out) + "\n"


def _original(f: Lifted) -> str:
    """The original function, renamed, as the fallback."""
    tree = ast.parse(f.source)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    fn.name = f"_original_{f.function}"
    fn.decorator_list = []
    return ast.unparse(tree) + "\n"


def _function(f: Lifted) -> str:
    tree = ast.parse(f.source)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    params = ", ".join(a.arg for a in fn.args.args)
    doc = ast.get_docstring(fn)
    lines = [f"def {f.function}({params}):"]
    lines.append(f'    """{(doc or f.function).splitlines()[0]} (GPU kernels by porter lift)"""')
    lines.append("    rt = _runtime()")
    lines.append(f"    src = _SOURCES_{f.function}.get(rt.name) if rt is not None else None")
    lines.append(f"    entries = _ENTRIES_{f.function}.get(rt.name) if rt is not None else None")
    lines.append("    if src is None:")
    lines.append(f'        _fallback("{f.function}")')
    lines.append(f"        return _original_{f.function}({params})")
    for name, expr in f.sizes:
        lines.append(f"    {name} = {expr}")
    for local in f.locals:
        lines.append(f"    {local.name} = {_allocation(local)}")
    buffers = (
        [p.name for p in f.params if p.kind == "array"]
        + [x.name for x in f.locals]
        + [t.name for t in f.temporaries]
    )
    for t in f.temporaries:
        lines.append(f"    {t.name} = {_allocation(t)}")
    lines.append("    b = {" + ", ".join(f"{n!r}: rt.upload({n})" for n in buffers) + "}")
    lines.append("    first = dict(b)  # the buffers of the caller's arrays, whatever swaps do to the names")
    for step in f.steps:
        lines += _step(step, "    ")
    arrays = [p.name for p in f.params if p.kind == "array"]
    for name in (n for n in arrays if n in f.writes):
        lines.append(f"    {name}[...] = rt.download(first[{name!r}]).reshape({name}.shape)")
    if f.returns.startswith("scalar:"):
        lines.append(f"    return rt.download(b[{f.returns[7:]!r}]).reshape(-1)[0]")
    elif f.returns in arrays:  # the caller's own array, as the original returns it
        lines.append(
            f"    return next(a for n, a in zip({tuple(arrays)!r}, ({', '.join(arrays)},)) if b[{f.returns!r}] is first[n])"
        )
    elif f.returns:
        lines.append(f"    return rt.download(b[{f.returns!r}])")
    return "\n".join(lines) + "\n"


def _step(step: Launch | Repeat, indent: str) -> list[str]:
    if isinstance(step, Repeat):
        out = [
            f"{indent}for {step.var} in range({step.start}, {step.start} + ({step.count}) * ({step.step}), {step.step}):"
        ]
        for inner in step.body:
            out += _step(inner, indent + "    ")
        for a, b in step.swaps:
            out.append(f"{indent}    b[{a!r}], b[{b!r}] = b[{b!r}], b[{a!r}]")
        return out
    args = ", ".join(_arg(a) for a in step.args)
    grid = "(" + ", ".join(f"int({g})" for g in step.grid) + ",)"
    return [
        f"{indent}rt.launch(src, *entries[{step.kernel!r}][:1], {grid}, {tuple(step.block)!r}, [{args}], "
        f"int({step.shared}), entries[{step.kernel!r}][1])"
    ]


def _arg(a: Arg) -> str:
    if a.kind == "array":
        return f"b[{a.value!r}]"
    return f"_np.{a.dtype}({a.value})"


def _allocation(local: Local) -> str:
    shape = "(" + ", ".join(local.shape) + ",)"
    if local.fill in ("zeros", "ones", "empty"):
        return f"_np.{local.fill}({shape}, dtype=_np.{local.dtype})"
    if local.fill.startswith("full:"):
        return f"_np.full({shape}, {local.fill[5:]}, dtype=_np.{local.dtype})"
    if local.fill.startswith("copy:"):
        return f"_np.array({local.fill[5:]}, dtype=_np.{local.dtype}, copy=True)"
    raise ValueError(local.fill)
