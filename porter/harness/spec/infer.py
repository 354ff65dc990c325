"""Spec inference from the program's own host code: the launch site gives the arguments and the
geometry; allocation sizes give the array shapes in size symbols; host assignments and ``#define``s
give the values; copies and ``const`` give roles."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from porter.errors import PorterError
from porter.harness.inputs import ctype_info, ctype_size
from porter.harness.spec.file import SPEC_SUFFIX, normalise_dtype
from porter.harness.spec.names import (
    dim_components,
    instance_label,
    split_instance,
    squash_name,
)
from porter.harness.spec.render import spec_snippet
from porter.harness.spec.sizes import (
    DEFAULT_TARGET_ELEMENTS,
    MIN_SCALABLE,
    choose_sizes,
)
from porter.model import Allocation, ArgSpec, Assignment, FileScan, Kernel, KernelSpec, LaunchSite, Role
from porter.scan import cexpr
from porter.scan.hostcalls import HostCode, deduce_template_args, host_code, literal_type, substitute_types
from porter.scan.reads import pointers_read

_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|__global|global)\b|[*&]")
_CAST_PREFIX = re.compile(r"^\(\s*[\w\s:]+\**\s*\)\s*")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
FLOAT_ATOMICS = frozenset(  # atomics that add floats: the result rounds by arrival order
    {"atomicAdd", "atomicAdd_block", "atomicAdd_system", "atomicSub", "unsafeAtomicAdd"}
)


@dataclass(frozen=True)
class _Frame:
    """One host function on the way from the launch out to the program's entry: the function, the
    line reached in it (the launch, or the call of the inner function), its parameters bound to the
    caller's argument texts (read in the next frame) and its template parameters bound to types."""

    function: str | None
    line: int
    args: Mapping[str, str] = field(default_factory=dict)
    types: Mapping[str, str] = field(default_factory=dict)
    start: int = 0
    end: int = 1 << 30


@dataclass
class _Env:
    """Host-side names visible at a launch site, through the chain of host functions that reach it.

    Names resolve in their own frame (a helper's local, a helper's parameter -- the caller's
    argument, read in the caller's frame -- or a #define).  Size symbols (names whose value is a
    constant) are kept under an internal name ``name@scope`` so that equal names of different
    functions never mix; :meth:`pretty` gives the name shown in specs."""

    scan: FileScan
    launch: LaunchSite
    frames: tuple[_Frame, ...] = ()
    defines: dict[str, cexpr.Expr] = field(default_factory=dict)
    macros: dict[str, tuple[tuple[str, ...], cexpr.Expr]] = field(default_factory=dict)
    define_lines: dict[str, int] = field(default_factory=dict)
    _leaf: dict[tuple[int, str], bool] = field(default_factory=dict)
    _canon: dict[tuple[int, str], str] = field(default_factory=dict)  # (scope, name) -> internal name
    _origin: dict[str, tuple[int, str]] = field(default_factory=dict)  # internal -> (frame, name)
    _pretty: dict[str, str] = field(default_factory=dict)  # internal -> shown name

    def __post_init__(self) -> None:
        if not self.frames:
            self.frames = (_Frame(self.launch.function, self.launch.line),)

    def assignment(self, name: str, frame: int = 0) -> Assignment | None:
        """The assignment of `name` that reaches the frame's line: same function, before it, declarations first."""
        fr = self.frames[frame]
        cands = [a for a in self.scan.assignments if a.var == name and a.function in (fr.function, None)]
        if not cands:
            return None

        def rank(a: Assignment) -> tuple[int, int, int]:
            before = a.line <= fr.line
            return (int(before), int(a.type is not None), a.line if before else -a.line)

        return max(cands, key=rank)

    def lookup(self, name: str, frame: int = 0) -> tuple[cexpr.Expr, int, int] | None:
        """(definition, frame it is read in, scope) of a name seen in `frame`; scope -1: global."""
        fr = self.frames[frame]
        if name in fr.args and frame + 1 < len(self.frames):
            try:
                return cexpr.parse(fr.args[name]), frame + 1, frame
            except cexpr.ExprError:
                return None
        a = self.assignment(name, frame)
        if a is not None and not (a.type and "dim3" in a.type):
            try:
                expr = cexpr.parse(substitute_types(a.value, fr.types))
            except cexpr.ExprError:
                return None
            return expr, frame, (frame if a.function is not None else -1)
        if name in self.defines:
            return self.defines[name], frame, -1
        return None

    def definition(self, name: str, frame: int = 0) -> cexpr.Expr | None:
        found = self.lookup(name, frame)
        return found[0] if found else None

    def _internal(self, name: str, frame: int, scope: int) -> str:
        key = (scope, name)
        if key not in self._canon:
            internal = f"{name}@{scope}"
            shown = name
            if shown in self._pretty.values():
                shown = f"{name}_{len(self._canon)}"
            self._canon[key] = internal
            self._origin[internal] = (frame, name)
            self._pretty[internal] = shown
        return self._canon[key]

    def pretty(self, name: str) -> str:
        return self._pretty.get(name, name)

    def pretty_expr(self, expr: cexpr.Expr) -> cexpr.Expr:
        values = {n: cexpr.Name(self._pretty[n]) for n in cexpr.names(expr) if n in self._pretty}
        return cexpr.substitute(expr, values) if values else expr

    def base_name(self, name: str) -> str:
        return self._origin[name][1] if name in self._origin else name

    def is_leaf(self, name: str, depth: int = 0, frame: int | None = None) -> bool:
        """A name whose value is a constant (no other names, no sizeof): a candidate size symbol."""
        if frame is None:
            if name in self._origin:
                return True
            frame = 0
        key = (frame, name)
        if key in self._leaf:
            return self._leaf[key]
        self._leaf[key] = False  # cycle guard
        found = self.lookup(name, frame)
        leaf = False
        if found is not None and not _has_sizeof(found[0]):
            expanded = self.expand(found[0], depth + 1, frame=found[1])
            if not cexpr.names(expanded) and not _has_sizeof(expanded):
                try:
                    cexpr.evaluate(expanded)
                    leaf = True
                except cexpr.ExprError:
                    leaf = False
        self._leaf[key] = leaf
        return leaf

    def _expand_macros(self, expr: cexpr.Expr) -> cexpr.Expr:
        for _ in range(16):
            if not cexpr.calls(expr) & set(self.macros):
                break
            try:
                expr = cexpr.substitute(expr, {}, self.macros)
            except cexpr.ExprError:
                break
        return expr

    def expand(self, expr: cexpr.Expr, depth: int = 0, frame: int = 0) -> cexpr.Expr:
        """Substitute non-leaf names by their definitions (recursively, each in its own frame),
        leaf names by their internal size-symbol name, and expand macros."""
        if depth > 32:
            return expr
        expr = self._expand_macros(expr)
        values: dict[str, cexpr.Expr] = {}
        for name in cexpr.names(expr):
            if name in self._origin:
                continue
            found = self.lookup(name, frame)
            if found is None:
                continue
            d, dframe, scope = found
            if depth < 32 and self.is_leaf(name, depth, frame):
                values[name] = cexpr.Name(self._internal(name, frame, scope))
                continue
            values[name] = self.expand(d, depth + 1, dframe)
        try:
            return cexpr.substitute(expr, values)
        except cexpr.ExprError:
            return expr

    def value(self, name: str, frame: int | None = None) -> int | float:
        if frame is None:
            frame, name = self._origin.get(name, (0, name))
        found = self.lookup(name, frame)
        if found is None:
            raise cexpr.ExprError(f"no value for {name}")
        return cexpr.evaluate(self.expand(found[0], frame=found[1]), {}, _sizeof_c)


def _has_sizeof(expr: cexpr.Expr) -> bool:
    match expr:
        case cexpr.SizeOf():
            return True
        case cexpr.Unary(_, x) | cexpr.Cast(_, x):
            return _has_sizeof(x)
        case cexpr.Binary(_, a, b):
            return _has_sizeof(a) or _has_sizeof(b)
        case cexpr.Cond(t, a, b):
            return _has_sizeof(t) or _has_sizeof(a) or _has_sizeof(b)
        case cexpr.Call(_, args):
            return any(_has_sizeof(a) for a in args)
    return False


def _sizeof_c(text: str) -> int:
    size = ctype_size(base_type(text))
    if size is None:
        raise cexpr.ExprError(f"sizeof({text}) is unknown")
    return size


def base_type(ctype: str) -> str:
    """`const float *__restrict__` -> `float`."""
    return " ".join(_QUALIFIERS.sub(" ", ctype).split())


def _strip_int_casts(expr: cexpr.Expr) -> cexpr.Expr:
    match expr:
        case cexpr.Cast(t, x) if "*" not in t and not ({"float", "double"} & set(t.split())):
            return _strip_int_casts(x)
        case cexpr.Binary(op, a, b):
            return cexpr.Binary(op, _strip_int_casts(a), _strip_int_casts(b))
        case cexpr.Unary(op, x):
            return cexpr.Unary(op, _strip_int_casts(x))
        case cexpr.Cond(t, a, b):
            return cexpr.Cond(t, _strip_int_casts(a), _strip_int_casts(b))
        case cexpr.Call(f, args):
            return cexpr.Call(f, tuple(_strip_int_casts(a) for a in args))
    return expr


def _pointer_var(arg: str) -> str | None:
    text = arg.strip()
    while True:
        m = _CAST_PREFIX.match(text)
        if not m:
            break
        text = text[m.end() :]
    text = text.lstrip("&").strip()
    if text.startswith("(") and text.endswith(")"):
        return _pointer_var(text[1:-1])
    return text if re.fullmatch(r"[A-Za-z_]\w*", text) else None


@dataclass
class _Inference:
    env: _Env
    kernel: Kernel
    path: str
    missing: list[str] = field(default_factory=list)
    symbols: dict[str, int] = field(default_factory=dict)  # size symbol (internal name) -> program value
    template_args: tuple[str, ...] = ()  # the launch's, the host templates' parameters substituted
    aliases: dict[str, str] = field(default_factory=dict)  # the file's type aliases (type_aliases)

    def where(self, line: int) -> str:
        return f"{Path(self.path).name}:{line}"

    def finalize(self, expr: cexpr.Expr) -> str:
        """Render an expanded expression: leaf constants that are not size symbols become values,
        integer casts go, and constant expressions fold to a number."""
        values: dict[str, cexpr.Expr] = {}
        for name in cexpr.names(expr):
            if name in self.symbols:
                continue
            if self.env.is_leaf(name):
                v = self.env.value(name)
                values[name] = cexpr.Num(v, _num_text(v))
        out = _strip_int_casts(cexpr.substitute(expr, values))
        if not cexpr.names(out):
            try:
                v = cexpr.evaluate(out, {}, _sizeof_c)
                return _num_text(v)
            except cexpr.ExprError:
                pass
        return cexpr.render(self.env.pretty_expr(out))


def _num_text(v: int | float) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _dtype_of(
    param_type: str, tmap: Mapping[str, str], aliases: Mapping[str, str] | None = None
) -> tuple[str, int] | None:
    """NumPy dtype and lanes of a parameter's element type: template arguments substituted, then the
    file's type aliases (``typedef float DATA_TYPE``, ``using real = double``, ``#define REAL float``)
    followed to a type porter knows."""
    t = base_type(tmap.get(base_type(param_type), param_type))
    for _ in range(8):  # an alias of an alias ...
        info = ctype_info(t)
        if info is not None or aliases is None or t not in aliases:
            return info
        t = base_type(aliases[t])
    return ctype_info(t)


_TYPEDEF = re.compile(r"\btypedef\s+([A-Za-z_][\w\s:]*?)\s+([A-Za-z_]\w*)\s*;")
_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([A-Za-z_][\w\s:]*?)\s*;")


def type_aliases(scan: FileScan) -> dict[str, str]:
    """The file's type aliases: typedefs and ``using`` of plain types, and object-like ``#define``s
    whose value is a type name (later ones win, as in the file)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", _source_text(scan), flags=re.S)
    out: dict[str, str] = {}
    for d in scan.defines:
        if d.params is None and re.fullmatch(r"[A-Za-z_][\w\s]*", d.value.strip() or "0"):
            out[d.name] = d.value.strip()
    for m in _TYPEDEF.finditer(text):
        out[m.group(2)] = m.group(1)
    for m in _USING.finditer(text):
        out[m.group(1)] = m.group(2)
    return out


def _template_map(kernel: Kernel, template_args: Sequence[str]) -> dict[str, str]:
    out = {}
    for decl, arg in zip(kernel.template_params, template_args, strict=False):
        words = decl.replace("=", " ").split()
        if len(words) >= 2:
            out[words[1]] = arg.strip()
    return out


def _allocation_for(scan: FileScan, var: str, frame: _Frame) -> Allocation | None:
    cands = [a for a in scan.allocations if _pointer_var(a.var) == var]
    if not cands:
        return None

    def rank(a: Allocation) -> tuple[int, int, int]:
        device = a.api.startswith(("cuda", "hip")) and a.api not in ("cudaMallocHost", "hipHostMalloc")
        return (int(device), int(a.function == frame.function), -abs(frame.line - a.line))

    return max(cands, key=rank)


def _source_text(scan: FileScan) -> str:
    from porter.files import read_header

    data = read_header(scan.path, quiet=True)  # the bytes the scan saw (the command's snapshot)
    return "" if data is None else data.decode("utf-8", "surrogateescape")


def _is_h2d(scan: FileScan, var: str) -> bool:
    """Does the host fill `var` before launching (a host-to-device copy or a memset)?"""
    if re.search(
        rf"\b(cuda|hip)Memset\w*\s*\(\s*(\([^()]*\)\s*)?&?\s*{re.escape(var)}\b", _source_text(scan)
    ):
        return True
    for c in scan.copies:
        if _pointer_var(c.dst) != var:
            continue
        if "HostToDevice" in c.kind or "Default" in c.kind or "memset" in c.api.lower():
            return True
    return False


def _kernel_body(scan: FileScan, kernel: Kernel) -> str:
    from porter.files import read_header

    data = read_header(scan.path, quiet=True)  # the bytes the scan saw (the command's snapshot)
    if data is None:
        return ""
    if kernel.end_byte > kernel.start_byte:
        return data[kernel.start_byte : kernel.end_byte].decode("utf-8", "surrogateescape")
    lines = data.decode("utf-8", "surrogateescape").splitlines()
    return "\n".join(lines[kernel.line - 1 : kernel.end_line])


def _read_params(scan: FileScan, kernel: Kernel) -> frozenset[str]:
    """The pointer parameters the kernel reads through (anything but a plain `p[i] = v`, `*p = v`
    or `p->f = v` store counts as a read: compound assignments, atomics, helper calls, aliases)."""
    return pointers_read(_kernel_body(scan, kernel), frozenset(p.name for p in kernel.params if p.pointer))


def _collect_defines(env: _Env, include_dirs: Sequence[str], defines: Sequence[str] = ()) -> None:
    """#defines of the file and of the local headers it includes (the file's own win), after the
    build's ``-D NAME[=VALUE]`` `defines`, which win over both (a size an ``#ifndef N`` only defaults)."""
    seen: set[Path] = set()
    for d in defines:
        name, _, value = d.partition("=")
        try:
            env.defines[name.strip()] = cexpr.parse(value if "=" in d else "1")
        except cexpr.ExprError:
            continue

    def add(scan: FileScan) -> None:
        for d in scan.defines:
            if d.name in env.defines or d.name in env.macros:
                continue
            try:
                body = cexpr.parse(d.value)
            except cexpr.ExprError:
                continue
            if d.params is None:
                env.defines[d.name] = body
                env.define_lines[d.name] = d.line
            else:
                env.macros[d.name] = (tuple(d.params), body)

    def headers(path: Path) -> Iterator[Path]:
        """Each local header ``path`` includes that was not read yet, once added to ``env``; the
        caller walks it before asking for the next (depth first, as the includes nest)."""
        from porter.files import is_regular, read_header

        data = read_header(path, quiet=True)  # regular files under the size cap only
        if data is None:
            return
        for name in _INCLUDE.findall(data.decode("utf-8", "surrogateescape")):
            for base in (path.parent, *map(Path, include_dirs)):
                cand = (base / name).resolve()
                if is_regular(cand) and cand not in seen:
                    seen.add(cand)
                    try:
                        from porter.scan import scan_file

                        add(scan_file(str(cand)))
                    except Exception:  # noqa: BLE001 - an unreadable header only loses its macros
                        continue
                    yield cand
                    break

    add(env.scan)
    walks = [headers(Path(env.scan.path))]  # a stack, not recursion: include chains may be long
    while walks:
        header = next(walks[-1], None)
        if header is None:
            walks.pop()
        else:
            walks.append(headers(header))


def infer_spec(
    scan: FileScan,
    kernel: str,
    *,
    include_dirs: Sequence[str] = (),
    target_elements: int = DEFAULT_TARGET_ELEMENTS,
    defines: Sequence[str] = (),
) -> KernelSpec:
    """Infer how to run `kernel` from the host code of its own file (see the module docstring).

    `kernel` may name one instantiation of a templated kernel (``axpby<float>``): only the launches
    with those template arguments count, after following the host helpers that launch it to their
    callers (explicit or deduced template arguments).  The spec's ``kernel`` is the base name and
    its ``template_args`` the instantiation's."""
    base, wanted = split_instance(kernel)
    k = next((x for x in scan.kernels if x.name == base), None)
    if k is None:
        names = ", ".join(x.name for x in scan.kernels) or "none"
        raise PorterError(f"no kernel named {kernel!r} (kernels here: {names})", path=scan.path)
    launches = [ls for ls in scan.launches if k.launched_by(ls)]
    if not launches:
        snippet = spec_snippet(_skeleton(k), missing=True, name=kernel)
        raise PorterError(
            f"cannot infer how to run {kernel}: the file never launches it (no <<<>>> or cudaLaunchKernel "
            f"site){_run_hint(scan, launched=False)}; or write {Path(scan.path).name}{SPEC_SUFFIX}:\n{snippet}",
            path=scan.path,
            line=k.line,
        )
    host: HostCode | None = None
    if any(ls.function not in (None, "main") for ls in launches):
        host = host_code(_source_text(scan))
    # Prefer a launch (and a chain of host calls reaching it) whose names resolve best.
    best: tuple[int, KernelSpec | None, _Inference, LaunchSite] | None = None
    seen_args: list[str] = []
    aliases = type_aliases(scan)
    for launch in launches:
        for frames in _call_chains(host, launch):
            env = _Env(scan, launch, frames=frames)
            _collect_defines(env, include_dirs, defines)
            inf = _Inference(env, k, scan.path, aliases=aliases)
            spec = _infer_at(inf, launch, target_elements)
            if wanted is not None:
                got = tuple(
                    map(
                        squash_name,
                        spec.template_args if spec is not None and spec.template_args else inf.template_args,
                    )
                )
                label = instance_label(base, got)
                if label not in seen_args:
                    seen_args.append(label)
                if got != tuple(map(squash_name, wanted)):
                    continue
            score = -len(inf.missing)
            if best is None or score > best[0]:
                best = (score, spec, inf, launch)
    if best is None:
        snippet = spec_snippet(_skeleton(k), missing=True, name=kernel)
        raise PorterError(
            f"cannot infer how to run {kernel}: no launch of {base} with template arguments "
            f"<{', '.join(wanted or ())}> (launched as {', '.join(seen_args) or 'none'}){_run_hint(scan)}; or "
            f"write {Path(scan.path).name}{SPEC_SUFFIX} next to the source:\n{snippet}",
            path=scan.path,
            line=launches[0].line,
        )
    _, spec, inf, launch = best
    if spec is None or inf.missing:
        partial = spec or _skeleton(k)
        snippet = spec_snippet(partial, missing=True, name=kernel)
        raise PorterError(
            f"cannot infer how to run {kernel}: {'; '.join(inf.missing)}{_run_hint(scan)}; or write "
            f"{Path(scan.path).name}{SPEC_SUFFIX} next to the source:\n{snippet}",
            path=scan.path,
            line=launch.line,
        )
    return spec


def _run_hint(scan: FileScan, launched: bool = True) -> str:
    """What settles it without a spec: the program's own run -- this file's, when it has a main(); else,
    for a kernel the file never launches (a header's), the run of the program that does."""
    from porter.backends.programs import defines_main

    name = Path(scan.path).name
    if not defines_main(_source_text(scan)):
        if launched:
            return ""
        return (
            ". If another file of the program launches it, capture the program's run (porter capture PROGRAM "
            f'--run "./PROG ARGS" --out CAP) and give --capture CAP (porter optimize {name} --capture CAP; '
            "check and bench take it too)"
        )
    run = f'--run "./{Path(name).stem} ARGS"'
    return (
        f". Give the program's run instead (porter port {name} {run}; for porter optimize: porter capture "
        f"{name} {run} --out CAP, then porter optimize {name} --capture CAP): its launches are captured and "
        "every kernel is replayed from them"
    )


_MAX_HELPER_DEPTH = 4  # host functions followed outward from a launch
_MAX_CHAINS = 16


def _call_chains(host: HostCode | None, launch: LaunchSite) -> list[tuple[_Frame, ...]]:
    """Every chain of host calls reaching the launch, innermost first: the launching function, then
    its caller at the call site, and so on (one chain when the function is never called)."""
    if host is None:
        return [(_Frame(launch.function, launch.line),)]

    def chains(fn: str | None, line: int, depth: int, seen: frozenset[str]) -> list[list[_Frame]]:
        f = host.function(fn) if fn else None
        span = (f.line, f.end_line) if f is not None else (0, 1 << 30)
        alone = [[_Frame(fn, line, {}, {}, *span)]]
        if f is None or fn == "main" or depth >= _MAX_HELPER_DEPTH or fn in seen:
            return alone
        calls = [c for c in host.calls_of(f.name) if c.function != f.name and len(c.args) <= len(f.params)]
        out: list[list[_Frame]] = []
        for call in calls:
            for outer in chains(call.function, call.line, depth + 1, seen | {f.name}):
                caller = outer[0]
                args = {
                    pname: substitute_types(arg, caller.types)
                    for (pname, _), arg in zip(f.params, call.args, strict=False)
                    if pname
                }
                types = {
                    tp: substitute_types(ta, caller.types)
                    for tp, ta in zip(f.template_params, call.template_args, strict=False)
                }
                if len(types) < len(f.template_params):

                    def type_of(
                        expr: str,
                        caller: _Frame = caller,
                        call_fn: str | None = call.function,
                        call_line: int = call.line,
                    ) -> str | None:
                        return _expr_type(host, expr, caller, call_fn, call_line)

                    deduced = deduce_template_args(
                        f.template_params, [t for _, t in f.params], call.args, type_of
                    )
                    types.update({t: v for t, v in deduced.items() if t not in types})
                out.append([_Frame(fn, line, args, types, *span), *outer])
                if len(out) >= _MAX_CHAINS:
                    return out
        return out or alone

    return [tuple(c) for c in chains(launch.function, launch.line, 0, frozenset())]


def _expr_type(host: HostCode, expr: str, frame: _Frame, function: str | None, line: int) -> str | None:
    """The C type of an argument expression in a caller: a literal, a cast, or a declared variable
    (`&x` adds a pointer level); the caller's own template parameters replaced by their types."""
    text = expr.strip()
    found = literal_type(text)
    if found is None:
        ref = text.startswith("&")
        name = text.lstrip("&").strip()
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            declared = host.declared_type(name, function, line)
            if declared is not None:
                found = declared + ("*" if ref else "")
    return substitute_types(found, frame.types) if found is not None else None


def _skeleton(k: Kernel) -> KernelSpec:
    args = []
    for p in k.params:
        info = ctype_info(base_type(p.type))
        dtype = info[0] if info else f"<dtype of {base_type(p.type)}>"
        if p.pointer:
            role = Role.IN if p.const or not p.written else Role.OUT
            args.append(ArgSpec(p.name, dtype, role, shape=("<element count, e.g. n>",)))
        else:
            args.append(ArgSpec(p.name, dtype, Role.SCALAR, value="<value, e.g. n>"))
    return KernelSpec(
        kernel=k.name,
        args=tuple(args),
        grid=("<blocks, e.g. (n + 255) / 256>",),
        block=("256",),
        source="inferred",
    )


def _infer_at(inf: _Inference, launch: LaunchSite, target_elements: int) -> KernelSpec | None:
    k, env, scan = inf.kernel, inf.env, inf.env.scan
    if len(launch.args) != len(k.params):
        inf.missing.append(
            f"the launch at {inf.where(launch.line)} passes {len(launch.args)} arguments to {len(k.params)} parameters"
        )
        return None
    inf.template_args = _launch_template_args(inf, launch)
    tmap = _template_map(k, inf.template_args)
    args: list[ArgSpec] = []
    pending_scalars: list[tuple[int, cexpr.Expr]] = []
    for i, (param, text) in enumerate(zip(k.params, launch.args, strict=True)):
        info = _dtype_of(param.type, tmap, inf.aliases)
        if info is None:
            inf.missing.append(f"the element type of {param.name} ({base_type(param.type)}) is unknown")
            dtype, lanes = f"<dtype of {param.name}>", 1
        else:
            dtype, lanes = info
        if not param.pointer:
            try:
                expr = env.expand(cexpr.parse(text))
            except cexpr.ExprError:
                inf.missing.append(f"the value of {param.name} ({text!r} at {inf.where(launch.line)})")
                args.append(ArgSpec(param.name, dtype, Role.SCALAR, value=f"<value of {text}>"))
                continue
            pending_scalars.append((i, expr))
            args.append(ArgSpec(param.name, dtype, Role.SCALAR, value=text))
            continue
        var, frame = _follow_pointer(env, text)
        alloc = _allocation_for(scan, var, env.frames[frame]) if var else None
        if alloc is None:
            inf.missing.append(
                f"the size of the buffer passed as {param.name} ({text.strip()!r}: no cudaMalloc/malloc of it found)"
            )
            args.append(ArgSpec(param.name, dtype, Role.IN, shape=(f"<element count of {param.name}>",)))
            continue
        count = _element_count(inf, alloc, dtype, lanes, frame)
        if param.const or not param.written:
            role = Role.IN
        elif _is_h2d(scan, var or "") or param.name in _read_params(scan, k):
            # filled by the host, or read by the kernel itself (`d[i] = 2 * d[i]` on a buffer an
            # earlier kernel wrote): its contents on entry matter, so they are drawn, not poisoned
            role = Role.INOUT
        else:
            role = Role.OUT
        args.append(ArgSpec(param.name, dtype, role, shape=(count,)))
    # Size symbols are known once every allocation was read; scalars and geometry refer to them.
    for i, expr in pending_scalars:
        value = _resolve(
            inf, expr, f"the value of {k.params[i].name} ({launch.args[i].strip()!r})", launch.line
        )
        args[i] = replace(args[i], value=value)
    grid = _dims(inf, launch.grid, "grid", launch.line)
    block = _dims(inf, launch.block, "block", launch.line)
    shared = (
        _resolve(inf, cexpr.parse(launch.shared_bytes), "the shared memory size", launch.line)
        if launch.shared_bytes
        else "0"
    )
    template_args = tuple(
        _resolve(inf, cexpr.parse(t), f"template argument {t}", launch.line)
        if _parses(t) and normalise_dtype(base_type(t)) is None
        else t
        for t in inf.template_args
    )
    constants, const_missing = infer_constants(scan, k.name, env=env)
    inf.missing.extend(const_missing)
    if inf.missing:
        return KernelSpec(
            kernel=k.name,
            args=tuple(args),
            grid=tuple(grid),
            block=tuple(block),
            shared_bytes=shared,
            constants=constants,
        )
    fixed = {env.pretty(s) for s in _fixed_symbols(inf)}
    program = {env.pretty(s): v for s, v in inf.symbols.items()}
    spec = KernelSpec(
        kernel=k.name,
        args=tuple(args),
        grid=tuple(grid),
        block=tuple(block),
        shared_bytes=shared,
        template_args=template_args,
        float_atomics=bool(set(k.atomics) & FLOAT_ATOMICS)
        and any(a.role in (Role.OUT, Role.INOUT) and np.dtype(a.dtype).kind == "f" for a in args),
        source="inferred",
        notes=(f"inferred from the launch at {inf.where(launch.line)}",)
        + tuple(f"called from {inf.where(fr.line)} ({fr.function})" for fr in env.frames[1:])
        + tuple(f"program size {s} = {v}" for s, v in sorted(program.items()))
        + tuple(f"__constant__ {c.name}: {c.shape[0]} x {c.dtype}, random per trial" for c in constants),
        constants=constants,
    )
    try:
        sizes, hidden = choose_sizes(spec, program, fixed, target_elements)
    except ValueError as err:
        inf.missing.append(f"no runnable validation size ({err})")
        return spec
    return replace(spec, sizes=sizes, hidden_sizes=hidden, fixed=tuple(sorted(fixed & set(program))))


_CONSTANT_SPACES = ("__constant__", "__device__")


def infer_constants(
    scan: FileScan,
    kernel: str,
    *,
    include_dirs: Sequence[str] = (),
    env: _Env | None = None,
    defines: Sequence[str] = (),
) -> tuple[tuple[ArgSpec, ...], list[str]]:
    """The namespace-scope ``__constant__`` / ``__device__`` arrays `kernel` (or a device function it
    calls) references, as input specs sized from their declarations (#defines resolved to numbers),
    plus what could not be inferred.  Arrays with an initializer keep the program's values (skipped)."""
    from porter.scan.extract import referenced_globals

    found = [
        g
        for g in referenced_globals(_source_text(scan), [kernel])
        if g.space in _CONSTANT_SPACES and g.dims and not g.pointer and not g.initialized
    ]
    if not found:
        return (), []
    if env is None:
        launch = next((ls for ls in scan.launches if ls.base == kernel), None)
        env = _Env(
            scan,
            launch
            or LaunchSite(
                kernel=kernel, line=1 << 30, grid="1", block="1", shared_bytes=None, stream=None, args=()
            ),
        )
        _collect_defines(env, include_dirs, defines)
    out: list[ArgSpec] = []
    missing: list[str] = []
    where = f"{Path(scan.path).name}"
    for g in found:
        info = ctype_info(base_type(g.type))
        if info is None:
            missing.append(f"the element type of {g.space} {g.name} ({g.type}, {where}:{g.line}) is unknown")
            continue
        dtype, lanes = info
        count = lanes
        try:
            for dim in g.dims:
                expr = cexpr.parse(dim)
                values = {n: cexpr.Num(env.value(n), str(env.value(n))) for n in cexpr.names(expr)}
                count *= int(cexpr.evaluate(cexpr.substitute(expr, values, env.macros), {}, _sizeof_c))
        except (cexpr.ExprError, ValueError, ZeroDivisionError):
            missing.append(f"the size of {g.space} {g.name}[{']['.join(g.dims)}] ({where}:{g.line})")
            continue
        if count <= 0:
            missing.append(f"the size of {g.space} {g.name} ({where}:{g.line}) is {count}")
            continue
        out.append(ArgSpec(g.name, dtype, Role.IN, shape=(str(count),)))
    return tuple(out), missing


def _parses(text: str) -> bool:
    try:
        cexpr.parse(text)
    except cexpr.ExprError:
        return False
    return True


def _element_count(inf: _Inference, alloc: Allocation, dtype: str, lanes: int, frame: int = 0) -> str:
    types = inf.env.frames[frame].types
    alloc = replace(
        alloc,
        bytes=substitute_types(alloc.bytes, types),
        elem_type=substitute_types(alloc.elem_type, types) if alloc.elem_type else None,
    )
    try:
        raw = cexpr.parse(alloc.bytes)
    except cexpr.ExprError:
        inf.missing.append(f"the byte size {alloc.bytes!r} of {alloc.var} at {inf.where(alloc.line)}")
        return f"<element count of {alloc.var}>"
    if alloc.api == "calloc" and "," in alloc.bytes:
        parts = dim_components(alloc.bytes)
        raw = cexpr.parse(f"({parts[0]}) * ({parts[1]})")
    expr = _strip_int_casts(inf.env.expand(raw, frame=frame))
    factors = cexpr.multiplicands(expr)
    elem = np.dtype(dtype).itemsize * lanes if not dtype.startswith("<") else 1
    size_factor = next((f for f in factors if isinstance(f, cexpr.SizeOf)), None)
    if size_factor is not None:
        factors.remove(size_factor)
        count: cexpr.Expr = cexpr.product(factors)
        try:
            ratio = _sizeof_c(size_factor.text) / elem
        except cexpr.ExprError:
            ratio = 1.0  # sizeof(T) of a template type: the parameter's own type
        if ratio != 1.0 and ratio.is_integer():
            count = cexpr.Binary("*", count, cexpr.Num(int(ratio), str(int(ratio))))
    elif (
        alloc.api.startswith("new")
        or alloc.elem_type is not None
        and alloc.api not in ("cudaMalloc", "hipMalloc")
    ):
        count = expr  # `new T[n]`: the size is already an element count
    else:
        count = cexpr.Binary("/", expr, cexpr.Num(elem, str(elem)))
    if lanes > 1:
        count = cexpr.Binary("*", count, cexpr.Num(lanes, str(lanes)))
    for name in cexpr.names(count):
        if inf.env.is_leaf(name):
            inf.symbols[name] = int(inf.env.value(name))
    return _resolve(inf, count, f"the element count of {alloc.var}", alloc.line, frame)


def _resolve(inf: _Inference, expr: cexpr.Expr, what: str, line: int, frame: int = 0) -> str:
    expanded = inf.env.expand(expr, frame=frame)
    unknown = sorted(n for n in cexpr.names(expanded) if n not in inf.symbols and not inf.env.is_leaf(n))
    unknown += sorted(f"{f}()" for f in cexpr.calls(expanded) if not _evaluable_call(f))
    if unknown:
        inf.missing.append(f"{what}: no host value for {', '.join(unknown)} (at {inf.where(line)})")
        return f"<{cexpr.render(inf.env.pretty_expr(expanded))}>"
    return inf.finalize(expanded)


def _evaluable_call(func: str) -> bool:
    """Can the evaluator compute calls of `func` (min/max and their kin)?"""
    try:
        cexpr.evaluate(cexpr.Call(func, (cexpr.Num(1, "1"), cexpr.Num(2, "2"))))
    except cexpr.ExprError:
        return False
    return True


def _launch_template_args(inf: _Inference, launch: LaunchSite) -> tuple[str, ...]:
    """The launch's template arguments with the enclosing host templates' parameters replaced;
    those the launch leaves out deduced from the arguments' declared types."""
    env, k = inf.env, inf.kernel
    targs = tuple(substitute_types(t, env.frames[0].types).strip() for t in launch.template_args)
    if len(targs) >= len(k.template_params) or len(launch.args) != len(k.params):
        return targs
    names = [_template_param_name(d) for d in k.template_params]
    known = dict(zip(names, targs, strict=False))
    host = host_code(_source_text(env.scan))

    def type_of(expr: str) -> str | None:
        var, frame = _follow_pointer(env, expr)
        fr = env.frames[frame]
        return _expr_type(host, var if var is not None else expr, fr, fr.function, fr.line)

    deduced = deduce_template_args(names, [p.type for p in k.params], launch.args, type_of)
    out = []
    for n in names:
        v = known.get(n) or deduced.get(n)
        if v is None:
            return targs
        out.append(v)
    return tuple(out)


def _template_param_name(decl: str) -> str:
    words = decl.split("=")[0].split()
    return words[-1] if words else decl


def _follow_pointer(env: _Env, text: str) -> tuple[str | None, int]:
    """The variable an argument names and the frame it lives in, following helper parameters out to
    the caller's argument (`x` of `run(float* x)` called as `run(d_x)` -> d_x in the caller)."""
    var = _pointer_var(text)
    frame = 0
    while var is not None and frame + 1 < len(env.frames) and var in env.frames[frame].args:
        var = _pointer_var(env.frames[frame].args[var])
        frame += 1
    return var, frame


def _dims(inf: _Inference, text: str, what: str, line: int) -> list[str]:
    t = text.strip()
    frame = 0
    frames = inf.env.frames
    # A helper's `dim3 grid` parameter: the caller's argument, read in the caller.
    while re.fullmatch(r"[A-Za-z_]\w*", t) and frame + 1 < len(frames) and t in frames[frame].args:
        t = frames[frame].args[t].strip()
        frame += 1
    comps: list[str] | None = None
    if re.fullmatch(r"[A-Za-z_]\w*", t):
        a = inf.env.assignment(t, frame)
        if a is not None and a.type and "dim3" in a.type:
            comps = dim_components(a.value)
        else:  # `dim3 block(16, 16);` -- a constructor-style declaration
            fr = frames[frame]
            decl = _dim3_declaration(inf.env.scan, t, fr.line if frame else line, fr.start)
            if decl is not None:
                comps = dim_components(decl)
    if comps is None:
        comps = dim_components(t) if t.startswith(("dim3", "{")) else [t]
    out = []
    for c in comps:
        try:
            c = substitute_types(c, frames[frame].types)
            out.append(_resolve(inf, cexpr.parse(c), f"the {what} size", line, frame))
        except cexpr.ExprError:
            inf.missing.append(f"the {what} size {c!r} (at {inf.where(line)})")
            out.append(f"<{c}>")
    while len(out) > 1 and out[-1] == "1":
        out.pop()
    return out


def _dim3_declaration(scan: FileScan, name: str, before_line: int, after_line: int = 0) -> str | None:
    """The constructor arguments of the last `dim3 name(...)` / `dim3 name{...}` before a line
    (and from `after_line` on: the function's first line)."""
    lines = _source_text(scan).splitlines()[max(after_line - 1, 0) : max(before_line, 1)]
    pattern = re.compile(rf"\bdim3\s+{re.escape(name)}\s*([({{].*?[)}}])\s*;")
    found = None
    for text in lines:
        m = pattern.search(text)
        if m:
            found = m.group(1)
    return found


def _fixed_symbols(inf: _Inference) -> set[str]:
    """Size symbols that must keep their program value: small ones, and #defines the kernel body
    itself uses (changing the host's value would not change the kernel's)."""
    body = _kernel_body(inf.env.scan, inf.kernel)
    fixed = set()
    for name, value in inf.symbols.items():
        raw = inf.env.base_name(name)
        if value < MIN_SCALABLE or (
            name.endswith("@-1") and raw in inf.env.defines and re.search(rf"\b{re.escape(raw)}\b", body)
        ):
            fixed.add(name)
    return fixed
