"""Deterministic CUDA -> HIP translation on the tree-sitter syntax tree.

Whole files, host and device code.  The source is parsed once; a byte regex finds every place a
CUDA name could be (it is cheap even on multi-MB files), and the syntax tree says what each place
is: an identifier in code is renamed from the tables in ``backends/hip/cuda2hip.toml``, a comment
or string is left alone, a macro body (``preproc_arg``, unparsed by tree-sitter) is tokenized with
:func:`porter.translate.common.c_tokens` and its identifier tokens renamed.  Edits are byte-precise
(:mod:`porter.translate.edits`), so everything else is preserved byte for byte.

What is translated:

* ``#include`` of CUDA headers -> HIP headers; local ``#include "x.cuh"`` kept and reported
  (:func:`local_includes`, :func:`translate_hip_files` translates them too, written beside the
  output under the same name).  A file with CUDA code but no runtime include gets
  ``#include <hip/hip_runtime.h>`` + ``#line 1`` prepended (nvcc includes the runtime implicitly,
  hipcc does not; ``#line`` keeps compiler line numbers equal to the original's).
* runtime, driver, NVRTC, complex, cuBLAS, cuRAND, cuFFT names, types, constants, error codes.
* launches: ``<<<>>>`` kept (``launch="chevrons"``) or rewritten to ``hipLaunchKernelGGL``
  (``launch="ggl"``, with ``HIP_KERNEL_NAME(...)`` around template instantiations, missing shared
  bytes / stream as ``0``); arguments, comments and line breaks inside them are kept.  Under ggl a
  whole launch in a ``#define`` body is rewritten there (``#define L(k, ...) k<<<g, b>>>(__VA_ARGS__)``
  -> ``hipLaunchKernelGGL(k, g, b, 0, 0, __VA_ARGS__)``); a body that leaves the launch to its use
  (``k<<<g, b>>>`` or ``<<<g, b>>>``, the arguments after the use) keeps its chevrons and each use
  becomes the ``hipLaunchKernelGGL`` it forms.  Namespaced kernels (``::k``, ``ns::k``) stay as written.
* every branch of ``#if``/``#ifdef``/``#elif``/``#else`` (tree-sitter parses them all): a build of any
  configuration gets HIP names; a runtime include inside one branch does not stand for the others.
* arguments HIP 5.2 types differently (cuda2hip.toml [arguments]): a kernel given to
  ``hipFuncSetAttribute`` & co. as ``reinterpret_cast<const void*>(k)``, a symbol as ``HIP_SYMBOL(s)``.
* warp intrinsics, by this policy: every ``*_sync`` intrinsic becomes the mask-free form every HIP
  version has (``__shfl_down_sync(m, v, d, w)`` -> ``__shfl_down(v, d, w)``), which acts on all
  active lanes of the 64-lane wavefront.  A literal full mask (0xffffffff ...) is exactly that
  (info diagnostic); any other mask is dropped with a warning; a width of 32 is kept and flagged.
  ``warpSize`` is kept (64 on AMD at run time).
* ``cub::`` -> ``hipcub::``, ``__CUDACC__`` -> ``__HIPCC__``, ``defined(__CUDA_ARCH__)`` ->
  ``defined(__HIP_DEVICE_COMPILE__)``.
* CUDA version tests: HIP defines no CUDA version macro, so ``#if CUDART_VERSION >= 11000`` takes its
  fallback path (a warning); a test every CUDA porter ports from decides alike (``#if CUDART_VERSION < 3000``,
  a fallback for CUDA 2) becomes that value, ``0 /* porter: ... */`` on the same lines (cuda2hip.toml
  [version_tests], :mod:`porter.translate.versions`).
* 1-D texture references over linear memory -> a ``__device__`` pointer and size, bound by
  ``hipMemcpyToSymbol`` and read by a guarded plain load (:mod:`porter.backends.hip.texrefs`; 2-D/3-D
  ones, normalized-float reads and filtering stay errors with their line).

Everything else is a :class:`~porter.model.Diagnostic` with file:line, construct and reason:
unsupported names (surface references, the texture API beyond 1-D references, removed launch API ...), CUDA-looking identifiers the
tables do not map (unless the file or its local headers define them), cooperative groups, libcu++,
numeric ``__CUDA_ARCH__`` checks, and the scanner's hazards (warp-size assumptions always; inline
PTX and dynamic parallelism as errors).  An ERROR inside a kernel (or in a device function it
calls) marks that kernel untranslatable.
"""

from __future__ import annotations

import os
import re
import tomllib
from bisect import bisect_right, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from porter.backends.hip.texrefs import rewrite_textures
from porter.grammars import parse

from porter.errors import UsageError
from porter.includes import reachable, resolve_local_include
from porter.model import UNMAPPED_API, Diagnostic, FileScan, Kernel, Severity, TranslatedKernel, Translation
from porter.translate.common import IDENT, PUNCT, Token, code_tokens, split_call_args
from porter.translate.edits import Edit, apply_edits
from porter.translate.versions import VersionRule, decided_tests

LAUNCH_STYLES = ("chevrons", "ggl")
TARGET = "hip"
# The HIP whose API the generated tables call "in HIP" (cuda2hip_api.toml [inputs.headers]): what an unmapped
# name is said to lack
HIP_REFERENCE = "HIP 5.2"

_IDENT_NODES = frozenset({"identifier", "type_identifier", "field_identifier", "namespace_identifier"})
_RUNTIME_HEADERS = frozenset({"hip/hip_runtime.h", "hip/hip_runtime_api.h"})
# Scanner hazard codes this translator reports itself (the scan's hazard is re-emitted only when
# nothing was reported on its line); every other code is always re-emitted.
_OWN_CODES = frozenset(
    {"texture-api", "removed-api", "full-warp-mask", "cooperative-groups", "libcudacxx", "unified-memory"}
)
_DEFINING_PARENTS = frozenset(
    {
        "preproc_def",
        "preproc_function_def",
        "function_declarator",
        "init_declarator",
        "declaration",
        "pointer_declarator",
        "reference_declarator",
        "array_declarator",
        "struct_specifier",
        "class_specifier",
        "union_specifier",
        "enum_specifier",
        "type_definition",
        "enumerator",
        "field_declaration",
        "parameter_declaration",
        "alias_declaration",
        "namespace_definition",
    }
)


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Note:
    severity: Severity
    reason: str
    since: str | None = None  # the ROCm release that introduced the HIP name, when newer than 5.2


@dataclass(frozen=True)
class WarpRule:
    legacy: str
    mask: int
    width: int | None
    note: str | None


@dataclass(frozen=True)
class NamespaceRule:
    rename: str | None
    severity: Severity
    reason: str


@dataclass(frozen=True)
class ArgRule:
    """An argument HIP types differently from CUDA (cuda2hip.toml [arguments]): wrapped where the call is renamed."""

    index: int
    wrap: str  # "{}" is the argument's text
    unless: re.Pattern[str]  # the argument already has HIP's form


@dataclass(frozen=True)
class ArityRule:
    """A call whose CUDA signature changed (cuda2hip.toml [by_arity]): what a call with this many arguments
    becomes.  ``hip``: its HIP name (else the table's usual one); ``drop_null``: the 0-based argument HIP's
    form lacks, dropped when it is a null pointer; ``append``: arguments HIP's form needs that CUDA's
    defaults (", 0"); ``reason``: HIP has no form of it (kept, reported)."""

    hip: str | None
    drop_null: int | None
    append: str
    reason: str


@dataclass(frozen=True)
class HipTables:
    """``backends/hip/cuda2hip.toml``, indexed."""

    headers: dict[str, str]
    # header -> (what in a file uses it, why HIP has no counterpart, the severity of keeping a used one)
    no_counterpart: dict[str, tuple[re.Pattern[str], str, Severity]]
    renames: dict[str, str]
    groups: dict[str, dict[str, str]]  # group -> its renames (for tests and docs)
    notes: dict[str, Note]
    unsupported: dict[str, Note]
    template_only: frozenset[str]  # unsupported names that count only as templates (texture<...>)
    namespaces: dict[str, NamespaceRule]
    cudacxx_warn: frozenset[str]
    cudacxx_warn_reason: str
    preprocessor: dict[str, dict[str, str]]
    warp: dict[str, WarpRule]
    full_masks: frozenset[str]
    narrow_widths: frozenset[str]
    math_same: tuple[str, ...]
    math_unsupported: frozenset[str]
    math_reason: str
    unmapped: re.Pattern[str]
    api_unsupported: dict[str, str]  # generated: CUDA API names HIP has no equivalent of -> the CUDA version
    hits: re.Pattern[bytes]  # where in the bytes a name worth looking at may start
    arguments: dict[str, ArgRule] = field(default_factory=dict)  # by CUDA name
    by_arity: dict[str, dict[int, ArityRule]] = field(default_factory=dict)  # CUDA name -> argument count ->
    versions: VersionRule | None = None  # [version_tests]: CUDA version tests every CUDA decides alike


def _load_toml(name: str = "cuda2hip.toml") -> dict[str, Any]:
    text = resources.files("porter.backends.hip").joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)


# the generated tables (backends/hip/tables/generate.py): families whose entries rename (math is identity)
API_FAMILIES = ("runtime", "driver", "rtc", "complex", "types", "enums", "unions", "defines")


def _api_note(cuda: str, row: Mapping[str, Any]) -> Note | None:
    """The diagnostic a generated entry carries: deprecated (warning), or a HIP name newer than HIP 5.2."""
    hip = row["hip"]
    said: list[str] = []
    if row.get("cuda_removed"):
        said.append(f"removed in CUDA {row['cuda_removed']}")
    if row.get("cuda_deprecated"):
        said.append(f"deprecated since CUDA {row['cuda_deprecated']}")
    if row.get("hip_deprecated") or row.get("hip_removed"):
        said.append(f"HIP deprecates {hip}")
    if row.get("in_hip") is False:
        since = row.get("hip_since")
        said.append(
            f"{hip} is not in {HIP_REFERENCE}" + (f" (ROCm {since} and later have it)" if since else "")
        )
        if hip in fallback_names() and len(said) == 1:  # porter's fallback header gives it to an older HIP
            return Note(Severity.INFO, said[0] + "; porter's fallback header defines it there", since or None)
        return Note(Severity.WARNING, "; ".join(said), since or None)
    if row.get("status") == "deprecated" or said:
        return Note(Severity.WARNING, "; ".join(said or ["deprecated"]))
    return None


_DEFINED = re.compile(r"^\s*#\s*define\s+(\w+)|\b(?:typedef\s+\w+\s+|inline\s+\w+\s+)(\w+)\s*[;(]", re.M)


@cache
def fallback_names() -> frozenset[str]:
    """The HIP names porter's fallback headers for AMD builds define (backends/hip/include_amd: newer HIP
    names an older HIP lacks, e.g. HIP_PI_F), so a translation may use them with the HIP porter targets."""
    folder = resources.files("porter.backends.hip").joinpath("include_amd").joinpath("hip")
    found: set[str] = set()
    for item in folder.iterdir():
        if item.name.endswith(".h"):
            found.update(a or b for a, b in _DEFINED.findall(item.read_text(encoding="utf-8")))
    return frozenset(found)


@cache
def hip_tables() -> HipTables:
    raw = _load_toml()
    renames: dict[str, str] = {}
    groups: dict[str, dict[str, str]] = {}
    for group, table in raw["rename"].items():
        groups[group] = dict(table)
        for name, target in table.items():
            if name in renames and renames[name] != target:
                raise ValueError(f"cuda2hip.toml: {name} maps to {renames[name]} and to {target}")
            renames[name] = target

    def note(spec: dict[str, Any]) -> Note:
        return Note(Severity(spec.get("severity", "warning")), spec["reason"], spec.get("since"))

    notes = {name: note(spec) for name, spec in raw.get("notes", {}).items()}
    unsupported = {name: note(spec) for name, spec in raw.get("unsupported", {}).items()}
    # the generated API tables under the hand table: a name the hand table knows keeps its meaning
    hand_known = (
        set(renames)
        | set(unsupported)
        | set(raw.get("warp", {}))
        | set(raw.get("preprocessor", {}))
        | set(raw.get("namespaces", {}))
        | set(raw.get("math", {}).get("unsupported", {}).get("names", []))
    )
    api = _load_toml("cuda2hip_api.toml")
    api_unsupported: dict[str, str] = {}
    for family in API_FAMILIES:
        mine: dict[str, str] = {}
        for name, row in api.get(family, {}).items():
            if name in hand_known:
                continue
            hip = row.get("hip")
            if hip is None or row.get("status") == "unsupported":
                api_unsupported[name] = str(row.get("cuda", ""))
                continue
            if hip == name:
                continue
            if row.get("in_hip") is False and hip not in fallback_names():
                # the HIP porter targets lacks it and porter's fallback headers do not give it: left as
                # written and reported, as the unmapped are (output that builds with that HIP, or says why)
                api_unsupported[name] = str(row.get("cuda", ""))
                continue
            mine[name] = renames[name] = hip
            api_note = _api_note(name, row)
            if api_note is not None and name not in notes:
                notes[name] = api_note
        groups[f"api.{family}"] = mine
    template_only = frozenset({"texture", "surface"} & set(unsupported))
    namespaces = {
        name: NamespaceRule(spec.get("rename"), Severity(spec.get("severity", "warning")), spec["reason"])
        for name, spec in raw.get("namespaces", {}).items()
    }
    warp = {
        name: WarpRule(spec["legacy"], int(spec["mask"]), spec.get("width"), spec.get("note"))
        for name, spec in raw.get("warp", {}).items()
    }
    policy = raw.get("warp_policy", {})
    math = raw.get("math", {})
    math_unsupported = math.get("unsupported", {})
    unmapped = re.compile("|".join(f"(?:{p})" for p in raw["unmapped"]["patterns"]))

    # Prefixes worth a look: three leading characters of every known name, plus the unmapped
    # patterns' literal starts.  Anything else is never touched.
    known = (
        set(renames)
        | set(api_unsupported)
        | set(unsupported)
        | set(warp)
        | set(raw.get("preprocessor", {}))
        | set(namespaces)
        | set(math_unsupported.get("names", []))
    )
    prefixes = {name[:3] for name in known} | {"cu", "CU", "nv", "NV"}
    hits = re.compile(
        rb"(?<![A-Za-z0-9_$])"
        + _trie_regex(prefixes).encode()
        + rb"[A-Za-z0-9_]*|<<<|^[ \t]*#[ \t]*include\b",
        re.MULTILINE,
    )
    headers = dict(raw.get("headers", {}))
    return HipTables(
        headers=headers,
        no_counterpart={
            name: (re.compile(entry["uses"]), entry["reason"], Severity(entry.get("used", "error")))
            for name, entry in raw.get("headers_without_counterpart", {}).items()
        },
        renames=renames,
        groups=groups,
        notes=notes,
        unsupported=unsupported,
        template_only=template_only,
        namespaces=namespaces,
        cudacxx_warn=frozenset(raw.get("libcudacxx_warn", {}).get("names", [])),
        cudacxx_warn_reason=raw.get("libcudacxx_warn", {}).get("reason", ""),
        preprocessor={k: dict(v) for k, v in raw.get("preprocessor", {}).items()},
        warp=warp,
        full_masks=frozenset(policy.get("full_masks", [])),
        narrow_widths=frozenset(policy.get("narrow_widths", [])),
        math_same=tuple(math.get("same", [])),
        math_unsupported=frozenset(math_unsupported.get("names", [])),
        math_reason=math_unsupported.get("reason", ""),
        unmapped=unmapped,
        api_unsupported=api_unsupported,
        hits=hits,
        arguments={
            name: ArgRule(int(spec["arg"]), spec["wrap"], re.compile(spec.get("unless", "(?!)")))
            for name, spec in raw.get("arguments", {}).items()
        },
        by_arity={
            name: {
                int(count): ArityRule(
                    rule.get("hip"), rule.get("drop_null"), rule.get("append", ""), rule.get("reason", "")
                )
                for count, rule in forms.items()
            }
            for name, forms in raw.get("by_arity", {}).items()
        },
        versions=VersionRule.from_table(raw.get("version_tests", {})),
    )


def _trie_regex(words: set[str]) -> str:
    """A regex matching any of ``words`` as a prefix tree (much faster than a flat alternation)."""
    if "" in words:
        return ""  # a shorter word already matches: the rest only extends it
    by_first: dict[str, set[str]] = {}
    for w in words:
        by_first.setdefault(w[0], set()).add(w[1:])
    parts = [re.escape(ch) + _trie_regex(rest) for ch, rest in sorted(by_first.items())]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def normalise_mask(text: str) -> str:
    """A mask literal in one spelling: ``(0xFFFFFFFFu)`` -> ``0xffffffff``, ``~0u`` -> ``~0``."""
    t = re.sub(r"\s+", "", text).lower()
    while t.startswith("(") and t.endswith(")"):
        t = t[1:-1]
    t = re.sub(r"\((?:unsigned(?:int|long|longlong)?|uint32_t|uint64_t)\)", "", t)
    return re.sub(r"(?<=[0-9a-f])[ul]+$", "", t)


# --------------------------------------------------------------------------- the translator


@dataclass
class _Pending:
    """An unmapped CUDA-looking name, reported unless the file or its headers define it."""

    name: str
    line: int
    start: int  # byte offset of the name
    form: str = ""  # a form of the call HIP lacks ("cudaGraphExecUpdate with 3 arguments"): not the name
    reason: str = ""  # why, for that form


@dataclass(frozen=True)
class _PartialLaunch:
    """A macro body ending in a launch without its arguments: ``k<<<g, b>>>`` (``callee`` set) or
    ``<<<g, b>>>`` (the use names the kernel before the macro).  Tokens index ``text``, the body."""

    params: tuple[str, ...] | None  # None: an object-like macro
    callee: tuple[Token, ...]
    config: tuple[tuple[Token, ...], ...]
    text: str


@dataclass
class _State:
    path: str
    src: bytes
    launch: str
    include_dirs: tuple[str, ...]
    edits: list[Edit] = field(default_factory=list)
    diags: list[Diagnostic] = field(default_factory=list)
    deleted: list[tuple[int, int]] = field(default_factory=list)  # sorted, non-overlapping
    defined: set[str] = field(default_factory=set)
    pending: list[_Pending] = field(default_factory=list)
    includes: list[tuple[str, int]] = field(default_factory=list)  # local "x.cuh", line
    runtime_included: bool = False
    uses_cuda: bool = False
    # lines the file needs first (before ``#line 1``): a macro a rule's rename uses (``code_prelude``)
    prelude: dict[str, str] = field(default_factory=dict)
    line_starts: list[int] = field(default_factory=list)
    # ggl: macros whose body holds a launch its uses complete (``k<<<g, b>>>`` or ``<<<g, b>>>``)
    partial: dict[str, _PartialLaunch] = field(default_factory=dict)


def _line(state: _State, offset: int) -> int:
    return bisect_right(state.line_starts, offset)


def _diag(state: _State, offset: int, construct: str, reason: str, severity: Severity) -> None:
    state.diags.append(Diagnostic(state.path, _line(state, offset), construct, reason, severity))


def _is_deleted(state: _State, start: int, end: int) -> bool:
    """Inside a deleted range?  ``state.deleted`` is kept sorted and its ranges do not overlap."""
    k = bisect_right(state.deleted, (start, float("inf"))) - 1
    return k >= 0 and state.deleted[k][0] <= start and end <= state.deleted[k][1]


def _edit(state: _State, start: int, end: int, text: str) -> None:
    if not _is_deleted(state, start, end):
        state.edits.append(Edit(start, end, text))


_DIRECTIVE_PARTS = frozenset(
    {"preproc_if", "preproc_elif", "preproc_def", "preproc_function_def", "preproc_call", "preproc_arg"}
)


def _in_code(node) -> bool:
    """Is `node` part of C++ code, rather than of a directive (an ``#if`` condition, a macro's body)?
    Code inside an ``#if`` block is code: the block's condition is the only part that is not."""
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in ("preproc_if", "preproc_elif"):
            cond = parent.child_by_field_name("condition")
            if cond is not None and cond.start_byte <= child.start_byte and child.end_byte <= cond.end_byte:
                return False
        elif parent.type in _DIRECTIVE_PARTS:
            return False
        child, parent = parent, parent.parent
    return True


def _is_definition(node) -> bool:
    parent = node.parent
    if parent is None or parent.type not in _DEFINING_PARENTS:
        return False
    for name in ("declarator", "name"):
        child = parent.child_by_field_name(name)
        if child is not None and child.start_byte == node.start_byte and child.end_byte == node.end_byte:
            return True
    return False


def _handle_name(
    state: _State,
    name: str,
    start: int,
    end: int,
    *,
    is_field: bool = False,
    template: bool = False,
    namespace: bool = False,
    defined_check: bool = False,
    qualified: str = "",
    code: bool = False,
) -> None:
    """One identifier in code (tree node or macro-body token): rename it or report it.

    ``code``: in a C++ expression, neither a directive's condition nor a macro's body.

    ``qualified``: for a namespace, what follows ``name::`` (``std::atomic`` for ``cuda::std::atomic<int>``).
    """
    t = hip_tables()
    if _is_deleted(state, start, end):
        return
    if namespace or name == "cooperative_groups":
        ns_rule = t.namespaces.get(name)
        if ns_rule is not None:
            if ns_rule.rename:
                _edit(state, start, end, ns_rule.rename)
            if name == "cuda" and qualified in t.cudacxx_warn:
                _diag(
                    state,
                    start,
                    f"cuda::{qualified}",
                    t.cudacxx_warn_reason.format(name=qualified),
                    Severity.WARNING,
                )
            else:
                shown = f"{name}::{qualified}" if qualified else f"{name}::"
                _diag(state, start, shown, ns_rule.reason, ns_rule.severity)
            state.uses_cuda = True
            return
    if name in t.preprocessor:
        spec = t.preprocessor[name]
        if "defined_rename" in spec:
            if defined_check:
                _edit(state, start, end, spec["defined_rename"])
                _diag(state, start, name, spec["defined_reason"], Severity(spec["defined_severity"]))
            elif code and "code_rename" in spec:
                # a value in C++ code: where HIP-Clang leaves it undefined, an undeclared name there
                _edit(state, start, end, spec["code_rename"])
                state.prelude[spec["code_rename"]] = spec["code_prelude"]
                _diag(state, start, name, spec["code_reason"], Severity(spec["code_severity"]))
            else:
                _diag(state, start, name, spec["value_reason"], Severity(spec["value_severity"]))
        else:
            if spec.get("rename"):
                _edit(state, start, end, spec["rename"])
            _diag(state, start, name, spec["reason"], Severity(spec.get("severity", "warning")))
        return
    if is_field:
        return  # member names are the struct's business (cudaDeviceProp fields keep their names)
    if name in t.unsupported and (template or name not in t.template_only):
        rule = t.unsupported[name]
        _diag(state, start, name, rule.reason, rule.severity)
        state.uses_cuda = True
        return
    target = t.renames.get(name)
    if target is not None:
        _edit(state, start, end, target)
        state.uses_cuda = True
        note = t.notes.get(name)
        if note is not None:
            _diag(state, start, name, f"{name} -> {target}: {note.reason}", note.severity)
        return
    if name in t.math_unsupported:
        _diag(state, start, name, t.math_reason, Severity.WARNING)
        return
    if name in t.api_unsupported or t.unmapped.match(name):
        state.pending.append(_Pending(name, _line(state, start), start))


# --------------------------------------------------------------------------- warp intrinsics


def _warp_call(
    state: _State,
    name: str,
    name_span: tuple[int, int],
    args: list[tuple[int, int, str]],
    after_mask: int | None,
) -> None:
    """Rewrite one *_sync warp intrinsic call.  ``args``: (start, end, text) per argument;
    ``after_mask``: byte offset just past the comma that follows the mask argument."""
    t = hip_tables()
    rule = t.warp[name]
    start = name_span[0]
    if len(args) <= rule.mask or after_mask is None:
        _diag(state, start, name, f"{name} with {len(args)} arguments: not rewritten", Severity.WARNING)
        return
    mask_start, _, mask_text = args[rule.mask]
    end = after_mask
    while end < len(state.src) and state.src[end : end + 1] in (b" ", b"\t"):
        end += 1
    _edit(state, name_span[0], name_span[1], rule.legacy)
    _edit(state, mask_start, end, "")
    insort(state.deleted, (mask_start, end))
    state.uses_cuda = True
    if normalise_mask(mask_text) in t.full_masks:
        _diag(
            state,
            start,
            f"{name}({mask_text}, ...)",
            f"rewritten to {rule.legacy}(...): the full 32-bit mask {mask_text} meant 'every lane'; the mask-free "
            f"HIP form acts on all active lanes of the wavefront (64 on AMD), which every HIP version supports",
            Severity.INFO,
        )
    else:
        _diag(
            state,
            start,
            f"{name}({mask_text}, ...)",
            f"rewritten to {rule.legacy}(...) with the mask {mask_text} dropped: HIP's mask-free form takes part "
            f"with all active lanes; check that no active lane outside the mask was meant to be excluded",
            Severity.WARNING,
        )
    if rule.width is not None and len(args) > rule.width:
        width_text = args[rule.width][2]
        if normalise_mask(width_text) in t.narrow_widths:
            _diag(
                state,
                args[rule.width][0],
                f"{name}(..., width {width_text})",
                f"warp-size-assumption: width {width_text} kept, but on 64-lane AMD wavefronts it splits the "
                f"shuffle into two independent 32-lane halves; use warpSize if the whole warp was meant",
                Severity.WARNING,
            )
    if rule.note:
        _diag(state, start, name, rule.note, Severity.WARNING)


def _tree_warp_call(state: _State, name: str, node) -> bool:
    call = node.parent
    if call is None or call.type != "call_expression":
        return False
    fn = call.child_by_field_name("function")
    if fn is None or fn.start_byte != node.start_byte or fn.end_byte != node.end_byte:
        return False
    arglist = call.child_by_field_name("arguments")
    if arglist is None:
        return False
    args = [
        (a.start_byte, a.end_byte, a.text.decode("utf-8", "surrogateescape"))
        for a in arglist.named_children
        if a.type != "comment"
    ]
    rule = hip_tables().warp[name]
    after_mask = None
    if len(args) > rule.mask:
        mask_end = args[rule.mask][1]
        for child in arglist.children:
            if child.type == "," and child.start_byte >= mask_end:
                after_mask = child.end_byte
                break
    _warp_call(state, name, (node.start_byte, node.end_byte), args, after_mask)
    return True


# --------------------------------------------------------------------------- arguments


def _wrap_argument(state: _State, name: str, start: int, end: int, text: str) -> None:
    """Wrap the argument at ``start:end`` of a call to ``name`` as cuda2hip.toml [arguments] says."""
    rule = hip_tables().arguments[name]
    if rule.unless.search(text) or _is_deleted(state, start, end):
        return
    before, after = rule.wrap.split("{}", 1)
    _edit(state, start, start, before)
    _edit(state, end, end, after)


def _tree_argument(state: _State, name: str, node) -> None:
    args = _tree_call_args(node)
    index = hip_tables().arguments[name].index
    if args is not None and len(args) > index:
        _wrap_argument(state, name, *args[index])


# --------------------------------------------------------------------------- signatures CUDA changed

_NULL = re.compile(r"^\s*(?:nullptr|NULL|0|\(\s*void\s*\*\s*\)\s*0)\s*$")


def _arity_call(state: _State, name: str, start: int, end: int, args: Sequence[tuple[int, int, str]]) -> bool:
    """A call to ``name`` (its name at ``start:end``) with ``args`` (start, end, text each) whose form
    cuda2hip.toml [by_arity] lists: renamed, its null argument HIP lacks dropped, or kept and reported.
    False where the call's form is not listed (the usual rename applies)."""
    rule = hip_tables().by_arity.get(name, {}).get(len(args))
    if rule is None or _is_deleted(state, start, end):
        return False
    form = f"{name} with {len(args)} arguments"
    reason = rule.reason
    if not reason and rule.drop_null is not None and not _NULL.match(args[rule.drop_null][2]):
        reason = (
            f"argument {rule.drop_null + 1} ({args[rule.drop_null][2].strip()}) is not null, and HIP's form "
            "has no such argument"
        )
    state.uses_cuda = True
    if reason:
        state.pending.append(_Pending(name, _line(state, start), start, form, reason))
        return True
    _edit(state, start, end, rule.hip or hip_tables().renames.get(name, name))
    if rule.drop_null is not None:
        at = rule.drop_null
        cut = (args[at - 1][1], args[at][1]) if at > 0 else (args[at][0], args[at + 1][0])
        _edit(state, cut[0], cut[1], "")
        insort(state.deleted, cut)
    if rule.append and args:
        _edit(state, args[-1][1], args[-1][1], rule.append)
    return True


def _tree_call_args(node) -> list[tuple[int, int, str]] | None:
    """The arguments (start, end, text) of the call whose callee is the identifier ``node``, else None."""
    call = node.parent
    if call is None or call.type != "call_expression":
        return None
    fn = call.child_by_field_name("function")
    arglist = call.child_by_field_name("arguments")
    if fn is None or arglist is None or fn.start_byte != node.start_byte or fn.end_byte != node.end_byte:
        return None
    return [
        (a.start_byte, a.end_byte, a.text.decode("utf-8", "surrogateescape"))
        for a in arglist.named_children
        if a.type != "comment"
    ]


# --------------------------------------------------------------------------- launches


def _ggl_launch(state: _State, config) -> None:
    """``k<<<g, b, s, st>>>(args)`` -> ``hipLaunchKernelGGL(k, g, b, s, st, args)``."""
    call = config.parent
    if call is None or call.type != "call_expression":
        return
    fn = call.child_by_field_name("function")
    arglist = call.child_by_field_name("arguments")
    if fn is None or arglist is None:
        return
    open_tok = next((c for c in config.children if c.type == "<<<"), None)
    close_tok = next((c for c in config.children if c.type == ">>>"), None)
    paren = arglist.children[0] if arglist.children else None
    if open_tok is None or close_tok is None or paren is None or paren.type != "(":
        return
    n_config = sum(1 for c in config.named_children if c.type != "comment")
    if n_config < 2:
        _diag(
            state,
            config.start_byte,
            "<<<...>>>",
            "launch with fewer than 2 configuration arguments kept",
            Severity.WARNING,
        )
        return
    templated = fn.type == "template_function" or (fn.type == "qualified_identifier" and b"<" in fn.text)
    defaults = ", 0" * max(0, 4 - n_config)
    has_args = any(c.type != "comment" for c in arglist.named_children)
    state.edits.append(
        Edit(fn.start_byte, fn.start_byte, "hipLaunchKernelGGL(" + ("HIP_KERNEL_NAME(" if templated else ""))
    )
    first = config.named_children[0]
    after_open = (
        first.start_byte if not state.src[open_tok.end_byte : first.start_byte].strip() else open_tok.end_byte
    )
    last = config.named_children[-1]
    before_close = (
        last.end_byte if not state.src[last.end_byte : close_tok.start_byte].strip() else close_tok.start_byte
    )
    kept = _kept_lines(state, fn.end_byte, after_open, False)
    state.edits.append(Edit(fn.end_byte, after_open, (")" if templated else "") + ", " + kept))
    kept = _kept_lines(state, before_close, paren.end_byte, False)
    state.edits.append(Edit(before_close, paren.end_byte, defaults + (", " if has_args else "") + kept))


# --------------------------------------------------------------------------- macro bodies


def _byte_offsets(text: str) -> list[int] | None:
    """Character -> byte offset table for non-ASCII text (None: they coincide)."""
    if text.isascii():
        return None
    offsets = [0]
    for ch in text:
        offsets.append(offsets[-1] + len(ch.encode("utf-8", "surrogateescape")))
    return offsets


_DEFINE_HEAD = re.compile(r"#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?")
_DEFINE_AT = re.compile(rb"^[ \t]*#[ \t]*define\b", re.MULTILINE)


def _macro_ranges(state: _State, root) -> list[tuple[int, int]]:
    """Translate every #define body; return their byte ranges (sorted).

    The whole body is tokenized here rather than trusting ``preproc_arg``: tree-sitter splits a
    macro body with a comment in it into ERROR nodes, and the tokenizer knows comments."""
    ranges: list[tuple[int, int]] = []
    for m in _DEFINE_AT.finditer(state.src):
        hash_at = m.start() + m.group().index(b"#")
        node = root.descendant_for_byte_range(hash_at, hash_at + 1)
        define = node.parent if node is not None else None
        if define is None or define.type not in ("preproc_def", "preproc_function_def"):
            continue
        ranges.append((define.start_byte, define.end_byte))
        _macro_body(state, define)
    return ranges


def _macro_body(state: _State, define) -> None:
    whole = define.text.decode("utf-8", "surrogateescape")
    head = _DEFINE_HEAD.match(whole)
    if head is None:
        return
    state.defined.add(head.group(1))
    text = whole[head.end() :]
    table = _byte_offsets(whole)
    base = define.start_byte
    skip = head.end()

    def at(char_offset: int) -> int:
        offset = char_offset + skip
        return base + (offset if table is None else table[offset])

    tokens = code_tokens(text)
    t = hip_tables()
    for i, tok in enumerate(tokens):
        if tok.kind == PUNCT and tok.text == "<<<" and state.launch == "ggl":
            why = _macro_launch(state, tokens, i, text, at, head)
            if why:
                _diag(
                    state,
                    at(tok.start),
                    "<<<...>>>",
                    f"launch inside a macro body kept as <<<...>>> (hipcc accepts it): {why}",
                    Severity.INFO,
                )
            continue
        if tok.kind != IDENT:
            continue
        prev = tokens[i - 1] if i > 0 else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        name = tok.text
        if (prev is not None and prev.text == "##") or (nxt is not None and nxt.text == "##"):
            if t.unmapped.match(name) or name in t.renames or name.lower().startswith(("cu", "nv")):
                _diag(
                    state,
                    at(tok.start),
                    name,
                    "part of a token-pasted (##) name in a macro: the pasted CUDA name cannot be renamed; rename by hand",
                    Severity.WARNING,
                )
            continue
        if name in t.warp and nxt is not None and nxt.text == "(":
            split = split_call_args(tokens, i + 1)
            if split is not None:
                arg_tokens, _ = split
                args = [
                    (at(a[0].start), at(a[-1].end), text[a[0].start : a[-1].end]) for a in arg_tokens if a
                ]
                after_mask = None
                rule = t.warp[name]
                if len(arg_tokens) > rule.mask + 1 and arg_tokens[rule.mask]:
                    # the comma follows the mask argument's last token
                    last = arg_tokens[rule.mask][-1]
                    comma = next((k for k in tokens[i + 1 :] if k.start >= last.end and k.text == ","), None)
                    after_mask = at(comma.end) if comma is not None else None
                _warp_call(state, name, (at(tok.start), at(tok.end)), args, after_mask)
                continue
        if name in t.by_arity and nxt is not None and nxt.text == "(":
            split = split_call_args(tokens, i + 1)
            if split is not None and all(split[0]):
                spans = [(at(a[0].start), at(a[-1].end), text[a[0].start : a[-1].end]) for a in split[0]]
                if _arity_call(state, name, at(tok.start), at(tok.end), spans):
                    continue
        defined_check = prev is not None and (
            prev.text == "defined" or (prev.text == "(" and i > 1 and tokens[i - 2].text == "defined")
        )
        _handle_name(
            state,
            name,
            at(tok.start),
            at(tok.end),
            is_field=prev is not None and prev.text in (".", "->"),
            template=nxt is not None and nxt.text == "<",
            namespace=nxt is not None and nxt.text == "::" and name in t.namespaces,
            defined_check=defined_check,
            qualified=_qualified_tokens(tokens, i + 1) if nxt is not None and nxt.text == "::" else "",
        )
        if name in t.arguments and nxt is not None and nxt.text == "(":
            split = split_call_args(tokens, i + 1)
            index = t.arguments[name].index
            if split is not None and len(split[0]) > index and split[0][index]:
                arg = split[0][index]
                _wrap_argument(
                    state, name, at(arg[0].start), at(arg[-1].end), text[arg[0].start : arg[-1].end]
                )


# ------------------------------------------------------------------- launches in macros (ggl)


def _callee_start(tokens: Sequence[Token], j: int) -> int | None:
    """The first token of the kernel name that ends just before ``tokens[j]``: ``k``, ``ns::k``,
    ``::k``, ``k<T, 4>``; None when no name ends there."""
    i = j - 1
    if i >= 0 and tokens[i].text in (">", ">>"):
        depth = 0
        while i >= 0:
            tx = tokens[i].text
            depth += {">": 1, ">>": 2, "<": -1, "<<": -2}.get(tx, 0)
            if tx in (";", "{", "}"):
                return None
            i -= 1
            if depth <= 0:
                break
        if depth != 0:
            return None
    if i < 0 or tokens[i].kind != IDENT:
        return None
    while i >= 2 and tokens[i - 1].text == "::" and tokens[i - 2].kind == IDENT:
        i -= 2
    if i >= 1 and tokens[i - 1].text == "::":
        i -= 1
    return i


def _chevrons_close(tokens: Sequence[Token], j: int) -> int | None:
    """The index of the ``>>>`` closing the ``<<<`` at ``tokens[j]``."""
    depth = 0
    for i in range(j + 1, len(tokens)):
        tok = tokens[i]
        if tok.kind != PUNCT:
            continue
        if tok.text in ("(", "[", "{"):
            depth += 1
        elif tok.text in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                return None
        elif tok.text == ">>>" and depth == 0:
            return i
        elif tok.text == ";":
            return None
    return None


def _top_level_split(tokens: Sequence[Token]) -> list[tuple[Token, ...]]:
    """``tokens`` split at their top-level commas."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.kind == PUNCT and tok.text in ("(", "[", "{"):
            depth += 1
        elif tok.kind == PUNCT and tok.text in (")", "]", "}"):
            depth -= 1
        elif tok.kind == PUNCT and tok.text == "," and depth == 0:
            parts.append([])
            continue
        parts[-1].append(tok)
    return [tuple(p) for p in parts]


def _kept_lines(state: _State, start: int, end: int, in_macro: bool) -> str:
    """The line breaks an edit over ``start:end`` removes, given back (a macro's continued), with the
    indentation of the last line they start."""
    n = state.src.count(b"\n", start, end)
    if not n:
        return ""
    last = state.src[state.src.rindex(b"\n", start, end) + 1 : end]
    indent = last[: len(last) - len(last.lstrip(b" \t"))].decode("ascii")
    return ("\\\n" if in_macro else "\n") * n + indent


def _macro_launch(state: _State, tokens: list[Token], j: int, text: str, at, head: re.Match[str]) -> str:
    """``k<<<g, b, s, st>>>(args)`` in a macro body -> ``hipLaunchKernelGGL(k, g, b, s, st, args)``.
    A body ending in ``k<<<g, b>>>`` or ``<<<g, b>>>`` is completed by its uses: remembered in
    ``state.partial`` and rewritten there.  Returns why a launch is kept ('' when rewritten)."""
    close = _chevrons_close(tokens, j)
    if close is None:
        return "its >>> is not in the body"
    config = [c for c in _top_level_split(tokens[j + 1 : close]) if c]
    if len(config) < 2:
        return "fewer than 2 configuration arguments"
    c = _callee_start(tokens, j)
    if any(tok.text in ("#", "##") for tok in tokens[max((c if c is not None else j) - 1, 0) : close]):
        return "its kernel or configuration is built with # or ##"
    after = tokens[close + 1] if close + 1 < len(tokens) else None
    if after is None:  # the launch is completed where the macro is used
        if c is None and j != 0:
            return "no kernel name before <<<"
        params = None
        if head.group(2) is not None:
            params = tuple(
                "__VA_ARGS__" if p.strip() == "..." else p.strip().removesuffix("...").strip()
                for p in head.group(2)[1:-1].split(",")
                if p.strip()
            )
        state.partial[head.group(1)] = _PartialLaunch(
            params, tuple(tokens[c:j]) if c is not None else (), tuple(config), text
        )
        return "the launch is completed where the macro is used: rewritten at each use"
    if c is None:
        return "no kernel name before <<<"
    if after.text != "(":
        return "no argument list after >>>"
    split = split_call_args(tokens, close + 1)
    if split is None:
        return "its argument list is not closed in the body"
    templated = any(tok.text in ("<", "<<") for tok in tokens[c:j])
    defaults = ", 0" * max(0, 4 - len(config))
    start = at(tokens[c].start)
    _edit(state, start, start, "hipLaunchKernelGGL(" + ("HIP_KERNEL_NAME(" if templated else ""))
    a, b = at(tokens[j - 1].end), at(config[0][0].start)
    _edit(state, a, b, (")" if templated else "") + ", " + _kept_lines(state, a, b, True))
    a, b = at(config[-1][-1].end), at(after.end)
    _edit(state, a, b, defaults + (", " if split[0] else "") + _kept_lines(state, a, b, True))
    return ""


def _renamed(text: str) -> str:
    """``text`` with the CUDA names the tables simply rename renamed (a macro argument copied to its use)."""
    renames = hip_tables().renames
    out: list[str] = []
    pos = 0
    for tok in code_tokens(text):
        if tok.kind == IDENT and tok.text in renames:
            out.append(text[pos : tok.start] + renames[tok.text])
            pos = tok.end
    return "".join(out) + text[pos:]


def _spelled(tokens: Sequence[Token], text: str, args: Mapping[str, str]) -> str:
    """The tokens as text, a macro parameter replaced by its argument and CUDA names renamed."""
    out: list[str] = []
    prev = None
    renames = hip_tables().renames
    for tok in tokens:
        if prev is not None and text[prev : tok.start]:
            out.append(" ")
        word = tok.text
        out.append(args.get(word, renames.get(word, word)) if tok.kind == IDENT else word)
        prev = tok.end
    return "".join(out)


def _partial_launch_uses(state: _State, root, macros: Sequence[tuple[int, int]]) -> None:
    """``M(a)(args)`` / ``k M(a)(args)`` where ``M``'s body is ``k<<<cfg>>>`` / ``<<<cfg>>>`` ->
    ``hipLaunchKernelGGL(k, cfg..., args)`` (ggl mode): the launch is formed by the use."""
    src = state.src
    starts = [r[0] for r in macros]
    for name, macro in state.partial.items():
        for m in re.finditer(rb"(?<![A-Za-z0-9_$])" + re.escape(name.encode()) + rb"(?![A-Za-z0-9_$])", src):
            start = m.start()
            k = bisect_right(starts, start) - 1
            if k >= 0 and start < macros[k][1]:
                continue
            node = root.descendant_for_byte_range(start, m.end())
            if node is None or node.type not in _IDENT_NODES or node.start_byte != start:
                continue
            if src[state.line_starts[_line(state, start) - 1] : start].lstrip().startswith(b"#"):
                continue  # #ifdef M, #undef M: a directive, not a use
            _partial_use(state, macro, name, start)


def _partial_use(state: _State, macro: _PartialLaunch, name: str, start: int) -> None:
    src = state.src
    window = src[start : start + 16384].decode("utf-8", "surrogateescape")
    table = _byte_offsets(window)

    def at(offset: int) -> int:
        return start + (offset if table is None else table[offset])

    tokens = code_tokens(window)
    k = 0
    args: dict[str, str] = {}
    if macro.params is not None:
        split = split_call_args(tokens, 1)
        if split is None:
            return
        margs, k = split
        texts = [_renamed(window[a[0].start : a[-1].end]) if a else "" for a in margs]
        variadic = bool(macro.params) and macro.params[-1] == "__VA_ARGS__"
        fixed = macro.params[:-1] if variadic else macro.params
        if len(texts) < len(fixed) or (not variadic and len(texts) > len(fixed) and texts != [""]):
            return
        args = dict(zip(fixed, texts, strict=False))
        if variadic:
            args["__VA_ARGS__"] = ", ".join(texts[len(fixed) :])
    call = split_call_args(tokens, k + 1)
    if call is None:
        return
    begin = start
    if macro.callee:
        callee = _spelled(macro.callee, macro.text, args)
    else:  # `k M(...)(args)`: the kernel is named before the macro
        back_at = max(0, start - 1024)
        back = src[back_at:start].decode("utf-8", "surrogateescape")
        back_table = _byte_offsets(back)
        back_tokens = code_tokens(back)
        c = _callee_start(back_tokens, len(back_tokens))
        if c is None:
            return
        first = back_tokens[c].start
        begin = back_at + (first if back_table is None else back_table[first])
        callee = back[first : back_tokens[-1].end]
    templated = "<" in callee
    config = [_spelled(c, macro.text, args) for c in macro.config]
    paren_end = at(tokens[k + 1].end)
    if _is_deleted(state, begin, paren_end) or any(
        e.start < paren_end and begin < e.end for e in state.edits if e.end > e.start
    ):
        return
    text = (
        "hipLaunchKernelGGL("
        + (f"HIP_KERNEL_NAME({callee})" if templated else callee)
        + ", "
        + ", ".join(config)
        + ", 0" * max(0, 4 - len(config))
        + (", " if call[0] else "")
        + _kept_lines(state, begin, paren_end, False)
    )
    state.edits.append(Edit(begin, paren_end, text))
    insort(state.deleted, (begin, paren_end))
    state.uses_cuda = True
    _diag(
        state,
        begin,
        f"{name}(...)",
        f"the launch {name} completes is written as hipLaunchKernelGGL here",
        Severity.INFO,
    )


def _qualified_tokens(tokens: list[Token], colon: int) -> str:
    """``std::atomic`` from the tokens ``:: std :: atomic < int >`` (template arguments dropped)."""
    parts: list[str] = []
    i = colon
    while i + 1 < len(tokens) and tokens[i].text == "::" and tokens[i + 1].kind == IDENT:
        parts.append(tokens[i + 1].text)
        i += 2
    return "::".join(parts)


def _qualified_tree(node) -> str:
    """``std::atomic`` for the namespace node ``cuda`` of ``cuda::std::atomic<int>``."""
    parent = node.parent
    if parent is None or parent.type != "qualified_identifier":
        return ""
    text = parent.text.decode("utf-8", "surrogateescape")[node.end_byte - parent.start_byte :]
    return "::".join(re.findall(r"::\s*([A-Za-z_]\w*)", text.split("<", 1)[0]))


# --------------------------------------------------------------------------- version tests


def _version_tests(state: _State, root) -> None:
    """Each CUDA version test every CUDA porter ports from decides alike (``#if CUDART_VERSION < 3000``,
    cuda2hip.toml [version_tests]) becomes its value, on its own lines; its macro's name is not looked at again
    (no [preprocessor] warning: the port takes the branch CUDA takes)."""
    rule = hip_tables().versions
    if rule is None:
        return
    for test in decided_tests(state.src, root, rule):
        state.edits.append(Edit(test.start, test.end, test.replacement(rule.oldest)))
        insort(state.deleted, (test.start, test.end))
        _diag(state, test.start, test.text, rule.explain(test), rule.severity)


# --------------------------------------------------------------------------- includes


_CONDITIONALS = frozenset({"preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else", "preproc_elifdef"})


def _unconditional(node) -> bool:
    """Is ``node`` in every configuration's code: inside no ``#if``/``#ifdef`` branch but an include
    guard (``#ifndef X`` whose first line is ``#define X``)?  A runtime header included in one
    branch leaves the other configurations without it."""
    parent = node.parent
    while parent is not None and parent.type != "translation_unit":
        if parent.type in _CONDITIONALS and not _include_guard(parent):
            return False
        parent = parent.parent
    return True


def _include_guard(node) -> bool:
    if node.type != "preproc_ifdef" or not node.children or node.children[0].type != "#ifndef":
        return False
    name = node.child_by_field_name("name")
    body = [c for c in node.named_children if c != name and c.type != "comment"]
    if name is None or not body or body[0].type != "preproc_def":
        return False
    defined = body[0].child_by_field_name("name")
    return defined is not None and defined.text == name.text


def _include(state: _State, node) -> None:
    path_node = node.child_by_field_name("path")
    if path_node is None:
        return
    raw = path_node.text.decode("utf-8", "surrogateescape")
    name = raw[1:-1]
    t = hip_tables()
    missing = t.no_counterpart.get(name)
    if missing is not None:
        uses, reason, used = missing
        code = re.sub(r"(?m)^[ \t]*#[ \t]*include\b.*$", "", state.src.decode("utf-8", "surrogateescape"))
        if uses.search(code):  # (its #include lines name headers, not what they declare)
            _diag(state, node.start_byte, raw, f"{reason}: kept; the file uses it", used)
        else:
            state.edits.append(
                Edit(node.start_byte, path_node.end_byte, f"// porter: #include {raw} dropped")
            )
            _diag(
                state, node.start_byte, raw, f"dropped: {reason}, and the file uses none of it", Severity.INFO
            )
        return
    target = t.headers.get(name)
    if target is not None:
        state.edits.append(Edit(path_node.start_byte, path_node.end_byte, f"<{target}>"))
        state.uses_cuda = True
        if target in _RUNTIME_HEADERS and _unconditional(node):
            state.runtime_included = True
        return
    if name.startswith("hip/hip_runtime") and _unconditional(node):
        state.runtime_included = True
    if name.startswith("cuda/"):
        _diag(state, node.start_byte, raw, t.namespaces["cuda"].reason, Severity.WARNING)
        return
    if raw.startswith('"'):
        state.includes.append((name, _line(state, node.start_byte)))
        return
    stem = name.split("/")[0]
    if t.unmapped.match(stem.split(".")[0]) or re.match(r"(cu|nv|cuda)[A-Za-z_]", stem):
        _diag(
            state,
            node.start_byte,
            raw,
            "CUDA header with no HIP counterpart in porter's tables: kept; port what it provides by hand",
            Severity.WARNING,
        )


# --------------------------------------------------------------------------- definitions in headers


@cache
def _header_definitions(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    """CUDA-looking names a local header defines (macros, functions, types, variables)."""
    from porter.files import read_header

    del mtime_ns, size  # cache key only
    src = read_header(path, quiet=True)  # None: gone, or no longer a regular file of a sane size
    return _definitions_in(src) if src is not None else frozenset()


def _definitions_in(src: bytes) -> frozenset[str]:
    t = hip_tables()
    root = parse("cuda", src).root_node
    found = set()
    for m in t.hits.finditer(src):
        word = m.group().decode("ascii", "replace")
        if not t.unmapped.match(word):
            continue
        node = root.descendant_for_byte_range(m.start(), m.end())
        if node is not None and node.type in _IDENT_NODES and _is_definition(node):
            found.add(word)
    return frozenset(found)


_RUNTIME_INCLUDE = re.compile(
    rb"^[ \t]*#[ \t]*include[ \t]*[<\"](?:cuda_runtime\.h|cuda_runtime_api\.h|cuda\.h|hip/hip_runtime\.h|hip/hip_runtime_api\.h)[>\"]",
    re.MULTILINE,
)


def _local_header_facts(state: _State) -> tuple[set[str], bool]:
    """Across the file's local headers, transitively: the CUDA-looking names they define, and
    whether one of them includes the CUDA (or HIP) runtime."""
    defined: set[str] = set()
    runtime = False
    first = [
        (str(found), None)
        for name, _ in state.includes
        if (found := resolve_local_include(name, state.path, state.include_dirs)) is not None
    ]
    for path, src in reachable(first, state.include_dirs, quoted_only=True):
        try:
            stat = os.stat(path)
        except OSError:
            continue
        defined |= _header_definitions(os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
        runtime = runtime or _RUNTIME_INCLUDE.search(src) is not None
    return defined, runtime


_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)


# --------------------------------------------------------------------------- scan + kernels


def _scan(source: bytes, path: str, include_dirs: Sequence[str]) -> tuple[FileScan | None, str | None]:
    from porter.scan import scan_source
    from porter.scan.macros import collect

    try:
        return scan_source(source, path, "cuda", collect([(path, source)], include_dirs)), None
    except Exception as err:  # the scan is advisory here: a failure becomes a diagnostic
        return None, f"{type(err).__name__}: {err}"


class _KernelIndex:
    """Which kernel a line is in (kernels do not nest): a bisect over their first lines."""

    def __init__(self, kernels: Sequence[Kernel]) -> None:
        self.kernels = sorted(kernels, key=lambda k: k.line)
        self.starts = [k.line for k in self.kernels]

    def at(self, line: int) -> Kernel | None:
        i = bisect_right(self.starts, line) - 1
        if i >= 0 and line <= self.kernels[i].end_line:
            return self.kernels[i]
        return None


def _translated_kernels(
    scan: FileScan | None, diags: Sequence[Diagnostic], src: bytes
) -> tuple[TranslatedKernel, ...]:
    if scan is None:
        return ()
    blocked: dict[str, list[str]] = {k.name: [] for k in scan.kernels}
    errors = [d for d in diags if d.severity == Severity.ERROR]
    index = _KernelIndex(scan.kernels)
    for d in errors:
        k = index.at(d.line)
        if k is not None:
            blocked[k.name].append(d.construct)
    # an ERROR inside a device function taints the kernels that call it
    for fn in scan.device_functions:
        bad = [d.construct for d in errors if fn.line <= d.line <= fn.end_line]
        if not bad:
            continue
        call = re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(fn.name.encode()) + rb"\s*[(<]")
        for k in scan.kernels:
            if k.end_byte > k.start_byte and call.search(src, k.start_byte, k.end_byte):
                blocked[k.name].extend(f"{fn.name}: {c}" for c in bad)
    return tuple(
        TranslatedKernel(
            name=k.name,
            entry=k.qualified,  # `lib::k` for a kernel in a namespace
            target=TARGET,
            arg_map=tuple(range(len(k.params))),
            untranslatable=tuple(dict.fromkeys(blocked[k.name])),
        )
        for k in scan.kernels
    )


# --------------------------------------------------------------------------- entry points


def translate_to_hip(
    source: str,
    path: str = "<input>",
    *,
    launch: str = "chevrons",
    include_dirs: Sequence[str] = (),
    scan: FileScan | None = None,
) -> Translation:
    """Translate one CUDA file (or header) to HIP.  ``scan``: the file's scan, when already made.
    UsageError for a file nested too deeply to walk."""
    from porter.errors import too_deeply_nested

    try:
        return _translate_to_hip(source, path, launch=launch, include_dirs=include_dirs, scan=scan)
    except RecursionError:
        raise too_deeply_nested(path) from None


def _translate_to_hip(
    source: str, path: str, *, launch: str, include_dirs: Sequence[str], scan: FileScan | None
) -> Translation:
    if launch not in LAUNCH_STYLES:
        raise UsageError(f"unknown HIP launch style {launch!r} (choose {' or '.join(LAUNCH_STYLES)})")
    src = source.encode("utf-8", "surrogateescape")
    state = _State(path=path, src=src, launch=launch, include_dirs=tuple(str(d) for d in include_dirs))
    state.line_starts = [0, *(m.end() for m in re.finditer(rb"\n", src))]
    t = hip_tables()
    root = parse("cuda", src).root_node
    _version_tests(state, root)
    macros = _macro_ranges(state, root)
    macro_starts = [r[0] for r in macros]
    if state.partial:
        _partial_launch_uses(state, root, macros)
    textures = rewrite_textures(src, root, state.line_starts)  # texture references -> plain loads
    for start, end, text in textures.edits:
        state.edits.append(Edit(start, end, text))
    for span in textures.handled:
        insort(state.deleted, span)
    for offset, construct, why, severity in textures.diagnostics:
        _diag(state, offset, construct, why, severity)
    if textures.names or textures.diagnostics:
        state.uses_cuda = True

    for m in t.hits.finditer(src):
        start, end = m.start(), m.end()
        k = bisect_right(macro_starts, start) - 1
        if k >= 0 and start < macros[k][1]:
            continue  # inside a #define: done by _macro_ranges
        word = m.group()
        if word == b"<<<":
            node = root.descendant_for_byte_range(start, end)
            if node is not None and node.type == "<<<" and node.parent is not None:
                state.uses_cuda = True
                if launch == "ggl" and node.parent.type == "kernel_call_syntax":
                    _ggl_launch(state, node.parent)
            continue
        if word.lstrip().startswith(b"#"):
            hash_at = start + word.index(b"#")
            node = root.descendant_for_byte_range(hash_at, hash_at + 1)
            if node is not None and node.parent is not None and node.parent.type == "preproc_include":
                _include(state, node.parent)
            continue
        node = root.descendant_for_byte_range(start, end)
        if node is None:
            continue
        if node.type not in _IDENT_NODES or node.start_byte != start or node.end_byte != end:
            continue  # comment, string, part of a longer token ...
        name = word.decode("ascii")
        if _is_definition(node):
            state.defined.add(name)
            continue
        if name in t.warp and _tree_warp_call(state, name, node):
            continue
        parent = node.parent
        ptype = parent.type if parent is not None else ""
        if name == "tex1Dfetch" and ptype == "template_function":
            state.uses_cuda = True  # a texture object's fetch, tex1Dfetch<T>(obj, i): HIP has it
            continue
        call_args = _tree_call_args(node) if name in t.by_arity else None
        if call_args is not None and _arity_call(state, name, start, end, call_args):
            continue
        defined_check = ptype in ("preproc_defined",) or (
            ptype in ("preproc_ifdef", "preproc_elifdef")
            and parent is not None
            and (name_node := parent.child_by_field_name("name")) is not None
            and name_node.start_byte == start
        )
        in_code = name in t.preprocessor and not defined_check and _in_code(node)
        _handle_name(
            state,
            name,
            start,
            end,
            is_field=node.type == "field_identifier",
            template=ptype in ("template_type", "template_function"),
            namespace=node.type == "namespace_identifier",
            defined_check=defined_check,
            qualified=_qualified_tree(node) if node.type == "namespace_identifier" else "",
            code=in_code,
        )
        if name in t.arguments:
            _tree_argument(state, name, node)

    # names the file or its local headers define are the user's, not CUDA's
    header_defined, header_runtime = _local_header_facts(state)
    defined = state.defined | header_defined
    kernel_scan, scan_error = (scan, None) if scan is not None else _scan(src, path, state.include_dirs)
    index = _KernelIndex(kernel_scan.kernels if kernel_scan is not None else ())
    unmapped = [p for p in state.pending if p.name not in defined]
    unmapped = _drop_case_labels(state, root, unmapped)
    for p in unmapped:
        inside = index.at(p.line)
        if p.form:
            state.diags.append(
                Diagnostic(
                    path,
                    p.line,
                    p.form,
                    f"{p.form} has no HIP equivalent ({HIP_REFERENCE}): {p.reason}; left as written",
                    Severity.ERROR if inside else Severity.WARNING,
                    UNMAPPED_API,
                )  # fmt: skip
            )
            continue
        known = p.name in t.api_unsupported
        since = t.api_unsupported.get(p.name) or ""
        state.diags.append(
            Diagnostic(
                path,
                p.line,
                p.name,
                f"{p.name} has no HIP equivalent ({HIP_REFERENCE}"
                + (f"; CUDA {since} API" if since else "; a CUDA API name" if known else "")
                + (")" if known else "; not in porter's tables)")
                + ": left as written"
                + (", so this kernel will not compile for HIP" if inside else ""),
                Severity.ERROR if inside else Severity.WARNING,
                UNMAPPED_API,
            )
        )
    _comment_unmapped(state, root, unmapped)
    for name, line in state.includes:
        if resolve_local_include(name, path, state.include_dirs) is None and Path(path).parent.exists():
            state.diags.append(
                Diagnostic(
                    path,
                    line,
                    f'#include "{name}"',
                    "local header not found beside the file or in the include directories: not translated, its CUDA names stay",
                    Severity.WARNING,
                )
            )
    if scan_error is not None:
        state.diags.append(
            Diagnostic(
                path, 1, "scan", f"scanning failed ({scan_error}); kernels not listed", Severity.WARNING
            )
        )

    if kernel_scan is not None:
        _merge_hazards(state, kernel_scan)
        if kernel_scan.kernels or kernel_scan.device_functions or kernel_scan.launches:
            state.uses_cuda = True

    prelude = "".join(state.prelude[k] for k in sorted(state.prelude))
    if state.uses_cuda and not state.runtime_included and not header_runtime:
        state.edits.append(Edit(0, 0, f"#include <hip/hip_runtime.h>\n{prelude}#line 1\n"))
        state.diags.append(
            Diagnostic(
                path,
                1,
                "#include <hip/hip_runtime.h>",
                "added: nvcc includes the CUDA runtime implicitly, hipcc does not (#line 1 keeps line numbers)",
                Severity.INFO,
            )
        )

    elif prelude:
        state.edits.append(Edit(0, 0, f"{prelude}#line 1\n"))

    text = apply_edits(src, state.edits).decode("utf-8", "surrogateescape")
    diags = tuple(
        sorted(dict.fromkeys(state.diags), key=lambda d: (d.line, _SEVERITY_ORDER[d.severity], d.construct))
    )
    return Translation(
        source_path=path,
        target=TARGET,
        text=text,
        kernels=_translated_kernels(kernel_scan, diags, src),
        diagnostics=diags,
    )


_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def _drop_case_labels(state: _State, root, unmapped: Sequence[_Pending]) -> list[_Pending]:
    """``case cudaErrorTextureNotBound:`` whose value is one CUDA API name HIP lacks (a name of porter's
    tables: the runtime's and driver's; not a library's status porter does not map yet) becomes a comment:
    HIP never produces a value it has no name for, so the label cannot be reached, and HIP-Clang rejects
    the undeclared name (CUDA samples' helper_cuda.h switches over every CUDA error).  A fall-through into
    the label, and the statements after it, stay as written.  The rest of `unmapped`, to be commented."""
    kept: list[_Pending] = []
    # CUDA API names HIP's tables lack (a library's status porter does not map yet, cuFFT's, may have one)
    known = hip_tables().api_unsupported
    for p in unmapped:
        end = p.start + len(p.name.encode())
        node = root.descendant_for_byte_range(p.start, end) if not p.form and p.name in known else None
        label = node.parent if node is not None else None
        value = label.child_by_field_name("value") if label is not None else None
        colon = next((c for c in label.children if c.type == ":"), None) if label is not None else None
        if (
            label is None
            or label.type != "case_statement"
            or value is None
            or (value.start_byte, value.end_byte) != (p.start, end)
            or colon is None
            or _is_deleted(state, label.start_byte, colon.end_byte)
            or any(e.start < colon.end_byte and e.end > label.start_byte for e in state.edits)
        ):
            kept.append(p)
            continue
        words = state.src[label.start_byte : colon.end_byte].decode("utf-8", "surrogateescape")
        if "*/" in words or "\n" in words:
            kept.append(p)
            continue
        state.edits.append(Edit(label.start_byte, colon.end_byte, f"/* {words} */"))
        state.diags.append(
            Diagnostic(
                state.path,
                p.line,
                p.name,
                f"`{words}` dropped: {p.name} has no HIP equivalent ({HIP_REFERENCE}), so HIP never produces "
                "that value; the statements after the label stay",
                Severity.INFO,
            )
        )
    return kept


def _comment_unmapped(state: _State, root, unmapped: Sequence[_Pending]) -> None:
    """``// porter: NAME has no HIP equivalent (HIP 5.2)`` at the end of each line that keeps an unmapped
    name (one comment a line, naming each once).  Where a line comment cannot go there (a macro line
    continued with a backslash, a line ending inside a block comment or a string), a block comment
    follows the name instead."""
    by_line: dict[int, list[_Pending]] = {}
    for p in unmapped:
        by_line.setdefault(p.line, []).append(p)
    src = state.src
    spans = sorted((e.start, e.end) for e in state.edits if e.end > e.start)  # edits never overlap
    starts = [a for a, _ in spans]
    for line, names in sorted(by_line.items()):
        shown = list(dict.fromkeys(p.form or p.name for p in names))
        text = "; ".join(f"{n} has no HIP equivalent ({HIP_REFERENCE})" for n in shown)
        end = state.line_starts[line] - 1 if line < len(state.line_starts) else len(src)
        if end > 0 and src[end - 1 : end] == b"\r":
            end -= 1
        body = src[state.line_starts[line - 1] : end].rstrip()
        tail = state.line_starts[line - 1] + len(body)
        node = root.descendant_for_byte_range(max(tail - 1, 0), max(tail - 1, 0)) if tail > 0 else None
        awkward = body.endswith(b"\\") or (
            node is not None
            and node.type in ("comment", "string_content", "raw_string_literal", "raw_string_content")
            and not (node.type == "comment" and node.text.startswith(b"//"))
            and node.end_byte > tail
        )
        k = bisect_right(starts, tail - 1) - 1  # the last edit starting before `tail`: does it span it?
        awkward = awkward or (k >= 0 and spans[k][1] > tail)
        if awkward or "*/" in text:
            for p in names:
                end_name = p.start + len(p.name.encode())
                state.edits.append(
                    Edit(
                        end_name,
                        end_name,
                        f" /* porter: {p.form or p.name} has no HIP equivalent ({HIP_REFERENCE}) */",
                    )
                )
            continue
        state.edits.append(Edit(tail, tail, f" // porter: {text}"))


def _merge_hazards(state: _State, scan: FileScan) -> None:
    reported = {d.line for d in state.diags}
    for h in scan.hazards:
        if h.code in _OWN_CODES and h.line in reported:
            continue
        state.diags.append(Diagnostic(state.path, h.line, h.code, h.message, h.severity))


def local_includes(source: str, path: str, include_dirs: Sequence[str] = ()) -> list[Path]:
    """The local headers (``#include "x"``) of a file that exist, resolved against its folder and
    ``include_dirs``, in order of appearance; commented-out includes are not included."""
    src = source.encode("utf-8", "surrogateescape")
    root = parse("cuda", src).root_node
    out: list[Path] = []
    for m in _LOCAL_INCLUDE.finditer(src):
        hash_at = m.start() + m.group().index(b"#")
        node = root.descendant_for_byte_range(hash_at, hash_at + 1)
        if node is None or node.parent is None or node.parent.type != "preproc_include":
            continue
        found = resolve_local_include(m.group(1).decode("utf-8", "surrogateescape"), path, include_dirs)
        if found is not None and found not in out:
            out.append(found)
    return out


def translate_hip_file(
    path: str | Path, *, launch: str = "chevrons", include_dirs: Sequence[str] = ()
) -> Translation:
    """Read and translate one file; UsageError for a missing or unreadable one."""
    from porter.files import read_text

    p = Path(path)
    source = read_text(p)  # UsageError: missing, not a regular file, too large, not UTF-8
    return translate_to_hip(source, str(p), launch=launch, include_dirs=include_dirs)


def translate_hip_files(
    path: str | Path,
    *,
    launch: str = "chevrons",
    include_dirs: Sequence[str] = (),
    held: Mapping[str, bytes] | None = None,
    scan: FileScan | None = None,
) -> dict[Path, Translation]:
    """Translate a file and, transitively, every local header it includes.

    Keys are the input paths (the file first).  A header keeps its file name: write each
    translation beside the output under the input's name so the ``#include "x.cuh"`` lines hold.
    A header that cannot be read (see :mod:`porter.files`) is left out with a warning.  ``held``:
    the bytes of files already read (a :class:`porter.source.SourceUnit`'s, by path), used instead
    of reading them again; ``scan``: the file's own scan, when already made (its headers are scanned
    here).
    """
    from porter.files import decode_text, read_text, warn

    known = {os.path.abspath(k): v for k, v in (held or {}).items()}

    def text_of(p: Path) -> str:
        data = known.get(os.path.abspath(p))
        return read_text(p) if data is None else decode_text(data, p)

    out: dict[Path, Translation] = {}
    todo = [Path(path)]
    while todo:
        current = todo.pop(0)
        key = current.resolve()
        if any(k.resolve() == key for k in out):
            continue
        try:
            source = text_of(current)
        except UsageError as err:
            if not out:  # the file itself
                raise
            # a header porter cannot read (too large, not UTF-8...) stays untranslated; the compiler
            # still finds the original beside the source
            warn(f"{err}; this header is not translated")
            continue
        own = scan if not out else None  # the file itself: its scan is given
        out[current] = translate_to_hip(
            source, str(current), launch=launch, include_dirs=include_dirs, scan=own
        )
        todo.extend(local_includes(source, str(current), include_dirs))
    return out
