"""Which pointer parameters a kernel body reads through, from its syntax tree.

Anything but a plain store (`p[i] = v`, `*p = v`, `*(p + i) = v`, `p->f = v`) counts as a read:
compound assignments, atomics, helper calls, aliases.  Spec inference marks the parameters read as
inputs.
"""

from __future__ import annotations

import functools

from tree_sitter import Node

from porter.grammars import parse

_STORE_TARGETS = frozenset({"subscript_expression", "pointer_expression", "field_expression"})


@functools.lru_cache(maxsize=256)
def pointers_read(text: str, names: frozenset[str]) -> frozenset[str]:
    if not names or not text:
        return frozenset()
    root = parse("cuda", text.encode("utf-8", "surrogateescape")).root_node
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
