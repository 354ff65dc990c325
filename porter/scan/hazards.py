"""Portability hazards: the tables in ``hazards.toml`` and the rules that read them.

The CUDA scanner (:mod:`porter.scan.cuda`) finds names, calls, types and expressions with
tree-sitter queries and asks this module whether each is a hazard.  Everything vendor- or
version-specific (removed APIs, texture and unified-memory names, mask spellings, the literals
that betray a 32-lane assumption) lives in the TOML file; this module only applies it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from porter.model import Hazard, Severity

CODES = (
    "warp-size-assumption",
    "full-warp-mask",
    "inline-asm",
    "texture-api",
    "unified-memory",
    "removed-api",
    "cooperative-groups",
    "dynamic-parallelism",
    "libcudacxx",
)
# Codes only HIP code gets (files scanned in the "hip" dialect): wave-size hazards of 64-lane masks.
HIP_CODES = (
    "narrow-ballot",
    "warp-size-redefined",
    "warp-size-branch",
)
DIALECTS = ("cuda", "hip")
# The hazards of code that assumes a wavefront width: what a run at 64 lanes proves or disproves.
WAVE_CODES = ("warp-size-assumption", "full-warp-mask", *HIP_CODES)


@dataclass(frozen=True)
class _Rule:
    code: str
    fields: dict[str, str]
    only_in: frozenset[str] = frozenset(DIALECTS)  # the dialects whose code the rule applies to


@dataclass(frozen=True)
class Tables:
    """The contents of ``hazards.toml``, indexed for lookups by name."""

    templates: dict[str, tuple[str, Severity]]
    calls: dict[str, tuple[_Rule, ...]]  # function name -> rules
    types: dict[str, tuple[_Rule, ...]]  # type name -> rules
    fields: dict[str, tuple[_Rule, ...]]  # member name -> rules
    field_owners: frozenset[str]  # struct types whose members `fields` describes
    qualifiers: dict[str, tuple[_Rule, ...]]  # declaration qualifier -> rules
    namespaces: dict[str, str]  # namespace -> code
    includes: tuple[tuple[str, str], ...]  # (path prefix, code)
    mask_first: frozenset[str]
    full_masks: frozenset[str]
    shuffle_width_arg: dict[str, int]
    shuffle_offset_arg: dict[str, int]
    arithmetic: dict[str, frozenset[str]]
    comparisons: frozenset[str]
    thread_builtins: frozenset[str]
    thread_words: frozenset[str]
    warp_size_words: frozenset[str]
    hip: HipTables


@dataclass(frozen=True)
class HipTables:
    """The ``[hip]`` table: what makes a lane mask narrow or a choice by warp size in HIP code."""

    narrow_mask_casts: frozenset[str]
    wide_mask_functions: frozenset[str]
    narrow_mask_types: frozenset[str]
    bit_functions: dict[str, str]  # 32-bit function -> its 64-bit counterpart
    warp_size_words: frozenset[str]
    warp_size_attributes: frozenset[str]
    branch_widths: frozenset[str]


def _add(index: dict[str, list[_Rule]], names: list[str], rule: _Rule) -> None:
    for name in names:
        index.setdefault(name, []).append(rule)


def _freeze(index: dict[str, list[_Rule]]) -> dict[str, tuple[_Rule, ...]]:
    return {k: tuple(v) for k, v in index.items()}


@cache
def _raw() -> dict[str, Any]:
    found: dict[str, Any] = tomllib.loads(
        resources.files(__package__).joinpath("hazards.toml").read_text(encoding="utf-8")
    )
    return found


def mask_bits(dialect: str) -> int:
    """How wide `dialect`'s warp masks and ballots are (hazards.toml ``[mask_bits]``; 32 when not listed)."""
    return int(_raw().get("mask_bits", {}).get(dialect, 32))


@cache
def tables() -> Tables:
    raw = _raw()
    templates = {
        code: (spec["message"], Severity(spec.get("severity", "warning")))
        for code, spec in raw["codes"].items()
    }
    missing = set(CODES + HIP_CODES) - set(templates)
    if missing:
        raise ValueError(f"hazards.toml lacks messages for {sorted(missing)}")
    calls: dict[str, list[_Rule]] = {}
    types: dict[str, list[_Rule]] = {}
    fields: dict[str, list[_Rule]] = {}
    qualifiers: dict[str, list[_Rule]] = {}

    def removed_fields(entry: dict[str, Any]) -> dict[str, str]:
        return {k: str(v) for k, v in entry.items() if k not in ("names", "owner", "only_in")}

    for entry in raw.get("removed", []):
        only_in = frozenset(entry.get("only_in", DIALECTS))
        _add(calls, entry["names"], _Rule("removed-api", removed_fields(entry), only_in))
    for entry in raw.get("removed_types", []):
        _add(types, entry["names"], _Rule("removed-api", removed_fields(entry)))
    for entry in raw.get("removed_fields", []):
        _add(fields, entry["names"], _Rule("removed-api", removed_fields(entry)))

    tex = raw["texture"]
    _add(calls, tex["functions"], _Rule("texture-api", {}))
    _add(types, tex["types"], _Rule("texture-api", {}))

    um = raw["unified_memory"]
    extra = um.get("extra", {})
    for name in um["functions"]:
        _add(calls, [name], _Rule("unified-memory", {"extra": extra.get(name, "")}))
    _add(qualifiers, um["qualifiers"], _Rule("unified-memory", {"extra": ""}))

    cg = raw["cooperative_groups"]
    _add(calls, cg["functions"], _Rule("cooperative-groups", {}))
    cxx = raw["libcudacxx"]
    namespaces = {ns: "cooperative-groups" for ns in cg["namespaces"]}
    namespaces.update({ns: "libcudacxx" for ns in cxx["namespaces"]})
    includes = tuple((p, "cooperative-groups") for p in cg["includes"]) + tuple(
        (p, "libcudacxx") for p in cxx["includes"]
    )

    warp = raw["warp"]
    hip = raw["hip"]
    hip_tables = HipTables(
        narrow_mask_casts=frozenset(_squash_type(t) for t in hip["narrow_mask_casts"]),
        wide_mask_functions=frozenset(hip["wide_mask_functions"]),
        narrow_mask_types=frozenset(_squash_type(t) for t in hip["narrow_mask_types"]),
        bit_functions=dict(hip["bit_functions"]),
        warp_size_words=frozenset(hip["warp_size_words"]),
        warp_size_attributes=frozenset(hip["warp_size_attributes"]),
        branch_widths=frozenset(hip["branch_widths"]),
    )
    return Tables(
        templates=templates,
        calls=_freeze(calls),
        types=_freeze(types),
        fields=_freeze(fields),
        field_owners=frozenset(e["owner"] for e in raw.get("removed_fields", [])),
        qualifiers=_freeze(qualifiers),
        namespaces=namespaces,
        includes=includes,
        mask_first=frozenset(warp["mask_first"]),
        full_masks=frozenset(m.lower() for m in warp["full_masks"]),
        shuffle_width_arg=dict(warp["shuffle_width_arg"]),
        shuffle_offset_arg=dict(warp["shuffle_offset_arg"]),
        arithmetic={op: frozenset(v.lower() for v in lits) for op, lits in warp["arithmetic"].items()},
        comparisons=frozenset(warp["comparisons"]),
        thread_builtins=frozenset(warp["thread_builtins"]),
        thread_words=frozenset(warp["thread_words"]),
        warp_size_words=frozenset(warp["warp_size_words"]),
        hip=hip_tables,
    )


def _squash_type(text: str) -> str:
    """``unsigned   int`` -> ``unsigned int``; ``std :: uint32_t`` -> ``std::uint32_t``."""
    return " ".join(text.split()).replace(" :: ", "::").replace(":: ", "::").replace(" ::", "::")


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return ""


def make(code: str, line: int, **fields: str) -> Hazard:
    """A hazard with the message of ``code`` filled from ``fields`` (absent fields read as empty)."""
    message, severity = _message(code, tuple(fields.items()))
    return Hazard(code=code, line=line, message=message, severity=severity)


@lru_cache(maxsize=8192)
def _message(code: str, fields: tuple[tuple[str, str], ...]) -> tuple[str, Severity]:
    """The filled message of ``code``; the same name is reported on many lines, so this is memoised."""
    template, severity = tables().templates[code]
    return template.format_map(_Defaults(fields)), severity


def _apply(rules: tuple[_Rule, ...], name: str, line: int, dialect: str = "cuda") -> list[Hazard]:
    return [make(r.code, line, name=name, **r.fields) for r in rules if dialect in r.only_in]


def for_call(name: str, line: int, dialect: str = "cuda") -> list[Hazard]:
    """Hazards of calling ``name`` (removed, texture, unified-memory, cooperative launch APIs) in
    code of ``dialect`` ("cuda" or "hip": HIP's mask-free warp intrinsics are not removed there)."""
    rules = tables().calls.get(name)
    return _apply(rules, name, line, dialect) if rules else []


def for_type(name: str, line: int) -> list[Hazard]:
    rules = tables().types.get(name)
    return _apply(rules, name, line) if rules else []


def for_field(name: str, line: int) -> list[Hazard]:
    rules = tables().fields.get(name)
    return _apply(rules, name, line) if rules else []


def for_qualifier(name: str, line: int) -> list[Hazard]:
    rules = tables().qualifiers.get(name)
    return _apply(rules, name, line) if rules else []


def for_namespace(namespace: str, shown: str, line: int) -> list[Hazard]:
    """``namespace`` is the real namespace (after resolving aliases), ``shown`` what the code wrote."""
    code = tables().namespaces.get(namespace)
    return [make(code, line, name=shown)] if code else []


def for_include(path: str, line: int) -> list[Hazard]:
    """``path`` without its quotes or angle brackets."""
    for prefix, code in tables().includes:
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return [make(code, line, name=f"#include <{path}>")]
    return []


_SUFFIX = re.compile(r"[uUlL]+$")
_CAST = re.compile(r"^\((?:unsigned|unsigned\s+int|uint32_t|unsigned\s+long\s+long|int)\)")


# The literal and name checks below are pure functions of short strings that recur throughout a
# source (`0`, `32`, `threadIdx.x`, `tid`), so they are memoised; the caches are bounded.
_MEMO = 8192


@lru_cache(maxsize=_MEMO)
def normalise_literal(text: str) -> str:
    """``0xFFFFFFFFu`` -> ``0xffffffff``; ``(unsigned)-1`` -> ``-1``; ``~0u`` -> ``~0``."""
    t = "".join(text.split())
    while t.startswith("(") and t.endswith(")") and t.count("(") == 1:
        t = t[1:-1]
    t = _CAST.sub("", t)
    return _SUFFIX.sub("", t).lower()


@lru_cache(maxsize=_MEMO)
def is_full_mask_literal(text: str) -> bool:
    return normalise_literal(text) in tables().full_masks


_WORD_SPLIT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def name_words(name: str) -> set[str]:
    """``warpId`` -> {warp, id, warpid}; ``lane_idx`` -> {lane, idx, laneidx}; ``kWarpSize`` -> ..."""
    parts = [p.lower() for p in _WORD_SPLIT.findall(name)]
    words = set(parts)
    words.add(name.lower().replace("_", ""))
    words.update(a + b for a, b in zip(parts, parts[1:], strict=False))
    return words


@lru_cache(maxsize=_MEMO)
def is_thread_name(name: str) -> bool:
    return bool(name_words(name) & tables().thread_words)


@lru_cache(maxsize=_MEMO)
def is_warp_size_name(name: str) -> bool:
    return bool(name_words(name) & tables().warp_size_words)


@lru_cache(maxsize=_MEMO)
def is_warp_name(name: str) -> bool:
    """A warp index or count (``warp``, ``warpId``, ``wid``, ``num_warps``), not a lane or thread id."""
    words = name_words(name)
    return "warp" in words or "warpid" in words or "wid" in words


@cache
def thread_builtin_pattern() -> re.Pattern[str]:
    """Matches the CUDA built-ins that make an expression thread-dependent (threadIdx, blockDim)."""
    names = "|".join(re.escape(n) for n in sorted(tables().thread_builtins))
    return re.compile(rf"\b(?:{names})\b")


@lru_cache(maxsize=_MEMO)
def warp_arithmetic(op: str, literal: str) -> bool:
    """Whether ``x <op> <literal>`` is lane/warp arithmetic that assumes 32 lanes."""
    lits = tables().arithmetic.get(op)
    return lits is not None and normalise_literal(literal) in lits


@lru_cache(maxsize=_MEMO)
def warp_comparison(op: str, literal: str) -> bool:
    return op in tables().comparisons and normalise_literal(literal) == "32"


# ------------------------------------------------------------------ HIP code


_HEX_OR_DEC = re.compile(r"^(0x[0-9a-f]+|\d+)([ul]*)$")
_ALL_ONES = re.compile(r"^(~0|-1)([ul]*)$")
_C_CAST = re.compile(r"^\(([a-z_][\w:\s]*)\)(.+)$")
_CXX_CAST = re.compile(r"^static_cast<([a-z_][\w:\s]*)>\((.+)\)$")


_SIGNED_32 = frozenset({"int", "signed", "signed int", "int32_t", "std::int32_t"})


def _unparen(t: str) -> str:
    while t.startswith("(") and t.endswith(")") and t.count("(") == 1:
        t = t[1:-1].strip()
    return t


@lru_cache(maxsize=_MEMO)
def is_narrow_mask_literal(text: str) -> bool:
    """An all-ones mask only 32 bits wide, which HIP's 64-bit masks zero-extend (lanes 32-63 left out):
    ``0xffffffff``, ``4294967295``, ``~0u``, ``-1u``, ``(unsigned)-1``, ``static_cast<uint32_t>(~0)``.
    ``~0``, ``-1``, ``~0ull``, ``0xffffffffffffffff`` are all 64 ones there and are not narrow."""
    t = _unparen(" ".join(text.split()).lower())
    cast = _C_CAST.match(t) or _CXX_CAST.match(t)
    if cast is not None:
        kind, rest = _squash_type(cast.group(1)), _unparen(cast.group(2).strip())
        ones = _HEX_OR_DEC.match(rest.replace(" ", "")) or _ALL_ONES.match(rest.replace(" ", ""))
        if ones is None:
            return False
        if kind in tables().hip.narrow_mask_casts:
            return True  # whatever the spelling, a 32-bit unsigned all-ones (or 0xffffffff) value
        if kind in _SIGNED_32:
            return False  # (int)0xffffffff is -1: it widens to all 64 ones
        return is_narrow_mask_literal(rest)
    t = t.replace(" ", "")
    number = _HEX_OR_DEC.match(t)
    if number is not None:
        return int(number.group(1), 0) == 0xFFFFFFFF
    ones = _ALL_ONES.match(t)
    # ~0u / -1u are unsigned int; with an l (or none: plain int -1) they widen to 64 ones
    return ones is not None and "u" in ones.group(2) and "l" not in ones.group(2)


@lru_cache(maxsize=_MEMO)
def is_narrow_mask_type(type_text: str) -> bool:
    """Whether a variable of this type (``unsigned int``, ``uint32_t``) cuts a 64-bit lane mask."""
    return _squash_type(type_text) in tables().hip.narrow_mask_types


@lru_cache(maxsize=_MEMO)
def is_wave_size_name(name: str) -> bool:
    """A name that reads as the warp size itself (``warpSize``, ``kWarpSize``, ``wavefront_size``,
    ``hipDeviceAttributeWarpSize``), not a warp index or count."""
    return bool(name_words(name) & tables().hip.warp_size_words)
