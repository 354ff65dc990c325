"""Cut the device-side translation unit out of a whole CUDA program.

NVRTC and the CPU emulator cannot compile host code (``main``, ``cudaMalloc``, ``printf`` of
results...).  :func:`device_code` keeps what device code needs: preprocessor directives, type
definitions, ``__global__`` / ``__device__`` functions and their templates, ``__constant__`` /
``__device__`` / ``__managed__`` variables and texture references, ``const`` / ``constexpr``
globals, and the namespaces, ``extern "C"`` blocks and ``#if`` blocks around them.  Everything
else becomes blank lines, so every kept line keeps its line number and compiler messages point
at the user's source.
"""

from __future__ import annotations

from tree_sitter import Node

from porter.grammars import parser

# Nodes kept whole wherever they sit at top level.
_KEEP_WHOLE = frozenset(
    {
        "preproc_include",
        "preproc_def",
        "preproc_function_def",
        "preproc_call",  # #pragma, #error, #undef, #line ...
        "type_definition",
        "alias_declaration",
        "struct_specifier",
        "class_specifier",
        "union_specifier",
        "enum_specifier",
        "namespace_alias_definition",
        "using_declaration",
        "static_assert_declaration",
        "comment",
        "concept_definition",
    }
)
# Nodes whose children are decided one by one (their own tokens: braces, directives, are kept).
_CONTAINERS = frozenset(
    {
        "namespace_definition",
        "linkage_specification",
        "declaration_list",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
    }
)
_DIRECTIVE_PARTS = frozenset(
    {
        "identifier",
        "string_literal",
        "namespace_identifier",
        "nested_namespace_specifier",
        "preproc_defined",
        "binary_expression",
        "unary_expression",
        "parenthesized_expression",
        "number_literal",
        "call_expression",
        "char_literal",
    }
)
_DEVICE_TOKENS = frozenset({"__global__", "__device__", "__constant__", "__managed__", "__shared__"})
_TEXTURE_TYPES = frozenset({"texture", "surface"})


def _tokens(node: Node) -> set[str]:
    """The qualifier tokens directly on a declaration or definition."""
    out = set()
    for c in node.children:
        if not c.is_named:
            out.add(c.type)
        elif c.type in ("type_qualifier", "storage_class_specifier"):
            out.add((c.text or b"").decode())
    return out


def _is_device(node: Node) -> bool:
    """A function definition, prototype or variable that belongs to the device side."""
    t = node.type
    if t == "template_declaration":
        inner = [c for c in node.named_children if c.type != "template_parameter_list"]
        return any(c.type in _KEEP_WHOLE or _is_device(c) for c in inner)
    if t == "function_definition":
        tokens = _tokens(node)
        return bool(tokens & _DEVICE_TOKENS) or "constexpr" in tokens
    if t in ("declaration", "field_declaration"):
        tokens = _tokens(node)
        if tokens & _DEVICE_TOKENS:
            return True
        type_node = node.child_by_field_name("type")
        if type_node is not None and type_node.type == "template_type":
            name = type_node.child_by_field_name("name")
            if name is not None and (name.text or b"").decode() in _TEXTURE_TYPES:
                return True
        is_function = any(d.type == "function_declarator" for d in node.children_by_field_name("declarator"))
        return not is_function and bool(tokens & {"const", "constexpr"})
    return False


def _drop_ranges(node: Node, out: list[tuple[int, int]]) -> None:
    for child in node.children:
        if not child.is_named:
            continue  # braces, `#endif`, `extern`, `;` stay
        t = child.type
        if t in _KEEP_WHOLE:
            continue
        if t == "linkage_specification":
            body = child.child_by_field_name("body")
            if body is not None and body.type == "declaration_list":
                _drop_ranges(body, out)
            elif body is None or not _is_device(body):
                out.append((child.start_byte, child.end_byte))
            continue
        if t in _CONTAINERS:
            _drop_ranges(child, out)
            continue
        if node.type in ("preproc_if", "preproc_elif") and child == node.child_by_field_name("condition"):
            continue
        if t in _DIRECTIVE_PARTS and node.type != "translation_unit":
            continue  # names of namespaces and #ifdef, the "C" of extern "C", #if conditions
        if _is_device(child):
            continue
        out.append((child.start_byte, child.end_byte))


def device_code(source: str) -> str:
    """``source`` with host-only code blanked out, line numbers unchanged."""
    data = source.encode("utf-8")
    tree = parser("cuda").parse(data)
    ranges: list[tuple[int, int]] = []
    _drop_ranges(tree.root_node, ranges)
    pieces = []
    pos = 0
    for start, end in sorted(ranges):
        if start < pos:
            continue
        pieces.append(data[pos:start])
        pieces.append(b"\n" * data.count(b"\n", start, end))
        pos = end
    pieces.append(data[pos:])
    text = b"".join(pieces).decode("utf-8")
    return "\n".join(line.rstrip() for line in text.split("\n"))
