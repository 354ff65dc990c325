"""KernelSpec: how to run a kernel -- from a spec file next to the source, or inferred from host code.

Order of precedence (see docs/SPEC_FORMAT.md):

1. ``<source>.porter.toml`` or ``porter.toml`` in the source's directory (:func:`load_spec_file`);
2. inference from the file's own host code (:func:`infer_spec`): the launch site gives the
   arguments and the geometry; ``cudaMalloc``/``malloc`` sizes give the array shapes in size
   symbols; host assignments and ``#define``s give the values; copies and ``const`` give roles.

When inference falls short, :class:`~porter.errors.PorterError` names the file and line, says
what is missing and carries a ready-to-edit spec file snippet.
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from porter.errors import PorterError, UsageError
from porter.harness import cexpr
from porter.harness.hostcalls import HostCode, deduce_template_args, host_code, literal_type, substitute_types
from porter.harness.inputs import ctype_info, ctype_size
from porter.model import Allocation, ArgSpec, Assignment, FileScan, Kernel, KernelSpec, LaunchSite, Role

if TYPE_CHECKING:
    from tree_sitter import Node

SPEC_SUFFIX = ".porter.toml"
DIR_SPEC = "porter.toml"
DEFAULT_TARGET_ELEMENTS = 32768  # elements in the largest array at the first validation size
MIN_SCALABLE = 9  # size symbols below this stay at their program value (channels, radius...)
MAX_SIZE_VALUE = 2**63 - 1  # a size symbol's largest value (C's long long)

_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|__global|global)\b|[*&]")
_CAST_PREFIX = re.compile(r"^\(\s*[\w\s:]+\**\s*\)\s*")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_FLOAT_ATOMICS = frozenset(
    {"atomicAdd", "atomicAdd_block", "atomicAdd_system", "atomicSub", "unsafeAtomicAdd"}
)


# ----------------------------------------------------------------------------- spec files


def find_spec_file(source: str | Path) -> Path | None:
    """The spec file that applies to `source`: `<source>.porter.toml`, else `porter.toml` beside it."""
    from porter import files

    src = Path(source)
    for candidate in (src.with_name(src.name + SPEC_SUFFIX), src.with_name(DIR_SPEC)):
        if files.is_regular(candidate):
            return candidate
        if files.exists(candidate):  # a FIFO, a device or a folder under a spec file's name
            raise UsageError(
                f"spec file: {files.refusal(candidate) or 'not a regular file'}", path=str(candidate)
            )
    return None


def load_spec_file(path: str | Path) -> dict[str, KernelSpec]:
    """Every kernel described in a spec file (format: docs/SPEC_FORMAT.md)."""
    from porter.files import read_text

    p = Path(path)
    text = read_text(p, "spec file")  # UsageError: missing, not a regular file, too large, not UTF-8
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"not a valid spec file: {err}", path=str(p)) from None
    except RecursionError:
        raise UsageError("not a valid spec file: too deeply nested", path=str(p)) from None
    kernels = doc.get("kernels")
    if not isinstance(kernels, dict) or not kernels:
        raise UsageError("a spec file needs at least one [kernels.<name>] table", path=str(p))
    return {name: _spec_from_table(name, table, str(p)) for name, table in kernels.items()}


def spec_for(source: str | Path, scan: FileScan, kernel: str, include_dirs: Sequence[str] = ()) -> KernelSpec:
    """The spec file's entry for `kernel` when there is one, else the inferred spec.

    A spec-file entry that lists no ``constants`` gets the ``__constant__`` symbols the kernel reads,
    inferred from the source (when they can be: else it stays as written)."""
    spec_path = find_spec_file(source)
    base, wanted = split_instance(kernel)
    if spec_path is not None:
        specs = load_spec_file(spec_path)
        spec = specs.get(kernel) or next(
            (v for k, v in specs.items() if _squash(k) == _squash(kernel) and k != kernel), None
        )
        # The kernel's own entry serves an instantiation it names (template_args = [...]).
        if (
            spec is None
            and wanted is not None
            and base in specs
            and tuple(map(_squash, specs[base].template_args)) == tuple(map(_squash, wanted))
        ):
            spec = specs[base]
        if spec is not None:
            if not spec.constants:
                consts, missing = infer_constants(scan, base, include_dirs=include_dirs)
                if consts and not missing:
                    names = ", ".join(c.name for c in consts)
                    spec = replace(
                        spec, constants=consts, notes=(*spec.notes, f"constants inferred: {names}")
                    )
            return spec
    return infer_spec(scan, kernel, include_dirs=include_dirs)


def _need(table: Mapping[str, Any], key: str, what: str, path: str) -> Any:
    if key not in table:
        raise UsageError(f"{what}: missing `{key}`", path=path)
    return table[key]


def _expr_list(value: Any, what: str, path: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, (str, int)) or isinstance(item, bool):
            raise UsageError(f"{what}: expected an expression (string or integer), got {item!r}", path=path)
        text = str(item)
        try:
            cexpr.parse(text)
        except cexpr.ExprError as err:
            raise UsageError(f"{what}: {err}", path=path) from None
        out.append(text)
    if not 1 <= len(out) <= 3 and what.endswith(("grid", "block")):
        raise UsageError(f"{what}: 1 to 3 expressions", path=path)
    return tuple(out)


def _sizes(value: Any, what: str, path: str) -> tuple[dict[str, int], ...]:
    if not isinstance(value, list) or not all(isinstance(s, dict) for s in value):
        raise UsageError(f"{what}: expected a list of tables such as [{{ n = 4096 }}]", path=path)
    out = []
    for s in value:
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in s.values()):
            raise UsageError(f"{what}: size values must be positive integers, got {s}", path=path)
        big = next((k for k, v in s.items() if v > MAX_SIZE_VALUE), None)
        if big is not None:
            raise UsageError(
                f"{what}: size {big} = {s[big]} is larger than {MAX_SIZE_VALUE} (2**63 - 1)", path=path
            )
        out.append({str(k): int(v) for k, v in s.items()})
    return tuple(out)


def _number(
    table: Mapping[str, Any], key: str, what: str, path: str, *, minimum: float | None = None
) -> float | None:
    """An optional finite number of a spec table (``low``, ``rtol``...); UsageError for anything else."""
    if key not in table:
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{what}.{key}: expected a number, got {value!r}", path=path)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise UsageError(f"{what}.{key}: expected a finite number, got {value!r}", path=path)
    if minimum is not None and number < minimum:
        raise UsageError(f"{what}.{key}: must be at least {minimum:g}, got {value!r}", path=path)
    return number


def _range(table: Mapping[str, Any], what: str, path: str) -> tuple[float | None, float | None]:
    """The optional ``low`` / ``high`` of an argument or constant: finite, low <= high."""
    low, high = _number(table, "low", what, path), _number(table, "high", what, path)
    if low is not None and high is not None:
        if low > high:
            raise UsageError(f"{what}: low ({low:g}) is above high ({high:g})", path=path)
        if not math.isfinite(high - low):
            raise UsageError(f"{what}: the range [{low:g}, {high:g}] is too wide to draw from", path=path)
    return low, high


def _text(table: Mapping[str, Any], key: str, what: str, path: str) -> str:
    """A field that names something (``role``, ``dtype``, ``name``): a string."""
    value = table[key]
    if not isinstance(value, str):
        raise UsageError(f"{what}.{key}: expected a string, got {value!r}", path=path)
    return value


def normalise_dtype(text: str) -> str | None:
    """A NumPy dtype name from a NumPy name or a C type name; None when neither."""
    from porter.harness.inputs import known_dtype

    info = ctype_info(text)
    if info is not None:
        return info[0]
    try:
        dt = np.dtype(text)
    except (TypeError, ValueError, SyntaxError):
        return None
    return dt.name if dt.kind in "fiu" and known_dtype(dt.name) else None


def _spec_from_table(name: str, table: Any, path: str) -> KernelSpec:
    where = f"kernels.{name}"
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table", path=path)
    raw_args = _need(table, "args", where, path)
    if not isinstance(raw_args, list) or not raw_args:
        raise UsageError(f"{where}.args: expected [[{where}.args]] entries", path=path)
    args = []
    for i, a in enumerate(raw_args):
        aw = f"{where}.args[{i}]"
        if not isinstance(a, dict):
            raise UsageError(f"{aw}: expected a table", path=path)
        _need(a, "role", aw, path)
        role_text = _text(a, "role", aw, path)
        try:
            role = Role(role_text)
        except ValueError:
            raise UsageError(
                f"{aw}: role must be in, out, inout or scalar, not {role_text!r}", path=path
            ) from None
        _need(a, "dtype", aw, path)
        dtype = normalise_dtype(_text(a, "dtype", aw, path))
        if dtype is None:
            raise UsageError(f"{aw}: unknown dtype {a['dtype']!r}", path=path)
        low, high = _range(a, aw, path)
        shape: tuple[str, ...] = ()
        value = None
        if role is Role.SCALAR:
            value = _expr_list(_need(a, "value", aw, path), f"{aw}.value", path)[0]
        else:
            shape = _expr_list(_need(a, "shape", aw, path), f"{aw}.shape", path)
        args.append(
            ArgSpec(
                name=_text(a, "name", aw, path) if "name" in a else f"arg{i}",
                dtype=dtype,
                role=role,
                shape=shape,
                value=value,
                low=low,
                high=high,
            )
        )
    constants = _constants_from_table(table.get("constants", []), where, path)
    sizes = _sizes(_need(table, "sizes", where, path), f"{where}.sizes", path)
    if not sizes:
        raise UsageError(f"{where}.sizes: at least one size", path=path)
    hidden = _sizes(table["hidden_sizes"], f"{where}.hidden_sizes", path) if "hidden_sizes" in table else ()
    if not hidden:
        hidden = (_hidden_from(sizes[-1]),)
    base, instance_args = split_instance(name)
    raw_template = table.get("template_args", list(instance_args or ()))
    if not isinstance(raw_template, list) or not all(
        isinstance(t, (str, int)) and not isinstance(t, bool) for t in raw_template
    ):
        raise UsageError(
            f'{where}.template_args: expected a list of strings or integers such as ["256"], '
            f"got {raw_template!r}",
            path=path,
        )
    template_args = tuple(str(t) for t in raw_template)
    float_atomics = table.get("float_atomics", False)
    if not isinstance(float_atomics, bool):
        raise UsageError(f"{where}.float_atomics: expected true or false, got {float_atomics!r}", path=path)
    spec = KernelSpec(
        kernel=base,
        args=tuple(args),
        grid=_expr_list(_need(table, "grid", where, path), f"{where}.grid", path),
        block=_expr_list(_need(table, "block", where, path), f"{where}.block", path),
        shared_bytes=_expr_list(table.get("shared_bytes", "0"), f"{where}.shared_bytes", path)[0],
        sizes=sizes,
        hidden_sizes=hidden,
        bench_sizes=_sizes(table["bench_sizes"], f"{where}.bench_sizes", path)
        if "bench_sizes" in table
        else (),
        rtol=_number(table, "rtol", where, path, minimum=0.0),
        atol=_number(table, "atol", where, path, minimum=0.0),
        template_args=template_args,
        float_atomics=float_atomics,
        source="spec-file",
        notes=(f"spec file {path}",),
        constants=constants,
    )
    _check_symbols(spec, path)
    return spec


def _constants_from_table(raw: Any, where: str, path: str) -> tuple[ArgSpec, ...]:
    """`[[kernels.K.constants]]`: name (the symbol), dtype, shape, optional low/high."""
    if not isinstance(raw, list):
        raise UsageError(f"{where}.constants: expected [[{where}.constants]] entries", path=path)
    out = []
    for i, c in enumerate(raw):
        cw = f"{where}.constants[{i}]"
        if not isinstance(c, dict):
            raise UsageError(f"{cw}: expected a table", path=path)
        name = str(_need(c, "name", cw, path))
        if not isinstance(c["name"], str) or not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise UsageError(f"{cw}: name must be the symbol's identifier, not {name!r}", path=path)
        _need(c, "dtype", cw, path)
        dtype = normalise_dtype(_text(c, "dtype", cw, path))
        if dtype is None:
            raise UsageError(f"{cw}: unknown dtype {c['dtype']!r}", path=path)
        low, high = _range(c, cw, path)
        out.append(
            ArgSpec(
                name=name,
                dtype=dtype,
                role=Role.IN,
                shape=_expr_list(_need(c, "shape", cw, path), f"{cw}.shape", path),
                low=low,
                high=high,
            )
        )
    return tuple(out)


def _hidden_from(size: Mapping[str, int]) -> dict[str, int]:
    """A size unlike the given one (about 0.8x, odd), for specs that name no hidden size."""
    return {k: (max(1, round(v * 0.8)) | 1) if v > MIN_SCALABLE else v for k, v in size.items()}


def _check_symbols(spec: KernelSpec, path: str) -> None:
    """Every expression of the spec must evaluate at every size, to something a run can take."""
    for size in spec.sizes + spec.hidden_sizes + spec.bench_sizes:
        try:
            check_size(spec, size)
        except ValueError as err:  # cexpr.ExprError included
            raise UsageError(f"kernels.{spec.kernel}: at size {size}: {err}", path=path) from None


def memory_bytes() -> int:
    """The most the buffers of one run may take: half this machine's physical memory (a validation
    holds several copies of them), 1 TiB if unknown."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE")) // 2
    except (AttributeError, ValueError, OSError):
        return 1 << 40


def check_size(spec: KernelSpec, size: Mapping[str, int]) -> None:
    """ValueError when the spec cannot run at ``size``: an expression that does not evaluate, a
    scalar its type cannot hold, an array of no elements, a launch geometry out of range, or buffers
    larger than :func:`memory_bytes`."""
    from porter.harness.inputs import element_count, scalar_value

    total = 0
    for arg in (*spec.args, *spec.constants):
        if arg.role is Role.SCALAR:
            scalar_value(arg, size)
            continue
        count = element_count(arg, size)
        if count <= 0:
            what = "constant" if arg in spec.constants else "argument"
            raise ValueError(f"{what} {arg.name} has {count} elements")
        total += count * np.dtype(arg.dtype).itemsize
    geometry(spec, size)
    limit = memory_bytes()
    if total > limit:
        raise ValueError(
            f"the buffers take {total / (1 << 30):.4g} GiB, more than half this machine's memory "
            f"({limit / (1 << 30):.4g} GiB)"
        )


MAX_LAUNCH_DIM = 2**31 - 1  # CUDA's largest grid x extent; no launch dimension may exceed it


def geometry(spec: KernelSpec, size: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(grid, block, shared_bytes) at a problem size; ValueError when out of range."""
    from porter.harness.inputs import _sizeof

    def value(text: str) -> int:
        v = cexpr.eval_text(text, size, _sizeof)
        try:
            return int(v)
        except (OverflowError, ValueError):  # a float infinity or NaN
            raise ValueError(f"{text} is {v}, not an integer") from None

    grid = tuple(value(g) for g in spec.grid)
    block = tuple(value(b) for b in spec.block)
    shared = value(spec.shared_bytes or "0")
    if any(v <= 0 for v in grid + block):
        raise ValueError(f"launch geometry grid={grid} block={block} is empty")
    if any(v > MAX_LAUNCH_DIM for v in grid + block):
        raise ValueError(f"launch geometry grid={grid} block={block} exceeds {MAX_LAUNCH_DIM} in a dimension")
    if not 0 <= shared <= MAX_LAUNCH_DIM:
        raise ValueError(f"dynamic shared memory of {shared} bytes is out of range")
    return grid, block, shared


# ----------------------------------------------------------------------------- inference


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


def _dim_components(text: str) -> list[str]:
    """`dim3(a, b)` / `(a, b)` / `{a, b}` / `a, b` / `a` -> ["a", "b"]."""
    t = text.strip()
    t = re.sub(r"^dim3\s*", "", t)
    if t and t[0] in "({" and _matching_close(t) == len(t) - 1:
        t = t[1:-1]
    parts, depth, cur = [], 0, ""
    for ch in t:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _matching_close(text: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1


@dataclass
class _Inference:
    env: _Env
    kernel: Kernel
    path: str
    missing: list[str] = field(default_factory=list)
    symbols: dict[str, int] = field(default_factory=dict)  # size symbol (internal name) -> program value
    template_args: tuple[str, ...] = ()  # the launch's, the host templates' parameters substituted

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


def _dtype_of(param_type: str, tmap: Mapping[str, str]) -> tuple[str, int] | None:
    t = base_type(param_type)
    t = tmap.get(t, t)
    return ctype_info(base_type(t))


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
    try:
        return Path(scan.path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


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
    try:
        data = Path(scan.path).read_bytes()
    except OSError:
        return ""
    if kernel.end_byte > kernel.start_byte:
        return data[kernel.start_byte : kernel.end_byte].decode("utf-8", "replace")
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[kernel.line - 1 : kernel.end_line])


_STORE_TARGETS = frozenset({"subscript_expression", "pointer_expression", "field_expression"})


def _read_params(scan: FileScan, kernel: Kernel) -> frozenset[str]:
    """The pointer parameters the kernel reads through (anything but a plain `p[i] = v`, `*p = v`
    or `p->f = v` store counts as a read: compound assignments, atomics, helper calls, aliases)."""
    return _read_params_in(_kernel_body(scan, kernel), frozenset(p.name for p in kernel.params if p.pointer))


@functools.lru_cache(maxsize=256)
def _read_params_in(text: str, names: frozenset[str]) -> frozenset[str]:
    from porter.grammars import parser

    if not names or not text:
        return frozenset()
    root = parser("cuda").parse(text.encode("utf-8")).root_node
    stack = list(root.named_children)
    bodies = []
    while stack:  # the body of the (possibly templated) function definition
        node = stack.pop()
        if node.type == "function_definition":
            body = node.child_by_field_name("body")
            if body is not None:
                bodies.append(body)
        elif node.type in ("template_declaration", "linkage_specification", "declaration_list"):
            stack.extend(node.named_children)
    read: set[str] = set()
    stack = bodies
    while stack:
        node = stack.pop()
        if node.type == "identifier":
            name = (node.text or b"").decode()
            if name in names and name not in read and not _plain_store(node):
                read.add(name)
            continue
        stack.extend(node.named_children)
    return frozenset(read)


def _plain_store(ident: Node) -> bool:
    """`p[i] = v`, `*p = v`, `*(p + i) = v`, `p->f = v`: ``ident`` only names where a value goes."""
    target = ident.parent
    while target is not None and target.type in ("parenthesized_expression", "binary_expression"):
        if target.type == "binary_expression":
            op = target.child_by_field_name("operator")
            if op is None or op.type not in ("+", "-"):
                return False
        target = target.parent
    if target is None or target.type not in _STORE_TARGETS:
        return False
    if target.type == "subscript_expression":
        base = target.child_by_field_name("argument")
        if base is None or not (base.start_byte <= ident.start_byte and ident.end_byte <= base.end_byte):
            return False  # the name is in the index: `q[p[0]]` reads p
    if target.type == "pointer_expression" and (target.child(0) is None or target.child(0).type != "*"):
        return False
    assign = target.parent
    if assign is None or assign.type != "assignment_expression":
        return False
    left, op = assign.child_by_field_name("left"), assign.child_by_field_name("operator")
    return (
        left is not None
        and left.start_byte == target.start_byte
        and left.end_byte == target.end_byte
        and op is not None
        and op.type == "="
    )


def _collect_defines(env: _Env, include_dirs: Sequence[str]) -> None:
    """#defines of the file and of the local headers it includes (the file's own win)."""
    seen: set[Path] = set()

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
        for name in _INCLUDE.findall(data.decode("utf-8", "replace")):
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


def split_instance(kernel: str) -> tuple[str, tuple[str, ...] | None]:
    """`axpby<float>` -> ("axpby", ("float",)); `saxpy` -> ("saxpy", None)."""
    text = kernel.strip()
    if "<" not in text or not text.endswith(">"):
        return text, None
    base, rest = text.split("<", 1)
    return base.strip(), tuple(_squash(a) for a in _dim_components(rest[:-1]))


def _squash(text: str) -> str:
    return re.sub(r"\s*([<>,*&])\s*", r"\1", " ".join(text.split()))


def _instance_label(base: str, args: Sequence[str]) -> str:
    return f"{base}<{', '.join(args)}>" if args else base


def infer_spec(
    scan: FileScan,
    kernel: str,
    *,
    include_dirs: Sequence[str] = (),
    target_elements: int = DEFAULT_TARGET_ELEMENTS,
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
            f"site); write {Path(scan.path).name}{SPEC_SUFFIX}:\n{snippet}",
            path=scan.path,
            line=k.line,
        )
    host: HostCode | None = None
    if any(ls.function not in (None, "main") for ls in launches):
        host = host_code(_source_text(scan))
    # Prefer a launch (and a chain of host calls reaching it) whose names resolve best.
    best: tuple[int, KernelSpec | None, _Inference, LaunchSite] | None = None
    seen_args: list[str] = []
    for launch in launches:
        for frames in _call_chains(host, launch):
            env = _Env(scan, launch, frames=frames)
            _collect_defines(env, include_dirs)
            inf = _Inference(env, k, scan.path)
            spec = _infer_at(inf, launch, target_elements)
            if wanted is not None:
                got = tuple(
                    map(
                        _squash,
                        spec.template_args if spec is not None and spec.template_args else inf.template_args,
                    )
                )
                label = _instance_label(base, got)
                if label not in seen_args:
                    seen_args.append(label)
                if got != tuple(map(_squash, wanted)):
                    continue
            score = -len(inf.missing)
            if best is None or score > best[0]:
                best = (score, spec, inf, launch)
    if best is None:
        snippet = spec_snippet(_skeleton(k), missing=True, name=kernel)
        raise PorterError(
            f"cannot infer how to run {kernel}: no launch of {base} with template arguments "
            f"<{', '.join(wanted or ())}> (launched as {', '.join(seen_args) or 'none'}); write "
            f"{Path(scan.path).name}{SPEC_SUFFIX} next to the source:\n{snippet}",
            path=scan.path,
            line=launches[0].line,
        )
    _, spec, inf, launch = best
    if spec is None or inf.missing:
        partial = spec or _skeleton(k)
        snippet = spec_snippet(partial, missing=True, name=kernel)
        raise PorterError(
            f"cannot infer how to run {kernel}: {'; '.join(inf.missing)}. Write "
            f"{Path(scan.path).name}{SPEC_SUFFIX} next to the source:\n{snippet}",
            path=scan.path,
            line=launch.line,
        )
    return spec


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
        info = _dtype_of(param.type, tmap)
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
        float_atomics=bool(set(k.atomics) & _FLOAT_ATOMICS)
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
    return replace(spec, sizes=sizes, hidden_sizes=hidden)


_CONSTANT_SPACES = ("__constant__", "__device__")


def infer_constants(
    scan: FileScan, kernel: str, *, include_dirs: Sequence[str] = (), env: _Env | None = None
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
        _collect_defines(env, include_dirs)
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
        parts = _dim_components(alloc.bytes)
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
            comps = _dim_components(a.value)
        else:  # `dim3 block(16, 16);` -- a constructor-style declaration
            fr = frames[frame]
            decl = _dim3_declaration(inf.env.scan, t, fr.line if frame else line, fr.start)
            if decl is not None:
                comps = _dim_components(decl)
    if comps is None:
        comps = _dim_components(t) if t.startswith(("dim3", "{")) else [t]
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


# ----------------------------------------------------------------------------- sizes


def _largest(spec: KernelSpec, size: Mapping[str, int]) -> int:
    from porter.harness.inputs import element_count

    return max((element_count(a, size) for a in spec.args if a.role is not Role.SCALAR), default=0)


def _runnable(spec: KernelSpec, size: Mapping[str, int]) -> bool:
    from porter.harness.inputs import element_count

    try:
        geometry(spec, size)
        return all(element_count(a, size) > 0 for a in spec.args if a.role is not Role.SCALAR)
    except (cexpr.ExprError, ValueError, ZeroDivisionError):
        return False


def _scaled(program: Mapping[str, int], fixed: Iterable[str], factor: float) -> dict[str, int]:
    fixed = set(fixed)
    return {k: v if k in fixed else max(1, round(v * factor)) for k, v in program.items()}


def choose_sizes(
    spec: KernelSpec,
    program: Mapping[str, int],
    fixed: Iterable[str] = (),
    target: int = DEFAULT_TARGET_ELEMENTS,
) -> tuple[tuple[dict[str, int], ...], tuple[dict[str, int], ...]]:
    """Validation sizes derived from the program's own size, keeping the symbols' ratios.

    Returns (sizes, hidden_sizes): sizes[0] scaled so the largest array holds about `target`
    elements, rounded to multiples of 32; sizes[1] smaller with every scalable symbol odd (so not a
    multiple of any power-of-two block); one hidden size, odd, of yet another magnitude.
    """
    fixed = set(fixed)
    if not program:
        return (({},), ())
    scalable = [k for k in program if k not in fixed]
    if not scalable:
        return ((dict(program),), ())
    lo, hi = 0.0, 1.0
    if _largest(spec, program) > target:
        for _ in range(60):
            mid = (lo + hi) / 2
            if _largest(spec, _scaled(program, fixed, mid)) > target:
                hi = mid
            else:
                lo = mid
        factor = lo
    else:
        factor = 1.0

    def nice(factor: float) -> dict[str, int]:
        s = _scaled(program, fixed, factor)
        return {k: (max(32, v - v % 32) if k not in fixed and v >= 64 else v) for k, v in s.items()}

    def odd(factor: float, offset: int) -> dict[str, int]:
        s = _scaled(program, fixed, factor)
        return {k: ((v + offset) | 1) if k not in fixed and v > 2 else v for k, v in s.items()}

    candidates = [nice(factor), odd(factor * 0.77, 0)]
    hidden_candidates = [odd(factor * 0.61, 6), odd(factor * 0.45, 10), odd(factor * 0.9, 4)]
    sizes = []
    for s in candidates:
        if _runnable(spec, s) and s not in sizes:
            sizes.append(s)
    if not sizes:
        raise ValueError(f"the spec cannot run at sizes derived from {dict(program)}")
    hidden = next((s for s in hidden_candidates if _runnable(spec, s) and s not in sizes), None)
    return tuple(sizes), ((hidden,) if hidden else ())


# ----------------------------------------------------------------------------- rendering


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else '"nan"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return str(v)


def spec_snippet(spec: KernelSpec, *, missing: bool = False, name: str | None = None) -> str:
    """The spec as spec-file TOML (placeholders in <angle brackets> where inference fell short).

    `name` keys the table (default: the kernel); an instantiation's name is quoted:
    ``[kernels."axpby<float>"]``."""
    key = name or spec.kernel
    if not re.fullmatch(r"[A-Za-z0-9_-]+", key):
        key = _toml_value(key)
    lines = [f"[kernels.{key}]"]
    lines.append(f"grid = {_toml_value(list(spec.grid))}")
    lines.append(f"block = {_toml_value(list(spec.block))}")
    if spec.shared_bytes not in ("", "0"):
        lines.append(f"shared_bytes = {_toml_value(spec.shared_bytes)}")
    if spec.sizes:
        lines.append(f"sizes = {_toml_value(list(spec.sizes))}")
    else:
        lines.append("sizes = [{ n = 4096 }, { n = 3001 }]  # bind every size symbol used below")
    if spec.hidden_sizes:
        lines.append(f"hidden_sizes = {_toml_value(list(spec.hidden_sizes))}")
    if spec.template_args:
        lines.append(f"template_args = {_toml_value(list(spec.template_args))}")
    if spec.float_atomics:
        lines.append("float_atomics = true")
    if spec.rtol is not None:
        lines.append(f"rtol = {spec.rtol!r}")
    if spec.atol is not None:
        lines.append(f"atol = {spec.atol!r}")
    for a in spec.args:
        lines.append("")
        lines.append(f"[[kernels.{key}.args]]")
        lines.append(f"name = {_toml_value(a.name)}")
        lines.append(f"role = {_toml_value(a.role.value)}")
        lines.append(f"dtype = {_toml_value(a.dtype)}")
        if a.role is Role.SCALAR:
            lines.append(f"value = {_toml_value(a.value or '')}")
        else:
            lines.append(f"shape = {_toml_value(list(a.shape))}")
        if a.low is not None:
            lines.append(f"low = {a.low!r}")
        if a.high is not None:
            lines.append(f"high = {a.high!r}")
    for c in spec.constants:
        lines.append("")
        lines.append(f"[[kernels.{key}.constants]]  # a __constant__ symbol, random per trial")
        lines.append(f"name = {_toml_value(c.name)}")
        lines.append(f"dtype = {_toml_value(c.dtype)}")
        lines.append(f"shape = {_toml_value(list(c.shape))}")
        if c.low is not None:
            lines.append(f"low = {c.low!r}")
        if c.high is not None:
            lines.append(f"high = {c.high!r}")
    if missing:
        lines.insert(
            0, "# Fill in every <placeholder>; expressions may use the size symbols bound in `sizes`."
        )
    return "\n".join(lines)
