"""Cut the device-side translation unit out of a whole CUDA program.

NVRTC and the CPU emulator cannot compile host code (``main``, ``cudaMalloc``, ``printf`` of
results...).  :func:`device_code` keeps what device code needs: preprocessor directives, type
definitions, ``__global__`` / ``__device__`` functions and their templates, ``__constant__`` /
``__device__`` / ``__managed__`` variables and texture references, ``const`` / ``constexpr``
globals, and the namespaces, ``extern "C"`` blocks and ``#if`` blocks around them.  Everything
else becomes blank lines, so every kept line keeps its line number and compiler messages point
at the user's source.

``device_code(source, kernels=["saxpy"])`` keeps only what the named kernels need: other
``__global__`` functions, and ``__device__`` functions and ``__constant__`` / ``__device__`` /
texture variables that no kept function references (an identifier closure over the tree, through
macro bodies), are blanked too.  A texture kernel then no longer drags its neighbours down.
:func:`referenced_globals` lists the namespace-scope device variables of that closure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from tree_sitter import Node

from porter.grammars import parse
from porter.scan.macros import MacroTable, Masked, definitions, mask, resolve

_UNMASKED = Masked(b"")  # no macros blanked: qualifiers are only those written out

# Nodes kept whole wherever they sit at top level.
_HOST_LAUNCH = re.compile(rb"<\s*<\s*<")  # a macro body launching a kernel
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
        "compound_statement",  # a block at namespace scope: a short scope macro, masked
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


def _tokens(node: Node, masked: Masked = _UNMASKED) -> set[str]:
    """The qualifier tokens directly on a declaration or definition, those that blanked qualifier
    macros stand for (``KERNEL void k()``; :func:`porter.scan.macros.mask`) included."""
    out = set()
    for c in node.children:
        if not c.is_named:
            out.add(c.type)
        elif c.type in ("type_qualifier", "storage_class_specifier"):
            out.add((c.text or b"").decode())
    if masked.spans:
        out |= masked.qualifiers_of(node)
    return out


def _is_device(node: Node, masked: Masked = _UNMASKED) -> bool:
    """A function definition, prototype or variable that belongs to the device side."""
    t = node.type
    if t == "template_declaration":
        inner = [c for c in node.named_children if c.type != "template_parameter_list"]
        return any(c.type in _KEEP_WHOLE or _is_device(c, masked) for c in inner)
    if t == "function_definition":
        tokens = _tokens(node, masked)
        return bool(tokens & _DEVICE_TOKENS) or "constexpr" in tokens
    if t in ("declaration", "field_declaration"):
        tokens = _tokens(node, masked)
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


def _drop_ranges(node: Node, out: list[tuple[int, int]], masked: Masked) -> None:
    for child in node.children:
        if not child.is_named:
            continue  # braces, `#endif`, `extern`, `;` stay
        t = child.type
        if t == "preproc_function_def" and _HOST_LAUNCH.search(child.text or b""):
            out.append((masked.start_of(child), child.end_byte))  # a host launch macro: not device code
            continue
        if t in _KEEP_WHOLE:
            continue
        if t == "linkage_specification":
            body = child.child_by_field_name("body")
            if body is not None and body.type == "declaration_list":
                _drop_ranges(body, out, masked)
            elif body is None or not _is_device(body, masked):
                out.append((masked.start_of(child), child.end_byte))
            continue
        if t in _CONTAINERS:
            _drop_ranges(child, out, masked)
            continue
        if node.type in ("preproc_if", "preproc_elif") and child == node.child_by_field_name("condition"):
            continue
        if t in _DIRECTIVE_PARTS and node.type != "translation_unit":
            continue  # names of namespaces and #ifdef, the "C" of extern "C", #if conditions
        if _is_device(child, masked):
            continue
        out.append((masked.start_of(child), child.end_byte))


def device_code(source: str, kernels: Collection[str] | None = None, macros: MacroTable | None = None) -> str:
    """``source`` with host-only code blanked out, line numbers unchanged.

    ``kernels``: keep only these ``__global__`` functions (names as launched; template arguments and
    namespaces are ignored) and the device functions and variables they reach.  When none of them
    is found, every kernel is kept.  ``macros``: the macro table in scope
    (:func:`porter.scan.macros.collect`); None takes those ``source`` defines itself.
    """
    data = source.encode("utf-8", "surrogateescape")
    if macros is None:
        macros = resolve(definitions(data))
    # scope macros read as the braces they stand for, qualifier macros blanked; the offsets
    # stay those of ``data``, which the result is cut from
    masked = mask(data, macros)
    tree = parse("cuda", masked.source)
    ranges: list[tuple[int, int]] = []
    _drop_ranges(tree.root_node, ranges, masked)
    if kernels is not None:
        items = _items(tree.root_node, masked)
        kept = _closure(items, kernels)
        if kept is not None:
            ranges.extend(
                (masked.start_of(it.node), it.node.end_byte)
                for i, it in enumerate(items)
                if i not in kept and it.kind in _BLANKABLE
            )
    pieces = []
    pos = 0
    for start, end in sorted(ranges):
        if start < pos:
            continue
        pieces.append(data[pos:start])
        pieces.append(b"\n" * data.count(b"\n", start, end))
        pos = end
    pieces.append(data[pos:])
    text = b"".join(pieces).decode("utf-8", "surrogateescape")
    return "\n".join(line.rstrip() for line in text.split("\n"))


# --------------------------------------------------------------------------- per-kernel closure

_BLANKABLE = frozenset({"kernel", "device_function", "variable"})
_IDENTIFIERS = frozenset({"identifier", "type_identifier", "field_identifier", "namespace_identifier"})
_WORD = re.compile(r"[A-Za-z_]\w*")
_DECLARATOR_WRAPPERS = frozenset(
    {"pointer_declarator", "reference_declarator", "init_declarator", "parenthesized_declarator"}
)


@dataclass(frozen=True)
class DeviceGlobal:
    """A namespace-scope device variable: ``__constant__ float coeffs[KSIZE];``."""

    name: str
    type: str  # element type as written, without __constant__/__device__/static/extern
    dims: tuple[str, ...]  # array dimensions as written, outermost first; () for a scalar
    space: str  # "__constant__" | "__device__" | "__managed__" | "__shared__" | "texture"
    pointer: bool  # declared as a pointer (`__device__ float* p;`)
    initialized: bool  # has an initializer (`= {...}`): the program's values, not the host's
    line: int


@dataclass(frozen=True)
class _Item:
    node: Node  # what is blanked (the template/extern "C" wrapper included)
    inner: Node  # the function definition or declaration itself
    kind: str  # kernel | device_function | variable | macro | seed
    names: tuple[str, ...]
    refs: frozenset[str]


def _base_name(name: str) -> str:
    """`ns::axpby<float>` -> `axpby`."""
    return name.split("<", 1)[0].split("::")[-1].strip()


def _identifiers_in(node: Node) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in _IDENTIFIERS:
            out.add((n.text or b"").decode())
        elif n.type in ("preproc_arg", "preproc_params"):
            out.update(_WORD.findall((n.text or b"").decode()))
        stack.extend(n.children)
    return out


def _declared_name(declarator: Node | None) -> str | None:
    """The identifier a (function or variable) declarator declares."""
    node = declarator
    while node is not None:
        if node.type in ("identifier", "field_identifier", "type_identifier"):
            return (node.text or b"").decode()
        if node.type in ("qualified_identifier", "template_function", "operator_name", "destructor_name"):
            return _base_name((node.text or b"").decode())
        inner = node.child_by_field_name("declarator") or node.child_by_field_name("name")
        if inner is None:
            return None
        node = inner
    return None


def _function_of(node: Node) -> Node | None:
    """The function definition inside a (template / extern "C") wrapper, or the node itself."""
    if node.type == "function_definition":
        return node
    if node.type == "template_declaration":
        inner = [c for c in node.named_children if c.type != "template_parameter_list"]
        return _function_of(inner[-1]) if inner else None
    if node.type == "linkage_specification":
        body = node.child_by_field_name("body")
        return _function_of(body) if body is not None and body.type != "declaration_list" else None
    return None


def _variable_of(node: Node) -> Node | None:
    if node.type == "declaration":
        return node
    if node.type == "linkage_specification":
        body = node.child_by_field_name("body")
        return body if body is not None and body.type == "declaration" else None
    return None


def _space(decl: Node) -> str | None:
    """The device memory space of a namespace-scope variable declaration, None for other declarations."""
    if any(d.type == "function_declarator" for d in _declarator_chain(decl)):
        return None
    tokens = _tokens(decl)
    for space in ("__constant__", "__managed__", "__shared__", "__device__"):
        if space in tokens:
            return space
    type_node = decl.child_by_field_name("type")
    if type_node is not None and type_node.type == "template_type":
        name = type_node.child_by_field_name("name")
        if name is not None and (name.text or b"").decode() in _TEXTURE_TYPES:
            return "texture"
    return None


def _declarator_chain(decl: Node) -> Iterator[Node]:
    for d in decl.children_by_field_name("declarator"):
        node: Node | None = d
        while node is not None:
            yield node
            node = node.child_by_field_name("declarator")


def _items(root: Node, masked: Masked = _UNMASKED) -> list[_Item]:
    """Top-level device entities (inside namespaces, extern "C" blocks and #if blocks too)."""
    out: list[_Item] = []

    def walk(node: Node) -> None:
        for child in node.named_children:
            t = child.type
            if t in ("preproc_def", "preproc_function_def"):
                name = child.child_by_field_name("name")
                value = child.child_by_field_name("value")
                used = _WORD.findall((value.text or b"").decode()) if value is not None else []
                macro = (name.text or b"").decode() if name is not None else ""
                out.append(_Item(child, child, "macro", (macro,), frozenset(used)))
                continue
            if t == "linkage_specification":
                body = child.child_by_field_name("body")
                if body is not None and body.type == "declaration_list":
                    walk(body)
                    continue
            elif t in _CONTAINERS:
                walk(child)
                continue
            fn = _function_of(child)
            if fn is not None:
                tokens = _tokens(fn, masked)
                fname = _declared_name(fn.child_by_field_name("declarator"))
                if fname is not None and "__global__" in tokens:
                    out.append(_Item(child, fn, "kernel", (fname,), frozenset(_identifiers_in(child))))
                elif fname is not None and "__device__" in tokens:
                    out.append(
                        _Item(child, fn, "device_function", (fname,), frozenset(_identifiers_in(child)))
                    )
                elif _is_device(child, masked) or t in _KEEP_WHOLE:
                    out.append(_Item(child, fn, "seed", (), frozenset(_identifiers_in(child))))
                continue
            decl = _variable_of(child)
            space = _space(decl) if decl is not None else None
            if decl is not None and space is not None:
                names = tuple(
                    n
                    for d in decl.children_by_field_name("declarator")
                    if (n := _declared_name(d)) is not None
                )
                refs = _identifiers_in(child) - set(names)
                out.append(_Item(child, decl, "variable", names, frozenset(refs)))
                continue
            if t in _KEEP_WHOLE or _is_device(child, masked):
                # Types, const tables, prototypes...: always kept, and what they name is kept too.
                # (A prototype names its own function: not a reason to keep that function's body.)
                is_prototype = t == "declaration" and any(
                    d.type == "function_declarator" for d in _declarator_chain(child)
                )
                if t not in ("comment", "preproc_include") and not is_prototype:
                    out.append(_Item(child, child, "seed", (), frozenset(_identifiers_in(child))))

    walk(root)
    return out


def _closure(items: list[_Item], kernels: Collection[str]) -> set[int] | None:
    """Indices of the items the named kernels reach; None when none of them is defined here."""
    wanted = {_base_name(k) for k in kernels}
    start = [i for i, it in enumerate(items) if it.kind == "kernel" and set(it.names) & wanted]
    if not start:
        return None
    by_name: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        for n in it.names:
            by_name.setdefault(n, []).append(i)
    work = start + [i for i, it in enumerate(items) if it.kind == "seed"]
    kept: set[int] = set()
    while work:
        i = work.pop()
        if i in kept:
            continue
        kept.add(i)
        for ref in items[i].refs:
            work.extend(j for j in by_name.get(ref, ()) if j not in kept)
    return kept


def _dims_and_pointer(declarator: Node) -> tuple[tuple[str, ...], bool, bool]:
    dims: list[str] = []
    pointer = initialized = False
    node: Node | None = declarator
    while node is not None:
        if node.type == "init_declarator":
            initialized = True
        elif node.type == "pointer_declarator":
            pointer = True
        elif node.type == "array_declarator":
            size = node.child_by_field_name("size")
            dims.append((size.text or b"").decode() if size is not None else "")
        node = node.child_by_field_name("declarator")
    return tuple(dims), pointer, initialized


def referenced_globals(source: str, kernels: Collection[str]) -> tuple[DeviceGlobal, ...]:
    """The namespace-scope device variables (``__constant__``, ``__device__``, textures...) that the
    named kernels, or the device functions they call, reference; () when no such kernel is defined."""
    data = source.encode("utf-8", "surrogateescape")
    items = _items(parse("cuda", data).root_node)
    kept = _closure(items, kernels)
    if kept is None:
        return ()
    out: list[DeviceGlobal] = []
    for i in sorted(kept):
        it = items[i]
        if it.kind != "variable":
            continue
        decl = it.inner
        space = _space(decl) or ""
        type_node = decl.child_by_field_name("type")
        quals = [
            (c.text or b"").decode()
            for c in decl.children
            if c.type == "type_qualifier" and (c.text or b"").decode() in ("const", "volatile")
        ]
        base = (type_node.text or b"").decode() if type_node is not None else ""
        type_text = " ".join([*quals, " ".join(base.split())])
        for d in decl.children_by_field_name("declarator"):
            name = _declared_name(d)
            if name is None:
                continue
            dims, pointer, initialized = _dims_and_pointer(d)
            # C declarators list dimensions outermost last when walking inwards: reverse them.
            out.append(
                DeviceGlobal(
                    name=name,
                    type=type_text,
                    dims=tuple(reversed(dims)),
                    space=space,
                    pointer=pointer,
                    initialized=initialized,
                    line=decl.start_point[0] + 1,
                )
            )
    return tuple(out)
