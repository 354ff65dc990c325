"""Barriers in both branches of one if/else, in translated OpenCL C.

A kernel that treats one work-group apart (the last, partial group of a reduction) can synchronise in each branch
of an ``if``/``else`` whose condition every work-item of a group reads alike: legal in CUDA and in OpenCL.  Some
OpenCL compilers get it wrong (Debian's PoCL 3.1 returns one element instead of each group's sum: pocl/pocl#553,
#1167).  Porter's device probe (``probe_barriers.cl``) finds such a device; a kernel this module finds the shape
in requires ``branch_barriers`` (dialect.toml), so it is left out on that device and its verdict there names
why, instead of failing there for the compiler's defect.

Only what the kernel's own text (or a function it reaches) shows is found: an ``if`` with an ``else`` where
both branches hold a barrier call, at any depth (a branch's nested ``if``, a loop).  A barrier reached through
a call inside a branch is not.
"""

from __future__ import annotations

from collections.abc import Iterator

from porter.grammars import parse
from tree_sitter import Node

from porter.scan.nodes import node_text

BARRIERS = frozenset({"barrier", "work_group_barrier"})


def _walk(node: Node) -> Iterator[Node]:
    """`node` and every named node under it."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.named_children)


def _is_barrier(n: Node) -> bool:
    fn = n.child_by_field_name("function") if n.type == "call_expression" else None
    return fn is not None and fn.type == "identifier" and node_text(fn) in BARRIERS


def _has_barrier(node: Node | None) -> bool:
    return node is not None and any(_is_barrier(n) for n in _walk(node))


def barriers_in_both_branches(text: str) -> bool:
    """Whether the OpenCL C `text` has an ``if``/``else`` both of whose branches call a barrier."""
    if "barrier" not in text:
        return False
    try:
        root = parse("cuda", text.encode("utf-8", "surrogateescape")).root_node
    except (ValueError, RecursionError):
        return False
    return any(
        n.type == "if_statement"
        and _has_barrier(n.child_by_field_name("alternative"))
        and _has_barrier(n.child_by_field_name("consequence"))
        for n in _walk(root)
    )
