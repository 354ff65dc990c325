"""Object-like macros that stand for CUDA function qualifiers: ``#define KERNEL __global__``.

Legacy code and libraries rarely spell ``__global__`` where a kernel is defined: they write
``KERNEL void k(...)``, ``HOST_DEVICE inline float f(...)`` or CCCL's
``CUB_DETAIL_KERNEL_ATTRIBUTES void DeviceReduceKernel(...)``, with the macro defined in some
header.  Tree-sitter does not expand macros, so the scanner asks this table which identifiers
expand (through other macros) to ``__global__``, ``__device__``, ``__host__`` and friends.

The table is built lexically, without parsing: ``#define`` lines of the scanned files and of the
headers they include (``"..."`` beside the including file or in the include directories,
``<...>`` in the include directories), each header read once.  A macro defined differently under
``#if`` branches carries the qualifiers of every definition (``_CCCL_DEVICE`` is ``__device__``
for nvcc and empty for a host compiler; porter reads code as CUDA).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from porter.includes import at_line_start, reachable

# The qualifiers a macro may stand for, as the scanner spells them (tree-sitter node types).
QUALIFIERS = frozenset(
    {"__global__", "__device__", "__host__", "__forceinline__", "__noinline__", "__inline__", "inline"}
)
# Plain names for what the scanner treats as qualifiers: a macro name -> the qualifiers it stands for.
MacroTable = Mapping[str, tuple[str, ...]]

# Starts at the `#` (a literal prefix the regex engine finds fast); the line start is checked after.
_DEFINE = re.compile(rb"#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])((?:[^\n\\]|\\\r?\n|\\)*)")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# Parts of a qualifier macro that are not identifiers: attributes, launch bounds, linkage.
_DROP = re.compile(
    r"\b(?:__attribute__|__declspec|__launch_bounds__|__maxnreg__|__align__|alignas)\s*"
    r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
    r'|\bextern\s*"C(?:\+\+)?"'
)
_NOT_WORDS = re.compile(r"[^\w\s]")
_TOKEN = re.compile(r"\w+")


def definitions(source: bytes) -> dict[str, list[tuple[str, ...]]]:
    """Object-like macros whose bodies are identifiers only (after dropping attributes):
    name -> the identifier sequence of each definition."""
    if b"define" not in source:
        return {}
    out: dict[str, list[tuple[str, ...]]] = {}
    for m in _DEFINE.finditer(source):
        raw = m.group(2)
        if not raw.strip(b" \t\r"):
            continue  # `#define GUARD_H`: stands for nothing, so for no qualifier either
        if not at_line_start(source, m.start()):
            continue  # not a directive: `#` inside a line
        body = raw.decode("utf-8", "replace").replace("\\\r\n", " ").replace("\\\n", " ")
        body = _DROP.sub(" ", _COMMENT.sub(" ", body))
        if _NOT_WORDS.search(body) is None:
            words = _TOKEN.findall(body)
            if not any(w[0].isdigit() for w in words):  # numbers: `#define BLOCK 256`
                out.setdefault(m.group(1).decode("ascii"), []).append(tuple(words))
    return out


def resolve(defs: Mapping[str, list[tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    """Macro name -> the qualifiers it expands to, for the macros that expand to at least one."""
    memo: dict[str, frozenset[str]] = {}

    def expand(name: str, active: frozenset[str]) -> frozenset[str]:
        if name in memo:
            return memo[name]
        found: set[str] = set()
        for body in defs.get(name, ()):
            for word in body:
                if word in QUALIFIERS:
                    found.add(word)
                elif word in defs and word not in active:
                    found |= expand(word, active | {word})
        result = frozenset(found)
        if not active - {name}:  # only results computed without a cycle cut are final
            memo[name] = result
        return result

    table = {}
    for name in defs:
        quals = expand(name, frozenset({name}))
        if quals:
            table[name] = tuple(sorted(quals))
    return table


def collect(
    files: Iterable[tuple[str, bytes | None]], include_dirs: Iterable[str | Path] = ()
) -> dict[str, tuple[str, ...]]:
    """The qualifier macros visible to ``files`` ((path, bytes or None to read it)) and their headers."""
    defs: dict[str, list[tuple[str, ...]]] = {}
    for _, source in reachable(files, include_dirs):
        for name, bodies in definitions(source).items():
            defs.setdefault(name, []).extend(bodies)
    return resolve(defs)


def spelled_out(text: str, table: MacroTable) -> str:
    """``text`` with every qualifier macro replaced by the qualifiers it stands for (``#define``
    lines are left alone), for translators that need the qualifiers written out."""
    if not table:
        return text
    words = re.compile(
        r"\b(?:" + "|".join(re.escape(n) for n in sorted(table, key=len, reverse=True)) + r")\b"
    )
    if words.search(text) is None:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("#"):
            lines[i] = words.sub(lambda m: " ".join(table[m.group()]), line)
    return "\n".join(lines)
