"""A kernel's spec as ready-to-edit spec-file text (``porter check``/``port`` print it when inference
falls short)."""

from __future__ import annotations

import math
import re
from typing import Any

from porter.model import KernelSpec, Role


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
