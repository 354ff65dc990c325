"""Small readers of tree-sitter nodes shared by the analyses that walk a CUDA tree themselves
(host-call analysis in the harness, template instantiation in the OpenCL launcher)."""

from __future__ import annotations

from tree_sitter import Node


def node_text(node: Node | None) -> str:
    """The node's source text ("" for no node)."""
    return (node.text or b"").decode("utf-8", "surrogateescape") if node is not None else ""


def squash(text: str) -> str:
    """Runs of blanks (newlines included) as one space."""
    return " ".join(text.split())


def function_declarator(fn: Node) -> Node | None:
    """The function declarator of a function definition, through pointer and reference wrappers."""
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    return decl


def function_name(fn: Node) -> str | None:
    """The name a function definition declares, as written (`ns::f`, `operator()`)."""
    decl = function_declarator(fn)
    return squash(node_text(decl.child_by_field_name("declarator"))) if decl is not None else None


def enclosing_function(node: Node) -> str | None:
    """The name of the function definition ``node`` is in; None at file scope."""
    cur = node.parent
    while cur is not None:
        if cur.type == "function_definition":
            return function_name(cur)
        cur = cur.parent
    return None


def template_param_names(plist: Node) -> tuple[str, ...]:
    """`template <typename T, int N>` -> ("T", "N")."""
    names = []
    for p in plist.named_children:
        ident = None
        for c in p.named_children:
            if c.type in ("type_identifier", "identifier"):
                ident = c
        if ident is not None:
            names.append(node_text(ident))
    return tuple(names)
