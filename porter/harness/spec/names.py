"""Kernel instance names: ``axpby<float>`` split into its base and template arguments, and the
launch-geometry text splitter they share."""

from __future__ import annotations

import re
from collections.abc import Sequence


def dim_components(text: str) -> list[str]:
    """`dim3(a, b)` / `(a, b)` / `{a, b}` / `a, b` / `a` -> ["a", "b"]."""
    t = text.strip()
    t = re.sub(r"^dim3\s*", "", t)
    if t and t[0] in "({" and matching_close(t) == len(t) - 1:
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


def matching_close(text: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_instance(kernel: str) -> tuple[str, tuple[str, ...] | None]:
    """`axpby<float>` -> ("axpby", ("float",)); `saxpy` -> ("saxpy", None)."""
    text = kernel.strip()
    if "<" not in text or not text.endswith(">"):
        return text, None
    base, rest = text.split("<", 1)
    return base.strip(), tuple(squash_name(a) for a in dim_components(rest[:-1]))


def squash_name(text: str) -> str:
    return re.sub(r"\s*([<>,*&])\s*", r"\1", " ".join(text.split()))


def instance_label(base: str, args: Sequence[str]) -> str:
    return f"{base}<{', '.join(args)}>" if args else base
