"""CUDA source -> :class:`porter.model.FileScan`.

One parse per file and three queries (``grammars/cuda-toplevel.scm`` on the file, depth-limited;
``cuda-device.scm`` on each ``__global__``/``__device__`` function; ``cuda-host.scm`` on each host
function).  Small Python on the captured nodes turns them into plain data; no tree node leaves
this module.  Facts about CUDA APIs come from ``cuda_api.toml``, hazards from ``hazards.toml``.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from tree_sitter import Node, QueryCursor

from porter.grammars import parse, query
from porter.model import (
    Allocation,
    Assignment,
    Copy,
    Define,
    DeviceFunction,
    FileScan,
    Hazard,
    Kernel,
    LaunchSite,
    Param,
    ParseWarning,
    SharedArray,
)
from porter.scan import hazards as hz
from porter.scan.macros import MacroTable, Masked, mask

MAX_WARNINGS = 50
# Codes reported at most once per line (a line naming cg:: twice is one hazard).
_ONE_PER_LINE = frozenset(
    {"cooperative-groups", "libcudacxx", "warp-size-assumption", "texture-api", "inline-asm"}
)

_QUALIFIER_TOKENS = frozenset(
    {"__global__", "__device__", "__host__", "__forceinline__", "__noinline__", "__inline__", "inline"}
)
_CAST_FUNCTIONS = frozenset({"reinterpret_cast", "static_cast", "const_cast", "dynamic_cast", "__ldg"})
_IDENT = re.compile(r"[A-Za-z_]\w*")
_SIZEOF = re.compile(r"sizeof\s*\(\s*([A-Za-z_][\w:\s<>,]*?)\s*\)")
_SIMPLE = re.compile(r"^[\w.]+$")
_CONTINUATION = re.compile(r"\\\r?\n")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


# --------------------------------------------------------------------------- API tables


@dataclass(frozen=True)
class _Api:
    barriers: frozenset[str]
    barrier_methods: frozenset[str]
    barrier_qualified: frozenset[str]
    atomics: frozenset[str]
    warp_intrinsics: frozenset[str]
    writes_first_arg: frozenset[str]
    alloc_out_param: dict[str, dict[str, Any]]
    alloc_returning: dict[str, dict[str, Any]]
    copies: dict[str, dict[str, int]]
    copies_2d: dict[str, dict[str, int]]
    launch_apis: dict[str, dict[str, Any]]

    host_calls: frozenset[str]  # every name in the four tables above


@cache
def api() -> _Api:
    raw = tomllib.loads(resources.files(__package__).joinpath("cuda_api.toml").read_text(encoding="utf-8"))
    dev, host = raw["device"], raw["host"]
    atomics = set(dev["atomics"])
    atomics.update(a + s for a in dev["atomics"] for s in dev["atomic_scope_suffixes"])
    return _Api(
        barriers=frozenset(dev["barriers"]),
        barrier_methods=frozenset(dev["barrier_methods"]),
        barrier_qualified=frozenset(dev["barrier_qualified"]),
        atomics=frozenset(atomics),
        warp_intrinsics=frozenset(dev["warp_intrinsics"]),
        writes_first_arg=frozenset(dev["writes_first_arg"]) | frozenset(atomics),
        alloc_out_param=host["alloc_out_param"],
        alloc_returning=host["alloc_returning"],
        copies=host["copies"],
        copies_2d=host["copies_2d"],
        launch_apis=host["launch_apis"],
        host_calls=frozenset(host["alloc_out_param"])
        | frozenset(host["alloc_returning"])
        | frozenset(host["copies"])
        | frozenset(host["copies_2d"]),
    )


# --------------------------------------------------------------------------- small node helpers


def _text(node: Node | None) -> str:
    if node is None:
        return ""
    raw = node.text
    return raw.decode("utf-8", "surrogateescape") if raw is not None else ""


_TextFn = Callable[[Node | None], str]


def _text_of(source: bytes) -> _TextFn:
    """A fast ``_text`` for the nodes of one parse of ``source``: slices instead of ``node.text``.

    ASCII sources (nearly all CUDA) are decoded once and sliced by byte offsets; anything else
    slices the bytes and decodes each piece exactly as ``_text`` does.
    """
    if source.isascii():
        whole = source.decode("ascii")

        def text(node: Node | None) -> str:
            return "" if node is None else whole[node.start_byte : node.end_byte]

    else:

        def text(node: Node | None) -> str:
            return (
                ""
                if node is None
                else source[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")
            )

    return text


def _squash(text: str) -> str:
    return " ".join(text.split())


def _line(node: Node) -> int:
    return node.start_point[0] + 1


def _args(arglist: Node | None) -> list[Node]:
    if arglist is None:
        return []
    return [c for c in arglist.named_children if c.type != "comment"]


def _wrapped(expr: str) -> bool:
    """`(a + b)`, `sizeof(float)`, `f(x, y)`: one balanced group that spans to the end."""
    head = expr.find("(")
    if head < 0 or not expr.endswith(")") or not _SIMPLE.match(expr[:head] or "x"):
        return False
    depth = 0
    for i, ch in enumerate(expr[head:], head):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(expr) - 1
    return False


def _paren(expr: str) -> str:
    return expr if _SIMPLE.match(expr) or _wrapped(expr) else f"({expr})"


def _declared_name(node: Node | None) -> Node | None:
    """The identifier a declarator declares (through pointers, arrays, references, init)."""
    while node is not None:
        t = node.type
        if t in (
            "identifier",
            "field_identifier",
            "qualified_identifier",
            "destructor_name",
            "operator_name",
        ):
            return node
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            # reference_declarator and some others keep the name as a plain child
            nxt = next(
                (c for c in node.named_children if c.type not in ("type_qualifier", "ms_pointer_modifier")),
                None,
            )
        node = nxt
    return None


def _strip_expr(text: _TextFn, node: Node) -> Node:
    """Remove parentheses and casts around an expression."""
    while True:
        t = node.type
        if t == "parenthesized_expression" and node.named_child_count:
            node = node.named_children[0]
        elif t == "cast_expression":
            value = node.child_by_field_name("value")
            if value is None:
                return node
            node = value
        elif t == "call_expression":
            fn = node.child_by_field_name("function")
            name = fn.child_by_field_name("name") if fn is not None and fn.type == "template_function" else fn
            args = _args(node.child_by_field_name("arguments"))
            if name is not None and text(name) in _CAST_FUNCTIONS and len(args) == 1:
                node = args[0]
            else:
                return node
        else:
            return node


def _address_target(text: _TextFn, node: Node) -> str:
    """`(void**)&d_x` -> `d_x`; `&buf.data` -> `buf.data`."""
    node = _strip_expr(text, node)
    if node.type == "pointer_expression" and node.child(0) is not None and node.child(0).type == "&":
        arg = node.child_by_field_name("argument")
        if arg is not None:
            return _squash(text(_strip_expr(text, arg)))
    return _squash(text(node))


# --------------------------------------------------------------------------- functions


@dataclass(slots=True)
class _Function:
    node: Node  # function_definition
    outer: Node  # the template_declaration around it, or the definition itself
    name: str
    kind: str  # "kernel" | "device" | "host"
    qualifiers: tuple[str, ...]
    start: int  # where it starts in the file: at the template, or at a blanked macro before it
    params: list[_ParamInfo] = field(default_factory=list)


@dataclass(slots=True)
class _ParamInfo:
    name: str
    decl: Node  # parameter_declaration
    pointer: bool  # pointer or array
    reference: bool
    ident: Node | None = None  # the declared name, found once while reading the signature

    def written_in(self, roots: set[str]) -> bool:
        """Stored through (pointers) or assigned (references) according to a function's write roots."""
        if not self.name:
            return False
        if self.pointer:
            return self.name in roots
        return self.reference and ("&" + self.name in roots or self.name in roots)


def _function_info(text: _TextFn, fn: Node, masked: Masked) -> _Function | None:
    """Name, kind, qualifiers and parameters of a function definition.

    Qualifiers spelled through a macro (``KERNEL void k()`` after ``#define KERNEL __global__``)
    count as written: :func:`porter.scan.macros.mask` blanked the macro and remembers where.
    """
    found: list[tuple[int, str]] = []  # (offset, qualifier): written ones and those of macros
    for child in fn.children:
        t = child.type
        if t in _QUALIFIER_TOKENS:
            found.append((child.start_byte, t))
        elif t == "storage_class_specifier":
            found.append((child.start_byte, text(child)))
        elif t == "type_qualifier" and text(child) == "constexpr":
            found.append((child.start_byte, "constexpr"))
    if masked.spans:
        found += [(start, q) for start, _, expansion in masked.spans_of(fn) for q in expansion]
        found.sort(key=lambda x: x[0])
    quals: list[str] = []
    for _, q in found:
        if q not in quals:
            quals.append(q)
    declarator = fn.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None:
        return None
    name_node = declarator.child_by_field_name("declarator")
    name = _squash(text(name_node))
    if "__global__" in quals:
        kind = "kernel"
    elif "__device__" in quals:
        kind = "device"
    else:
        kind = "host"
    parent = fn.parent
    outer = parent if parent is not None and parent.type == "template_declaration" else fn
    start = min(outer.start_byte, masked.start_of(fn))
    info = _Function(node=fn, outer=outer, name=name, kind=kind, qualifiers=tuple(quals), start=start)
    params = declarator.child_by_field_name("parameters") if kind != "host" else None
    if params is not None:
        for p in params.named_children:
            if p.type in ("parameter_declaration", "optional_parameter_declaration"):
                declarator = p.child_by_field_name("declarator")
                ident, pointer, reference = _param_shape(declarator)
                info.params.append(
                    _ParamInfo(text(ident) if ident is not None else "", p, pointer, reference, ident)
                )
    return info


def _param_shape(declarator: Node | None) -> tuple[Node | None, bool, bool]:
    """(declared name, pointer or array, reference) of a parameter declarator.

    ``x`` and ``*x`` (nearly all CUDA parameters) are answered directly; anything else goes
    through :func:`_declared_name` and :func:`_pointer_kind`.
    """
    if declarator is None:
        return None, False, False
    t = declarator.type
    if t == "identifier":
        return declarator, False, False
    if t == "pointer_declarator":
        inner = declarator.child_by_field_name("declarator")
        if inner is not None and inner.type == "identifier":
            return inner, True, False
    pointer, reference = _pointer_kind(declarator)
    return _declared_name(declarator), pointer, reference


def _pointer_kind(declarator: Node | None) -> tuple[bool, bool]:
    """(pointer or array, reference) for a parameter declarator."""
    pointer = reference = False
    node = declarator
    while node is not None:
        if node.type in ("pointer_declarator", "abstract_pointer_declarator", "array_declarator"):
            pointer = True
        elif node.type in ("reference_declarator", "abstract_reference_declarator"):
            reference = True
        nxt = node.child_by_field_name("declarator")
        if nxt is None and node.type == "reference_declarator":
            nxt = next((c for c in node.named_children if c.type != "type_qualifier"), None)
        node = nxt
    return pointer, reference


def _param(text: _TextFn, source: bytes, p: _ParamInfo, written: bool) -> Param:
    decl = p.decl
    start = decl.start_byte
    raw = source[start : decl.end_byte]
    # `const` must be spelled in the parameter's text; only then look for the qualifier node
    # (`const T* p`, the usual spelling, is answered by the first child alone)
    if b"const" not in raw:
        const = False
    elif (
        raw[5:6] in (b" ", b"\t", b"\n")
        and raw.startswith(b"const")
        and decl.child(0).type == "type_qualifier"
    ):
        const = True
    else:
        const = any(c.type == "type_qualifier" and text(c) in ("const", "constexpr") for c in decl.children)
    # the declared type: the parameter's text without its name and default value
    default = decl.child_by_field_name("default_value") if b"=" in raw else None
    ident = p.ident
    if ident is not None and ident.type == "identifier":
        cut_a, cut_b = ident.start_byte - start, ident.end_byte - start
        type_bytes = raw[:cut_a] + raw[cut_b:]
    else:
        type_bytes = raw
    if default is not None:
        eq = type_bytes.rfind(b"=")
        if eq >= 0:
            type_bytes = type_bytes[:eq]
    type_text = _squash(type_bytes.decode("utf-8", "surrogateescape"))
    return Param(name=p.name, type=type_text, pointer=p.pointer, const=const, written=written)


# --------------------------------------------------------------------------- device analysis


@dataclass(slots=True)
class _DeviceFacts:
    info: _Function
    written_roots: set[str] = field(default_factory=set)
    edges: list[tuple[str, int, str]] = field(default_factory=list)  # (callee, arg index, root)
    shared: list[SharedArray] = field(default_factory=list)
    barriers: int = 0
    atomics: set[str] = field(default_factory=set)
    warp: set[str] = field(default_factory=set)
    launch_bounds: str | None = None


def _root(
    text: _TextFn,
    node: Node | None,
    aliases: dict[str, str],
    pointers: set[str] | frozenset[str] = frozenset(),
    through: bool = False,
) -> tuple[str | None, bool]:
    """The variable an lvalue or pointer expression is based on, and whether it goes through memory.

    ``p[i]``, ``*(p + i)``, ``p->f`` and ``&p[i]`` are based on ``p``; local pointer aliases
    (``float* q = p + off``) resolve to what they alias.  ``pointers`` names the known pointers
    and decides which operand of ``a + b`` is the pointer.
    """
    depth = 0
    while node is not None and depth < 32:
        depth += 1
        t = node.type
        if t == "identifier":
            name = text(node)
            hops = 0
            while name in aliases and hops < 8:
                name = aliases[name]
                hops += 1
            return name, through
        if t == "subscript_expression":
            node, through = node.child_by_field_name("argument"), True
        elif t == "pointer_expression":
            star = node.child(0)
            if star is not None and star.type == "*":
                through = True
            node = node.child_by_field_name("argument")
        elif t == "field_expression":
            arrow = node.child_by_field_name("operator")
            if arrow is not None and arrow.type == "->":
                through = True
            node = node.child_by_field_name("argument")
        elif t == "binary_expression":
            op = node.child_by_field_name("operator")
            if op is None or op.type not in ("+", "-"):
                return None, through
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            lname, lthr = _root(text, left, aliases, pointers, through)
            if op.type == "+":
                rname, rthr = _root(text, right, aliases, pointers, through)
                if rname is not None and rname in pointers and lname not in pointers:
                    return rname, rthr
            return lname, lthr
        elif t in ("parenthesized_expression", "cast_expression", "call_expression"):
            stripped = _strip_expr(text, node)
            if stripped is node:
                return None, through
            node = stripped
        else:
            return None, through
    return None, through


def _shared_arrays(text: _TextFn, decl: Node) -> list[SharedArray]:
    extern = False
    quals = []
    for c in decl.children:
        t = c.type
        if t == "storage_class_specifier":
            extern = extern or text(c) == "extern"
        elif t == "type_qualifier":
            q = text(c)
            if q not in ("__shared__", "extern"):
                quals.append(q)
    line = _line(decl)
    if decl.has_error:
        return _shared_from_text(text(decl), extern, line)
    type_node = decl.child_by_field_name("type")
    elem = _squash(" ".join([*quals, text(type_node)]))
    out = []
    for d in decl.children_by_field_name("declarator"):
        node = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        dims: list[str] = []
        unsized = False
        ptr = ""
        while node is not None and node.type in ("array_declarator", "pointer_declarator"):
            if node.type == "pointer_declarator":
                ptr += "*"
            else:
                size = node.child_by_field_name("size")
                if size is None:
                    unsized = True
                else:
                    dims.append(_squash(text(size)))
            node = node.child_by_field_name("declarator")
        if node is None:
            continue
        dims.reverse()  # the outermost array_declarator holds the last dimension
        if unsized:
            size_text = None
        elif not dims:
            size_text = "1"
        elif len(dims) == 1:
            size_text = dims[0]
        else:
            size_text = " * ".join(_paren(x) for x in dims)
        out.append(SharedArray(name=text(node), type=elem + ptr, size=size_text, extern=extern, line=line))
    return out


_SHARED_TEXT = re.compile(
    r"__shared__\s+(?:__align__\s*\([^)]*\)\s*)?(?P<type>[\w\s:<>,*]+?)\s*(?:__align__\s*\([^)]*\)\s*)?"
    r"(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]*\]\s*)*);"
)


def _shared_from_text(text: str, extern: bool, line: int) -> list[SharedArray]:
    """Fallback for declarations the grammar cannot parse (e.g. with `__align__(16)`)."""
    m = _SHARED_TEXT.search(" ".join(text.split()))
    if m is None:
        return []
    elem = _squash(re.sub(r"\b(extern|volatile)\b", "", m["type"]))
    dims = [d.strip() for d in re.findall(r"\[([^\]]*)\]", m["dims"])]
    if any(not d for d in dims):
        size = None
    elif not dims:
        size = "1"
    else:
        size = dims[0] if len(dims) == 1 else " * ".join(_paren(d) for d in dims)
    return [SharedArray(name=m["name"], type=elem, size=size, extern=extern, line=line)]


class _Scanner:
    def __init__(self, path: str, source: bytes, macros: MacroTable | None = None, dialect: str = "cuda"):
        self.path = path
        self.dialect = dialect
        self.hip = hz.mask_bits(dialect) == 64  # HIP: 64-bit masks and ballots, the wave-size rules
        # an all-ones member mask that leaves lanes out: any 32-bit spelling in CUDA terms (the port
        # gets 64 lanes), only the 32-bit ones in HIP (~0 and -1 are all 64 ones there)
        self.is_full_mask = hz.is_narrow_mask_literal if self.hip else hz.is_full_mask_literal
        # scope macros (`CUB_NAMESPACE_BEGIN`) written as braces and qualifier macros blanked;
        # offsets and lines unchanged
        self.masked = mask(source, macros or MacroTable())
        self.source = self.masked.source
        self.text: _TextFn = _text_of(self.source)
        self.hazards: list[Hazard] = []
        self.defines: list[Define] = []
        self.full_mask_names: set[str] = set()
        self.namespace_aliases: dict[str, str] = {}
        self.launches: list[LaunchSite] = []
        self.pointers: dict[str, set[str]] = {}  # function-pointer variable -> what it was set to
        self.launch_macros = (
            _launch_macros(source.decode("utf-8", "surrogateescape"))
            if b"#" in source and b"<" in source
            else {}
        )
        self.allocations: list[Allocation] = []
        self.copies: list[Copy] = []
        self.assignments: list[Assignment] = []
        self.functions: list[_Function] = []
        self.device_names: set[str] = set()  # __device__ / __global__ functions of this file

    # ------------------------------------------------------------------ top level

    def scan(self) -> FileScan:
        tree = parse("cuda", self.source)
        root = tree.root_node
        self._toplevel(root)
        warnings = _parse_warnings(root) if root.has_error else []
        device = [f for f in self.functions if f.kind != "host"]
        self.device_names = {f.name for f in device}
        facts = {id(f.node): self._device(f) for f in device}
        self._propagate_writes(facts)
        for f in self.functions:
            if f.kind == "host":
                self._host(f)
        if self.hip:
            for f in self.functions:
                self.hazards += _HipWave(self.text, f).hazards()
        kernels = []
        device_functions = []
        for f in device:
            fact = facts[id(f.node)]
            if f.kind == "kernel":
                kernels.append(self._kernel(f, fact))
            else:
                device_functions.append(
                    DeviceFunction(
                        name=f.name,
                        line=_line(f.node),
                        end_line=f.node.end_point[0] + 1,
                        qualifiers=f.qualifiers,
                        start_byte=f.start,
                        end_byte=f.outer.end_byte,
                    )
                )
        self._resolve_pointers({k.name for k in kernels})
        seen: set[tuple[str, int, str]] = set()
        unique = []
        for h in sorted(self.hazards, key=lambda h: (h.line, h.code)):
            key = (h.code, h.line, "" if h.code in _ONE_PER_LINE else h.message)
            if key not in seen:
                seen.add(key)
                unique.append(h)
        return FileScan(
            path=self.path,
            language=self.dialect,
            kernels=tuple(kernels),
            device_functions=tuple(device_functions),
            launches=tuple(self.launches),
            allocations=tuple(self.allocations),
            copies=tuple(self.copies),
            defines=tuple(self.defines),
            assignments=tuple(self.assignments),
            hazards=tuple(unique),
            warnings=tuple(warnings),
        )

    def _toplevel(self, root: Node) -> None:
        text = self.text
        globals_: list[Node] = []
        usings: list[Node] = []
        seen: set[int] = set()
        containers = [root]
        while containers:
            container = containers.pop()
            cursor = QueryCursor(query("cuda-toplevel"))
            cursor.set_max_start_depth(1)
            for _, caps in cursor.matches(container):
                if "container" in caps:
                    node = caps["container"][0]
                    if node != container:
                        containers.append(node)
                elif "function" in caps:
                    node = caps["function"][0]
                    if node.start_byte in seen:
                        continue
                    seen.add(node.start_byte)
                    info = _function_info(text, node, self.masked)
                    if info is not None:
                        self.functions.append(info)
                elif "define" in caps:
                    self._define(caps["define"][0])
                elif "include" in caps:
                    node = caps["include"][0]
                    path = text(node).strip()
                    if path[:1] in '<"' and len(path) >= 2:
                        path = path[1:-1]
                    self.hazards += hz.for_include(path.strip(), _line(node))
                elif "global" in caps:
                    globals_.append(caps["global"][0])
                elif "alias" in caps:
                    node = caps["alias"][0]
                    target = [
                        c
                        for c in node.named_children
                        if c.type
                        in ("namespace_identifier", "nested_namespace_specifier", "qualified_identifier")
                    ]
                    if len(target) >= 2:
                        real = text(target[-1]).lstrip(":").split("::")[0]
                        self.namespace_aliases[text(caps["alias.name"][0])] = real
                        self.hazards += hz.for_namespace(real, _squash(text(node)), _line(node))
                elif "using" in caps:
                    usings.append(caps["using"][0])
        self.functions.sort(key=lambda f: f.node.start_byte)
        for node in usings:
            names = [text(c) for c in node.named_children if c.type in ("identifier", "namespace_identifier")]
            for qual in (c for c in node.named_children if c.type == "qualified_identifier"):
                names.append(text(qual).lstrip(":").split("::")[0])
            for name in names:
                real = self.namespace_aliases.get(name, name)
                self.hazards += hz.for_namespace(real, _squash(text(node)), _line(node))
        for node in globals_:
            self._global(node)

    def _define(self, node: Node) -> None:
        text = self.text
        name = text(node.child_by_field_name("name"))
        value = _squash(_COMMENT.sub(" ", _CONTINUATION.sub(" ", text(node.child_by_field_name("value")))))
        params_node = node.child_by_field_name("parameters")
        params = tuple(text(c) for c in params_node.named_children) if params_node is not None else None
        line = _line(node)
        self.defines.append(Define(name=name, value=value, line=line, params=params))
        if params is None:
            if self.hip and name == "warpSize":
                self.hazards.append(_warp_size_redefined(f"#define warpSize {value}", value, line))
            elif self.is_full_mask(value):
                self.full_mask_names.add(name)
            elif hz.normalise_literal(value) == "32" and hz.is_warp_size_name(name):
                self.hazards.append(
                    hz.make(
                        "warp-size-assumption",
                        line,
                        detail=f"#define {name} {value} hard-codes the warp size",
                    )
                )

    def _global(self, node: Node) -> None:
        text = self.text
        line = _line(node)
        quals = [text(c) for c in node.children if c.type == "type_qualifier"] + [
            c.type for c in node.children if not c.is_named
        ]
        for q in quals:
            self.hazards += hz.for_qualifier(q, line)
        type_node = node.child_by_field_name("type")
        if type_node is not None:
            if type_node.type == "template_type":
                name = text(type_node.child_by_field_name("name"))
                self.hazards += hz.for_type(name, line)
            elif type_node.type == "type_identifier":
                self.hazards += hz.for_type(text(type_node), line)
            elif type_node.type == "qualified_identifier":
                self._scope_hazards(type_node, line)
        device_side = any(q in ("__device__", "__constant__", "__managed__", "__shared__") for q in quals)
        for d in node.children_by_field_name("declarator"):
            if d.type != "init_declarator":
                continue
            ident = d.child_by_field_name("declarator")
            value = d.child_by_field_name("value")
            if ident is None or ident.type != "identifier" or value is None:
                continue
            name = text(ident)
            value_text = _squash(text(value))
            if self.hip and name == "warpSize":
                self.hazards.append(_warp_size_redefined(f"warpSize = {value_text}", value_text, line))
            elif self.is_full_mask(value_text):
                self.full_mask_names.add(name)
            elif hz.normalise_literal(value_text) == "32" and hz.is_warp_size_name(name):
                self.hazards.append(
                    hz.make(
                        "warp-size-assumption", line, detail=f"{name} = {value_text} hard-codes the warp size"
                    )
                )
            if not device_side:
                self.assignments.append(
                    Assignment(
                        var=name, type=_decl_type(text, node), value=_value_text(text, node, value), line=line
                    )
                )

    def _scope_hazards(self, qualified: Node, line: int) -> None:
        text = self.text
        scope = qualified.child_by_field_name("scope")
        if scope is None:
            return
        name = text(scope)
        real = self.namespace_aliases.get(name, name)
        shown = _squash(text(qualified))
        self.hazards += hz.for_namespace(real, shown, line)

    # ------------------------------------------------------------------ device functions

    def _device(self, f: _Function) -> _DeviceFacts:
        text = self.text
        facts = _DeviceFacts(info=f)
        a = api()
        tables = hz.tables()
        for child in f.node.children:
            if child.type == "launch_bounds":
                facts.launch_bounds = ", ".join(_squash(text(c)) for c in child.named_children)
        pointers = {p.name for p in f.params if p.pointer}
        pointer_params = frozenset(pointers)
        references = {p.name for p in f.params if p.reference}
        aliases: dict[str, str] = {}
        calls: list[tuple[str, Node, Node]] = []
        binaries: list[tuple[Node, Node]] = []
        ladders: list[tuple[str, Node]] = []
        derived: set[str] = set()  # locals computed from threadIdx / blockDim
        masks = set(self.full_mask_names)
        written = facts.written_roots
        thread_builtin = hz.thread_builtin_pattern()
        type_rules = tables.types
        for _, caps in QueryCursor(query("cuda-device")).matches(f.node):
            if "store" in caps:
                target = caps["store"][0]
                if target.type == "identifier":
                    name = text(target)
                    if name in references:
                        written.add("&" + name)
                    elif name in pointers and "assign" in caps:
                        # `q = p + off;` re-points a local pointer: q becomes an alias of p
                        root, _ = _root(
                            text, caps["assign"][0].child_by_field_name("right"), aliases, pointers
                        )
                        if root is not None and root != name and (root in aliases or root in pointer_params):
                            aliases[name] = root
                    continue
                root, through = _root(text, target, aliases, pointers)
                if root is not None and through:
                    written.add(root)
            elif "local.name" in caps:
                name = text(caps["local.name"][0])
                value = caps["local.value"][0]
                vtext = _squash(text(value))
                if thread_builtin.search(vtext) or (
                    derived and not derived.isdisjoint(_IDENT.findall(vtext))
                ):
                    derived.add(name)
                elif self.hip and name == "warpSize":
                    self.hazards.append(_warp_size_redefined(f"warpSize = {vtext}", vtext, _line(value)))
                elif self.is_full_mask(vtext):
                    masks.add(name)
                elif hz.normalise_literal(vtext) == "32" and hz.is_warp_size_name(name):
                    self.hazards.append(
                        hz.make(
                            "warp-size-assumption",
                            _line(value),
                            detail=f"{name} = {vtext} hard-codes the warp size",
                        )
                    )
            elif "call" in caps:
                call = caps["call"][0]
                if call.child_count == 2 or not any(c.type == "kernel_call_syntax" for c in call.children):
                    calls.append((text(caps["call.name"][0]), call, caps["call.args"][0]))
            elif "alias.value" in caps:
                ident = _declared_name(caps["alias.declarator"][0])
                if ident is not None:
                    name = text(ident)
                    root, _ = _root(text, caps["alias.value"][0], aliases, pointers)
                    if root is not None and root != name:
                        aliases[name] = root
                    pointers.add(name)
            elif "method" in caps:
                if text(caps["method.name"][0]) in a.barrier_methods:
                    facts.barriers += 1
            elif "qualified" in caps:
                node = caps["qualified"][0]
                parent = node.parent
                if parent is None or parent.type != "qualified_identifier":
                    self._scope_hazards(node, _line(node))
                    inner = node.child_by_field_name("name")
                    if (
                        inner is not None
                        and parent is not None
                        and parent.type == "call_expression"
                        and text(inner) in a.barrier_qualified
                    ):
                        facts.barriers += 1
            elif "shared" in caps:
                facts.shared += _shared_arrays(text, caps["shared"][0])
            elif "ladder" in caps:
                if hz.normalise_literal(text(caps["ladder.start"][0])) == "16":
                    ladders.append((text(caps["ladder.var"][0]), caps["ladder"][0]))
            elif "binary" in caps:
                binaries.append((caps["binary"][0], caps["binary.literal"][0]))
            elif "launch" in caps:
                node = caps["launch"][0]
                fn = node.child_by_field_name("function")
                callee = text(
                    fn.child_by_field_name("name")
                    if fn is not None and fn.type == "template_function"
                    else fn
                )
                where = f"in {'kernel' if f.kind == 'kernel' else '__device__ function'} {f.name}"
                self.hazards.append(hz.make("dynamic-parallelism", _line(node), name=callee, where=where))
            elif "asm" in caps:
                self._asm(caps["asm"][0])
            elif "type" in caps:
                node = caps["type"][0]
                type_name = text(node)
                if type_name in type_rules:
                    self.hazards += hz.for_type(type_name, _line(node))

        # calls: barriers, atomics, warp intrinsics, writes, name hazards
        device_names = self.device_names
        call_rules = tables.calls
        for name, call, arglist in calls:
            if name in device_names:
                for i, arg in enumerate(_args(arglist)):
                    root, _ = _root(text, arg, aliases, pointers)
                    if root is not None:
                        facts.edges.append((name, i, root))
                continue
            if name in a.barriers:
                facts.barriers += 1
            if name in a.atomics:
                facts.atomics.add(name)
            if name in a.warp_intrinsics:
                facts.warp.add(name)
            if name in a.writes_first_arg:
                args = _args(arglist)
                if args:
                    root, _ = _root(text, args[0], aliases, pointers, through=True)
                    if root is not None:
                        written.add(root)
            if name in call_rules:
                self.hazards += hz.for_call(name, _line(call), self.dialect)
            if name in tables.mask_first or name in tables.shuffle_width_arg:
                self._warp_call_hazards(name, _args(arglist), _line(call), masks, ladders, call)

        for node, literal in binaries:
            self._binary_hazard(node, literal, derived)
        return facts

    def _warp_call_hazards(
        self,
        name: str,
        args: list[Node],
        line: int,
        masks: set[str],
        ladders: list[tuple[str, Node]],
        call: Node,
    ) -> None:
        text = self.text
        tables = hz.tables()
        if name in tables.mask_first and args:
            mask = _squash(text(args[0]))
            if self.is_full_mask(mask) or mask in masks:
                self.hazards.append(hz.make("full-warp-mask", line, name=name, mask=mask))
        width_at = tables.shuffle_width_arg.get(name)
        if width_at is not None and len(args) > width_at:
            width = _squash(text(args[width_at]))
            if hz.normalise_literal(width) == "32":
                self.hazards.append(
                    hz.make("warp-size-assumption", line, detail=f"{name} is given width {width}")
                )
        offset_at = tables.shuffle_offset_arg.get(name)
        if offset_at is not None and len(args) > offset_at:
            offset = _squash(text(args[offset_at]))
            if hz.normalise_literal(offset) == "16":
                self.hazards.append(
                    hz.make(
                        "warp-size-assumption",
                        line,
                        detail=f"{name} starts a shuffle reduction at offset {offset} (half of 32 lanes)",
                    )
                )
            else:
                for var, loop in ladders:
                    if var == offset and loop.start_byte <= call.start_byte < loop.end_byte:
                        self.hazards.append(
                            hz.make(
                                "warp-size-assumption",
                                line,
                                detail=f"{name} runs a shuffle loop whose offset {var} starts at 16 "
                                "(half of 32 lanes)",
                            )
                        )
                        break

    def _binary_hazard(self, node: Node, literal: Node, derived: set[str]) -> None:
        text = self.text
        op_node = node.child_by_field_name("operator")
        left = node.child_by_field_name("left")
        if op_node is None or left is None:
            return
        op, lit = op_node.type, text(literal)
        arithmetic = hz.warp_arithmetic(op, lit)
        comparison = not arithmetic and hz.warp_comparison(op, lit)
        if not (arithmetic or comparison):
            return
        names = _identifiers(text, left)
        if comparison and self.hip and _is_wave_size_expr(text, left, set()):
            return  # `warpSize == 32` chooses by the width: warp-size-branch (HipWave), not a lane index
        tables = hz.tables()
        if op == "*":
            related = any(hz.is_warp_name(n) for n in names)
        else:
            related = any(n in tables.thread_builtins or n in derived or hz.is_thread_name(n) for n in names)
        if related:
            expr = _squash(text(node))
            kind = "compares a lane/thread index with" if comparison else "does lane/warp arithmetic with"
            self.hazards.append(
                hz.make("warp-size-assumption", _line(node), detail=f"`{expr}` {kind} the literal {lit}")
            )

    def _asm(self, node: Node) -> None:
        text = self.text
        code = node.child_by_field_name("assembly_code")
        snippet = _squash(text(code) if code is not None else text(node))
        if len(snippet) > 40:
            snippet = snippet[:37] + "..."
        self.hazards.append(hz.make("inline-asm", _line(node), snippet=snippet))

    def _propagate_writes(self, facts: dict[int, _DeviceFacts]) -> None:
        by_name: dict[str, list[_DeviceFacts]] = {}
        for fact in facts.values():
            by_name.setdefault(fact.info.name, []).append(fact)

        def written_indexes(fact: _DeviceFacts) -> set[int]:
            roots = fact.written_roots
            return {i for i, p in enumerate(fact.info.params) if p.written_in(roots)}

        changed = True
        rounds = 0
        while changed and rounds < 16:
            changed = False
            rounds += 1
            for fact in facts.values():
                for callee, index, root in fact.edges:
                    if root in fact.written_roots:
                        continue
                    targets = by_name.get(callee)
                    if targets and any(index in written_indexes(t) for t in targets):
                        fact.written_roots.add(root)
                        changed = True

    def _kernel(self, f: _Function, fact: _DeviceFacts) -> Kernel:
        text = self.text
        roots = fact.written_roots
        params = []
        for p in f.params:
            params.append(_param(text, self.source, p, p.written_in(roots)))
        template_params: tuple[str, ...] = ()
        if f.outer is not f.node:
            plist = f.outer.child_by_field_name("parameters")
            if plist is not None:
                template_params = tuple(_squash(text(c)) for c in plist.named_children if c.type != "comment")
        return Kernel(
            name=f.name,
            line=_line(f.node),
            end_line=f.node.end_point[0] + 1,
            template_params=template_params,
            params=tuple(params),
            shared=tuple(fact.shared),
            barriers=fact.barriers,
            atomics=tuple(sorted(fact.atomics)),
            warp_intrinsics=tuple(sorted(fact.warp)),
            launch_bounds=fact.launch_bounds,
            start_byte=f.start,
            end_byte=f.outer.end_byte,
            namespace=self._namespace_of(f.outer),
        )

    def _namespace_of(self, node: Node) -> str:
        """The enclosing namespaces of a declaration, outermost first ("" at file scope): named
        ones as written (inline ones left out), and those a scope macro opened by the names the
        macro gives them (``CUB_NAMESPACE_BEGIN``: ``cub``)."""
        names: list[str] = []
        parent = node.parent
        while parent is not None:
            if parent.type == "namespace_definition":
                name = parent.child_by_field_name("name")
                if name is None:
                    names[:0] = self.masked.namespaces.get(parent.start_byte, ())
                elif parent.child(0) is not None and parent.child(0).type != "inline":
                    names[:0] = _squash(self.text(name)).replace(" ", "").split("::")
            parent = parent.parent
        return "::".join(names)

    # ------------------------------------------------------------------ host functions

    def _host(self, f: _Function) -> None:
        text = self.text
        a = api()
        arrays: dict[str, list[str]] = {}  # `void* args[] = {&a, &b}` -> ["a", "b"]
        pending_api_launches: list[tuple[str, Node, Node]] = []
        fields: list[Node] = []
        owners = hz.tables().field_owners
        owned: set[str] = set()  # variables of an owner type (cudaDeviceProp prop;)
        host_api = a.host_calls
        call_rules = hz.tables().calls
        for _, caps in QueryCursor(query("cuda-host")).matches(f.node):
            if "call" in caps:
                call = caps["call"][0]
                if call.child_count != 2 and any(c.type == "kernel_call_syntax" for c in call.children):
                    continue
                name = text(caps["call.name"][0])
                if name in call_rules:
                    self.hazards += hz.for_call(name, _line(call), self.dialect)
                if name in self.launch_macros:
                    self._macro_launch(f, name, call, caps["call.args"][0])
                elif name in a.launch_apis:
                    pending_api_launches.append((name, call, caps["call.args"][0]))
                elif name in host_api:
                    self._host_call(f, name, call, caps["call.args"][0])
            elif "launch" in caps:
                self._chevron_launch(f, caps)
            elif "new" in caps:
                self._new(f, caps)
            elif "decl" in caps:
                self._host_decl(f, caps["decl"][0])
            elif "ctor" in caps:
                node = caps["ctor"][0]
                self.assignments.append(
                    Assignment(
                        var=text(caps["ctor.var"][0]),
                        type=text(caps["ctor.type"][0]),
                        value=text(caps["ctor.type"][0]) + _squash(text(caps["ctor.args"][0])),
                        line=_line(node),
                        function=f.name,
                    )
                )
            elif "array" in caps:
                name_node = _declared_name(caps["array"][0])
                if name_node is not None:
                    arrays[text(name_node)] = [
                        _address_target(text, c) for c in _args(caps["array.values"][0])
                    ]
            elif "assign" in caps:
                node = caps["assign"][0]
                op = node.child_by_field_name("operator")
                if op is not None and op.type == "=":
                    value = caps["assign.value"][0]
                    if not _is_allocation_value(text, value):
                        self.assignments.append(
                            Assignment(
                                var=text(caps["assign.var"][0]),
                                type=None,
                                value=_squash(text(value)),
                                line=_line(node),
                                function=f.name,
                            )
                        )
            elif "field" in caps:
                fields.append(caps["field"][0])
            elif "qualified" in caps:
                node = caps["qualified"][0]
                if node.parent is None or node.parent.type != "qualified_identifier":
                    self._scope_hazards(node, _line(node))
            elif "type" in caps:
                node = caps["type"][0]
                type_name = text(node)
                self.hazards += hz.for_type(type_name, _line(node))
                if type_name in owners and node.parent is not None:
                    for d in node.parent.children_by_field_name("declarator"):
                        ident = _declared_name(d)
                        if ident is not None:
                            owned.add(text(ident))
            elif "asm" in caps:
                self._asm(caps["asm"][0])
        for node in fields:
            # removed struct members, only on variables declared with the struct's type
            obj = node.parent.child_by_field_name("argument") if node.parent is not None else None
            if obj is not None and text(obj) in owned:
                self.hazards += hz.for_field(text(node), _line(node))
        for name, call, arglist in pending_api_launches:
            self._api_launch(f, name, call, arglist, arrays)

    def _chevron_launch(self, f: _Function, caps: dict[str, list[Node]]) -> None:
        text = self.text
        node = caps["launch"][0]
        kernel_node = caps["launch.kernel"][0]
        template_args: tuple[str, ...] = ()
        if kernel_node.type == "template_function":
            targs = kernel_node.child_by_field_name("arguments")
            template_args = tuple(_squash(text(c)) for c in _args(targs))
            kernel_node = kernel_node.child_by_field_name("name") or kernel_node
        config = [c for c in caps["launch.config"][0].named_children if c.type != "comment"]
        cfg = [_squash(text(c)) for c in config]
        self.launches.append(
            LaunchSite(
                kernel=_squash(text(kernel_node)),
                line=_line(node),
                grid=cfg[0] if cfg else "",
                block=cfg[1] if len(cfg) > 1 else "",
                shared_bytes=cfg[2] if len(cfg) > 2 else None,
                stream=cfg[3] if len(cfg) > 3 else None,
                args=tuple(_squash(text(c)) for c in _args(caps["launch.args"][0])),
                template_args=template_args,
                via="chevrons",
                function=f.name,
            )
        )

    def _macro_launch(self, f: _Function, name: str, call: Node, arglist: Node) -> None:
        """A launch written in a function-like macro's body (``LAUNCH(scale, x, n)``): the body with the
        call's arguments put in is scanned as a host function; its launches count at the call's line."""
        params, body = self.launch_macros[name]
        args = [self.text(c) for c in _args(arglist)]
        expanded = _substitute(body, params, args)
        inner = scan_cuda(
            self.path, f"void __porter_macro_{name}() {{ {expanded}; }}\n".encode(), MacroTable()
        )
        for ls in inner.launches:
            self.launches.append(
                dataclasses.replace(ls, line=_line(call), via=f"{ls.via} (macro {name})", function=f.name)
            )

    def _resolve_pointers(self, kernel_names: set[str]) -> None:
        """A launch through a function-pointer variable (``fp<<<g, b>>>(...)``) is a launch of the kernel
        the variable was set to, when the file sets it to exactly one kernel."""
        for a in self.assignments:  # fp = kernel; after its declaration
            if a.type is None:
                self.pointers.setdefault(a.var, set()).add(_function_set(a.value))
        for i, ls in enumerate(self.launches):
            if ls.kernel in kernel_names or ls.kernel not in self.pointers:
                continue
            targets = self.pointers[ls.kernel] & kernel_names
            if len(targets) == 1 and len(self.pointers[ls.kernel]) == 1:
                (kernel,) = targets
                self.launches[i] = dataclasses.replace(ls, kernel=kernel, via=f"{ls.via} through {ls.kernel}")

    def _api_launch(
        self, f: _Function, name: str, call: Node, arglist: Node, arrays: dict[str, list[str]]
    ) -> None:
        text = self.text
        spec = api().launch_apis[name]
        args = _args(arglist)

        def at(key: str) -> str | None:
            i = spec.get(key)
            return _squash(text(args[i])) if i is not None and i < len(args) else None

        kernel_node = _strip_expr(text, args[spec["kernel"]]) if len(args) > spec["kernel"] else None
        template_args: tuple[str, ...] = ()
        if kernel_node is not None and kernel_node.type == "pointer_expression":
            kernel_node = kernel_node.child_by_field_name("argument") or kernel_node
        if kernel_node is not None and kernel_node.type == "template_function":
            template_args = tuple(
                _squash(text(c)) for c in _args(kernel_node.child_by_field_name("arguments"))
            )
            kernel_node = kernel_node.child_by_field_name("name") or kernel_node
        if "first_arg" in spec:
            kargs = tuple(_squash(text(c)) for c in args[spec["first_arg"] :])
        else:
            array = at("args")
            if array is None:
                kargs = ()
            elif array in arrays:
                kargs = tuple(arrays[array])
            else:
                kargs = (array,)
        self.launches.append(
            LaunchSite(
                kernel=_squash(text(kernel_node)) if kernel_node is not None else "",
                line=_line(call),
                grid=at("grid") or "",
                block=at("block") or "",
                shared_bytes=at("shared"),
                stream=at("stream"),
                args=kargs,
                template_args=template_args,
                via=name,
                function=f.name,
            )
        )

    def _host_call(self, f: _Function, name: str, call: Node, arglist: Node) -> None:
        text = self.text
        a = api()
        args = _args(arglist)
        line = _line(call)
        texts = [_squash(text(x)) for x in args]
        if name in a.alloc_out_param:
            at = a.alloc_out_param[name]["bytes"]
            if len(args) > at:
                self.allocations.append(
                    Allocation(
                        var=_address_target(text, args[0]),
                        bytes=texts[at],
                        line=line,
                        api=name,
                        elem_type=_sizeof_type(texts[at]),
                        function=f.name,
                    )
                )
        elif name in a.alloc_returning:
            idx = a.alloc_returning[name]["bytes"]
            if all(i < len(args) for i in idx):
                nbytes = texts[idx[0]] if len(idx) == 1 else " * ".join(_paren(texts[i]) for i in idx)
                var, cast_type = _assigned_to(text, call)
                self.allocations.append(
                    Allocation(
                        var=var or "",
                        bytes=nbytes,
                        line=line,
                        api=name,
                        elem_type=cast_type or _sizeof_type(nbytes),
                        function=f.name,
                    )
                )
        elif name in a.copies:
            spec = a.copies[name]
            if len(args) > spec["bytes"]:
                kind = texts[spec["kind"]] if 0 <= spec["kind"] < len(args) else ""
                self.copies.append(
                    Copy(
                        dst=texts[spec["dst"]],
                        src=texts[spec["src"]],
                        bytes=texts[spec["bytes"]],
                        kind=kind,
                        line=line,
                        api=name,
                    )
                )
        elif name in a.copies_2d:
            spec = a.copies_2d[name]
            if len(args) > spec["height"]:
                kind = texts[spec["kind"]] if 0 <= spec["kind"] < len(args) else ""
                self.copies.append(
                    Copy(
                        dst=texts[spec["dst"]],
                        src=texts[spec["src"]],
                        bytes=f"{_paren(texts[spec['width']])} * {_paren(texts[spec['height']])}",
                        kind=kind,
                        line=line,
                        api=name,
                    )
                )

    def _new(self, f: _Function, caps: dict[str, list[Node]]) -> None:
        text = self.text
        node = caps["new"][0]
        elem = _squash(text(caps["new.type"][0]))
        length = _squash(text(caps["new.length"][0]))
        var, _ = _assigned_to(text, node)
        self.allocations.append(
            Allocation(
                var=var or "",
                bytes=f"{_paren(length)} * sizeof({elem})",
                line=_line(node),
                api="new[]",
                elem_type=elem,
                function=f.name,
            )
        )

    def _host_decl(self, f: _Function, node: Node) -> None:
        text = self.text
        parent = node.parent
        if parent is not None and parent.type == "for_statement":
            return
        type_text = None
        for d in node.children_by_field_name("declarator"):
            if d.type != "init_declarator":
                continue
            ident = d.child_by_field_name("declarator")
            value = d.child_by_field_name("value")
            if value is None or ident is None:
                continue
            if ident.type != "identifier" and "(" in text(ident):  # void (*fp)(float*, int) = kernel;
                named = _declared_name(ident)
                if named is not None:
                    self.pointers.setdefault(text(named), set()).add(_function_set(text(value)))
                continue
            if ident.type == "identifier":
                if value.type == "lambda_expression" or _is_allocation_value(text, value):
                    continue
                if type_text is None:
                    type_text = _decl_type(text, node)
                self.assignments.append(
                    Assignment(
                        var=text(ident),
                        type=type_text,
                        value=_value_text(text, node, value),
                        line=_line(d),
                        function=f.name,
                    )
                )


# --------------------------------------------------------------------------- helpers


_LAUNCH_MACRO = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)((?:[^\n\\]|\\\n|\\.)*)", re.MULTILINE
)


def _launch_macros(text: str) -> dict[str, tuple[list[str], str]]:
    """Function-like macros of the file whose body launches a kernel: name -> (parameters, body)."""
    out: dict[str, tuple[list[str], str]] = {}
    for m in _LAUNCH_MACRO.finditer(text):
        body = m.group(3).replace("\\\n", " ")
        if re.search(r"<\s*<\s*<", body):
            out[m.group(1)] = ([p.strip() for p in m.group(2).split(",") if p.strip()], body.strip())
    return out


def _substitute(body: str, params: list[str], args: list[str]) -> str:
    """A macro body with its parameters replaced by the call's arguments (``...`` by the rest, as
    ``__VA_ARGS__``); stringizing and pasting are left as written."""
    values: dict[str, str] = {}
    for k, name in enumerate(params):
        if name == "...":
            values["__VA_ARGS__"] = ", ".join(args[k:])
            break
        values[name] = args[k] if k < len(args) else ""
    if not values:
        return body
    pattern = re.compile(r"\b(" + "|".join(re.escape(v) for v in values) + r")\b")
    return pattern.sub(lambda m: values[m.group(1)], body)


def _function_set(value: str) -> str:
    """The function a pointer is set to: ``&kernel``, ``(kernel)`` and ``kernel`` are ``kernel``."""
    return value.strip().lstrip("&").strip().strip("()").strip()


def _identifiers(text: _TextFn, node: Node) -> list[str]:
    """Identifier texts in a (small) expression, including `threadIdx` of `threadIdx.x`."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.append(text(n))
        elif n.type in ("field_identifier", "number_literal", "string_literal"):
            continue
        else:
            stack.extend(n.named_children)
    return out


def _decl_type(text: _TextFn, decl: Node) -> str:
    """`const unsigned int n = 4, m = 5;` -> `const unsigned int`."""
    first = decl.child_by_field_name("declarator")
    raw = decl.text or b""
    if first is None:
        return _squash(raw.decode("utf-8", "surrogateescape"))
    return _squash(raw[: first.start_byte - decl.start_byte].decode("utf-8", "surrogateescape"))


def _value_text(text: _TextFn, decl: Node, value: Node) -> str:
    if value.type in ("argument_list", "initializer_list"):
        # `dim3 block(16, 16);` -> `dim3(16, 16)`
        type_node = decl.child_by_field_name("type")
        return _squash(text(type_node)) + _squash(text(value))
    return _squash(text(value))


def _is_allocation_value(text: _TextFn, value: Node) -> bool:
    node = _strip_expr(text, value)
    if node.type == "new_expression":
        return True
    if node.type == "call_expression":
        fn = node.child_by_field_name("function")
        return fn is not None and text(fn) in api().alloc_returning
    return False


def _assigned_to(text: _TextFn, node: Node) -> tuple[str | None, str | None]:
    """The variable a (cast) allocation expression is stored in, and the cast's pointee type."""
    cast_type = None
    cur = node
    for _ in range(8):
        parent = cur.parent
        if parent is None:
            return None, cast_type
        t = parent.type
        if t == "cast_expression":
            type_node = parent.child_by_field_name("type")
            cast_type = _pointee(text(type_node))
        elif t == "argument_list" and parent.parent is not None and parent.parent.type == "call_expression":
            fn = parent.parent.child_by_field_name("function")
            if fn is None or fn.type != "template_function":
                return None, cast_type
            name = fn.child_by_field_name("name")
            if text(name) not in _CAST_FUNCTIONS:
                return None, cast_type
            targs = _args(fn.child_by_field_name("arguments"))
            if targs:
                cast_type = _pointee(text(targs[0]))
            parent = parent.parent
        elif t == "parenthesized_expression":
            pass
        elif t == "init_declarator":
            ident = _declared_name(parent.child_by_field_name("declarator"))
            return (text(ident) if ident is not None else None), cast_type
        elif t == "assignment_expression":
            return _squash(text(parent.child_by_field_name("left"))), cast_type
        else:
            return None, cast_type
        cur = parent
    return None, cast_type


def _pointee(type_text: str) -> str | None:
    t = _squash(type_text)
    if t.endswith("*"):
        return t[:-1].strip() or None
    return None


def _sizeof_type(expr: str) -> str | None:
    found = {_squash(m) for m in _SIZEOF.findall(expr)}
    return found.pop() if len(found) == 1 else None


def _parse_warnings(root: Node) -> list[ParseWarning]:
    """ERROR and MISSING nodes, visiting only subtrees that contain errors."""
    out: list[ParseWarning] = []
    stack = [root]
    while stack and len(out) < MAX_WARNINGS:
        node = stack.pop()
        if node.is_missing:
            out.append(
                ParseWarning(
                    line=node.start_point[0] + 1,
                    column=node.start_point[1] + 1,
                    message=f"syntax error: missing `{node.type}`",
                )
            )
            continue
        if node.type == "ERROR":
            snippet = _squash(_text(node))
            if len(snippet) > 50:
                snippet = snippet[:47] + "..."
            out.append(
                ParseWarning(
                    line=node.start_point[0] + 1,
                    column=node.start_point[1] + 1,
                    message=f"syntax error: cannot parse `{snippet}`; the rest of the file was still scanned",
                )
            )
            continue
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
    out.sort(key=lambda w: (w.line, w.column))
    return out


def scan_cuda(path: str, source: bytes, macros: MacroTable | None = None, dialect: str = "cuda") -> FileScan:
    """Scan one CUDA (or CUDA-bearing C++) source; never raises on bad syntax (warnings instead).

    ``macros``: the macro table (qualifier, scope and blank macros; :mod:`porter.scan.macros`); None
    takes those the source defines itself (no file is read: ``path`` may name no file).
    ``dialect``: "cuda", or "hip" for HIP code: the same facts, HIP's own mask rules (64-bit masks,
    mask-free warp intrinsics) and the wave-size hazards of 64-lane AMD wavefronts
    (:class:`_HipWave`); the scan's ``language`` is the dialect.
    """
    if dialect not in hz.DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}")
    if macros is None:
        from porter.scan.macros import definitions, resolve

        macros = resolve(definitions(source))
    return _Scanner(path, source, macros, dialect).scan()


# --------------------------------------------------------------------------- HIP: wave-size hazards

_MASK_OPS = frozenset({"&", "|", "^", "<<"})  # keep a lane mask's width (`>> 32` takes a half: fits)
_ASSIGN_OPS = frozenset({"=", "|=", "&=", "^="})
_CASTS = frozenset({"static_cast", "reinterpret_cast"})


def _bare(node: Node) -> Node:
    """The expression inside any parentheses."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        inner = node.named_children[0]
        if inner is None:
            break
        node = inner
    return node


def _is_wave_size_expr(text: _TextFn, node: Node | None, sizes: set[str]) -> bool:
    """``warpSize``, ``prop.warpSize``, ``kWaveSize``, ``attr(hipDeviceAttributeWarpSize)`` or a
    variable in ``sizes`` (one that was set to the warp size): the warp size itself."""
    if node is None:
        return False
    node = _bare(node)
    if node.type == "cast_expression":
        return _is_wave_size_expr(text, node.child_by_field_name("value"), sizes)
    if node.type == "identifier":
        name = text(node)
        return name in sizes or hz.is_wave_size_name(name)
    if node.type == "field_expression":
        return hz.is_wave_size_name(text(node.child_by_field_name("field")))
    if node.type == "qualified_identifier":
        return hz.is_wave_size_name(text(node).rsplit("::", 1)[-1])
    if node.type == "call_expression":
        fn = node.child_by_field_name("function")
        named = fn is not None and fn.type in ("identifier", "field_expression", "qualified_identifier")
        if named and _is_wave_size_expr(text, fn, sizes):
            return True  # getWarpSize(), dev.warpSize()
        attributes = hz.tables().hip.warp_size_attributes
        return any(text(a) in attributes for a in _args(node.child_by_field_name("arguments")))
    return False


def _warp_size_redefined(what: str, value: str, line: int) -> Hazard:
    """HIP code that gives ``warpSize`` a value of its own: 32 is the 32-lane assumption itself."""
    if hz.normalise_literal(value) == "32":
        return hz.make(
            "warp-size-assumption",
            line,
            detail=f"{what} replaces HIP's built-in warpSize (the wavefront size of the device) with 32",
        )
    return hz.make("warp-size-redefined", line, detail=what, value=value)


class _HipWave:
    """The wave-size hazards of one function of HIP code, read in source order: lane masks kept in
    32-bit variables or counted with 32-bit bit functions (HIP's ballots are 64-bit), and code
    paths chosen by comparing the warp size with 32 or 64."""

    def __init__(self, text: _TextFn, f: _Function):
        self.text = text
        self.f = f
        self.t = hz.tables().hip
        self.narrow: set[str] = set()  # variables of a 32-bit type
        self.masks: dict[str, str] = {}  # variable -> the call its lane mask came from
        self.sizes: set[str] = set()  # variables holding the warp size
        self.out: list[Hazard] = []
        where = {"host": "host code", "kernel": "kernel"}.get(f.kind, "device function")
        self.where = f"{where} in {f.name}"

    def hazards(self) -> list[Hazard]:
        ret = self.f.node.child_by_field_name("type")
        returns_narrow = ret is not None and hz.is_narrow_mask_type(self.text(ret))
        stack = [self.f.outer]
        while stack:
            node = stack.pop()
            kind = node.type
            if kind in ("declaration", "parameter_declaration"):
                self._declaration(node)
            elif kind == "assignment_expression":
                self._assignment(node)
            elif kind == "call_expression":
                self._call(node)
            elif kind == "cast_expression":
                self._cast(node, node.child_by_field_name("type"), node.child_by_field_name("value"))
            elif kind == "binary_expression":
                self._comparison(node)
            elif kind == "switch_statement":
                self._switch(node)
            elif kind == "return_statement" and returns_narrow and node.named_child_count:
                value = node.named_children[0]
                source = self._mask_source(value) if value is not None else None
                if value is not None and source is not None:
                    self._narrow(
                        node,
                        f"`{_squash(self.text(node))}` returns the lane mask as {_squash(self.text(ret))}",
                        source,
                        "return uint64_t / unsigned long long",
                    )
            elif kind == "lambda_expression":
                continue  # its own scope; a lambda in HIP host code is rarely device code
            stack.extend(reversed(node.children))
        return self.out

    # -- lane masks

    def _mask_source(self, node: Node) -> str | None:
        """The HIP call whose 64-bit lane mask ``node`` carries, whole (None when it carries none)."""
        node = _bare(node)
        text = self.text
        if node.type == "call_expression":
            fn = node.child_by_field_name("function")
            name = text(
                fn.child_by_field_name("name") if fn is not None and fn.type == "template_function" else fn
            )
            if name in self.t.wide_mask_functions:
                return f"{name}()"
            if name in _CASTS and fn is not None and fn.type == "template_function":
                args = _args(node.child_by_field_name("arguments"))
                target = fn.child_by_field_name("arguments")
                if args and not (target is not None and hz.is_narrow_mask_type(text(target).strip("<> "))):
                    return self._mask_source(args[0])
            return None
        if node.type == "identifier":
            return self.masks.get(text(node))
        if node.type == "cast_expression":
            target = node.child_by_field_name("type")
            value = node.child_by_field_name("value")
            if value is None or (target is not None and hz.is_narrow_mask_type(text(target))):
                return None  # the cast itself is reported
            return self._mask_source(value)
        if node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            if op is not None and op.type in _MASK_OPS:
                for side in ("left", "right"):
                    part = node.child_by_field_name(side)
                    found = self._mask_source(part) if part is not None else None
                    if found is not None:
                        return found
            return None
        if node.type == "unary_expression":
            op = node.child_by_field_name("operator")
            arg = node.child_by_field_name("argument")
            if op is not None and op.type == "~" and arg is not None:
                return self._mask_source(arg)
        return None

    def _narrow(self, node: Node, detail: str, source: str, fix: str) -> None:
        self.out.append(hz.make("narrow-ballot", _line(node), detail=detail, source=source, fix=fix))

    def _declaration(self, node: Node) -> None:
        text = self.text
        type_node = node.child_by_field_name("type")
        narrow = type_node is not None and hz.is_narrow_mask_type(text(type_node))
        for d in node.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            ident = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            if ident is not None and ident.type == "reference_declarator" and ident.named_child_count:
                ident = ident.named_children[0]
            if ident is None or ident.type != "identifier":
                continue
            name = text(ident)
            if narrow:
                self.narrow.add(name)
            if value is None:
                continue
            if value.type == "initializer_list" and value.named_child_count == 1:
                value = value.named_children[0] or value  # `unsigned m{__ballot(p)}`
            if _is_wave_size_expr(text, value, self.sizes):
                self.sizes.add(name)
            source = self._mask_source(value)
            if source is None:
                continue
            self.masks[name] = source
            if narrow and type_node is not None:
                self._narrow(
                    d,
                    f"`{_squash(text(type_node))} {_squash(text(d))}` keeps a lane mask in the 32-bit "
                    f"{_squash(text(type_node))}",
                    source,
                    "declare it uint64_t / unsigned long long (or auto)",
                )

    def _assignment(self, node: Node) -> None:
        text = self.text
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        op = node.child_by_field_name("operator")
        if left is None or right is None or op is None or op.type not in _ASSIGN_OPS:
            return
        if left.type != "identifier":
            return
        name = text(left)
        if op.type == "=" and _is_wave_size_expr(text, right, self.sizes):
            self.sizes.add(name)
        source = self._mask_source(right)
        if source is None:
            return
        self.masks[name] = source
        if name in self.narrow:
            self._narrow(
                node,
                f"`{_squash(text(node))}` keeps a lane mask in {name}, a 32-bit variable",
                source,
                "declare it uint64_t / unsigned long long (or auto)",
            )

    def _call(self, node: Node) -> None:
        text = self.text
        fn = node.child_by_field_name("function")
        if fn is None:
            return
        name = text(fn.child_by_field_name("name") if fn.type == "template_function" else fn)
        args = _args(node.child_by_field_name("arguments"))
        wide = self.t.bit_functions.get(name)
        if wide is not None and args:
            source = self._mask_source(args[0])
            if source is not None:
                self._narrow(
                    node,
                    f"`{_squash(text(node))}` applies the 32-bit {name} to a lane mask",
                    source,
                    f"use {wide} (the 64-bit {name})",
                )
        elif name in _CASTS and fn.type == "template_function" and args:
            target = fn.child_by_field_name("arguments")
            if target is not None:
                self._cast(node, target, args[0])
        elif len(args) >= 2 and text(args[1]) in self.t.warp_size_attributes:
            out = _bare(args[0])
            if out.type == "pointer_expression" and out.named_child_count:
                target = out.named_children[0]
                if target is not None and target.type == "identifier":
                    self.sizes.add(text(target))  # hipDeviceGetAttribute(&ws, hipDeviceAttributeWarpSize, d)

    def _cast(self, node: Node, target: Node | None, value: Node | None) -> None:
        if target is None or value is None:
            return
        kind = self.text(target).strip("<> ")
        if not hz.is_narrow_mask_type(kind):
            return
        source = self._mask_source(value)
        if source is not None:
            self._narrow(
                node,
                f"`{_squash(self.text(node))}` casts a lane mask to the 32-bit {_squash(kind)}",
                source,
                "keep it uint64_t / unsigned long long",
            )

    # -- choices by warp size

    def _branch(self, node: Node, expr: str) -> None:
        self.out.append(hz.make("warp-size-branch", _line(node), where=self.where, expr=expr))

    def _width(self, node: Node | None) -> bool:
        return (
            node is not None
            and _bare(node).type == "number_literal"
            and hz.normalise_literal(self.text(_bare(node))) in self.t.branch_widths
        )

    def _comparison(self, node: Node) -> None:
        op = node.child_by_field_name("operator")
        if op is None or op.type not in hz.tables().comparisons:
            return
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if (self._width(right) and _is_wave_size_expr(self.text, left, self.sizes)) or (
            self._width(left) and _is_wave_size_expr(self.text, right, self.sizes)
        ):
            self._branch(node, _squash(self.text(node)))

    def _switch(self, node: Node) -> None:
        condition = node.child_by_field_name("condition")
        body = node.child_by_field_name("body")
        if condition is None or body is None:
            return
        value = condition.named_children[-1] if condition.named_child_count else None
        if not _is_wave_size_expr(self.text, value, self.sizes):
            return
        cases = [
            c.child_by_field_name("value")
            for c in body.named_children
            if c is not None and c.type == "case_statement"
        ]
        if any(self._width(v) for v in cases):
            self._branch(node, f"switch ({_squash(self.text(value))})")
