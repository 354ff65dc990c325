"""Spec files (``<source>.porter.toml`` or ``porter.toml`` beside the source; docs/SPEC_FORMAT.md):
found, read and checked field by field."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from porter.errors import UsageError
from porter.harness.inputs import ctype_info
from porter.harness.spec.names import split_instance
from porter.harness.spec.sizes import MAX_SIZE_VALUE, MIN_SCALABLE, check_size
from porter.model import ArgSpec, KernelSpec, Role
from porter.scan import cexpr

SPEC_SUFFIX = ".porter.toml"
DIR_SPEC = "porter.toml"


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
    text = read_text(
        p, "spec file", strict=True
    )  # UsageError: missing, not a regular file, too large, not UTF-8
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
