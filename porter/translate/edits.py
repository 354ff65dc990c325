"""Byte-precise edits on a source buffer, the way every translator rewrites a tree-sitter tree.

Translators collect :class:`Edit`s against the original bytes (node.start_byte/end_byte) and apply
them once: everything outside an edit is preserved byte for byte (comments, strings, formatting).
Overlapping edits are a translator bug and raise ValueError, never a silently garbled file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Edit:
    start: int  # byte offset, inclusive
    end: int  # byte offset, exclusive (== start for an insertion)
    text: str

    @classmethod
    def replace(cls, node, text: str) -> Edit:
        return cls(node.start_byte, node.end_byte, text)

    @classmethod
    def insert_before(cls, node, text: str) -> Edit:
        return cls(node.start_byte, node.start_byte, text)

    @classmethod
    def insert_after(cls, node, text: str) -> Edit:
        return cls(node.end_byte, node.end_byte, text)

    @classmethod
    def delete(cls, node) -> Edit:
        return cls(node.start_byte, node.end_byte, "")


def apply_edits(source: bytes, edits: Iterable[Edit]) -> bytes:
    """Apply non-overlapping edits; insertions at one offset keep the order they were given in."""
    indexed = sorted(enumerate(edits), key=lambda ie: (ie[1].start, ie[1].end, ie[0]))
    out: list[bytes] = []
    pos = 0
    for _, e in indexed:
        if e.start < pos:
            raise ValueError(f"overlapping edits at byte {e.start} (previous edit ends at {pos})")
        if e.end < e.start or e.end > len(source):
            raise ValueError(f"edit out of range: {e.start}..{e.end} (source has {len(source)} bytes)")
        out.append(source[pos : e.start])
        out.append(e.text.encode("utf-8", "surrogateescape"))
        pos = e.end
    out.append(source[pos:])
    return b"".join(out)


def line_of(source: bytes, offset: int) -> int:
    """1-based line number of a byte offset."""
    return source.count(b"\n", 0, offset) + 1
