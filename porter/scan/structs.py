"""Structs whose fields are all of one arithmetic type (``typedef struct { fp v, x, y, z; } FOUR_VECTOR;``
with ``#define fp double``): what a replay compares an array of them as -- its lanes, each within the
tolerance of its type -- instead of byte for byte, where the last bit of a double would fail a port.

Found on the syntax tree of the program's files: a struct (tagged or typedef'd) whose every field is a
scalar of one type, directly or through a ``#define`` or ``typedef`` naming it, possibly as fixed-size
arrays (``double r[3];``).  The lane count is what the fields say; whoever uses it checks it against the
element size the compiler reported (padding, a macro that means something else in another unit)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tree_sitter import Node

from porter.grammars import parse
from porter.scan.macros import definitions

# the scalar spellings a field may have (after aliases), as the validator names their types
_SCALARS = {
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "signed int": "int32",
    "unsigned int": "uint32",
    "unsigned": "uint32",
    "long long": "int64",
    "long long int": "int64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "short": "int16",
    "unsigned short": "uint16",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "uint64_t": "uint64",
}


@dataclass(frozen=True)
class Lanes:
    """A struct of `count` fields of one scalar type (`dtype`, the validator's name)."""

    dtype: str
    count: int


def homogeneous_structs(texts: Iterable[str]) -> dict[str, Lanes]:
    """Struct name (its tag and every typedef name) -> its lanes, for the structs in `texts` whose
    fields are all one scalar type.  A name two files define differently is left out."""
    found: dict[str, Lanes | None] = {}
    for text in texts:
        aliases = _aliases(text)
        tree = parse("cuda", text)
        for name, lanes in _structs(tree.root_node, aliases):
            if name in found and found[name] != lanes:
                found[name] = None
            else:
                found[name] = lanes
    return {k: v for k, v in found.items() if v is not None}


def _aliases(text: str) -> dict[str, str]:
    """Object-like macros and typedefs that name a scalar type: ``#define fp double`` -> ``double``."""
    out: dict[str, str] = {}
    for name, bodies in definitions(text.encode()).items():
        spelled = {" ".join(b) for b in bodies}
        if len(spelled) == 1:
            out[name] = next(iter(spelled))
    root = parse("cuda", text).root_node
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "type_definition":
            kind = node.child_by_field_name("type")
            declarator = node.child_by_field_name("declarator")
            if (
                kind is not None
                and declarator is not None
                and declarator.type == "type_identifier"
                and kind.type in ("primitive_type", "sized_type_specifier", "type_identifier")
            ):
                out[_text(declarator)] = " ".join(_text(kind).split())
        stack.extend(node.children)
    return out


def _scalar(spelled: str, aliases: Mapping[str, str]) -> str | None:
    seen: set[str] = set()
    words = " ".join(w for w in spelled.split() if w not in ("const", "volatile"))
    while words in aliases and words not in seen:
        seen.add(words)
        words = aliases[words]
    return _SCALARS.get(words)


@dataclass(frozen=True)
class Field:
    """One field of a struct: its type as written (whitespace squashed), the pointer declarators around
    its name, and how many elements it holds (an array's literal extents multiplied; None when an extent
    is not a literal)."""

    type: str
    stars: int
    count: int | None


@dataclass(frozen=True)
class Struct:
    """A struct's (or class's) fields by name, in order; ``plain``: nothing else in its body (no method,
    access specifier or nested type); ``keyword``: ``struct`` or ``class``."""

    fields: dict[str, Field]
    plain: bool
    keyword: str


def struct_of(spec: Node) -> tuple[list[str], Struct] | None:
    """The names (its tag and each typedef name) and fields of the struct or class `spec` defines (a
    ``struct_specifier`` / ``class_specifier`` with a body), None for any other node.  The one reader of
    struct definitions: the replay's field-by-field comparison here, the OpenCL translator's atomics on
    struct fields."""
    if spec.type not in ("struct_specifier", "class_specifier"):
        return None
    body = spec.child_by_field_name("body")
    if body is None:
        return None
    fields: dict[str, Field] = {}
    plain = True
    for child in body.named_children:
        if child.type == "comment":
            continue
        kind = child.child_by_field_name("type") if child.type == "field_declaration" else None
        if kind is None:
            plain = False
            continue
        for d in child.children_by_field_name("declarator"):
            stars = 0
            count: int | None = 1
            while d.type in ("array_declarator", "pointer_declarator"):
                if d.type == "pointer_declarator":
                    stars += 1
                else:
                    count = count * n if count is not None and (n := _literal_extent(d)) is not None else None
                inner = d.child_by_field_name("declarator")
                if inner is None:
                    break
                d = inner
            if d.type == "field_identifier":
                fields[_text(d)] = Field(" ".join(_text(kind).split()), stars, count)
            else:
                plain = False
    names = [_text(tag)] if (tag := spec.child_by_field_name("name")) is not None else []
    parent = spec.parent
    if parent is not None and parent.type == "type_definition":
        names += [
            _text(d) for d in parent.children_by_field_name("declarator") if d.type == "type_identifier"
        ]
    return names, Struct(fields, plain, spec.type.split("_")[0])


def _literal_extent(array: Node) -> int | None:
    size = array.child_by_field_name("size")
    if size is None or size.type != "number_literal":
        return None
    try:
        return int(_text(size).rstrip("uUlL"), 0)
    except ValueError:
        return None


def _structs(root: Node, aliases: Mapping[str, str]) -> Iterable[tuple[str, Lanes]]:
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        found = struct_of(node) if node.type == "struct_specifier" else None
        if found is None:
            continue
        names, struct = found
        lanes = _lanes(struct, aliases)
        if lanes is not None:
            for name in names:
                yield name, lanes


def _lanes(struct: Struct, aliases: Mapping[str, str]) -> Lanes | None:
    """The struct's lanes when it is plain data whose every field is a scalar (or a fixed array of them)
    of one type."""
    if not struct.plain:
        return None  # a method, an access specifier, a nested type: not plain data
    dtype = ""
    count = 0
    for f in struct.fields.values():
        scalar = _scalar(f.type, aliases)
        if scalar is None or (dtype and scalar != dtype) or f.stars or f.count is None:
            return None
        dtype = scalar
        count += f.count
    return Lanes(dtype, count) if count else None


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


__all__ = ["Field", "Lanes", "Struct", "homogeneous_structs", "struct_of"]
