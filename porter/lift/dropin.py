"""The generated module of `porter lift`: each lifted function under its own name and signature, running
its kernels through CuPy (NVIDIA), HIP Python (AMD) or pyopencl, and the original Python, with a
warning, where none finds a device.

The module is plain Python a reader can follow: the kernel sources as strings, a small runtime class per
GPU stack (compile once per process, upload, launch, download), and per function the same statements the
plan has -- its sizes bound by name, its arrays allocated as the original allocates them, each launch with
the host expressions of the user's own code, time loops as Python loops, swaps as swaps -- then the
arrays the function writes copied back into the caller's arrays and its value returned.

Every name the module binds itself starts with ``_porter_`` (its runtime, each function's buffers and
handles) and it reaches Python's builtins and math through ``_porter_builtins`` / ``_porter_math``, so
no parameter, function name or import of the user's can change what it runs (:func:`clash` refuses a
function whose own names start with the prefix).  porter lift calls every function through the written
file before it reports it validated (:func:`porter.lift.validate.check_dropin`).

``PORTER_LIFT_BACKEND=cupy|hip|opencl|python`` chooses the stack (``python``: the original);
``PORTER_LIFT_DEVICE=gpu`` refuses a CPU OpenCL device (pyopencl prefers a GPU anyway).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence

from porter.lift import hostexpr
from porter.lift.ir import Arg, Launch, Lifted, Local, Repeat

RUNTIME = r'''
import builtins as _porter_builtins
import math as _porter_math
import os as _porter_os
import warnings as _porter_warnings

import numpy as _porter_np


class _porter_CuPy:
    name = "cupy"

    def __init__(self):
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise _porter_builtins.RuntimeError("no CUDA device")
        self.cp = cupy
        self.modules = {}

    def function(self, source, entry):
        mod = self.modules.get(source)
        if mod is None:
            mod = self.modules[source] = self.cp.RawModule(code=source, options=("-std=c++17",))
        return mod.get_function(entry)

    def upload(self, a):
        return self.cp.asarray(_porter_np.ascontiguousarray(a))

    def download(self, buf):
        return self.cp.asnumpy(buf)

    def launch(self, source, entry, grid, block, args, shared=0, argmap=None):
        self.function(source, entry)(_porter_builtins.tuple(grid), _porter_builtins.tuple(block), _porter_builtins.tuple(args), shared_mem=_porter_builtins.int(shared))


class _porter_Hip:
    name = "hip"

    def __init__(self):
        from hip import hip, hiprtc

        err, count = hip.hipGetDeviceCount()
        if err != hip.hipError_t.hipSuccess or count < 1:
            raise _porter_builtins.RuntimeError("no HIP device")
        self.hip, self.rtc = hip, hiprtc
        props = hip.hipDeviceProp_t()
        self._ok(hip.hipGetDeviceProperties(props, 0))
        self.arch = props.gcnArchName
        self.functions = {}
        self.modules = []

    def _ok(self, result):
        err = result[0] if _porter_builtins.isinstance(result, _porter_builtins.tuple) else result
        if err not in (self.hip.hipError_t.hipSuccess, _porter_builtins.getattr(self.rtc, "hiprtcResult", None) and self.rtc.hiprtcResult.HIPRTC_SUCCESS):
            raise _porter_builtins.RuntimeError(f"HIP error {err}")
        return result[1] if _porter_builtins.isinstance(result, _porter_builtins.tuple) and _porter_builtins.len(result) == 2 else result

    def function(self, source, entry):
        key = (source, entry)
        if key not in self.functions:
            rtc = self.rtc
            prog = self._ok(rtc.hiprtcCreateProgram(source.encode(), b"lifted.hip", 0, [], []))
            opts = [b"--offload-arch=" + (self.arch if _porter_builtins.isinstance(self.arch, _porter_builtins.bytes) else _porter_builtins.str(self.arch).encode()), b"-std=c++17"]
            err, = rtc.hiprtcCompileProgram(prog, _porter_builtins.len(opts), opts)
            if err != rtc.hiprtcResult.HIPRTC_SUCCESS:
                _, size = rtc.hiprtcGetProgramLogSize(prog)
                log = _porter_builtins.bytearray(size)
                rtc.hiprtcGetProgramLog(prog, log)
                raise _porter_builtins.RuntimeError(log.decode(errors="replace"))
            size = self._ok(rtc.hiprtcGetCodeSize(prog))
            code = _porter_builtins.bytearray(size)
            self._ok(rtc.hiprtcGetCode(prog, code))
            module = self._ok(self.hip.hipModuleLoadData(code))
            self.modules.append(module)
            self.functions[key] = self._ok(self.hip.hipModuleGetFunction(module, entry.encode()))
        return self.functions[key]

    def upload(self, a):
        a = _porter_np.ascontiguousarray(a)
        ptr = self._ok(self.hip.hipMalloc(_porter_builtins.max(1, a.nbytes)))
        self._ok(self.hip.hipMemcpy(ptr, a, a.nbytes, self.hip.hipMemcpyKind.hipMemcpyHostToDevice))
        return (ptr, a.shape, a.dtype)

    def download(self, buf):
        ptr, shape, dtype = buf
        out = _porter_np.empty(shape, dtype)
        self._ok(self.hip.hipMemcpy(out, ptr, out.nbytes, self.hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        return out

    def launch(self, source, entry, grid, block, args, shared=0, argmap=None):
        g = [*grid, 1, 1][:3]
        b = [*block, 1, 1][:3]
        extra = _porter_builtins.tuple(a[0] if _porter_builtins.isinstance(a, _porter_builtins.tuple) else _porter_np.ctypeslib.as_ctypes_type(a.dtype)(a.item()) for a in args)
        self._ok(self.hip.hipModuleLaunchKernel(self.function(source, entry), *g, *b, sharedMemBytes=_porter_builtins.int(shared),
                                                stream=None, kernelParams=None, extra=extra))
        self._ok(self.hip.hipDeviceSynchronize())


class _porter_OpenCL:
    name = "opencl"

    def __init__(self):
        import pyopencl as cl

        gpus, cpus = [], []
        for platform in cl.get_platforms():
            for d in platform.get_devices():
                (gpus if d.type & cl.device_type.GPU else cpus).append(d)
        if _porter_os.environ.get("PORTER_LIFT_DEVICE") == "gpu":
            cpus = []
        devices = gpus or cpus
        if not devices:
            raise _porter_builtins.RuntimeError("no OpenCL device")
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
        a = _porter_np.ascontiguousarray(a)
        mf = self.cl.mem_flags
        return (self.cl.Buffer(self.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) if a.nbytes else
                self.cl.Buffer(self.ctx, mf.READ_WRITE, 1), a.shape, a.dtype)

    def download(self, buf):
        b, shape, dtype = buf
        out = _porter_np.empty(shape, dtype)
        if out.nbytes:
            self.cl.enqueue_copy(self.queue, out, b)
        return out

    def launch(self, source, entry, grid, block, args, shared=0, argmap=None):
        k = self.function(source, entry)
        values = [a[0] if _porter_builtins.isinstance(a, _porter_builtins.tuple) else a for a in args]
        if argmap is not None:  # the OpenCL kernel's own order; None: a __local buffer of the shared bytes
            values = [values[m] if m is not None else self.cl.LocalMemory(_porter_builtins.max(1, _porter_builtins.int(shared))) for m in argmap]
        k.set_args(*values)
        g = [*grid, 1, 1][: _porter_builtins.len(block)]
        self.cl.enqueue_nd_range_kernel(self.queue, k, [_porter_builtins.int(x) * _porter_builtins.int(y) for x, y in _porter_builtins.zip(g, block)], [_porter_builtins.int(y) for y in block])
        self.queue.finish()


_porter_RUNTIMES = {"cupy": _porter_CuPy, "hip": _porter_Hip, "opencl": _porter_OpenCL}
_porter_CHOSEN = []
_porter_WHY = []


def _porter_runtime():
    """The first GPU stack that finds a device (CuPy, then HIP Python, then pyopencl), once per process."""
    if _porter_CHOSEN:
        return _porter_CHOSEN[0]
    want = _porter_os.environ.get("PORTER_LIFT_BACKEND", "")
    names = [want] if want else _porter_builtins.list(_porter_RUNTIMES)
    chosen = None
    for name in names:
        make = _porter_RUNTIMES.get(name)
        if make is None:
            continue
        try:
            chosen = make()
            break
        except _porter_builtins.Exception as err:  # an absent package or device: try the next stack
            _porter_WHY.append(f"{name}: {err}")
    _porter_CHOSEN.append(chosen)
    return chosen


def _porter_unlike(arrays):
    """Why the caller's arrays are not what the kernels were validated for (dtype, dimensions), or ''."""
    for arg, (value, dtype, ndim) in arrays.items():
        if not _porter_builtins.isinstance(value, _porter_np.ndarray):
            return f"{arg} is a {_porter_builtins.type(value).__name__}, the kernels take a {dtype} array"
        if value.dtype != dtype or value.ndim != ndim:
            return f"{arg} is {value.dtype} with {value.ndim} dimension(s), the kernels take {dtype} with {ndim}"
    return ""


def _porter_fallback(name, unlike=""):
    if unlike:
        _porter_warnings.warn(f"{name}: {unlike}; running the original Python", _porter_builtins.RuntimeWarning, stacklevel=3)
        return
    why = "; ".join(_porter_WHY) or "PORTER_LIFT_BACKEND=python"
    _porter_warnings.warn(f"{name}: no GPU runtime found ({why}); running the original Python", _porter_builtins.RuntimeWarning, stacklevel=3)
'''


STACKS = (("cupy", "cuda"), ("hip", "hip"), ("opencl", "opencl"))
PACKAGES = {"cupy": "cupy", "hip": "hip", "opencl": "pyopencl"}  # what each stack imports
FALLBACK = "running the original Python"  # what the module warns when no GPU runtime starts (RUNTIME)
PREFIX = "_porter_"  # every name the module itself binds starts with it: none is the user's
Entries = Mapping[str, tuple[str, tuple[int | None, ...] | None]]


def clash(f: Lifted) -> str:
    """Why the module cannot hold `f` ('' when it can): a name of the user's function or of the file's
    imports starts with :data:`PREFIX`, which the module keeps for its own names; or a default value
    is not a literal (the module has the file's imports, not its other globals)."""
    names = {f.function} | _identifiers(f.source) | {n for i in f.imports for n in _identifiers(i)}
    bad = sorted(n for n in names if n.startswith(PREFIX))
    if bad:
        return f"{f.function}: {', '.join(bad)} start(s) with {PREFIX}, which the drop-in module keeps for its own names"
    fn = _def(f)
    for d in fn.args.defaults:
        try:
            ast.literal_eval(d)
        except ValueError:
            return (
                f"{f.function}: the default value {ast.unparse(d)} is not a literal; the drop-in module "
                "holds the file's imports, not its other globals"
            )
    return ""


def _def(f: Lifted) -> ast.FunctionDef:
    fn = ast.parse(f.source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn


def _signature(fn: ast.FunctionDef) -> tuple[str, str]:
    """(the parameters as the original declares them, without annotations: names, defaults, ``/``;
    the same parameters passed on positionally)."""
    declared = ast.arguments(
        posonlyargs=[ast.arg(a.arg) for a in fn.args.posonlyargs],
        args=[ast.arg(a.arg) for a in fn.args.args],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=list(fn.args.defaults),
    )
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    return ast.unparse(declared), ", ".join(names)


def _identifiers(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
    return out


def fell_back(warned: Sequence[str]) -> str:
    """The module's own warning that it ran the original Python (no GPU runtime started), or ''."""
    return next((w for w in warned if FALLBACK in w), "")


def module(
    origin: str,
    lifted: tuple[Lifted, ...],
    sources: Mapping[str, Mapping[str, tuple[str, Entries]]],
    imports: tuple[str, ...],
) -> str:
    """The module's text. `sources`: function -> dialect -> (the kernels' text, CUDA kernel -> (its
    entry, its argument order: None for CUDA's own; in it None marks an added ``__local`` buffer)).
    A function :func:`clash` refuses is a ValueError."""
    for f in lifted:
        why = clash(f)
        if why:
            raise ValueError(why)
    names = ", ".join(f.function for f in lifted)
    out = [
        f'"""Generated by porter lift from {_plain(origin)}: {names}, on a GPU.\n\n'
        "Each function keeps the original's name and signature and runs its kernels through CuPy (NVIDIA),\n"
        "HIP Python (AMD) or pyopencl (PORTER_LIFT_BACKEND=cupy|hip|opencl|python chooses); without any of\n"
        "them it runs the original Python with a warning.  Every kernel here was validated against the\n"
        "original by porter, and every function was called through this file, as written, on the runtimes\n"
        'porter found (report.json beside this file)."""\n',
        "# ruff: noqa",
        *imports,
        RUNTIME,
    ]
    for f in lifted:
        if f.python:  # lifted partly: its own Python, calling its nests' functions above or below
            out.append(f.python + "\n")
            continue
        src = sources.get(f.function, {})
        out.append(f"{PREFIX}SOURCES_{f.function} = {{")
        for stack, dialect in STACKS:
            if dialect in src:
                out.append(f"    {stack!r}: {src[dialect][0]!r},")
        out.append("}")
        # CUDA kernel -> (its entry, its argument order) per stack
        out.append(f"{PREFIX}ENTRIES_{f.function} = {{")
        for stack, dialect in STACKS:
            if dialect in src:
                out.append(f"    {stack!r}: {dict(src[dialect][1])!r},")
        out.append("}\n")
        out.append(_original(f))
        out.append(_function(f))
    return "\n".join(out) + "\n"


def _plain(text: str) -> str:
    """`text` as it may stand inside the module's triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _original(f: Lifted) -> str:
    """The original function, renamed, as the fallback: without its decorators and annotations (they
    may name the file's other globals, which the module does not have)."""
    tree = ast.parse(f.source)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    fn.name = f"{PREFIX}original_{f.function}"
    fn.decorator_list = []
    fn.returns = None
    for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs):
        a.annotation = None
    return ast.unparse(tree) + "\n"


def _function(f: Lifted) -> str:
    """The function under its own name: every name it binds besides the user's own (sizes, locals, loop
    variables) starts with :data:`PREFIX`, and its host expressions call Python's builtins and math
    through the module's own names, as :mod:`porter.lift.hostexpr` evaluates them for the validation."""
    p = PREFIX
    tree = ast.parse(f.source)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    declared, params = _signature(fn)
    doc = ast.get_docstring(fn)
    lines = [f"def {f.function}({declared}):"]
    lines.append(f"    {(doc or f.function).splitlines()[0] + ' (GPU kernels by porter lift)'!r}")
    # arrays of another dtype or shape than the kernels were validated for: the original runs, with a warning
    checked = ", ".join(
        f"{q.name!r}: ({q.name}, {q.dtype!r}, {q.ndim})" for q in f.params if q.kind == "array"
    )
    lines.append(f"    {p}mismatch = {p}unlike({{{checked}}})")
    lines.append(f"    {p}rt = {p}runtime() if not {p}mismatch else None")
    lines.append(f"    {p}src = {p}SOURCES_{f.function}.get({p}rt.name) if {p}rt is not None else None")
    lines.append(f"    {p}entries = {p}ENTRIES_{f.function}.get({p}rt.name) if {p}rt is not None else None")
    lines.append(f"    if {p}src is None:")
    lines.append(f'        {p}fallback("{f.function}", {p}mismatch)')
    lines.append(f"        return {p}original_{f.function}({params})")
    for name, expr in f.sizes:
        lines.append(f"    {name} = {_host(expr)}")
    for local in f.locals:
        lines.append(f"    {local.name} = {_allocation(local)}")
    uploads = [f"{n!r}: {p}rt.upload({n})" for n in [q.name for q in f.params if q.kind == "array"]]
    uploads += [f"{x.name!r}: {p}rt.upload({x.name})" for x in f.locals]
    # device-only buffers (partial sums, scan blocks) live in the dict alone: no Python name of theirs
    uploads += [f"{t.name!r}: {p}rt.upload({_allocation(t)})" for t in f.temporaries]
    lines.append(f"    {p}b = {{" + ", ".join(uploads) + "}")
    lines.append(
        f"    {p}first = {p}builtins.dict({p}b)  # the buffers of the caller's arrays, whatever swaps do to the names"
    )
    temps = {t.name: t.shape for t in f.temporaries}
    for step in f.steps:
        lines += _step(step, "    ", temps)
    arrays = [q.name for q in f.params if q.kind == "array"]
    for name in (n for n in arrays if n in f.writes):
        lines.append(f"    {name}[...] = {p}rt.download({p}first[{name!r}]).reshape({name}.shape)")
    if f.returns.startswith("scalar:"):
        lines.append(f"    return {p}rt.download({p}b[{f.returns[7:]!r}]).reshape(-1)[0]")
    elif f.returns in arrays:  # the caller's own array, as the original returns it
        lines.append(
            f"    return {p}builtins.next({p}a for {p}n, {p}a in {p}builtins.zip({tuple(arrays)!r}, ({', '.join(arrays)},)) "
            f"if {p}b[{f.returns!r}] is {p}first[{p}n])"
        )
    elif f.returns:
        lines.append(f"    return {p}rt.download({p}b[{f.returns!r}])")
    return "\n".join(lines) + "\n"


def _step(step: Launch | Repeat, indent: str, temps: Mapping[str, tuple[str, ...]]) -> list[str]:
    p = PREFIX
    if isinstance(step, Repeat):
        start, count, stride = _host(step.start), _host(step.count), _host(step.step)
        out = [
            f"{indent}for {step.var} in {p}builtins.range({start}, {start} + ({count}) * ({stride}), {stride}):"
        ]
        for inner in step.body:
            out += _step(inner, indent + "    ", temps)
        for a, b in step.swaps:
            out.append(f"{indent}    {p}b[{a!r}], {p}b[{b!r}] = {p}b[{b!r}], {p}b[{a!r}]")
        return out
    args = ", ".join(_arg(a, temps) for a in step.args)
    grid = "(" + ", ".join(f"{p}builtins.int({_host(g)})" for g in step.grid) + ",)"
    return [
        f"{indent}{p}rt.launch({p}src, *{p}entries[{step.kernel!r}][:1], {grid}, {tuple(step.block)!r}, [{args}], "
        f"{p}builtins.int({_host(step.shared)}), {p}entries[{step.kernel!r}][1])"
    ]


def _arg(a: Arg, temps: Mapping[str, tuple[str, ...]]) -> str:
    if a.kind == "array":
        return f"{PREFIX}b[{a.value!r}]"
    return f"{PREFIX}np.{a.dtype}({_host(_temp_shapes(a.value, temps))})"


def _temp_shapes(expr: str, temps: Mapping[str, tuple[str, ...]]) -> str:
    """A device-only buffer has no Python name in the module: ``__s_x.shape[0]`` (a kernel's extent
    argument) becomes the buffer's own shape expression."""
    if not any(t in expr for t in temps):
        return expr
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return expr

    class Shape(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            v = node.value
            if (
                isinstance(v, ast.Attribute)
                and v.attr == "shape"
                and isinstance(v.value, ast.Name)
                and v.value.id in temps
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int)
            ):
                return ast.parse(f"({temps[v.value.id][node.slice.value]})", mode="eval").body
            return self.generic_visit(node)

    return ast.unparse(Shape().visit(tree))


def _allocation(local: Local) -> str:
    np_ = f"{PREFIX}np"
    shape = "(" + ", ".join(_host(s) for s in local.shape) + ",)"
    if local.fill in ("zeros", "ones", "empty"):
        return f"{np_}.{local.fill}({shape}, dtype={np_}.{local.dtype})"
    if local.fill.startswith("full:"):
        return f"{np_}.full({shape}, {_host(local.fill[5:])}, dtype={np_}.{local.dtype})"
    if local.fill.startswith("copy:"):
        return f"{np_}.array({_host(local.fill[5:])}, dtype={np_}.{local.dtype}, copy=True)"
    raise ValueError(local.fill)


class _Qualify(ast.NodeTransformer):
    """A host expression's calls of builtins (``max``, ``len``, ``range``...) and its math (``math.pi``,
    ``np.sqrt``) through the module's own names: a parameter called ``max`` or ``math`` cannot change
    what the launch computes, just as it cannot in :func:`porter.lift.hostexpr.evaluate`."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in hostexpr.BUILTINS:
            node.func = ast.Attribute(ast.Name(f"{PREFIX}builtins", ast.Load()), node.func.id, ast.Load())
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if (
            isinstance(node.value, ast.Name)
            and node.value.id in hostexpr.MATH_MODULES
            and node.attr in hostexpr.MATH_NAMES
        ):
            return ast.Attribute(ast.Name(f"{PREFIX}math", ast.Load()), node.attr, node.ctx)
        return node


def _host(expr: str) -> str:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return expr
    return ast.unparse(ast.fix_missing_locations(_Qualify().visit(tree)))
