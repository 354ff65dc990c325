"""CUDA's three-component vectors in global memory, kept in CUDA's packed layout (the translator's part).

CUDA's ``float3`` is three floats, 12 bytes, 4-byte aligned (``double3``: 24 bytes; every ``T3`` is three
``T``); OpenCL C's ``float3`` takes the room of four (16 bytes).  The host's buffers hold CUDA's layout, so a
kernel's ``float3* v`` translated as ``__global float3* v`` reads and writes every element but the first at
the wrong place.  Instead, a pointer to a three-component vector in global memory (a kernel's parameter, a
helper's parameter in a variant for global memory, a local pointer into it, a cast to one) becomes a pointer
to the scalar -- ``__global float* v`` -- and its element accesses address CUDA's layout:

* ``v[i]`` read: ``vload3(i, v)``; ``*v``: ``vload3(0, v)``;
* ``v[i] = e;``: ``vstore3(e, i, v);`` and ``v[i] op= e;``: ``vstore3(vload3(i, v) op (e), i, v);``
  (statements only: their value is not used, and the index and pointer, evaluated twice, have no effects);
* ``v[i].x`` (read or written, compound assignments and ``++`` included): ``v[3*i]`` (``.y``: ``v[3*i+1]``);
  ``v->y``: ``v[1]``;
* pointer arithmetic counts scalars: ``v + k``: ``v + 3*(k)``, ``p += k``: ``p += 3*(k)``, ``p++``:
  ``p += 3``, ``p - q``: ``((p - q) / 3)``;
* a local pointer (``float3* w = v + k;``, ``auto w = v;``, ``float3* p = (float3*)raw;``) is such a
  pointer too, and so is a ``__device__`` helper's ``float3*`` parameter in its variant for global memory:
  a call passes the scalar pointer on;
* a kernel's by-value ``float3 d`` (12 bytes from the host, where OpenCL C's float3 argument takes 16) is a
  struct of three floats, ``porter_packed_float3 d_packed``, made the float3 ``d`` on the kernel's first line.

``__shared__`` arrays and private vectors keep OpenCL C's own layout: no host sees their bytes.

Refused, naming the construct and its line: the address of an element or member (``&v[i]``, ``&v[i].x``,
an atomic on a member), an element or member bound to a reference (a helper's non-const reference
parameter, a local ``float3& e = v[i];``), the pointer stored
(into memory, an initializer list) or returned, ``sizeof`` of an element (16 in OpenCL C, 12 in CUDA), ``++``
on a whole element, a whole-element assignment whose value is used, and a compound one whose index or
pointer has side effects.  The layouts are data: ``[three_component_sizes]`` of ``cuda2opencl.toml``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tree_sitter import Node

from porter.translate.edits import Edit

LANES = 3
_MEMBERS = "xyz"
_SIMPLE = re.compile(r"^[A-Za-z_]\w*$|^[0-9][\w.]*$")
_DECIMAL = re.compile(r"^([0-9]+)[uU]?$")
_QUALIFIERS = ("const", "volatile", "struct", "__global", "global")
_UNFOLLOWED = (
    "the reference, a pointer in OpenCL C, would point into that layout, which porter does not follow"
)
_DEPTH = 8  # pointer arithmetic nests no deeper (`v + i + j`); long integer sums are not followed
_EFFECTS = frozenset({"assignment_expression", "update_expression", "call_expression"})


@dataclass(frozen=True)
class Packed:
    """A pointer into global memory holding CUDA's three-component vectors."""

    vector: str  # OpenCL C's name of the element type: float3, long3 ...
    scalar: str  # what the translated pointer points to: float, long ...
    cuda_bytes: int  # CUDA's size of an element (12 for float3)
    const: bool = False

    @property
    def opencl_bytes(self) -> int:
        return self.cuda_bytes * 4 // LANES

    def pointer(self, space: str = "global") -> str:
        """The translated pointer type: ``__global const float*``."""
        return f"__{space} {'const ' if self.const else ''}{self.scalar}*"

    def layouts(self) -> str:
        return (
            f"CUDA's {self.vector} elements are {self.cuda_bytes} bytes apart, OpenCL C's {self.opencl_bytes}; "
            f"porter keeps CUDA's layout as a pointer to {self.scalar} read with vload3 and written with vstore3"
        )


def packed_type(elem: str, sizes: Mapping[str, Any]) -> Packed | None:
    """The packed layout of a (translated, OpenCL C) element type: None unless a three-component vector."""
    words = elem.replace("*", " * ").split()
    if "*" in words:
        return None
    bare = " ".join(w for w in words if w not in _QUALIFIERS)
    size = sizes.get(bare)
    if size is None or not bare.endswith(str(LANES)):
        return None
    vector = bare.replace("longlong", "long")  # CUDA's longlong3 is OpenCL C's long3
    return Packed(vector, vector[:-1], int(size), "const" in words)


def _paren(text: str) -> str:
    return text if _SIMPLE.match(text) else f"({text})"


def _strip(node: Node | None) -> Node | None:
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape") if node is not None else ""


def _squash(text: str) -> str:
    return " ".join(text.split())


def _operator(node: Node) -> str:
    op = node.child_by_field_name("operator")
    return _text(op)


def _effects(node: Node | None) -> bool:
    """Whether evaluating `node` twice could differ from once: an assignment, an update or a call in it."""
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        if n.type in _EFFECTS:
            return True
        stack.extend(n.children)
    return False


def _statement(node: Node) -> bool:
    """Whether the value of expression `node` is unused: a statement, a for-loop's update, a comma's left."""
    parent = node.parent
    if parent is None:
        return False
    if parent.type == "expression_statement":
        return True
    if parent.type == "for_statement":
        return any(u == node for u in parent.children_by_field_name("update"))
    if parent.type == "comma_expression":
        return parent.child_by_field_name("left") == node or _statement(parent)
    if parent.type == "parenthesized_expression":
        return _statement(parent)
    return False


def _reference_bound(node: Node) -> Node | None:
    """The declarator `node` initializes a reference with (`float3& e = v[i]`), or None."""
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        parent = parent.parent
    if parent is None or parent.type != "init_declarator":
        return None
    decl = parent.child_by_field_name("declarator")
    if decl is None or decl.type != "reference_declarator":
        return None
    return parent.parent if parent.parent is not None and parent.parent.type == "declaration" else parent


def scaled(text: str) -> str:
    """An element count in scalars."""
    m = _DECIMAL.match(text)
    if m:
        return str(LANES * int(m.group(1)))
    return f"{LANES}*{_paren(text)}"


def struct_name(scalar: str) -> str:
    """The OpenCL C type of a by-value three-component kernel argument, in CUDA's layout."""
    return f"porter_packed_{scalar}{LANES}"


def struct_source(scalar: str) -> str:
    name = struct_name(scalar)
    return (
        f"/* porter: a {scalar}{LANES} kernel argument as CUDA passes it (three {scalar}s, no padding) */\n"
        f"typedef struct {{ {scalar} x, y, z; }} {name};"
    )


def model_hint(param: str) -> str | None:
    """What model-written code must know of a kernel parameter of :func:`struct_name` (it is compiled alone,
    without the translation's typedef), or None for any other parameter."""
    m = re.match(rf"^(?:const\s+)?porter_packed_(\w+?){LANES}\s+(\w+)$", " ".join(param.split()))
    if m is None:
        return None
    scalar, name = m.groups()
    vector = f"{scalar}{LANES}"
    return (
        f"`{name}` is the original's `{vector}` argument as CUDA passes it, three {scalar}s with no padding "
        f"(OpenCL C's {vector} argument is larger): define `typedef struct {{ {scalar} x, y, z; }} "
        f"{struct_name(scalar)};` before the kernel and read it as `({vector})({name}.x, {name}.y, {name}.z)`."
    )


def unpacked(info: Packed, arg: str) -> str:
    """The OpenCL C vector of a by-value argument of :func:`struct_name`."""
    return f"({info.vector})({arg}.x, {arg}.y, {arg}.z)"


class _Body(Protocol):
    edits: list[Edit]

    def render(self, node: Node) -> str: ...

    def visit(self, node: Node) -> None: ...

    def error(self, node: Node, construct: str, reason: str) -> None: ...

    def root(self, node: Node | None) -> Any: ...


class Layout:
    """The packed pointers of one function instance and the rewrites of their uses (hooks of the body's
    visitor: each returns True when it handled the node)."""

    def __init__(self, body: _Body, sizes: Mapping[str, Any], line: Callable[[Node], int]):
        self.body = body
        self.sizes = sizes
        self.line = line
        self.vars: dict[str, Packed] = {}

    def of(self, elem: str) -> Packed | None:
        return packed_type(elem, self.sizes)

    def refuse(self, node: Node, what: str, info: Packed, why: str) -> None:
        shown = _squash(_text(node))
        self.body.error(node, shown, f"{what} (line {self.line(node)}): {info.layouts()}, so {why}")

    # ------------------------------------------------------------------ what an expression is

    def cast_target(self, tnode: Node | None, value: Node | None) -> Packed | None:
        """The packed pointer a cast to `T3*` makes of a pointer into global memory."""
        if tnode is None or value is None:
            return None
        stars = [c for c in tnode.named_children if c.type == "abstract_pointer_declarator"]
        if len(stars) != 1 or stars[0].named_child_count:
            return None
        rendered = self.body.render(tnode).replace("*", " ").replace("__global", " ")
        info = self.of(rendered)
        if info is None:
            return None
        if self.pointer(value) is not None:
            return info
        r = self.body.root(value)
        return info if r is not None and r.indirect and r.space == "global" else None

    def pointer(self, node: Node | None, depth: int = 0) -> Packed | None:
        """The packed pointer `node` evaluates to, or None."""
        node = _strip(node)
        if node is None or depth > _DEPTH:
            return None
        t = node.type
        if t == "identifier":
            return self.vars.get(_text(node))
        if t == "binary_expression":
            op = _operator(node)
            left = self.pointer(node.child_by_field_name("left"), depth + 1)
            right = self.pointer(node.child_by_field_name("right"), depth + 1)
            if op == "+" and (left is None) != (right is None):
                return left or right
            if op == "-" and left is not None and right is None:
                return left
            return None
        if t == "update_expression":
            return self.pointer(node.child_by_field_name("argument"), depth + 1)
        if t == "conditional_expression":
            a = self.pointer(node.child_by_field_name("consequence"), depth + 1)
            b = self.pointer(node.child_by_field_name("alternative"), depth + 1)
            return a if a is not None and b is not None and a.vector == b.vector else None
        if t == "assignment_expression" and _operator(node) in ("=", "+=", "-="):
            return self.pointer(node.child_by_field_name("left"), depth + 1)
        if t == "cast_expression":
            return self.cast_target(node.child_by_field_name("type"), node.child_by_field_name("value"))
        if t == "call_expression":
            cast = self.cpp_cast(node)
            return cast[0] if cast is not None else None
        return None

    def cpp_cast(self, node: Node) -> tuple[Packed, Node, Node] | None:
        """`reinterpret_cast<float3*>(p)` (static_cast ...) of a pointer into global memory: (the packed
        pointer, the type, the value)."""
        fn = node.child_by_field_name("function")
        if fn is None or fn.type != "template_function":
            return None
        if _text(fn.child_by_field_name("name")) not in ("static_cast", "reinterpret_cast", "const_cast"):
            return None
        targs = fn.child_by_field_name("arguments")
        tdesc = targs.named_children[0] if targs is not None and targs.named_child_count == 1 else None
        args = node.child_by_field_name("arguments")
        values = [a for a in args.named_children if a.type != "comment"] if args is not None else []
        if tdesc is None or len(values) != 1:
            return None
        info = self.cast_target(tdesc, values[0])
        return (info, tdesc, values[0]) if info is not None else None

    def element(self, node: Node | None) -> tuple[Node, Node | None, Packed] | None:
        """(the pointer, the index or None for `*p`, its layout) of an element `p[i]` or `*p`."""
        node = _strip(node)
        if node is None:
            return None
        if node.type == "subscript_expression":
            indices = node.child_by_field_name("indices")
            real = [c for c in indices.named_children if c.type != "comment"] if indices is not None else []
            ptr = node.child_by_field_name("argument")
            info = self.pointer(ptr)
            if info is None or ptr is None or len(real) != 1:
                return None
            return ptr, real[0], info
        if node.type == "pointer_expression" and _operator(node) == "*":
            ptr = node.child_by_field_name("argument")
            info = self.pointer(ptr)
            return (ptr, None, info) if info is not None and ptr is not None else None
        return None

    def member(self, node: Node | None) -> tuple[Node, Node | None, Packed, str] | None:
        """(the pointer, the index, its layout, the member) of `p[i].x`, `(*p).y` or `p->z`."""
        node = _strip(node)
        if node is None or node.type != "field_expression":
            return None
        arg = node.child_by_field_name("argument")
        name = _text(node.child_by_field_name("field"))
        if _operator(node) == "->":
            info = self.pointer(arg)
            return (arg, None, info, name) if info is not None and arg is not None else None
        found = self.element(arg)
        return (*found, name) if found is not None else None

    def inside(self, node: Node | None) -> tuple[Packed, str] | None:
        """(the layout, "element" or "member") of an element or a member `node` is, or None."""
        found = self.element(node)
        if found is not None:
            return found[2], "element"
        m = self.member(node)
        return (m[2], "member") if m is not None else None

    # ------------------------------------------------------------------ the text of a use

    def _index(self, index: Node | None) -> str:
        return self.body.render(index) if index is not None else "0"

    def _base(self, ptr: Node) -> str:
        """The pointer as the operand of a subscript."""
        text = self.body.render(ptr)
        return text if ptr.type in ("identifier", "parenthesized_expression") else f"({text})"

    def load(self, ptr: Node, index: Node | None) -> str:
        return f"vload3({self._index(index)}, {self.body.render(ptr)})"

    # ------------------------------------------------------------------ hooks

    def field(self, node: Node) -> bool:
        """`v[i].x`, `v->y`: the scalar of CUDA's layout, an lvalue as the member was."""
        found = self.member(node)
        if found is None:
            return False
        ptr, index, info, name = found
        bound = _reference_bound(node)
        if bound is not None:
            self.refuse(
                bound, f"a reference to a member of a {info.vector} in global memory", info, _UNFOLLOWED
            )
            return True
        if name not in _MEMBERS:
            self.refuse(
                node, f"member {name} of a {info.vector} in global memory", info, "it has x, y and z only"
            )
            return True
        lane = _MEMBERS.index(name)
        if index is None:
            offset = str(lane)
        else:
            base = scaled(self._index(index))
            offset = base if lane == 0 else f"{base}+{lane}"
        self.body.edits.append(Edit.replace(node, f"{self._base(ptr)}[{offset}]"))
        return True

    def subscript(self, node: Node) -> bool:
        """`v[i]` or `*v` read as a whole: vload3."""
        found = self.element(node)
        if found is None:
            return False
        ptr, index, info = found
        parent = node.parent
        while parent is not None and parent.type == "parenthesized_expression":
            parent = parent.parent
        if parent is not None and parent.type == "update_expression":
            self.refuse(
                parent, f"{_operator(parent)} on a whole {info.vector} element", info, "it is not translated"
            )
            return True
        bound = _reference_bound(node)
        if bound is not None:
            self.refuse(bound, f"a reference to a {info.vector} element in global memory", info, _UNFOLLOWED)
            return True
        if parent is not None and parent.type == "sizeof_expression":
            self.refuse(parent, f"sizeof a {info.vector} element in global memory", info, "its sizes differ")
            return True
        self.body.edits.append(Edit.replace(node, self.load(ptr, index)))
        return True

    def pointer_expression(self, node: Node) -> bool:
        """`&v[i]`, `&v[i].x`: refused; `*v`: an element."""
        if _operator(node) != "&":
            return self.subscript(node)
        found = self.inside(node.child_by_field_name("argument"))
        if found is None:
            return False
        info, kind = found
        self.refuse(
            node,
            f"the address of a {info.vector} {kind} in global memory taken",
            info,
            f"it would be an OpenCL C pointer to {info.vector if kind == 'element' else info.scalar} into that "
            "layout, which porter does not follow (pointer arithmetic, v + i, is translated)",
        )
        return True

    def assignment(self, node: Node) -> bool:
        """`v[i] = e;` and `v[i] op= e;`: vstore3; `p += k` on a packed pointer: in scalars; the pointer
        stored into memory: refused."""
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        op = _operator(node)
        if left is None or right is None:
            return False
        found = self.element(left)
        if found is not None:
            return self._store(node, op, right, *found)
        target = self.pointer(left)
        if target is not None and op in ("+=", "-="):
            self.body.visit(left)
            self.body.edits.append(Edit.replace(right, scaled(self.body.render(right))))
            return True
        stored = self.pointer(right)
        lvalue = _strip(left)
        if stored is not None and op == "=" and lvalue is not None and lvalue.type != "identifier":
            self.refuse(
                node,
                f"a pointer to {stored.vector} in global memory stored",
                stored,
                "a pointer read back from memory could not be followed",
            )
            return True
        return False

    def _store(self, node: Node, op: str, right: Node, ptr: Node, index: Node | None, info: Packed) -> bool:
        if not _statement(node):
            self.refuse(
                node,
                f"an assignment to a {info.vector} element in global memory whose value is used",
                info,
                "it becomes vstore3, which has no value",
            )
            return True
        value = self.body.render(right)
        if op != "=":
            if _effects(index) or _effects(ptr):
                self.refuse(
                    node,
                    f"a compound assignment to a {info.vector} element whose index or pointer has side effects",
                    info,
                    "the element would be read and written with them evaluated twice",
                )
                return True
            value = f"{self.load(ptr, index)} {op[:-1]} {_paren(value)}"
        where = self._index(index)
        self.body.edits.append(Edit.replace(node, f"vstore3({value}, {where}, {self.body.render(ptr)})"))
        return True

    def update(self, node: Node) -> bool:
        """`p++`, `--p` on a packed pointer: a step of three scalars."""
        arg = node.child_by_field_name("argument")
        if self.pointer(arg) is None or arg is None or self.element(arg) is not None:
            return False
        op = "+=" if _operator(node) == "++" else "-="
        name = self.body.render(arg)
        prefix = node.children[0].type in ("++", "--")
        if _statement(node) or prefix:
            text = f"{name} {op} {LANES}" if _statement(node) else f"({name} {op} {LANES})"
        else:  # the value before the step
            back = "-" if op == "+=" else "+"
            text = f"(({name} {op} {LANES}) {back} {LANES})"
        self.body.edits.append(Edit.replace(node, text))
        return True

    def arithmetic(self, node: Node) -> bool:
        """`v + k`, `k + v`, `v - k`: offsets in scalars; `p - q`: a count of elements."""
        op = _operator(node)
        if op not in ("+", "-"):
            return False
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        lp, rp = self.pointer(left), self.pointer(right)
        if left is None or right is None or (lp is None and rp is None):
            return False
        if lp is not None and rp is not None:
            if op != "-":
                return False
            self.body.edits.append(Edit.insert_before(node, "(("))
            self.body.visit(left)
            self.body.visit(right)
            self.body.edits.append(Edit.insert_after(node, f") / {LANES})"))
            return True
        ptr, count = (left, right) if lp is not None else (right, left)
        self.body.visit(ptr)
        self.body.edits.append(Edit.replace(count, scaled(self.body.render(count))))
        return True

    def escapes(self, node: Node, what: str) -> bool:
        """A packed pointer in an initializer list or a return: refused (True), else False."""
        for c in node.named_children:
            info = self.pointer(c)
            if info is not None:
                self.refuse(
                    c, f"a pointer to {info.vector} in global memory {what}", info, "it is not translated"
                )
                return True
        return False

    def reference(self, node: Node, arg: Node | None, construct: str) -> bool:
        """An element or member bound to a helper's non-const reference: refused (True)."""
        found = self.inside(arg)
        if found is None or arg is None:
            return False
        info, kind = found
        self.refuse(
            arg,
            f"a {info.vector} {kind} in global memory bound to a reference ({construct})",
            info,
            _UNFOLLOWED,
        )
        return True

    def atomic(self, target: Node | None, name: str) -> bool:
        """An atomic on an element or member: refused (True)."""
        inner = _strip(target)
        if inner is None or inner.type != "pointer_expression" or _operator(inner) != "&":
            return False
        found = self.inside(inner.child_by_field_name("argument"))
        if found is None:
            return False
        info, kind = found
        self.refuse(
            inner,
            f"{name} on a {info.vector} {kind} in global memory",
            info,
            "atomics on it are not translated",
        )
        return True
