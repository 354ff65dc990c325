"""Deterministic CUDA -> OpenCL C translation of kernels, on the tree-sitter syntax tree.

:func:`translate_to_opencl` returns ONE self-contained OpenCL C 1.2 program holding every kernel
of a CUDA file (local headers inlined, host code removed) plus the launch mapping of each kernel
instantiation.  The mapping tables are data: ``backends/opencl/cuda2opencl.toml``.

Decisions worth knowing:

* index built-ins become ``(uint)get_local_id(0)`` and friends: CUDA's ``threadIdx.x`` is an
  ``unsigned int``, so the cast keeps CUDA's 32-bit unsigned arithmetic exactly;
* ``__syncthreads()`` becomes ``barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)``, or
  ``barrier(CLK_LOCAL_MEM_FENCE)`` when the kernel cannot write global memory (every pointer
  parameter points to const);
* kernel pointers are ``__global``; local pointers, casts and helper-function pointer parameters
  get the address space of what they point into.  A helper called with pointers into different
  address spaces is emitted once per combination (``f``, ``f__local`` ...);
* ``extern __shared__`` arrays become one trailing ``__local`` kernel argument sized from the
  launch (``extra_args`` ``{"kind": "local", "bytes": "shared_bytes"}``); ``__constant__``
  variables become trailing ``__constant`` arguments, threaded through the helpers that read them;
* a texture reference over linear memory (``texture<T, 1, cudaReadModeElementType> tex;`` read
  with ``tex1Dfetch``) becomes two trailing arguments of each kernel reading it, ``__global const
  T* tex`` and ``uint tex_size``, threaded through helpers like ``__constant__`` variables; a fetch
  is a plain load, zero outside the bound range (:mod:`.textures`);
* templated kernels are emitted once per template-argument tuple found at launch sites
  (``axpby<float>`` -> ``axpby_float``), the file's and those of each file it inlines (an
  ``#include "scan.cu"`` whose host code launches ``prescan<true, false>``);
* a shared-memory accessor template (the CUDA samples' ``SharedMemory<T>``: member functions
  that only return an ``extern __shared__`` array) is omitted, and its uses in a kernel
  (``SharedMemory<T>()``, ``smem.getPointer()``) become that same dynamic ``__local`` argument
  cast to the instance's element type (``((__local float*)__smem)``);
* a struct or union C++ names without its keyword gets ``typedef struct S S;`` after its first
  declaration, unless the file typedefs that name itself;
* C++ functional casts to a scalar type become C casts, in code and in macro bodies:
  ``float(x)`` -> ``((float)(x))``, also through a template parameter, a file-scope typedef of a
  scalar (``typedef float real;``) or an object-like macro whose body is one (``#define fp float``);
* ``[kernel_param_types]`` (``bool`` -> ``uchar``, ``size_t`` -> ``ulong``) also applies to what
  pointers into ``__global`` memory point to: the host's ``bool`` arrays arrive as ``uchar*``;
* three-component vectors keep CUDA's packed layout (12-byte ``float3``) in ``__global`` memory and in
  by-value kernel arguments: ``float3* v`` becomes ``__global float* v`` read with ``vload3``, written with
  ``vstore3``, members at ``3*i+k`` (:mod:`.packed`); what cannot keep it is refused with its line;
* warp shuffles and votes become sub-group functions guarded by ``#if defined(<extension>)``,
  so a device without them still builds the file's other kernels.  ``subgroups=False`` makes
  them (and their kernels) untranslatable;
* everything left untranslated is a :class:`~porter.model.Diagnostic` with file and line.
  A kernel with an ERROR diagnostic is replaced by a comment and marked untranslatable.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from porter.backends.opencl import branches as _branches
from porter.backends.opencl import conditionals as _conditionals
from porter.backends.opencl import packed as _packed
from porter.backends.opencl import textures as _textures
from porter.backends.opencl.launch import instance_entry, launch_geometry
from porter.backends.opencl.requirements import ptx_subgroups_source
from porter.backends.opencl.unit import Unit, build_unit
from porter.grammars import parse
from tree_sitter import Node

from porter.model import Diagnostic, FileScan, LaunchSite, Severity, TranslatedKernel, Translation
from porter.scan.instances import instance_name, template_instantiations
from porter.source import Scanned
from porter.translate.common import COMMENT, IDENT, NUMBER, PUNCT, Token, c_tokens
from porter.translate.edits import Edit, apply_edits
from porter.translate.versions import VersionRule, decided_tests, fallback_uses

__all__ = ["launch_geometry", "requirements", "tables", "translate_to_opencl"]

TARGET = "opencl"
WARP_32 = 32  # CUDA's warp size: what kernels assuming it require of a sub-group
REQD_32 = "reqd_sub_group_size_32"
BRANCH_BARRIERS = "branch_barriers"  # barriers in both branches of an if/else (backends/opencl/branches.py)
_SIMPLE = re.compile(r"^[A-Za-z_]\w*$|^[0-9][\w.]*$")
_MAKE_VECTOR = re.compile(r"^make_([a-z]+?)([1-4]|8|16)$")
_FLOAT_LITERAL = re.compile(r"^(?:[0-9]*\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)[lL]?$")
_LL_SUFFIX = re.compile(r"^(.*?)([uU]?)(ll|LL)([uU]?)$")
_POINTER_DECLS = frozenset({"pointer_declarator", "abstract_pointer_declarator"})
_SPACES = ("global", "local", "constant")
# type keywords tree-sitter reads as identifiers when called: `unsigned(n)`, `long(x)`
_FUNCTIONAL_KEYWORDS = frozenset({"unsigned", "signed", "long", "short"})


@cache
def tables() -> dict[str, Any]:
    """The CUDA -> OpenCL tables (``backends/opencl/cuda2opencl.toml``)."""
    text = resources.files("porter.backends").joinpath("opencl/cuda2opencl.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@cache
def version_rule() -> VersionRule | None:
    """``[version_tests]`` of the tables: the CUDA version tests every CUDA porter ports from decides alike."""
    return VersionRule.from_table(tables().get("version_tests", {}))


@cache
def requirements() -> dict[str, dict[str, Any]]:
    """What a kernel may need beyond OpenCL C 1.2: ``[requirements]`` of the OpenCL dialect
    (``backends/opencl/dialect.toml``): source guards, pragmas, attributes."""
    from porter.backends.dialect import load_facts

    return {k: dict(v) for k, v in load_facts("porter.backends.opencl").requirements.items()}


def fast_math_prelude(body: str) -> str:
    """The porter_fast_* macros `body` names (CUDA's fast-math intrinsics, cuda2opencl.toml [fast_math]): the
    native_ functions where the build defines dialect.toml's [facts.native_math] `define`, else the
    full-precision ones; "" when `body` names none."""
    from porter.backends.dialect import load_facts

    used = [
        (head, full, native)
        for head, (full, native) in tables()["fast_math"].items()
        if re.search(rf"\b{re.escape(head.split('(')[0])}\b", body)
    ]
    if not used:
        return ""
    define = load_facts("porter.backends.opencl").facts["native_math"]["define"]
    return "\n".join(
        [
            f"/* CUDA's fast-math intrinsics: OpenCL's native_ functions where the build defines {define} (porter's",
            " * builds do on GPUs whose native_ functions are the approximations CUDA's use), else full precision */",
            f"#if defined({define})",
            *(f"#define {head} {native}" for head, _, native in used),
            "#else",
            *(f"#define {head} {full}" for head, full, _ in used),
            "#endif",
        ]
    )


def _closure(names: set[str]) -> list[str]:
    """`names` and every requirement they need, in table order."""
    table = requirements()
    out: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name not in out:
            out.add(name)
            stack.extend(table[name].get("needs", []))
    return [n for n in table if n in out]


_CG_SCOPES = ("cg", "cooperative_groups")


def _cg_name(node: Node | None) -> str:
    """`cg::thread_block` -> "thread_block" (the name inside a cooperative-groups scope), else ""."""
    if node is None or node.type != "qualified_identifier":
        return ""
    scope = node.child_by_field_name("scope")
    name = node.child_by_field_name("name")
    if scope is None or name is None or _text(scope) not in _CG_SCOPES:
        return ""
    return _text(name)


def _cg_parts(node: Node | None) -> tuple[str, list[Node]]:
    """`cg::thread_block_tile<32>` / `cg::tiled_partition<N>` -> ("thread_block_tile", [the template
    arguments]); `cg::sync` -> ("sync", []); ("", []) outside a cooperative-groups scope."""
    if node is None or node.type != "qualified_identifier":
        return "", []
    scope = node.child_by_field_name("scope")
    name = node.child_by_field_name("name")
    if scope is None or name is None or _text(scope) not in _CG_SCOPES:
        return "", []
    if name.type in ("template_type", "template_function"):
        targs = name.child_by_field_name("arguments")
        inner = name.child_by_field_name("name")
        return _text(inner), [
            a for a in (targs.named_children if targs is not None else []) if a.type != "comment"
        ]
    return _text(name), []


def _under_cuda_arch(node: Node) -> bool:
    """Is `node` inside a preprocessor conditional that tests __CUDA_ARCH__?"""
    up = node.parent
    while up is not None:
        if up.type in ("preproc_if", "preproc_ifdef", "preproc_elif") and "__CUDA_ARCH__" in _text(
            up.child_by_field_name("condition") or up.child_by_field_name("name")
        ):
            return True
        up = up.parent
    return False


def _drop_items(lst: Node, items: Sequence[Node], empty: str = "") -> list[Edit]:
    """Edits removing `items` (children of a parameter or argument list) with their commas; `empty`:
    what the list holds when every item goes."""
    if not items:
        return []
    kids = [c for c in lst.named_children if c.type != "comment"]
    kept = [c for c in kids if c not in items]
    if not kept:
        return [Edit(kids[0].start_byte, kids[-1].end_byte, empty)]
    edits = []
    for item in items:
        i = kids.index(item)
        if any(c in kept for c in kids[i + 1 :]):
            edits.append(Edit(item.start_byte, kids[i + 1].start_byte, ""))
        else:
            edits.append(Edit(kids[i - 1].end_byte, item.end_byte, ""))
    return edits


def _this_thread_block(node: Node) -> bool:
    """Is `node` the call `cg::this_thread_block()` (or `cg::this_thread_block(scratch)`, whose
    block_tile_memory OpenCL does not need)?"""
    if node.type != "call_expression":
        return False
    fn = node.child_by_field_name("function")
    args = node.child_by_field_name("arguments")
    return fn is not None and _cg_name(fn) == "this_thread_block" and (args is None or len(_args(args)) <= 1)


@dataclass(frozen=True)
class _Group:
    """A cooperative-groups handle: the thread block (size 0) or a tile of `size` threads cut from
    `parent` (None: the block).  `uniform`: every work-item of the work-group reaches the code that
    holds it (a helper's handle bound at a call inside a condition is not)."""

    size: int = 0
    parent: _Group | None = None
    uniform: bool = True

    @property
    def block(self) -> bool:
        return self.size == 0

    @property
    def key(self) -> str:
        """How a helper variant's name tells its bindings apart."""
        if self.block:
            return "block"
        up = f"_of_{self.parent.key}" if self.parent is not None and not self.parent.block else ""
        return f"tile{self.size}{up}{'' if self.uniform else '_div'}"


_UNIFORM_BREAKERS = frozenset(
    {
        "if_statement",
        "for_statement",
        "for_range_loop",
        "while_statement",
        "do_statement",
        "switch_statement",
        "case_statement",
        "conditional_expression",
    }
)


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape") if node is not None else ""


def _squash(text: str) -> str:
    return " ".join(text.split())


def _paren(text: str) -> str:
    return text if _SIMPLE.match(text) else f"({text})"


def _args(arglist: Node | None) -> list[Node]:
    return [c for c in arglist.named_children if c.type != "comment"] if arglist is not None else []


def _canonical(type_text: str) -> str | None:
    words = [
        w for w in _squash(type_text).replace("*", " ").split() if w not in ("const", "volatile", "restrict")
    ]
    return tables()["scalar_types"].get(" ".join(words))


_INTEGER = ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong")
_RANK = ("int", "uint", "long", "ulong", "float", "double")  # after integer promotion
_HEX_OR_INT = re.compile(r"^(?:0[xX][0-9a-fA-F']+|[0-9][0-9']*)([uUlL]*)$")


def _canonical_scalar(type_text: str) -> str | None:
    """The canonical scalar of a (non-pointer) type spelling: `const unsigned int` -> `uint`."""
    if "*" in type_text:
        return None
    words = [w for w in _squash(type_text).split() if w not in ("const", "volatile", "static", "register")]
    text = " ".join(words)
    if text == "bool":
        return "uchar"
    return _canonical(text) or (text if text in _RANK or text in _INTEGER else None)


def _literal_type(text: str) -> str | None:
    """The type of a number literal (`16` int, `16u` uint, `1.5f` float, `2.0` double)."""
    text = text.strip()
    if _FLOAT_LITERAL.match(text):
        return "double"
    if text[:-1] and _FLOAT_LITERAL.match(text[:-1]) and text[-1] in "fF":
        return "float"
    m = _HEX_OR_INT.match(text)
    if m is None:
        return None
    suffix = m.group(1).lower()
    return ("u" if "u" in suffix else "") + ("long" if "l" in suffix else "int")


def _promote(ty: str | None) -> str | None:
    """C's integer promotion: the small integer types become int."""
    return "int" if ty in ("char", "uchar", "short", "ushort") else ty


def _usual(a: str | None, b: str | None) -> str | None:
    """C's usual arithmetic conversions on two canonical scalars (None: unknown)."""
    a, b = _promote(a), _promote(b)
    if a is None or b is None:
        return None
    return max(a, b, key=_RANK.index)


# --------------------------------------------------------------------------- file structure


@dataclass
class _Param:
    node: Node
    name: str
    pointer: bool
    reference: bool
    const_pointee: bool


@dataclass
class _Fn:
    node: Node  # function_definition
    outer: Node  # what the definition occupies at top level (template / extern "C" around it)
    name: str
    kernel: bool
    tparams: list[tuple[str, str]]  # ("type" | "value", name)
    params: list[_Param]
    body: Node | None
    tokens: set[str]
    line_row: int


@dataclass
class _Const:
    name: str
    elem: str  # OpenCL element type
    dims: list[str]
    node: Node


@dataclass
class _Var:
    space: str  # global | local | constant | private
    elem: str  # element (pointee) type for pointers and arrays, the type for scalars
    indirect: bool  # pointer or array
    rank: int | None = None  # subscripts from the variable to a scalar (None: 1 if indirect else 0)

    @property
    def subscripts(self) -> int:
        return self.rank if self.rank is not None else int(self.indirect)


@dataclass
class _Result:
    """One translated function instance (kernel instantiation or helper variant)."""

    text: str = ""
    errors: list[str] = field(default_factory=list)
    requires: set[str] = field(default_factory=set)  # [requirements] names of dialect.toml
    assumes_32: bool = False  # the CUDA semantics need 32 lanes (a 32-bit ballot, a width of 32)
    span: tuple[int, int] = (0, 0)  # rows of the function in the unit text
    pragmas: set[str] = field(default_factory=set)
    helpers: set[tuple[str, str]] = field(default_factory=set)
    # helper variants it calls, in call order (a dict: the translation must not depend on hash order)
    calls: dict[tuple[str, tuple[str | None, ...]], None] = field(default_factory=dict)
    extra: list[dict[str, Any]] = field(default_factory=list)
    fp64: bool = False
    warp_helpers: set[str] = field(default_factory=set)  # [warp_helpers] the shuffles call
    tile_reducers: set[tuple[str, str]] = field(
        default_factory=set
    )  # (operation, type) of multi-warp reduces
    tex_types: set[str] = field(default_factory=set)  # element types of the textures it fetches from
    packed_structs: set[str] = field(default_factory=set)  # scalars of by-value `float3` kernel arguments


def _param_info(p: Node) -> _Param:
    decl = p.child_by_field_name("declarator")
    pointer = reference = False
    node = decl
    ident = None
    while node is not None:
        if node.type in ("pointer_declarator", "array_declarator", "abstract_pointer_declarator"):
            pointer = True
        elif node.type in ("reference_declarator", "abstract_reference_declarator"):
            reference = True
        if node.type == "identifier":
            ident = node
            break
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in node.named_children if c.type not in ("type_qualifier",)), None)
        node = nxt
    const = any(c.type == "type_qualifier" and _text(c) == "const" for c in p.children)
    return _Param(p, _text(ident), pointer, reference, const)


def _function(fn: Node, outer: Node) -> _Fn | None:
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    if decl is None:
        return None
    tokens = {c.type for c in fn.children if not c.is_named}
    tokens |= {_text(c) for c in fn.children if c.type == "storage_class_specifier"}
    tparams: list[tuple[str, str]] = []
    if outer.type == "template_declaration":
        plist = outer.child_by_field_name("parameters")
        for p in plist.named_children if plist is not None else []:
            kind = (
                "type"
                if p.type in ("type_parameter_declaration", "optional_type_parameter_declaration")
                else "value"
            )
            names = [c for c in p.named_children if c.type in ("type_identifier", "identifier")]
            if names:
                tparams.append((kind, _text(names[-1])))
    plist = decl.child_by_field_name("parameters")
    params = [
        _param_info(p)
        for p in (plist.named_children if plist is not None else [])
        if p.type in ("parameter_declaration", "optional_parameter_declaration")
    ]
    return _Fn(
        node=fn,
        outer=outer,
        name=_squash(_text(decl.child_by_field_name("declarator"))),
        kernel="__global__" in tokens,
        tparams=tparams,
        params=params,
        body=fn.child_by_field_name("body"),
        tokens=tokens,
        line_row=fn.start_point[0],
    )


def _declared(node: Node | None) -> tuple[Node | None, list[Node]]:
    """The identifier a declarator declares and the declarator nodes passed on the way."""
    chain: list[Node] = []
    while node is not None and node.type not in ("identifier", "field_identifier"):
        chain.append(node)
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in node.named_children if c.type != "type_qualifier"), None)
        node = nxt
    return node, chain


def _typedef_names(node: Node) -> set[str]:
    """The names a typedef of a type that is no struct, class or union defines (those of plain
    declarators only: a pointer or array typedef gives none)."""
    found = set()
    for d in node.children_by_field_name("declarator"):
        if d.type != "type_identifier":
            return set()
        found.add(_text(d))
    return found


def _type_names(node: Node) -> tuple[set[str], Node | None]:
    """The type names a struct / class / union definition (or a typedef of one) defines, and the
    definition's body (None for a declaration or a typedef of another type)."""
    spec = node
    names: set[str] = set()
    if node.type == "type_definition":
        spec = node.child_by_field_name("type") or node
        for d in node.children_by_field_name("declarator"):
            if d.type == "type_identifier":
                names.add(_text(d))
            else:
                return set(), None  # a typedef of a pointer or array type: kept
    if spec.type not in ("struct_specifier", "class_specifier", "union_specifier"):
        return set(), None
    name = spec.child_by_field_name("name")
    if name is not None:
        names.add(_text(name))
    return names, spec.child_by_field_name("body")


@dataclass
class _Accessor:
    """A shared-memory accessor: `template <class T> struct SharedMemory` (and its specialisations)
    made of member functions that hand out an `extern __shared__` array cast to `T*` (a pointer
    conversion operator, a method like `getPointer()`).  Its uses in a kernel (`SharedMemory<T>()`,
    `smem.getPointer()`) become the kernel's dynamic `__local` argument cast to the instance's
    element type."""

    name: str
    # template argument (None: the primary template) -> (its extern __shared__ array, the members
    # returning it: method names, "operator" for the pointer conversion)
    # (None: a definition handing out no shared memory, like the primary's `error()` guard)
    defs: dict[str | None, tuple[str, frozenset[str]] | None] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)  # the template declarations

    def array(self, arg: str, member: str) -> str | None:
        """The extern __shared__ array `member` of the accessor of element type `arg` returns."""
        found = self.defs.get(arg) if arg in self.defs else self.defs.get(None)
        return found[0] if found is not None and member in found[1] else None

    def members(self) -> set[str]:
        return {m for d in self.defs.values() if d is not None for m in d[1]}


def _uncast(value: Node | None) -> Node | None:
    """`value` without the casts and parentheses around it (`(T*)x`, `reinterpret_cast<T*>(x)`)."""
    while value is not None:
        if value.type == "cast_expression":
            value = value.child_by_field_name("value")
        elif value.type == "parenthesized_expression":
            value = value.named_children[0] if value.named_child_count else None
        elif value.type == "call_expression":
            fn = value.child_by_field_name("function")
            args = _args(value.child_by_field_name("arguments"))
            name = (
                _text(fn.child_by_field_name("name"))
                if fn is not None and fn.type == "template_function"
                else ""
            )
            if name not in ("static_cast", "reinterpret_cast", "const_cast") or len(args) != 1:
                return value
            value = args[0]
        else:
            return value
    return value


def _returned_array(member: Node) -> str | None:
    """The `extern __shared__` array a member function declares and returns (through casts)."""
    arrays: set[str] = set()
    returned: set[str] = set()
    stack = [member.child_by_field_name("body")]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        if n.type == "declaration":
            quals = {_text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")}
            ident, _ = _declared(n.child_by_field_name("declarator"))
            if {"extern", "__shared__"} <= quals and ident is not None:
                arrays.add(_text(ident))
        elif n.type == "return_statement":
            value = n.named_children[0] if n.named_child_count else None
            value = _uncast(value)
            if value is not None and value.type == "identifier":
                returned.add(_text(value))
        stack.extend(n.children)
    found = sorted(arrays & returned)
    return found[0] if len(found) == 1 and returned == set(found) else None


def _accessor_definition(spec: Node) -> tuple[str, str | None, tuple[str, frozenset[str]] | None] | None:
    """(family name, specialisation argument or None, (extern __shared__ array, the members that
    return it) or None) of a struct template made of member functions only; None for any other."""
    if spec.type not in ("struct_specifier", "class_specifier"):
        return None
    name_node = spec.child_by_field_name("name")
    body = spec.child_by_field_name("body")
    if name_node is None or body is None:
        return None
    arg: str | None = None
    if name_node.type == "template_type":
        targs = name_node.child_by_field_name("arguments")
        real = [c for c in targs.named_children if c.type != "comment"] if targs is not None else []
        if len(real) != 1:
            return None
        arg = _squash(_text(real[0]))
        name_node = name_node.child_by_field_name("name")
    if name_node is None or name_node.type != "type_identifier":
        return None
    arrays: set[str] = set()
    members: set[str] = set()
    for member in body.named_children:
        if member.type in ("comment", "access_specifier"):
            continue
        if member.type != "function_definition":
            return None  # data members: a real struct, not an accessor
        array = _returned_array(member)
        if array is None:
            continue  # the primary's `error(); return NULL;` guard, a helper method: not an access
        decl = member.child_by_field_name("declarator")
        while decl is not None and decl.type not in ("function_declarator", "operator_cast"):
            decl = decl.child_by_field_name("declarator")
        if decl is None:
            continue
        if decl.type == "function_declarator":
            members.add(_text(decl.child_by_field_name("declarator")))
        elif any(c.type == "abstract_pointer_declarator" for c in decl.named_children):
            members.add("operator")
        else:
            continue
        arrays.add(array)
    if len(arrays) > 1:
        return None
    return _text(name_node), arg, (arrays.pop(), frozenset(members)) if arrays else None


def _identifiers(node: Node | None) -> set[str]:
    out: set[str] = set()
    if node is None:
        return out
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("identifier", "type_identifier"):
            out.add(_text(n))
        stack.extend(n.children)
    return out


# --------------------------------------------------------------------------- the translator


def _struct_key(struct: str) -> str:
    """A struct's name as :meth:`_Translator.field_type`'s table keys it: its tag or typedef name, qualifiers
    and the struct/class keyword dropped."""
    return " ".join(w for w in _squash(struct).split() if w not in ("const", "volatile", "struct", "class"))


class _Translator:
    def __init__(
        self,
        unit: Unit,
        path: str,
        subgroups: bool,
        scan: Any,
        source: str,
        launched: Sequence[_Launches] = (),
    ):
        self.unit = unit
        self.path = path
        self.subgroups = subgroups
        self.scan = scan
        self.source = source
        # the launches of the unit: the main file's, then those of each file it inlines
        self.launched: list[_Launches] = [
            _Launches(path, source, tuple(scan.launches) if scan is not None else ()),
            *launched,
        ]
        self.t = tables()
        self._fields: dict[str, dict[str, str]] | None = (
            None  # struct -> field -> type (field_type, on first need)
        )
        self.data = unit.text.encode("utf-8", "surrogateescape")
        self.tree = parse("cuda", self.data)
        self.diags: list[Diagnostic] = list(unit.diagnostics)
        self.kernels: list[_Fn] = []
        self.helpers: dict[str, _Fn] = {}
        self.template_fns: dict[str, _Fn] = {}  # __device__ function templates: instantiated per call
        self.specialisations: dict[str, set[str]] = {}  # their explicit specialisations porter would use
        # a template instance's or a group-taking variant's template arguments and group handles
        self.variant_info: dict[
            tuple[str, tuple[str | None, ...]], tuple[dict[str, str], dict[str, _Group]]
        ] = {}
        self.consts: dict[str, _Const] = {}
        # texture references over linear memory: kernel arguments (backends/opencl/textures.py)
        self.textures: dict[str, _textures.Texture] = {}
        self.bad_globals: dict[str, str] = {}
        self.defines: dict[str, str] = {}
        self.warp_macros: set[str] = set()
        self.top_edits: list[Edit] = []
        self.variants: dict[tuple[str, tuple[str | None, ...]], str] = {}
        self.variant_results: dict[tuple[str, tuple[str | None, ...]], _Result] = {}
        self.queue: list[tuple[str, tuple[str | None, ...]]] = []
        self.const_uses: dict[str, set[str]] = {}
        self.reserved = frozenset(self.t["reserved"]["names"])
        self.flattened: set[str] = set()  # names of the namespaces translated at file scope
        self.accessors: dict[str, _Accessor] = {}  # shared-memory accessor templates (SharedMemory<T>)
        self.struct_templates: list[Node] = []  # other `template <...> struct S {...}`: omitted
        self.scalar_aliases: dict[str, str] = {}  # `typedef float real;`, `#define fp float`: canonical
        self._constexprs: dict[str, int] | None = None

    # ------------------------------------------------------------------ diagnostics

    def diag(
        self, node: Node | int, construct: str, reason: str, severity: Severity = Severity.WARNING
    ) -> None:
        row = node if isinstance(node, int) else node.start_point[0]
        path, line = self.unit.origin(row)
        self.diags.append(Diagnostic(path, line, _squash(construct)[:120], reason, severity))

    # ------------------------------------------------------------------ structure

    def collect(self) -> None:
        self._collect(self.tree.root_node)
        self._omit_struct_templates()
        self._texture_bindings()
        names = set(self.helpers) | set(self.template_fns)
        direct: dict[str, tuple[set[str], set[str]]] = {}
        # what each function reads of the file's __constant__ variables and texture references (its
        # added parameters), through the helpers it calls
        passed = set(self.consts) | set(self.textures)
        for fn in [*self.kernels, *self.helpers.values(), *self.template_fns.values()]:
            ids = _identifiers(fn.body)
            direct[fn.name] = (ids & passed, ids & names)
        changed = True
        uses = {name: set(c) for name, (c, _) in direct.items()}
        while changed:
            changed = False
            for name, (_, callees) in direct.items():
                for callee in callees:
                    extra = uses.get(callee, set()) - uses[name]
                    if extra:
                        uses[name] |= extra
                        changed = True
        self.const_uses = uses
        self._unused_types()
        self._scalar_aliases()

    def _scalar_aliases(self) -> None:
        """The names that spell a scalar type: file-scope typedefs of one (`typedef float real;`)
        and object-like macros whose body is one (`#define fp float`), through each other.  Their
        functional casts (`fp(1.6)`, `real(x)`) become C casts."""
        typedefs: dict[str, str] = {}
        for node in self._type_definitions(self.tree.root_node):
            spec = node.child_by_field_name("type") if node.type == "type_definition" else None
            if spec is None or spec.type not in ("primitive_type", "sized_type_specifier", "type_identifier"):
                continue
            quals = " ".join(_text(c) for c in node.named_children if c.type == "type_qualifier")
            text = _squash(f"{quals} {_text(spec)}")
            for d in node.children_by_field_name("declarator"):
                if d.type == "type_identifier":
                    typedefs[_text(d)] = text
        spelled = {**typedefs, **{k: _squash(v) for k, v in self.defines.items() if v}}
        changed = True
        while changed:
            changed = False
            for name, text in spelled.items():
                if name in self.scalar_aliases:
                    continue
                words = [w for w in text.split() if w not in ("const", "volatile")]
                canonical = _canonical_scalar(" ".join(words)) if words else None
                if canonical is None and len(words) == 1:
                    canonical = self.scalar_aliases.get(words[0])
                if canonical is not None:
                    self.scalar_aliases[name] = canonical
                    changed = True

    def _unused_types(self) -> None:
        """Omit the struct, class and union definitions no device code names: a header inlined for
        its device code also carries the host's types (a `class` with virtual methods, a struct of
        `pthread_barrier_t*`), and OpenCL C fails the whole program on any of them."""
        defined: list[tuple[Node, set[str], set[str]]] = []  # (node, names it defines, names it uses)
        inside: set[int] = set()
        for node in self._type_definitions(self.tree.root_node):
            names, body = _type_names(node)
            if body is None and node.type == "type_definition":
                # `typedef vector<bool> Code;`, `typedef unsigned char uint8;`: a host type, or a name
                # OpenCL C has (its uint8 is a vector), unless device code names it
                names = _typedef_names(node)
                body = node if names else None
            if body is None or not names:
                continue
            defined.append((node, names, _identifiers(node) - names))
            inside.add(node.id)
        # the template arguments of the host's launches name types the instances use
        used = {
            k.text
            for launch in self.launches()
            for a in launch.template_args
            for k in c_tokens(a)
            if k.kind == IDENT
        }
        stack = [self.tree.root_node]
        while stack:
            n = stack.pop()
            if n.id in inside:
                continue
            if n.type in ("identifier", "type_identifier"):
                used.add(_text(n))
            elif n.type == "preproc_arg":
                used |= {k.text for k in c_tokens(_text(n)) if k.kind == IDENT}
            stack.extend(n.children)
        kept: set[int] = set()
        changed = True
        while changed:
            changed = False
            for node, names, uses in defined:
                if node.id not in kept and names & used:
                    kept.add(node.id)
                    used |= uses
                    changed = True
        for node, names, _ in defined:
            if node.id in kept:
                continue
            end = node.end_byte
            after = node.next_sibling
            if after is not None and after.type == ";":
                end = after.end_byte
            kind = "typedef" if node.type == "type_definition" else node.type.split("_")[0]
            shown = f"{kind} {', '.join(sorted(names))}"
            self.diag(node, shown, "type no device code uses (host code): omitted", Severity.INFO)
            self.top_edits.append(Edit(node.start_byte, end, f"/* porter: {shown} omitted: unused */"))
        omitted = {node.id for node, _, _ in defined if node.id not in kept}
        self._bare_name_typedefs(omitted)

    def _bare_name_typedefs(self, omitted: set[int]) -> None:
        """`struct Pair {...};` is named `Pair` in C++, `struct Pair` in C: a `typedef struct Pair
        Pair;` after its first declaration at file scope gives OpenCL C the C++ name (unless the
        file typedefs that name itself, which C99 allows only once)."""
        typedefs: set[str] = set()
        stack = [self.tree.root_node]
        while stack:
            n = stack.pop()
            if n.type == "type_definition":
                typedefs |= {
                    _text(d) for d in n.children_by_field_name("declarator") if d.type == "type_identifier"
                }
            stack.extend(n.named_children)
        done: set[str] = set()
        for node in self._type_definitions(self.tree.root_node):
            if node.id in omitted:
                continue
            spec = node.child_by_field_name("type") if node.type == "type_definition" else node
            if spec is None or spec.type not in ("struct_specifier", "union_specifier"):
                continue
            name = spec.child_by_field_name("name")
            if name is None or name.type != "type_identifier":
                continue
            tag = _text(name)
            if tag in typedefs or tag in done:
                continue
            end = node.end_byte
            if node.type != "type_definition":
                after = node.next_sibling
                if after is None or after.type != ";":
                    continue  # `struct S {...} s;`: a variable declaration, another node
                end = after.end_byte
            done.add(tag)
            kind = spec.type.split("_")[0]
            self.top_edits.append(
                Edit(end, end, f"\ntypedef {kind} {tag} {tag}; /* porter: C++ names it {tag} */")
            )

    def field_type(self, struct: str, field: str) -> str | None:
        """The CUDA spelling of `field`'s element type in the struct named `struct` (its tag or a
        typedef name) defined at file scope, None when porter does not find one (a field that is an
        array gives its element type)."""
        if self._fields is None:
            from porter.scan.structs import struct_of

            self._fields = {}
            for node in self._type_definitions(self.tree.root_node):
                spec = node.child_by_field_name("type") if node.type == "type_definition" else node
                found = struct_of(spec) if spec is not None else None
                if found is not None:
                    names, defined = found
                    fields = {k: f.type + "*" * f.stars for k, f in defined.fields.items()}
                    self._fields.update(dict.fromkeys(names, fields))
        return self._fields.get(_struct_key(struct), {}).get(field)

    def pointer_fields(self, struct: str) -> list[str]:
        """The fields of the struct named `struct` that are pointers (empty for a struct porter does not find)."""
        self.field_type(struct, "")  # the table, read once
        assert self._fields is not None
        return [name for name, ty in self._fields.get(_struct_key(struct), {}).items() if ty.endswith("*")]

    def _type_definitions(self, node: Node) -> list[Node]:
        """The struct / class / union definitions at file scope (in #if blocks and namespaces too)."""
        out: list[Node] = []
        for child in node.named_children:
            t = child.type
            if t in ("struct_specifier", "class_specifier", "union_specifier", "type_definition"):
                out.append(child)
            elif t in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"):
                out += self._type_definitions(child)
            elif t == "namespace_definition":
                body = child.child_by_field_name("body")
                if body is not None and body.type == "declaration_list":
                    out += self._type_definitions(body)
        return out

    def _flatten(self, ns: Node) -> None:
        """OpenCL C has no namespaces: what a namespace holds is translated at file scope (its
        `namespace x {` and `}` are dropped), and `x::f` inside becomes `f`."""
        body = ns.child_by_field_name("body")
        if body is None or body.type != "declaration_list":
            self.diag(
                ns, _text(ns).split("\n")[0], "namespace not understood: not translated", Severity.ERROR
            )
            self.top_edits.append(Edit.replace(ns, "/* porter: namespace removed (not translated) */"))
            return
        name = ns.child_by_field_name("name")
        if name is not None:
            self.flattened.update(_text(name).replace(" ", "").split("::"))
        shown = _squash(self.data[ns.start_byte : body.start_byte + 1].decode("utf-8", "surrogateescape"))
        self.diag(
            ns, shown, "OpenCL C has no namespaces: its contents are translated at file scope", Severity.INFO
        )
        self.top_edits.append(Edit(ns.start_byte, body.start_byte + 1, f"/* porter: {shown} */"))
        close = body.children[-1] if body.children else None
        if close is not None and close.type == "}":
            self.top_edits.append(Edit.replace(close, "/* porter: end of namespace */"))
        self._collect(body)

    def _collect(self, node: Node) -> None:
        for child in node.named_children:
            t = child.type
            if t in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"):
                self._collect(child)
            elif t == "function_definition":
                self._add_function(child, child)
            elif t == "template_declaration":
                fn = next((c for c in child.named_children if c.type == "function_definition"), None)
                if fn is not None:
                    self._add_function(fn, child)
                else:
                    self._add_struct_template(child)
            elif t == "linkage_specification":
                body = child.child_by_field_name("body")
                if body is not None and body.type == "function_definition":
                    self._add_function(body, child)
                elif body is not None and body.type == "declaration_list":
                    self.diag(
                        child,
                        'extern "C" { ... }',
                        'extern "C" blocks are not translated: move the kernels out',
                    )
            elif t == "namespace_definition":
                self._flatten(child)
            elif t in ("namespace_alias_definition", "using_declaration"):
                # `namespace cg = cooperative_groups;`, `using namespace std;`: OpenCL C has no namespaces
                shown = _squash(_text(child))
                self.diag(child, shown, "OpenCL C has no namespaces: omitted", Severity.INFO)
                self.top_edits.append(
                    Edit.replace(child, "/* porter: " + shown.replace("*/", "* /") + " omitted */")
                )
            elif t == "declaration":
                self._add_declaration(child)
            elif t in ("preproc_def", "preproc_function_def"):
                name = _text(child.child_by_field_name("name"))
                value = child.child_by_field_name("value")
                if t == "preproc_def":
                    self.defines[name] = _text(value).strip()
                if value is not None and "warpSize" in {k.text for k in c_tokens(_text(value))}:
                    self.warp_macros.add(name)  # its uses need sub-groups: get_sub_group_size()

    def _add_struct_template(self, node: Node) -> None:
        """`template <class T> struct S {...}`: no OpenCL C compiler takes it, and left in it would
        stop the build of every kernel in the program, so it is omitted.  A shared-memory accessor
        (:class:`_Accessor`) is recorded: its uses are translated where they are."""
        spec = next(
            (c for c in node.named_children if c.type in ("struct_specifier", "class_specifier")), None
        )
        found = _accessor_definition(spec) if spec is not None else None
        if found is None:
            self.struct_templates.append(node)
            return
        name, arg, access = found
        acc = self.accessors.setdefault(name, _Accessor(name))
        acc.defs[arg] = access
        acc.nodes.append(node)

    def _omit_struct_templates(self) -> None:
        """The edits and diagnostics of the struct templates :meth:`_add_struct_template` saw: an
        accessor family only where one of its definitions hands out an extern __shared__ array."""
        for name, acc in list(self.accessors.items()):
            if not any(acc.defs.values()):
                del self.accessors[name]  # member functions only, but no shared memory: a functor
                self.struct_templates += acc.nodes
        omitted = [(n, False) for n in self.struct_templates]
        omitted += [(n, True) for acc in self.accessors.values() for n in acc.nodes]
        for node, accessor in sorted(omitted, key=lambda na: na[0].start_byte):
            head = _squash(_text(node).split("{", 1)[0]).replace("*/", "* /")
            if accessor:
                self.diag(
                    node,
                    head,
                    "shared-memory accessor template: omitted, its uses become the kernel's dynamic "
                    "__local argument",
                    Severity.INFO,
                )
                self.top_edits.append(
                    Edit.replace(
                        node, f"/* porter: {head} omitted: uses become the dynamic __local argument */"
                    )
                )
            else:
                self.diag(node, head, "C++ template in device code: omitted (OpenCL C has no templates)")
                self.top_edits.append(
                    Edit.replace(node, f"/* porter: {head} omitted: OpenCL C has no templates */")
                )

    def _add_function(self, fn: Node, outer: Node) -> None:
        info = _function(fn, outer)
        if info is None:
            return
        if info.kernel:
            self.kernels.append(info)
        elif info.tparams:
            if info.name in self.template_fns:
                self.diag(
                    fn,
                    f"template __device__ {info.name}",
                    "overloaded function template: OpenCL C has no overloading",
                    Severity.ERROR,
                )
                self.top_edits.append(Edit.replace(outer, f"/* porter: overload of {info.name} omitted */"))
                self.specialisations.setdefault(info.name, set()).add("an overload")
            else:
                self.template_fns[info.name] = info  # emitted once per template-argument tuple called with
        elif "<" in info.name:
            # `template <> T f<int>(...)`: an explicit specialisation.  Inside `#if __CUDA_ARCH__ ...` it is
            # code OpenCL's preprocessor leaves out (the host branch is taken); elsewhere porter does not
            # choose between it and the template, and refuses the template's calls
            base = info.name.split("<", 1)[0].strip()
            if not _under_cuda_arch(outer):
                self.specialisations.setdefault(base, set()).add(info.name)
            self.top_edits.append(Edit.replace(outer, f"/* porter: specialisation {info.name} omitted */"))
        elif info.name in self.helpers:
            self.diag(
                fn, info.name, "overloaded device function: OpenCL C has no overloading", Severity.ERROR
            )
            self.top_edits.append(Edit.replace(outer, f"/* porter: overload of {info.name} omitted */"))
        else:
            self.helpers[info.name] = info

    def _add_declaration(self, node: Node) -> None:
        tokens = {c.type for c in node.children if not c.is_named}
        quals = {_text(c) for c in node.children if c.type in ("type_qualifier", "storage_class_specifier")}
        declarators = node.children_by_field_name("declarator")
        is_function = any(
            _declared(d)[1] and _declared(d)[1][-1].type == "function_declarator" for d in declarators
        )
        is_function = is_function or any(d.type == "function_declarator" for d in declarators)
        type_node = node.child_by_field_name("type")
        if is_function:
            self.top_edits.append(Edit.replace(node, "/* porter: prototype removed */"))
            return
        if "__constant__" in quals:
            elem = _Body.static_type(self, type_node, quals - {"__constant__", "static", "extern"})
            for d in declarators:
                inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                ident, chain = _declared(inner)
                if d.type == "init_declarator":
                    self.diag(
                        node,
                        _text(node),
                        "__constant__ with an initializer: the initial values are not passed",
                    )
                dims = [
                    _squash(_text(c.child_by_field_name("size")))
                    for c in chain
                    if c.type == "array_declarator"
                ]
                self.consts[_text(ident)] = _Const(_text(ident), elem, dims, node)
            self.top_edits.append(
                Edit.replace(node, f"/* porter: {_squash(_text(node))} is a __constant kernel argument */")
            )
            return
        reason = None
        if type_node is not None and type_node.type == "template_type":
            tname = _text(type_node.child_by_field_name("name"))
            if tname == "texture":
                reason = self._add_texture(node, type_node, declarators)
                if not reason:
                    return
            elif tname == "surface":
                reason = f"{tname} reference: OpenCL images need host-side changes porter does not make"
        if reason is None and (tokens | quals) & {"__device__", "__managed__"}:
            reason = "program-scope __device__ variable: OpenCL C 1.2 has no writable program-scope memory"
        if reason is None and "__shared__" in quals:
            reason = "file-scope __shared__ variable"
        if reason is None and self._host_pointer(declarators):
            # `const char *sample = "name";`: kept by the device-code cut for its `const`, but a
            # pointer in host memory (CUDA device code cannot read it); at OpenCL program scope
            # it would be a private variable, which stops the build of every kernel
            shown = _squash(_text(node)).replace("*/", "* /")
            why = (
                "program-scope pointer without __device__/__constant__: host data, device code cannot use it"
            )
            for d in declarators:
                ident, _ = _declared(
                    d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                )
                if ident is not None:
                    self.bad_globals[_text(ident)] = why
            self.diag(node, shown, f"{why}; omitted", Severity.INFO)
            self.top_edits.append(Edit.replace(node, f"/* porter: host variable omitted: {shown} */"))
            return
        if reason is not None:
            for d in declarators:
                ident, _ = _declared(
                    d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                )
                if ident is not None:
                    self.bad_globals[_text(ident)] = reason
            self.diag(node, _text(node), reason, Severity.ERROR)
            self.top_edits.append(Edit.replace(node, f"/* porter: not translated: {_squash(_text(node))} */"))
            return
        # Other program-scope data: const tables become __constant, types are renamed.
        body = _Body(self, None, {}, {})
        body.visit(node)
        edits = body.edits
        if quals & {"const", "constexpr"}:
            for c in node.children:
                if c.type == "type_qualifier" and _text(c) == "constexpr":
                    edits.append(Edit.replace(c, "const"))
            edits.append(Edit(node.start_byte, node.start_byte, "__constant "))
        if edits:
            self.top_edits.append(Edit(node.start_byte, node.end_byte, self.apply(node, edits)))

    def _add_texture(self, node: Node, type_node: Node, declarators: list[Node]) -> str:
        """`texture<T, 1, cudaReadModeElementType> name;`: a texture reference each kernel reading it takes
        as a `__global const T*` and its size (backends/opencl/textures.py); "" when translated, else why
        not (the declaration is then refused as other program-scope device data is)."""
        args = _textures.template_args(type_node)
        names = [
            _text(ident)
            for d in declarators
            for ident in [
                _declared(d.child_by_field_name("declarator") if d.type == "init_declarator" else d)[0]
            ]
            if ident is not None
        ]
        t = self.t
        found = [
            _textures.declared(n, args, _canonical_scalar, t["vector_bases"], t["dtypes"], self.safe_name(n))
            for n in names
        ]
        why = next((f for f in found if isinstance(f, str)), "")
        if why or not names or any(d.type == "init_declarator" for d in declarators):
            return why or "texture reference of this form: not translated"
        shown = _squash(_text(node)).replace("*/", "* /")
        elem = ""
        for name, tex in zip(names, found, strict=True):
            assert not isinstance(tex, str)
            self.textures[name] = tex
            elem = tex.elem
        self.diag(
            node,
            shown,
            "texture reference over linear memory: each kernel reading it takes the bound memory "
            f"(__global const {elem}*) and its element count; tex1Dfetch is a plain load, zero out of range",
            Severity.INFO,
        )
        self.top_edits.append(Edit.replace(node, f"/* porter: {shown} is a __global kernel argument */"))
        return ""

    def _texture_bindings(self) -> None:
        """Refuse the textures the file's host code binds to a CUDA array or pitched memory, or asks for
        filtering or normalized coordinates: their kernels are not translated, naming that line.  (The
        file's own host code: the unit keeps only the device code of the headers it inlines.)"""
        if not self.textures:
            return
        from porter.backends.launches import blank_comments_and_strings

        text = blank_comments_and_strings(self.source)
        for name, (at, construct, why) in _textures.host_refusals(text, self.textures).items():
            line = text.count("\n", 0, at) + 1
            self.diags.append(Diagnostic(self.path, line, construct, why, Severity.ERROR))
            where = f"{construct} at {Path(self.path).name} line {line}"
            self.bad_globals[name] = f"reads the texture reference {name}, {why.split(':')[0]} ({where})"
            del self.textures[name]

    @staticmethod
    def _host_pointer(declarators: list[Node]) -> bool:
        """Does a program-scope declaration (no CUDA memory qualifier) declare a pointer?"""
        for d in declarators:
            inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            _, chain = _declared(inner)
            if any(c.type == "pointer_declarator" for c in chain):
                return True
        return False

    def constexprs(self) -> dict[str, int]:
        """The file's `constexpr` integer constants defined once (host code's too: a launch's template
        argument may name one, `kernel<T, 256 / groups>`), for the tile sizes they spell."""
        if self._constexprs is not None:
            return self._constexprs
        from porter.scan import cexpr

        found: dict[str, list[str]] = {}
        pattern = (
            r"\bconstexpr\s+(?:static\s+)?(?:unsigned\s+|signed\s+)?(?:int|long|short|size_t|unsigned)"
            r"\s+(\w+)\s*=\s*([^;{}]+);"
        )
        for m in re.finditer(pattern, self.source):
            found.setdefault(m.group(1), []).append(_squash(m.group(2)))
        self._constexprs = {}
        for name, values in found.items():
            if len(set(values)) != 1:
                continue
            try:
                value = cexpr.eval_text(self.expand(values[0]))
            except (cexpr.ExprError, ZeroDivisionError, ValueError, TypeError):
                continue
            if isinstance(value, int):
                self._constexprs[name] = value
        return self._constexprs

    def safe_name(self, name: str) -> str:
        """`name`, or `name_` when it is an OpenCL C keyword or reserved name."""
        return name + "_" if name in self.reserved else name

    def expand(self, text: str) -> str:
        """`text` with the file's object-like macros expanded (for expressions the harness evaluates)."""
        return _expand(self.defines, text)

    def apply(self, node: Node, edits: list[Edit]) -> str:
        s = node.start_byte
        shifted = [Edit(e.start - s, e.end - s, e.text) for e in edits]
        return apply_edits(self.data[s : node.end_byte], shifted).decode("utf-8", "surrogateescape")

    # ------------------------------------------------------------------ helpers variants

    def variant_name(self, key: tuple[str, tuple[str | None, ...]], base: str | None = None) -> str:
        if key not in self.variants:
            name, spaces = key
            name = self.safe_name(base or name)
            taken = set(self.variants.values())
            if name in taken:
                suffix = "_".join(s or "v" for s in spaces)
                name = re.sub(r"\W+", "_", f"{name}__{suffix}").rstrip("_")
            self.variants[key] = name
            self.queue.append(key)
        return self.variants[key]

    def launches(self) -> list[LaunchSite]:
        """Every launch of the unit: the main file's and those of the files it inlines."""
        return [launch for src in self.launched for launch in src.launches]

    def instantiations(self, templated: Sequence[str]) -> dict[str, list[tuple[str, ...]]]:
        """The template-argument tuples each templated kernel is launched with anywhere in the unit (the
        main file first, then each inlined file, in the order inlined), each file's launches resolved
        against its own host templates; a launch none resolves is a warning naming its file and line."""
        found: dict[str, list[tuple[str, ...]]] = {}
        for src in self.launched:
            if not any(launch.kernel in templated for launch in src.launches):
                continue
            inst = template_instantiations(src.source, src.launches, templated)
            for kname, line, why in inst.unresolved:
                self.diags.append(Diagnostic(src.path, line, f"{kname}<...> launch", why, Severity.WARNING))
            for kname, tuples in inst.found.items():
                seen = found.setdefault(kname, [])
                seen += [t for t in tuples if t not in seen]
        return found

    def run(self) -> list[tuple[_Fn, tuple[str, ...], str, _Result]]:
        """Translate every kernel instantiation, then every helper variant they reach."""
        found = self.instantiations([k.name for k in self.kernels if k.tparams])
        out: list[tuple[_Fn, tuple[str, ...], str, _Result]] = []
        for k in self.kernels:
            if not k.tparams:
                entry = self.safe_name(k.name)
                if entry != k.name:
                    self.diag(
                        k.node,
                        k.name,
                        f"{k.name} is reserved in OpenCL C: the kernel is named {entry}",
                        Severity.INFO,
                    )
                out.append((k, (), entry, _Body(self, k, {}, {}).translate(entry)))
                continue
            tuples = found.get(k.name, [])
            if not tuples:
                self.diag(
                    k.node,
                    f"template kernel {k.name}",
                    "no launch with known template arguments: no OpenCL kernel is instantiated",
                    Severity.WARNING,
                )
            for args in tuples:
                if len(args) != len(k.tparams):
                    self.diag(
                        k.node, instance_name(k.name, args), "template argument count differs", Severity.ERROR
                    )
                    continue
                subst = {name: arg for (_, name), arg in zip(k.tparams, args, strict=True)}
                entry = instance_entry(k.name, args)
                out.append((k, args, entry, _Body(self, k, subst, {}).translate(entry)))
        while self.queue:
            key = self.queue.pop(0)
            helper = self.helpers.get(key[0]) or self.template_fns[key[0]]
            spaces = dict(zip([p.name for p in helper.params], key[1], strict=False))
            subst, groups = self.variant_info.get(key, ({}, {}))
            body = _Body(self, helper, subst, spaces, groups)
            self.variant_results[key] = body.translate(self.variants[key])
        return out

    def reach(self, result: _Result) -> list[_Result]:
        """The result and every helper variant it calls, transitively."""
        seen: set[tuple[str, tuple[str | None, ...]]] = set()
        stack = list(result.calls)
        found = [result]
        while stack:
            key = stack.pop()
            if key in seen or key not in self.variant_results:
                continue
            seen.add(key)
            r = self.variant_results[key]
            found.append(r)
            stack.extend(r.calls)
        return found


# --------------------------------------------------------------------------- function bodies


class _Body:
    """Edits for one function instance: a kernel instantiation or a helper variant."""

    def __init__(
        self,
        tr: _Translator,
        fn: _Fn | None,
        subst: dict[str, str],
        spaces: dict[str, str | None],
        groups: dict[str, _Group] | None = None,
    ):
        self.tr = tr
        self.t = tr.t
        self.fn = fn
        self.subst = subst
        self.spaces = spaces
        self.edits: list[Edit] = []
        self.vars: dict[str, _Var] = {}
        # cooperative-groups handles: the block (`cta`), its tiles; a helper's are bound by its caller
        self.groups: dict[str, _Group] = dict(groups or {})
        # the __local scratch of multi-warp reductions: a helper handed such a tile gets it as a parameter
        self.scratch_param = any(g.size > WARP_32 for g in self.groups.values())
        self.scratch_hoisted = False
        self.refused_groups: set[str] = (
            set()
        )  # handles whose declaration was refused (their uses say no more)
        self.res = _Result()
        self.extern_shared: list[tuple[str, str]] = []
        self.hoisted: list[str] = []
        self.warned: set[str] = set()
        self.refs: set[str] = set()  # reference parameters, pointers once translated: uses read (*x)
        self.accessor_handles: dict[str, tuple[Node, str]] = {}  # `SharedMemory<T> smem;`: (T, family)
        # pointers to three-component vectors in global memory, kept in CUDA's packed layout (packed.py)
        self.packed = _packed.Layout(
            self, tr.t["three_component_sizes"], lambda n: tr.unit.origin(n.start_point[0])[1]
        )
        for c in tr.consts.values():
            self.vars[c.name] = _Var("constant", c.elem, bool(c.dims), len(c.dims))

    # ------------------------------------------------------------------ small tools

    @staticmethod
    def static_type(tr: _Translator, type_node: Node | None, quals: set[str]) -> str:
        body = _Body(tr, None, {}, {})
        text = body.render(type_node) if type_node is not None else "int"
        return _squash(" ".join([*sorted(q for q in quals if q in ("const", "volatile")), text]))

    def render(self, node: Node) -> str:
        saved = self.edits
        self.edits = []
        self.visit(node)
        sub, self.edits = self.edits, saved
        return self.tr.apply(node, sub)

    def error(self, node: Node, construct: str, reason: str) -> None:
        self.res.errors.append(f"{construct}: {reason}")
        self.tr.diag(node, construct, reason, Severity.ERROR)

    def warn_once(
        self, node: Node, construct: str, reason: str, severity: Severity = Severity.WARNING
    ) -> None:
        key = f"{construct}|{reason}"
        if key not in self.warned:
            self.warned.add(key)
            self.tr.diag(node, construct, reason, severity)

    def type_of(self, decl: Node, mapped: str | None = None) -> str:
        """The OpenCL element type of a declaration (qualifiers kept: const, volatile); `mapped`:
        the type to write instead of the declaration's own."""
        quals = [
            _text(c)
            for c in decl.children
            if c.type == "type_qualifier" and _text(c) in ("const", "volatile")
        ]
        type_node = decl.child_by_field_name("type")
        assert type_node is not None
        return _squash(" ".join([*quals, mapped or self.render(type_node)]))

    def global_pointee(self, decl: Node) -> str | None:
        """What a pointer into __global memory points to instead of the declaration's type: the
        host's arrays of `bool` (or `size_t` ...) reach kernels as arguments of the same-sized
        type of [kernel_param_types] (`bool*` -> `uchar*`, as a `bool` scalar becomes `uchar`),
        and every pointer into that memory keeps that type."""
        type_node = decl.child_by_field_name("type")
        if type_node is None:
            return None
        mapped = self.t["kernel_param_types"].get(_squash(_text(type_node)))
        return str(mapped) if mapped is not None else None

    def root(self, node: Node | None) -> _Var | None:
        """The variable a pointer expression points into (through subscripts, &, *, +, casts)."""
        depth = 0
        while node is not None and depth < 32:
            depth += 1
            t = node.type
            if t == "identifier":
                return self.vars.get(_text(node))
            if t in ("subscript_expression", "pointer_expression"):
                node = node.child_by_field_name("argument")
            elif t == "binary_expression":
                left = self.root(node.child_by_field_name("left"))
                if left is not None and left.indirect:
                    return left
                right = self.root(node.child_by_field_name("right"))
                return right if right is not None and right.indirect else left
            elif t == "parenthesized_expression":
                node = node.named_children[0] if node.named_child_count else None
            elif t in ("cast_expression", "update_expression"):  # `(T*)p`, `p++`: p's memory
                node = node.child_by_field_name("value" if t == "cast_expression" else "argument")
            elif t == "conditional_expression":
                node = node.child_by_field_name("consequence")
            elif t == "assignment_expression":
                node = node.child_by_field_name("right")
            elif t == "call_expression":
                use = self.accessor_use(node)
                if use is not None:
                    return _Var("local", self.render(use[0]), True)
                cast = self.packed.cpp_cast(node)  # reinterpret_cast<float3*>(p): p's memory
                if cast is None:
                    return None
                node = cast[2]
            elif t == "field_expression":
                # `b->count`, `bins[i].sum`: the struct's memory, the field's type (a scalar field of a
                # struct in global or local memory: an atomic's target)
                base = self.root(node.child_by_field_name("argument"))
                kind = (
                    self.tr.field_type(base.elem, _text(node.child_by_field_name("field")))
                    if base is not None and base.indirect and base.space in ("global", "local")
                    else None
                )
                if base is None or kind is None or "*" in kind:
                    return None
                return _Var(base.space, _canonical(kind) or kind, True)
            else:
                return None
        return None

    # ------------------------------------------------------------------ shared-memory accessors

    def accessor_use(self, call: Node) -> tuple[Node, str, str] | None:
        """(the element type's node, the accessor family, the member: "operator" or the method) of
        `SharedMemory<T>()` or `smem.getPointer()` on a `SharedMemory<T> smem`; None for any other
        call."""
        fn = call.child_by_field_name("function")
        if fn is None or _args(call.child_by_field_name("arguments")):
            return None
        if fn.type == "template_function":
            name = _text(fn.child_by_field_name("name"))
            targs = fn.child_by_field_name("arguments")
            real = [c for c in targs.named_children if c.type != "comment"] if targs is not None else []
            if name in self.tr.accessors and len(real) == 1 and real[0].type == "type_descriptor":
                return real[0], name, "operator"
        elif fn.type == "field_expression":
            arg = fn.child_by_field_name("argument")
            handle = (
                self.accessor_handles.get(_text(arg))
                if arg is not None and arg.type == "identifier"
                else None
            )
            if (
                handle is not None
                and _text(fn.child_by_field_name("field")) in self.tr.accessors[handle[1]].members()
            ):
                return (*handle, _text(fn.child_by_field_name("field")))
        return None

    def accessor_spelling(self, tdesc: Node) -> str:
        """The CUDA spelling of an accessor's template argument, template parameters substituted."""
        text = _squash(_text(tdesc))
        return _squash(self.subst.get(text, text))

    def accessor_pointer(self, node: Node, tdesc: Node, family: str, member: str) -> None:
        """`SharedMemory<T>()` -> `((__local T*)<the dynamic __local argument>)`."""
        shown = f"{family}<{self.accessor_spelling(tdesc)}>"
        if self.fn is None or not self.fn.kernel:
            self.error(
                node,
                shown,
                "shared-memory accessor in a __device__ helper: OpenCL allows __local only in kernels "
                "(pass the pointer from the kernel)",
            )
            return
        array = self.tr.accessors[family].array(self.accessor_spelling(tdesc), member)
        if array is None:
            how = f"{family}<...>()" if member == "operator" else f".{member}()"
            self.error(
                node,
                shown,
                f"{family} has no definition for this type whose {how} returns extern __shared__ memory",
            )
            return
        elem = self.render(tdesc)
        if self.extern_shared:
            base = self.extern_shared[0][0]
        else:
            base = self.tr.safe_name(array)
            self.extern_shared.append((base, elem))
            self.vars[base] = _Var("local", elem, True)
        self.edits.append(Edit.replace(node, f"((__local {elem}*){base})"))

    def accessor_handle(self, node: Node) -> bool:
        """`SharedMemory<T> smem;`: recorded (its `smem.getPointer()` calls are the dynamic __local
        argument) and the declaration dropped."""
        tnode = node.child_by_field_name("type")
        if tnode is None or tnode.type != "template_type":
            return False
        family = _text(tnode.child_by_field_name("name"))
        targs = tnode.child_by_field_name("arguments")
        real = [c for c in targs.named_children if c.type != "comment"] if targs is not None else []
        declarators = node.children_by_field_name("declarator")
        if (
            family not in self.tr.accessors
            or len(real) != 1
            or real[0].type != "type_descriptor"
            or not declarators
            or any(d.type != "identifier" for d in declarators)
        ):
            return False
        names = [_text(d) for d in declarators]
        for name in names:
            self.accessor_handles[name] = (real[0], family)
        shown = f"{family}<{self.accessor_spelling(real[0])}> {', '.join(names)}"
        self.edits.append(Edit.replace(node, f"/* porter: {shown}: the dynamic __local argument */"))
        return True

    def scalar_type(self, node: Node | None, depth: int = 0) -> str | None:
        """The canonical OpenCL scalar type of an expression (C's usual arithmetic conversions),
        or None when porter cannot tell (calls, fields, pointers ...)."""
        if node is None or depth > 32:
            return None
        t = node.type
        if t == "number_literal":
            return _literal_type(_text(node))
        if t == "char_literal":
            return "char"
        if t in ("true", "false"):
            return "int"
        if t == "identifier":
            name = _text(node)
            if name in self.subst:
                return _literal_type(self.subst[name])
            var = self.vars.get(name)
            if var is not None:
                return None if var.subscripts else _canonical_scalar(var.elem)
            if name in self.tr.defines:
                value = " ".join(k.text for k in c_tokens(self.tr.expand(name)) if k.kind != COMMENT)
                return _literal_type(value.strip("() "))
            return None
        if t == "field_expression":
            arg = node.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier" and _text(arg) in self.t["builtins"]:
                return self.t["builtin_cast"]["type"]
            return None
        if t == "parenthesized_expression":
            return self.scalar_type(node.named_children[0] if node.named_child_count else None, depth + 1)
        if t == "cast_expression":
            tnode = node.child_by_field_name("type")
            if tnode is None or any(c.type in _POINTER_DECLS for c in tnode.named_children):
                return None
            return _canonical_scalar(self.render(tnode))
        if t == "sizeof_expression":
            return "ulong"
        if t == "call_expression":
            return self.call_type(node)
        if t == "subscript_expression" or (t == "pointer_expression" and _text(node).startswith("*")):
            r = self.root(node)
            if r is None or not r.indirect or "*" in r.elem:
                return None
            depth_ = self.subscript_depth(node)
            return _canonical_scalar(r.elem) if depth_ == r.subscripts else None
        if t == "unary_expression":
            op = node.child_by_field_name("operator")
            if op is not None and _text(op) == "!":
                return "int"
            return _promote(self.scalar_type(node.child_by_field_name("argument"), depth + 1))
        if t == "update_expression":
            return self.scalar_type(node.child_by_field_name("argument"), depth + 1)
        if t == "binary_expression":
            operator = _text(node.child_by_field_name("operator"))
            if operator in ("<", ">", "<=", ">=", "==", "!=", "&&", "||"):
                return "int"
            left = self.scalar_type(node.child_by_field_name("left"), depth + 1)
            if operator in ("<<", ">>"):
                return _promote(left)
            return _usual(left, self.scalar_type(node.child_by_field_name("right"), depth + 1))
        if t == "conditional_expression":
            return _usual(
                self.scalar_type(node.child_by_field_name("consequence"), depth + 1),
                self.scalar_type(node.child_by_field_name("alternative"), depth + 1),
            )
        if t in ("assignment_expression", "comma_expression"):
            side = "left" if t == "assignment_expression" else "right"
            return self.scalar_type(node.child_by_field_name(side), depth + 1)
        return None

    def functional_cast(self, node: Node) -> str | None:
        """The canonical scalar a C++ functional cast converts to (`float(x)`, `unsigned(n)`,
        `fp(1.6)` through `#define fp float`, `real(x)` through `typedef float real;`, `T(x)` in a
        template instance), or None when `node` is no such call."""
        fn = node.child_by_field_name("function")
        if fn is None or len(_args(node.child_by_field_name("arguments"))) > 1:
            return None
        name = _text(fn)
        if fn.type in ("primitive_type", "sized_type_specifier"):
            return _canonical_scalar(name)
        if fn.type != "identifier" or name in self.vars or name in self.tr.helpers:
            return None
        if name in self.subst:
            return _canonical_scalar(self.subst[name])
        if name in _FUNCTIONAL_KEYWORDS:
            return _canonical_scalar(name)
        return self.tr.scalar_aliases.get(name)

    def call_type(self, node: Node) -> str | None:
        """The scalar a call returns: float math functions, min/max, the file's helpers."""
        cast = self.functional_cast(node)
        if cast is not None:
            return cast
        fn = node.child_by_field_name("function")
        if fn is None or fn.type != "identifier":
            return None
        name = _text(fn)
        args = _args(node.child_by_field_name("arguments"))
        table = self.t["float_arguments"]
        if name in table["float"]:
            return "float"
        if (
            name in self.t["floating_overloads"]
            and args
            and (ty := self.scalar_type(args[0])) in ("float", "double")
        ):
            return ty  # abs(x) of a float: a float, as fabs
        if name in table["double"] or name in ("min", "max"):
            types = [self.scalar_type(a) for a in args]
            if not types or None in types:
                return None
            if name in ("min", "max"):
                return _usual(types[0], types[-1])
            return "float" if all(ty == "float" for ty in types) else "double"
        helper = self.tr.helpers.get(name)
        if helper is not None:
            decl = helper.node.child_by_field_name("declarator")
            rtype = helper.node.child_by_field_name("type")
            if decl is None or decl.type != "function_declarator" or rtype is None:
                return None  # returns a pointer or a reference
            return _canonical_scalar(_text(rtype))
        return None

    def stored_pointer_use(self, node: Node, name: str) -> bool:
        """Whether this use of the __constant__ variable `name` may read a pointer stored in it: a struct with
        pointer fields (Rodinia heartwall's ``d_unique[bx].d_in2``), used through one of those fields or other
        than through a field (whole, or by address); a use of one of its other fields reads no pointer."""
        fields = self.tr.pointer_fields(self.tr.consts[name].elem)
        if not fields:
            return False
        up = node
        while up.parent is not None and up.parent.type in (
            "subscript_expression",
            "parenthesized_expression",
        ):
            if up.parent.type == "subscript_expression" and up.parent.child_by_field_name("argument") != up:
                break  # the variable is an index there
            up = up.parent
        parent = up.parent
        if (
            parent is not None
            and parent.type == "field_expression"
            and parent.child_by_field_name("argument") == up
        ):
            return _text(parent.child_by_field_name("field")) in fields
        return True

    def floating_overload(self, name: str, arg: Node) -> str:
        """What a call of `name` ([floating_overloads]: `abs`) with `arg` becomes: its floating spelling for a
        float or double argument, porter's overloaded helper where the type is not known here, "" for an integer
        (OpenCL C's own function of that name)."""
        spec = self.t["floating_overloads"][name]
        ty = self.scalar_type(arg)
        if ty in ("float", "double"):
            return str(spec["floating"])
        return str(spec["unknown"]) if ty is None else ""

    def subscript_depth(self, node: Node) -> int | None:
        """How many subscripts / dereferences lead from a variable to `node`; None when the chain
        passes anything else (pointer arithmetic, casts)."""
        n = 0
        while node.type in ("subscript_expression", "pointer_expression", "parenthesized_expression"):
            if node.type == "parenthesized_expression":
                inner = node.named_children[0] if node.named_child_count else None
            else:
                n += 1
                inner = node.child_by_field_name("argument")
            if inner is None:
                return None
            node = inner
        return n if node.type == "identifier" else None

    def math_arguments(self, name: str, args: list[Node]) -> dict[int, str]:
        """Casts that make integer arguments of a floating-point math function explicit: OpenCL's
        overloads (float, double) make `log2(16)` and `pow(2, i)` ambiguous, where CUDA converts
        the integers (to float for `sqrtf`, to double -- C++'s <cmath> -- for `sqrt` called with
        integers only)."""
        table = self.t["float_arguments"]
        types = [self.scalar_type(a) for a in args]
        integral = {i for i, ty in enumerate(types) if ty in _INTEGER}
        if name in table["float"]:
            return dict.fromkeys(integral, "float")
        if name in table["double"] and integral and len(integral) == len(args):
            self.res.fp64 = True
            return dict.fromkeys(integral, "double")
        return {}

    def visit_arguments(self, name: str, arglist: Node | None, args: list[Node]) -> None:
        """Visit a math call's arguments, casting the integer ones (:meth:`math_arguments`)."""
        if arglist is None:
            return
        casts = self.math_arguments(name, args)
        closing = []
        for i, ty in casts.items():
            a = args[i]
            simple = a.type in ("parenthesized_expression", "number_literal", "identifier")
            self.edits.append(Edit(a.start_byte, a.start_byte, f"({ty})" if simple else f"({ty})("))
            if not simple:
                closing.append(Edit(a.end_byte, a.end_byte, ")"))
        self.visit(arglist)
        self.edits.extend(closing)

    # ------------------------------------------------------------------ the walk

    def visit(self, node: Node) -> None:
        handler = getattr(self, "_v_" + node.type, None)
        if handler is not None and handler(node):
            return
        for c in node.children:
            self.visit(c)

    def _v_comment(self, node: Node) -> bool:
        return True

    def _v_string_literal(self, node: Node) -> bool:
        return True

    def _v_field_expression(self, node: Node) -> bool:
        if self.packed.field(node):
            return True
        arg = node.child_by_field_name("argument")
        fld = node.child_by_field_name("field")
        if arg is not None and arg.type == "call_expression" and self.block_dim3(node, arg, fld):
            return True
        builtins = self.t["builtins"]
        if arg is not None and arg.type == "identifier" and _text(arg) in builtins:
            dim = self.t["builtin_dims"].get(_text(fld))
            if dim is None:
                self.error(node, _text(node), "unknown component of a CUDA index built-in")
                return True
            call = builtins[_text(arg)].format(d=dim)
            self.edits.append(Edit.replace(node, f"({self.t['builtin_cast']['type']}){call}"))
            return True
        return False

    # the uses of pointers kept in CUDA's packed layout of three-component vectors (packed.py)
    def _v_subscript_expression(self, node: Node) -> bool:
        return self.packed.subscript(node)

    def _v_pointer_expression(self, node: Node) -> bool:
        return self.packed.pointer_expression(node)

    def _v_assignment_expression(self, node: Node) -> bool:
        return self.packed.assignment(node)

    def _v_update_expression(self, node: Node) -> bool:
        return self.packed.update(node)

    def _v_binary_expression(self, node: Node) -> bool:
        return self.packed.arithmetic(node)

    def _v_initializer_list(self, node: Node) -> bool:
        return self.packed.escapes(node, "stored in an initializer list")

    def _v_return_statement(self, node: Node) -> bool:
        return self.packed.escapes(node, "returned")

    def _v_compound_statement(self, node: Node) -> bool:
        """A block: the packed pointers it declares (or hides) end with it."""
        saved = dict(self.packed.vars)
        for c in node.children:
            self.visit(c)
        self.packed.vars = saved
        return True

    def _v_identifier(self, node: Node) -> bool:
        name = _text(node)
        if name in self.refused_groups:
            pass  # its declaration is reported
        elif name in self.groups:
            self.error(
                node,
                name,
                f"cooperative-groups handle {name} used as a value: porter translates its methods, the cg:: "
                "functions taking it and passing it to a __device__ helper",
            )
        elif name in self.subst:
            self.edits.append(Edit.replace(node, _paren(self.subst[name])))
        elif name in self.refs:
            self.edits.append(Edit.replace(node, f"(*{self.tr.safe_name(name)})"))
        elif name == "warpSize":
            self.warp_call(node, "warpSize", [])
        elif name in self.tr.warp_macros:
            self.warp_macro(node, name)
        elif name in self.t["builtins"]:
            self.error(node, name, f"{name} used as a whole (dim3): only {name}.x/.y/.z are translated")
        elif name in self.tr.consts and self.stored_pointer_use(node, name):
            fields = self.tr.pointer_fields(self.tr.consts[name].elem)
            self.error(
                node,
                name,
                f"reads the __constant__ {name}, whose {self.tr.consts[name].elem} holds device pointers "
                f"({', '.join(fields[:3])}{', ...' if len(fields) > 3 else ''}): an OpenCL kernel reaches a "
                "buffer through its arguments only, never through a pointer the program stored in memory",
            )
        elif name in self.tr.consts and not self.tr.consts[name].dims:
            self.edits.append(Edit.replace(node, f"(*{name})"))
        elif name in self.tr.textures:
            self.error(
                node,
                name,
                f"texture reference {name} used other than as tex1Dfetch's first argument: porter passes "
                "a texture's memory to the kernels reading it with tex1Dfetch only",
            )
        elif name in self.tr.bad_globals:
            self.error(node, name, self.tr.bad_globals[name])
        elif name in self.tr.reserved:
            self.warn_once(node, name, f"{name} is reserved in OpenCL C: renamed {name}_", Severity.INFO)
            self.edits.append(Edit.replace(node, name + "_"))
        return True

    def _v_type_identifier(self, node: Node) -> bool:
        name = _text(node)
        if name in self.subst:
            self.edits.append(Edit.replace(node, self.map_type(self.subst[name])))
        elif name in self.t["types"]:
            self.edits.append(Edit.replace(node, self.t["types"][name]))
        elif name == "dim3":
            self.error(node, "dim3", "dim3 in device code has no OpenCL C counterpart")
        elif name in ("cudaTextureObject_t", "cudaSurfaceObject_t"):
            self.error(
                node,
                name,
                "texture and surface objects need OpenCL images: porter translates texture references "
                "bound to linear memory (texture<T, 1> read with tex1Dfetch) only",
            )
        elif name in ("__half", "half", "__nv_bfloat16", "half2", "__half2"):
            self.error(
                node, name, "half-precision types are not translated (cl_khr_fp16 differs from cuda_fp16.h)"
            )
        else:
            m = re.match(r"^([a-z]+)([1-4])$", name)
            if m and m.group(1) in self.t["vector_bases"]:
                if m.group(2) == "1":
                    self.error(node, name, "one-component vector types have no OpenCL C counterpart")
                else:
                    self.edits.append(Edit.replace(node, self.t["vector_bases"][m.group(1)] + m.group(2)))
        return True

    def map_type(self, text: str) -> str:
        squashed = _squash(text)
        if squashed in self.t["types"]:
            return self.t["types"][squashed]
        words = squashed.split()
        if words and words[-1] == "*":
            return self.map_type(" ".join(words[:-1])) + "*"
        if "double" in words:
            self.res.fp64 = True
        return squashed

    def _v_primitive_type(self, node: Node) -> bool:
        text = _text(node)
        if text == "double":
            self.res.fp64 = True
        elif text in self.t["types"]:  # <stdint.h> names parse as primitive types: uint64_t -> ulong
            self.edits.append(Edit.replace(node, self.t["types"][text]))
        return True

    def _v_sized_type_specifier(self, node: Node) -> bool:
        text = _squash(_text(node))
        if text in self.t["types"]:
            self.edits.append(Edit.replace(node, self.t["types"][text]))
        if "double" in text:
            self.res.fp64 = True
        return True

    def _v_placeholder_type_specifier(self, node: Node) -> bool:
        self.error(node, "auto", "C++ type deduction (auto) has no OpenCL C counterpart")
        return True

    def _v_number_literal(self, node: Node) -> bool:
        text = _text(node)
        m = _LL_SUFFIX.match(text)
        if m:
            self.edits.append(Edit.replace(node, f"{m.group(1)}{m.group(2)}{m.group(3)[0]}{m.group(4)}"))
        elif _FLOAT_LITERAL.match(text):
            self.res.fp64 = True
        return True

    def _v_null(self, node: Node) -> bool:
        self.edits.append(Edit.replace(node, "0"))
        return True

    def _v_type_qualifier(self, node: Node) -> bool:
        text = _text(node)
        if text in ("__restrict__", "__restrict"):
            self.edits.append(Edit.replace(node, "restrict"))
        elif text == "__shared__":
            self.edits.append(Edit.replace(node, "__local"))
        elif text in ("__constant__", "__managed__"):
            self.error(node, text, f"{text} variable inside a function")
        elif text == "constexpr":
            self.edits.append(Edit.replace(node, "const"))
        return True

    def _unqualified(self, node: Node) -> Node | None:
        """The name inside `detail::f` or `::lib::detail::f` when every namespace it spells was
        translated at file scope (so that the name alone reaches it); None otherwise."""
        spelled = _text(node).split("<", 1)[0].replace(" ", "").lstrip(":").split("::")[:-1]
        if not spelled or not set(spelled) <= self.tr.flattened:
            return None
        name = node.child_by_field_name("name")
        while name is not None and name.type == "qualified_identifier":
            name = name.child_by_field_name("name")
        return name

    def _v_qualified_identifier(self, node: Node) -> bool:
        scope = _text(node.child_by_field_name("scope"))
        name = node.child_by_field_name("name")
        inner = self._unqualified(node)
        if inner is not None:
            self.edits.append(Edit(node.start_byte, inner.start_byte, ""))
            self.visit(inner)
            return True
        if scope == "std" and name is not None and _text(name) in self.t["std_builtins"]["names"]:
            self.edits.append(Edit.replace(node, _text(name)))
            return True
        reason = self.t["untranslatable_namespaces"].get(
            scope, f"C++ namespace {scope}:: has no OpenCL C counterpart"
        )
        self.error(node, _text(node), reason)
        return True

    def _v_template_function(self, node: Node) -> bool:
        if self.misparsed_comparison(node):  # `row < (a) && col > (b)`: the comparisons, visited as written
            return False
        self.error(node, _text(node), "call of a function template: OpenCL C has no templates")
        return True

    def misparsed_comparison(self, fn: Node) -> bool:
        """Whether `fn`, a ``template_function``, is two comparisons C++'s grammar cannot tell from a call of a
        function template: in ``row < (a + b) && col > (c - 1)`` (Rodinia heartwall) tree-sitter reads ``row<(a +
        b) && col>(c - 1)``, where ``row`` is a variable of the function, not a template of the program."""
        name = fn.child_by_field_name("name")
        return (
            name is not None
            and name.type == "identifier"
            and _text(name) in self.vars
            and _text(name) not in self.tr.template_fns
        )

    def _v_template_type(self, node: Node) -> bool:
        self.error(node, _text(node), "C++ template type: OpenCL C has no templates")
        return True

    def _v_gnu_asm_expression(self, node: Node) -> bool:
        self.error(node, "asm(...)", "inline PTX assembly has no OpenCL C counterpart")
        return True

    def _untranslatable_cxx(self, node: Node) -> bool:
        self.error(
            node, _text(node).split("\n")[0], f"C++ construct ({node.type}) has no OpenCL C counterpart"
        )
        return True

    _v_new_expression = _untranslatable_cxx
    _v_delete_expression = _untranslatable_cxx
    _v_lambda_expression = _untranslatable_cxx
    _v_throw_statement = _untranslatable_cxx
    _v_try_statement = _untranslatable_cxx
    _v_this = _untranslatable_cxx

    # ------------------------------------------------------------------ declarations

    def _v_declaration(self, node: Node) -> bool:
        quals = {_text(c) for c in node.children if c.type in ("type_qualifier", "storage_class_specifier")}
        if "__shared__" in quals:
            return self.dropped_cg_type(node) or self.shared(node, "extern" in quals)
        if self.group_declaration(node) or self.accessor_handle(node):
            return True
        tnode = node.child_by_field_name("type")
        if tnode is not None and tnode.type == "placeholder_type_specifier":
            return self.auto_declaration(node, tnode)
        elem = self.type_of(node)
        declarators = node.children_by_field_name("declarator")
        spaces: set[str] = set()
        plain = False
        single: list[str] = []  # the pointers (not pointers to pointers) declared
        for d in declarators:
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            ident, chain = _declared(inner)
            if ident is None:
                continue
            name = _text(ident)
            self.packed.vars.pop(name, None)  # a name declared again (packed again below if it is)
            if chain and chain[0].type == "pointer_declarator":
                space = self.pointer_space(name, value)
                if space is None:
                    if value is not None and value.type not in ("null", "number_literal"):
                        self.tr.diag(
                            node,
                            _text(node),
                            f"cannot tell which memory pointer {name} points into; it stays a private pointer",
                        )
                    space = "private"
                else:
                    spaces.add(space)
                stars = sum(1 for c in chain if c.type == "pointer_declarator")
                self.vars[name] = _Var(space, elem + "*" * (stars - 1), True)
                if stars == 1:
                    single.append(name)
                else:
                    plain = True  # `bool** q`: left alone
            elif chain and chain[0].type == "array_declarator":
                rank = sum(1 for c in chain if c.type == "array_declarator")
                self.vars[name] = _Var("private", elem, True, rank)
                plain = True
            else:
                self.vars[name] = _Var("private", elem, False)
                plain = True
        pointee = None
        if len(spaces) > 1 or (spaces and plain):
            self.error(node, _text(node), "one declaration mixes pointers into different memories: split it")
        elif spaces:
            space = spaces.pop()
            self.edits.append(Edit(node.start_byte, node.start_byte, f"__{space} "))
            pointee = self.global_pointee(node) if space == "global" and not plain else None
            packed = self.packed.of(elem) if space == "global" and not plain else None
            if packed is not None:  # `float3* w = v + k;`: CUDA's layout too (packed.py)
                pointee = packed.scalar
                for name in single:
                    self.packed.vars[name] = packed
            elif pointee is not None:  # `bool* f = flags;` with `flags` a kernel's `uchar*`
                elem = self.type_of(node, pointee)
                for name in single:
                    self.vars[name] = _Var("global", elem, True)
        for c in node.children:
            if pointee is not None and c == tnode:
                self.edits.append(Edit.replace(c, pointee))
            else:
                self.visit(c)
        return True

    def auto_declaration(self, node: Node, tnode: Node) -> bool:
        """`auto v = <init>;`: the type written out where the initializer tells it (a literal, a
        variable, a cast, arithmetic on those, an element, a math call, a pointer into a known
        memory); else an error naming the variable."""
        deduced: list[tuple[Node, str, _Var]] = []
        for d in node.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            if value is not None and value.type in ("initializer_list", "argument_list"):
                value = value.named_children[0] if value.named_child_count == 1 else None
            if inner is None or inner.type not in ("identifier", "pointer_declarator"):
                self.error(node, _text(node), "auto with a reference or array declarator: write the type out")
                return True
            ident, chain = _declared(inner)
            packed = self.packed.pointer(value)
            if packed is not None and ident is not None:  # `auto w = v + k;` (packed.py)
                self.packed.vars[_text(ident)] = packed
                elem = f"const {packed.vector}" if packed.const else packed.vector
                deduced.append((ident, packed.pointer(), _Var("global", elem, True)))
                continue
            found = self.deduce(value) if value is not None and ident is not None else None
            if found is not None and chain and found[1].indirect is False:
                found = None  # `auto* p = <not a pointer>`
            if found is None or ident is None:
                name = _text(ident) if ident is not None else _text(d)
                self.error(
                    node,
                    _text(node),
                    f"auto: porter cannot tell the type of {name}'s initializer; write the type out",
                )
                for c in node.children:  # what else the initializer holds is reported too
                    if c != tnode:
                        self.visit(c)
                return True
            deduced.append((ident, *found))
        texts = {text for _, text, _ in deduced}
        if len(texts) != 1:
            self.error(node, _text(node), "auto declaring variables of different types: split it")
            return True
        text = texts.pop()
        for ident, _, var in deduced:
            self.vars[_text(ident)] = var
        if text.endswith("*") and any(c.type == "pointer_declarator" for c in node.named_children):
            text = text[:-1].rstrip()  # `auto* p`: the star is written already
        self.edits.append(Edit.replace(tnode, text))
        for c in node.children:
            if c != tnode:
                self.visit(c)
        return True

    def deduce(self, value: Node) -> tuple[str, _Var] | None:
        """(the OpenCL type, the variable) an `auto` initialized from `value` declares."""
        scalar = self.scalar_type(value)
        if scalar is not None:
            if scalar == "double":
                self.res.fp64 = True
            return scalar, _Var("private", scalar, False)
        node = value
        while node.type == "parenthesized_expression" and node.named_child_count:
            node = node.named_children[0]
        space: str | None
        if node.type == "cast_expression":
            tnode = node.child_by_field_name("type")
            if tnode is None or not any(c.type in _POINTER_DECLS for c in tnode.named_children):
                return None
            r = self.root(node.child_by_field_name("value"))
            space = r.space if r is not None and r.indirect else "private"
            elem = self.render(tnode).rstrip()
            if not elem.endswith("*"):
                return None
            elem = elem[:-1].rstrip()
        elif node.type == "pointer_expression" and _text(node).startswith("&"):
            target = node.child_by_field_name("argument")
            space = self.lvalue_space(target)
            elem_type = self.scalar_type(target)
            if space is None or elem_type is None:
                return None
            elem = elem_type
        else:
            base: Node | None = node
            if node.type == "binary_expression" and _text(node.child_by_field_name("operator")) in ("+", "-"):
                base = node.child_by_field_name("left")  # pointer + offset
            if base is None or base.type != "identifier":
                return None
            r = self.vars.get(_text(base))
            if r is None or not r.indirect or r.subscripts != 1:
                return None
            space, elem = r.space, r.elem
        qual = f"__{space} " if space in _SPACES else ""
        return f"{qual}{elem}*", _Var(space, elem, True)

    def pointer_space(self, name: str, value: Node | None) -> str | None:
        candidates: list[Node | None] = [value] if value is not None else []
        if value is None and self.fn is not None and self.fn.body is not None:
            stack = [self.fn.body]
            while stack:
                n = stack.pop()
                if n.type == "assignment_expression":
                    left = n.child_by_field_name("left")
                    if left is not None and left.type == "identifier" and _text(left) == name:
                        candidates.append(n.child_by_field_name("right"))
                stack.extend(n.children)
        found = set()
        for c in candidates:
            r = self.root(c)
            if r is not None and r.indirect and r.space in _SPACES:
                found.add(r.space)
        return found.pop() if len(found) == 1 else None

    def shared(self, node: Node, extern: bool) -> bool:
        if self.fn is None or not self.fn.kernel:
            self.error(
                node,
                _text(node),
                "__shared__ inside a __device__ helper: OpenCL allows __local only in kernels",
            )
            return True
        elem = self.type_of(node)
        declared = []
        for d in node.children_by_field_name("declarator"):
            ident, chain = _declared(d)
            if ident is not None:
                declared.append(_text(ident))
                rank = sum(1 for c in chain if c.type == "array_declarator")
                self.vars[_text(ident)] = _Var("local", elem, True, rank)
                if extern:
                    self.extern_shared.append((_text(ident), elem))
        if extern:
            names = ", ".join(declared)
            self.edits.append(
                Edit.replace(node, f"/* porter: extern __shared__ {names}: a __local kernel argument */")
            )
            return True
        if node.parent is not None and node.parent == self.fn.body:
            for c in node.children:
                self.visit(c)
        else:  # OpenCL: __local variables at kernel function scope only
            saved, self.edits = self.edits, []
            for c in node.children:
                self.visit(c)
            inner, self.edits = self.edits, saved
            self.hoisted.append(self.tr.apply(node, inner))
            self.edits.append(
                Edit.replace(node, "/* porter: __local declaration moved to the kernel's top */")
            )
        return True

    def _v_cast_expression(self, node: Node) -> bool:
        tnode = node.child_by_field_name("type")
        value = node.child_by_field_name("value")
        has_pointer = tnode is not None and any(c.type in _POINTER_DECLS for c in tnode.named_children)
        if tnode is None or not has_pointer or value is None:
            return False
        packed = self.packed.cast_target(tnode, value)
        if packed is not None:  # `(float3*)raw` into global memory: CUDA's layout (packed.py)
            self.edits.append(Edit.replace(tnode, packed.pointer()))
            self.visit(value)
            return True
        r = self.root(value)
        if r is not None and r.indirect and r.space in _SPACES:
            self.edits.append(Edit.replace(tnode, f"__{r.space} {self.render(tnode)}"))
        else:
            self.visit(tnode)
        self.visit(value)
        return True

    # ------------------------------------------------------------------ calls

    def _v_call_expression(self, node: Node) -> bool:
        fn = node.child_by_field_name("function")
        arglist = node.child_by_field_name("arguments")
        args = _args(arglist)
        if fn is not None and self.cg_call(node, fn, args):
            return True
        if any(c.type == "kernel_call_syntax" for c in node.children):
            self.error(node, _text(fn) + "<<<...>>>", "kernel launch from device code (dynamic parallelism)")
            return True
        accessor = self.accessor_use(node)
        if accessor is not None:
            self.accessor_pointer(node, *accessor)
            return True
        if fn is not None and self.functional_cast(node) is not None:
            # `float(x)`, `fp(1.6)`: C++'s functional casts are no OpenCL C
            value = self.render(args[0]) if args else "0"
            name = _text(fn)
            spelled = self.map_type(self.subst[name]) if name in self.subst else self.render(fn)
            if self.functional_cast(node) == "double":
                self.res.fp64 = True
            self.edits.append(Edit.replace(node, f"(({spelled})({value}))"))
            return True
        if fn is not None and fn.type == "template_function" and self.misparsed_comparison(fn):
            return False  # comparisons, not a call: visited as written
        if fn is not None and fn.type == "template_function":
            name = _text(fn.child_by_field_name("name"))
            if name == "tex1Dfetch" or name in self.t["untranslatable"]:
                # `tex1Dfetch<float>(obj, i)`, `tex2D<float4>(obj, x, y)`: a texture object's fetch
                self.error(
                    node,
                    f"{name}<...>",
                    "texture object fetch (cudaTextureObject_t): porter translates texture references "
                    "bound to linear memory (texture<T, 1> with tex1Dfetch) only",
                )
                return True
            if name in ("static_cast", "reinterpret_cast", "const_cast") and len(args) == 1:
                targs = fn.child_by_field_name("arguments")
                tdesc = targs.named_children[0] if targs is not None and targs.named_child_count else None
                packed = self.packed.cpp_cast(node)
                if packed is not None:  # `reinterpret_cast<float3*>(raw)` (packed.py)
                    cast, _, operand = packed
                    self.edits.append(Edit.replace(node, f"(({cast.pointer()})({self.render(operand)}))"))
                    return True
                if tdesc is not None:
                    ttext = self.render(tdesc)
                    r = self.root(args[0])
                    pointer = any(c.type in _POINTER_DECLS for c in tdesc.named_children)
                    if pointer and r is not None and r.indirect and r.space in _SPACES:
                        ttext = f"__{r.space} {ttext}"
                    self.edits.append(Edit.replace(node, f"(({ttext})({self.render(args[0])}))"))
                    return True
            if name in self.tr.template_fns:
                targs = fn.child_by_field_name("arguments")
                explicit = [
                    a for a in (targs.named_children if targs is not None else []) if a.type != "comment"
                ]
                self.helper_call(node, name, fn, arglist, args, explicit)
                return True
            return False
        if fn is not None and fn.type == "qualified_identifier":
            inner = self._unqualified(fn)
            if inner is not None and inner.type == "identifier" and _text(inner) in self.tr.helpers:
                # `detail::helper(x)`: a call of the helper translated at file scope
                self.edits.append(Edit(fn.start_byte, inner.start_byte, ""))
                fn = inner
        if fn is None or fn.type != "identifier":
            if fn is not None and fn.type == "field_expression":
                self.error(node, _text(fn), "member function call: OpenCL C has no methods")
                return True
            return False
        name = _text(fn)
        t = self.t
        if name in self.tr.warp_macros:
            self.warp_macro(node, name)
        base = re.sub(r"_(block|system)$", "", name)
        if name == "tex1Dfetch" or (name in t["untranslatable"] and name.startswith("tex")):
            self.texture_fetch(node, name, args)
        elif name in t["untranslatable"]:
            self.error(node, name, t["untranslatable"][name])
        elif name in t["barriers"]:
            self.edits.append(Edit.replace(node, t["barriers"][name].format(fences=self.fences())))
        elif base in t["atomics"]:
            if base != name and name.endswith("_system"):
                self.warn_once(node, name, "system-scope atomic becomes a device-scope OpenCL atomic")
            self.atomic(node, base, args)
        elif name in t["warp"]:
            self.warp_call(node, name, args)
        elif (
            name in t["floating_overloads"]
            and len(args) == 1
            and (spelled := self.floating_overload(name, args[0]))
        ):
            # `abs(x)` of a float: C++'s floating overload, which OpenCL C spells otherwise (its abs is integer)
            self.edits.append(Edit.replace(fn, spelled))
            self.visit_arguments(name, arglist, args)
        elif name in t["function_templates"]:
            rendered = [self.render(a) for a in args]
            try:
                self.edits.append(Edit.replace(node, t["function_templates"][name].format(*rendered)))
            except IndexError:
                self.error(node, name, f"{name} called with {len(args)} arguments")
        elif name in t["functions"]:
            self.edits.append(Edit.replace(fn, t["functions"][name]))
            self.visit_arguments(name, arglist, args)
        elif _MAKE_VECTOR.match(name):
            m = _MAKE_VECTOR.match(name)
            assert m is not None
            vbase = t["vector_bases"].get(m.group(1))
            if vbase is None or m.group(2) == "1":
                self.error(node, name, "vector type without an OpenCL C counterpart")
            else:
                self.edits.append(Edit.replace(fn, f"({vbase}{m.group(2)})"))
                self.visit(arglist) if arglist is not None else None
        elif name in self.tr.helpers:
            self.helper_call(node, name, fn, arglist, args)
        elif any(k.name == name for k in self.tr.kernels):
            self.error(node, name, "calling a __global__ function from device code")
        elif name in self.tr.template_fns:
            self.helper_call(node, name, fn, arglist, args, [])
        else:
            self.visit_arguments(name, arglist, args)
        return True

    # ------------------------------------------------------------------ cooperative groups

    def dropped_cg_type(self, node: Node) -> bool:
        """`__shared__ cg::block_tile_memory<N> scratch;`: the memory CUDA's tiles of more than a warp
        need before sm_90; OpenCL's need none, so the declaration goes."""
        name, _ = _cg_parts(node.child_by_field_name("type"))
        if name not in self.t["cooperative_groups"]["dropped_types"]:
            return False
        shown = _squash(_text(node)).replace("*/", "* /")
        self.edits.append(Edit.replace(node, f"/* porter: {shown} dropped: OpenCL tiles need no memory */"))
        return True

    def group_declaration(self, node: Node) -> bool:
        """`cg::thread_block b = cg::this_thread_block();`, `cg::thread_block_tile<32> t =
        cg::tiled_partition<32>(b);`, `auto t = cg::tiled_partition<N>(b);`, `cg::thread_group g =
        cg::tiled_partition(b, 32);`: the handle is dropped (its line kept) and its uses translated
        where they are (:meth:`group_method`, :meth:`cg_call`)."""
        if self.dropped_cg_type(node):
            return True
        cgt = self.t["cooperative_groups"]
        kind = node.child_by_field_name("type")
        if kind is None:
            return False
        declared, _ = _cg_parts(kind)
        is_auto = kind.type == "placeholder_type_specifier"
        if not is_auto and declared not in (*cgt["block_types"], *cgt["tile_types"]):
            return False
        pairs: list[tuple[Node | None, Node | None]] = []
        for d in node.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else None
            if value is not None and value.type in ("initializer_list", "argument_list"):
                value = value.named_children[0] if value.named_child_count == 1 else None
            pairs.append((inner, value))
        return self.declare_groups(node, pairs, is_auto)

    def _v_expression_statement(self, node: Node) -> bool:
        """`cg::thread_block_tile<32> t = cg::tiled_partition<32>(b);` after another declaration, which
        tree-sitter reads as the comparisons `(cg::thread_block_tile < 32) > (t = ...)`."""
        expr = node.named_children[0] if node.named_child_count else None
        if (
            expr is None
            or expr.type != "binary_expression"
            or _text(expr.child_by_field_name("operator")) != ">"
        ):
            return False
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        if (
            left is None
            or right is None
            or left.type != "binary_expression"
            or _text(left.child_by_field_name("operator")) != "<"
            or right.type != "assignment_expression"
            or _text(right.child_by_field_name("operator")) != "="
        ):
            return False
        name, _ = _cg_parts(left.child_by_field_name("left"))
        if name not in self.t["cooperative_groups"]["tile_types"]:
            return False
        return self.declare_groups(
            node, [(right.child_by_field_name("left"), right.child_by_field_name("right"))], False
        )

    def declare_groups(self, node: Node, pairs: list[tuple[Node | None, Node | None]], is_auto: bool) -> bool:
        """The handles `pairs` (declared name, initializer) declare: recorded, the declaration dropped."""
        found: list[tuple[str, _Group]] = []
        for inner, value in pairs:
            if value is None or inner is None or inner.type != "identifier":
                if is_auto:
                    return False
                self.error(
                    node, _text(node), "cooperative-groups handle declared without its group: not translated"
                )
                return True
            group = self.group_value(value)
            if group is None and is_auto:
                return False
            if not isinstance(group, _Group):
                self.refused_groups.update(
                    _text(i) for i, _ in pairs if i is not None and i.type == "identifier"
                )
                self.error(node, _squash(_text(value)), group or "not a cooperative group porter follows")
                return True
            found.append((_text(inner), group))
        for name, group in found:
            self.groups[name] = group
        what = ", ".join(
            f"{n}: {'the work-group' if g.block else f'a tile of {g.size} threads'}" for n, g in found
        )
        self.edits.append(Edit.replace(node, f"/* porter: {what} */"))
        return True

    def constant(self, node: Node) -> int | None:
        """The integer value of a constant expression (template arguments substituted, macros expanded)."""
        from porter.scan import cexpr

        text = self.tr.expand(_squash(_text(node)))
        text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: _paren(self.subst.get(m.group(0), m.group(0))), text)
        try:
            value = cexpr.eval_text(self.tr.expand(text), self.tr.constexprs())
        except (cexpr.ExprError, ZeroDivisionError, ValueError, TypeError):
            return None
        return int(value) if isinstance(value, int) or float(value).is_integer() else None

    def group_of(self, node: Node | None) -> _Group | None:
        """The group a handle expression names: a handle variable or `cg::this_thread_block()`."""
        if node is None:
            return None
        while node.type == "parenthesized_expression" and node.named_child_count:
            node = node.named_children[0]
        if node.type == "identifier":
            return self.groups.get(_text(node))
        if _this_thread_block(node):
            return _Group()
        if node.type == "call_expression" and _cg_name(node.child_by_field_name("function")).startswith(
            "tiled_partition"
        ):
            made = self.group_value(node)  # `cg::reduce(cg::tiled_partition<32>(b), v, op)`
            return made if isinstance(made, _Group) else None
        return None

    def group_value(self, value: Node) -> _Group | str | None:
        """The group an initializer makes: a _Group, a reason it cannot be translated, or None when it
        is no cooperative-groups expression."""
        if value.type != "call_expression" or _this_thread_block(value):
            return self.group_of(value)
        if value.type != "call_expression":
            return None
        name, targs = _cg_parts(value.child_by_field_name("function"))
        if name != "tiled_partition":
            return f"cg::{name}: porter follows the thread block and its tiles only" if name else None
        args = _args(value.child_by_field_name("arguments"))
        size_node = (
            targs[0] if targs and len(args) == 1 else args[1] if not targs and len(args) == 2 else None
        )
        if size_node is None or not args:
            return "tiled_partition with arguments porter does not understand"
        parent = self.group_of(args[0])
        if parent is None:
            return f"tiled_partition of {_text(args[0])}: porter follows tiles of the thread block and of its tiles"
        size = self.constant(size_node)
        if size is None:
            return f"tile size {_squash(_text(size_node))} is not a constant porter can evaluate"
        if size < 1 or size > 1024 or size & (size - 1):
            return f"tile size {size}: CUDA's tiles are powers of two up to 1024 threads"
        if not parent.block and size >= parent.size:
            return f"a tile of {size} threads cut from a tile of {parent.size}"
        return _Group(size, None if parent.block else parent, parent.uniform)

    def rank_of(self, group: _Group) -> str:
        cgt = self.t["cooperative_groups"]
        if group.block:
            return str(cgt["rank"])
        return self.tile_value(group, "thread_rank")

    def size_of(self, group: _Group) -> str:
        return str(self.t["cooperative_groups"]["size"]) if group.block else f"{group.size}u"

    def tile_value(self, group: _Group, method: str) -> str:
        parent = group.parent or _Group()
        return str(self.t["cooperative_groups"]["tile"][method]).format(
            n=group.size, parent_rank=self.rank_of(parent), parent_size=self.size_of(parent)
        )

    def uniform(self, node: Node) -> bool:
        """Does every work-item of the work-group reach `node` of this function?  No condition or loop
        around it, no `return` before it (and, in a helper, a call of it that every work-item reaches)."""
        body = self.fn.body if self.fn is not None else None
        up = node.parent
        while up is not None and body is not None and up != body:
            if up.type in _UNIFORM_BREAKERS:
                return False
            if up.type == "binary_expression" and _text(up.child_by_field_name("operator")) in ("&&", "||"):
                return False
            up = up.parent
        if up is None or body is None:
            return False
        stack = [body]
        while stack:
            n = stack.pop()
            if (
                n.type == "return_statement"
                and n.start_byte < node.start_byte
                and not (n.start_byte <= node.start_byte < n.end_byte)
            ):
                return False
            stack.extend(n.children)
        return self.fn is None or self.fn.kernel or all(g.uniform for g in self.groups.values())

    def cg_call(self, node: Node, fn: Node, args: list[Node]) -> bool:
        """A cooperative-groups call: a method of a handle (`t.shfl_down(v, 1)`, `cta.thread_rank()`,
        `cg::this_thread_block().sync()`), or a free function taking one (`cg::sync(b)`,
        `cg::thread_rank(t)`, `cg::reduce(t, v, cg::plus<int>())`)."""
        cgt = self.t["cooperative_groups"]
        if fn.type == "field_expression":
            handle = fn.child_by_field_name("argument")
            if _text(handle) in self.refused_groups:
                return True  # its declaration is reported
            group = self.group_of(handle)
            if group is None:
                return False
            method = _text(fn.child_by_field_name("field"))
            self.group_method(node, f"{_text(handle)}.{method}", group, method, args)
            return True
        name, _ = _cg_parts(fn)
        if not name or not args:
            return False
        if _text(args[0]) in self.refused_groups:
            return True
        group = self.group_of(args[0])
        if group is None:
            return False
        if name in cgt["free_functions"]:
            self.group_method(node, f"cg::{name}", group, str(cgt["free_functions"][name]), args[1:])
        elif name in ("reduce", "inclusive_scan", "exclusive_scan"):
            self.group_reduce(node, name, group, args)
        else:
            self.error(
                node, f"cg::{name}", f"cg::{name}: a cooperative-groups function porter does not translate"
            )
        return True

    def group_method(self, node: Node, shown: str, group: _Group, method: str, args: list[Node]) -> None:
        cgt = self.t["cooperative_groups"]
        if group.block:
            table = cgt["block"]
            if method == "sync":
                self.edits.append(
                    Edit.replace(node, self.t["barriers"]["__syncthreads"].format(fences=self.fences()))
                )
            elif method in table["dim3"]:
                self.group_dim3(node, shown, method)
            elif method in table:
                self.edits.append(
                    Edit.replace(node, str(table[method]).format(rank=cgt["rank"], size=cgt["size"]))
                )
            else:
                self.error(node, shown, f"thread_block::{method} is not translated")
            return
        if method in cgt["tile"]:
            self.edits.append(Edit.replace(node, self.tile_value(group, method)))
            return
        if method == "sync" and group.size > WARP_32:
            if not self.uniform(node):
                self.error(
                    node,
                    shown,
                    f"sync of a {group.size}-thread tile that not every work-item reaches: OpenCL's only "
                    "barrier of several sub-groups is the work-group's",
                )
                return
            self.edits.append(
                Edit.replace(node, self.t["barriers"]["__syncthreads"].format(fences=self.fences()))
            )
            return
        warp = cgt["collectives"].get(method)
        if warp is None:
            self.error(node, shown, f"thread_block_tile::{method} is not translated")
            return
        if group.size > WARP_32:
            self.error(
                node,
                shown,
                f"{method} on a tile of {group.size} threads: CUDA offers it on tiles of a warp or less",
            )
            return
        if not self.subgroups_ok(node, shown):
            return
        rendered = [self.render(a) for a in args]
        if group.size == WARP_32 or method == "sync":
            if method == "sync" and group.size < WARP_32:
                self.warn_once(
                    node,
                    shown,
                    f"sync of a {group.size}-thread tile is a barrier of its whole 32-wide sub-group: "
                    "every tile of the warp must reach it",
                )
            self.res.assumes_32 = True
            spec = self.t["warp"][warp]
            full = [self.t["warp_full_masks"]["values"][0]] if spec.get("mask") == 0 else []
            self.emit_warp(node, warp, [*full, *rendered], None)
        elif method in cgt["partial_collectives"]:
            partial = cgt["partial_collectives"]
            self.res.assumes_32 = True
            self.res.requires.update(partial["requires"])
            self.edits.append(Edit.replace(node, str(partial[method]).format(*rendered, n=group.size)))
        elif warp in self.t["warp"] and self.t["warp"][warp].get("partial"):
            spec = self.t["warp"][warp]
            full = [self.t["warp_full_masks"]["values"][0]] if spec.get("mask") == 0 else []
            self.emit_warp(node, warp, [*full, *rendered], group.size)
        else:
            self.error(
                node, shown, f"{method} on a tile of {group.size} threads (part of a warp) is not translated"
            )

    def group_dim3(self, node: Node, shown: str, method: str) -> None:
        """`b.group_index()` alone is a dim3: not translated (its components are: :meth:`block_dim3`)."""
        self.error(node, shown, f"{method}() used as a whole (dim3): only .x/.y/.z of it are translated")

    def block_dim3(self, node: Node, call: Node, fld: Node | None) -> bool:
        """`b.group_index().x`, `b.thread_index().y`, `b.dim_threads().z` on the block's handle."""
        fn = call.child_by_field_name("function")
        if fn is None or fn.type != "field_expression" or _args(call.child_by_field_name("arguments")):
            return False
        group = self.group_of(fn.child_by_field_name("argument"))
        method = _text(fn.child_by_field_name("field"))
        block = self.t["cooperative_groups"]["block"]
        if group is None or not group.block or method not in block["dim3"]:
            return False
        dim = self.t["builtin_dims"].get(_text(fld))
        if dim is None:
            self.error(node, _text(node), f"unknown component of {method}()")
            return True
        self.edits.append(Edit.replace(node, str(block[method]).format(d=dim)))
        return True

    def group_reduce(self, node: Node, name: str, group: _Group, args: list[Node]) -> None:
        """cg::reduce(t, v, cg::plus<T>()), cg::inclusive_scan(t, v[, op]), cg::exclusive_scan(t, v[, op])."""
        cgt = self.t["cooperative_groups"]
        shown = f"cg::{name}"
        if group.block:
            self.error(node, shown, f"cg::{name} over the whole thread block: CUDA defines it on tiles")
            return
        if len(args) < 2 or (name == "reduce" and len(args) != 3) or len(args) > 3:
            self.error(node, shown, f"cg::{name} called with {len(args)} arguments")
            return
        op = "plus"
        if len(args) == 3:
            op, _ = _cg_parts(
                args[2].child_by_field_name("function") if args[2].type == "call_expression" else None
            )
        spec = cgt["reduce"].get(op)
        if spec is None:
            self.error(
                node,
                f"{shown} with {_squash(_text(args[2]))}",
                "porter translates the operations cg::plus, cg::less, cg::greater, cg::bit_and, cg::bit_or "
                "and cg::bit_xor",
            )
            return
        ty = self.scalar_type(args[1])
        types = cgt["reduce_types"]["integer" if spec.get("integer_only") else "types"]
        if ty is not None and ty not in types:
            self.error(
                node, shown, f"cg::{name} of {ty}: OpenCL's sub-group reductions take {', '.join(types)}"
            )
            return
        if not self.subgroups_ok(node, shown):
            return
        value = self.render(args[1])
        if group.size > WARP_32:
            self.multi_warp_reduce(node, shown, name, op, group, ty, value)
            return
        key = "warp" if name == "reduce" else name
        if group.size < WARP_32:
            if name != "reduce":
                self.error(
                    node,
                    shown,
                    f"cg::{name} over a tile of {group.size} threads: OpenCL has no clustered scan",
                )
                return
            self.res.requires.update(cgt["cluster"]["requires"])
            text = f"{spec['cluster']}({value}, {group.size}u)"
        elif key not in spec:
            self.error(node, shown, f"cg::{name} with cg::{op}: no OpenCL sub-group counterpart")
            return
        else:
            text = f"{spec[key]}({value})"
        self.res.assumes_32 = True
        self.res.requires.update(spec["requires"])
        self.edits.append(Edit.replace(node, text))

    def multi_warp_reduce(
        self, node: Node, shown: str, name: str, op: str, group: _Group, ty: str | None, value: str
    ) -> None:
        """cg::reduce over a tile of several sub-groups: a porter helper combining the sub-groups'
        reductions through the kernel's __local scratch; every work-item must reach the call."""
        multi = self.t["cooperative_groups"]["multi_warp"]
        spec = self.t["cooperative_groups"]["reduce"][op]
        if name != "reduce":
            self.error(
                node,
                shown,
                f"cg::{name} over a tile of {group.size} threads (several warps) is not translated",
            )
            return
        if ty is None:
            self.error(
                node,
                shown,
                f"cg::reduce over a tile of {group.size} threads: porter cannot tell the value's type",
            )
            return
        if not self.uniform(node):
            self.error(
                node,
                shown,
                f"cg::reduce over a tile of {group.size} threads that not every work-item reaches: its "
                "sub-groups are combined behind work-group barriers",
            )
            return
        if not self.use_scratch(node, shown):
            return
        self.res.assumes_32 = True
        self.res.requires.update(spec["requires"])
        self.res.tile_reducers.add((op, ty))
        if ty == "double":
            self.res.fp64 = True
        self.edits.append(Edit.replace(node, str(multi["call"]).format(value, name=op, T=ty, n=group.size)))

    def use_scratch(self, node: Node, shown: str) -> bool:
        """The __local scratch of multi-warp reductions: a kernel declares it at its top, a helper handed
        a multi-warp tile takes it as its last parameter."""
        multi = self.t["cooperative_groups"]["multi_warp"]
        if self.fn is not None and self.fn.kernel:
            if not self.scratch_hoisted:
                self.scratch_hoisted = True
                self.hoisted.append(str(multi["scratch_declaration"]))
            return True
        if self.scratch_param:
            return True
        self.error(
            node,
            shown,
            "a tile of several warps made inside a __device__ helper: pass it from the kernel instead",
        )
        return False

    def fences(self) -> str:
        f = self.t["barrier_fences"]
        if self.fn is not None and self.fn.kernel:
            writes_global = any(p.pointer and not p.const_pointee for p in self.fn.params)
            return f["global"] if writes_global else f["local"]
        return f["global"]

    def atomic(self, node: Node, name: str, args: list[Node]) -> None:
        if not args:
            self.error(node, name, "atomic without arguments")
            return
        if self.packed.atomic(args[0], name):
            return
        r = self.root(args[0])
        canonical = _canonical(r.elem) if r is not None and r.indirect else None
        if r is None or canonical is None:
            self.error(
                node,
                f"{name}({_text(args[0])}, ...)",
                "cannot tell the type or memory of the atomic's target",
            )
            return
        cls = {
            "int": "int",
            "uint": "int",
            "long": "int64",
            "ulong": "int64",
            "float": "float",
            "double": "double",
        }.get(canonical)
        ops = self.t["atomics"][name]
        op = ops.get(cls or "")
        if op is None:
            self.error(node, name, f"{name} on {canonical} has no OpenCL counterpart")
            return
        if name in ("atomicInc", "atomicDec") and canonical != "uint":
            self.error(node, name, f"{name} on {canonical}: CUDA defines it on unsigned int only")
            return
        if r.space not in ("global", "local"):
            self.error(
                node, name, f"atomic on {r.space} memory: OpenCL atomics work on __global and __local only"
            )
            return
        if op.startswith("porter_"):
            self.res.helpers.add((op, r.space))
            op = f"{op}_{r.space}"
            for ext in self.t["helpers"][op.rsplit("_", 1)[0]]["extensions"]:
                self.res.pragmas.add(ext)
        elif cls == "int64":
            self.res.pragmas.add(self.t["atomic_int64_extensions"][op])
        rendered = [self.render(a) for a in args]
        self.edits.append(Edit.replace(node, f"{op}({', '.join(rendered)})"))

    def warp_call(self, node: Node, name: str, args: list[Node]) -> None:
        spec = self.t["warp"][name]
        if not self.subgroups_ok(node, name):
            return
        rendered = [self.render(a) for a in args]
        mask = spec.get("mask")
        full = self.t["warp_full_masks"]["values"]
        partial_mask = mask is not None and mask < len(args) and _squash(_text(args[mask])) not in full
        width = spec.get("width")
        width_node = args[width] if width is not None and width < len(args) else None
        width_text = _squash(_text(width_node)) if width_node is not None else "warpSize"
        segment: int | None = None
        if width_text == str(WARP_32):
            self.res.assumes_32 = True  # the whole warp, when sub-groups are required to be 32 wide
        elif width_text != "warpSize":
            value = self.constant(width_node) if width_node is not None else None
            if value == WARP_32:
                self.res.assumes_32 = True
            elif (
                value is not None and 0 < value < WARP_32 and not value & (value - 1) and spec.get("partial")
            ):
                segment = value
            else:
                self.error(
                    node,
                    f"{name} width {width_text}",
                    "shuffles over part of a warp are translated for a constant power-of-two width only",
                )
                return
        # a whole-warp shuffle keeps a partial mask through its `masked` form; elsewhere the mask is ignored
        masked = partial_mask and segment is None and bool(spec.get("masked"))
        if partial_mask and not masked:
            assert mask is not None
            self.warn_once(
                node,
                f"{name} mask {_text(args[mask])}",
                "lane mask ignored: OpenCL sub-group functions take every work-item of the sub-group",
            )
        self.emit_warp(node, name, rendered, segment, masked)

    def emit_warp(
        self, node: Node, name: str, rendered: list[str], segment: int | None, masked: bool = False
    ) -> None:
        """The [warp] entry `name` with its rendered CUDA arguments; `segment`: a width below 32 (the
        entry's `partial` form: a general shuffle from the lane CUDA reads, in 32-wide sub-groups);
        `masked`: the whole-warp entry's `masked` form, for a lane mask other than the full warp (lanes
        outside it read as CUDA's undefined lanes do on NVIDIA)."""
        spec = self.t["warp"][name]
        if segment is not None:
            template = str(spec["partial"])
            self.res.assumes_32 = True
            self.res.requires.update(self.t["warp_partial"]["requires"])
        else:
            template = str(spec["masked"] if masked else spec["call"])
            if spec.get("note"):
                self.warn_once(node, name, spec["note"])
            self.res.requires.update(spec["requires"])
            # a lane mask is a bitmap of CUDA's 32 lanes: it names the sub-group's lanes when that is 32 wide
            self.res.assumes_32 = self.res.assumes_32 or masked or bool(spec.get("assumes_32"))
        # the [warp_helpers] the form calls (porter_lane_down, porter_shuffle_down ...): emitted in the prelude
        called = [h for h in re.findall(r"\bporter_\w+", template) if h in self.t["warp_helpers"]]
        while called:  # with the helpers each one calls (its `needs`)
            helper = called.pop()
            if helper not in self.res.warp_helpers:
                self.res.warp_helpers.add(helper)
                called += self.t["warp_helpers"][helper].get("needs", [])
        try:
            self.edits.append(Edit.replace(node, template.format(*rendered, w=segment)))
        except IndexError:
            self.error(node, name, f"{name} called with {len(rendered)} arguments")

    def warp_macro(self, node: Node, name: str) -> None:
        """A use of a macro whose body reads warpSize (get_sub_group_size() once translated)."""
        if self.subgroups_ok(node, f"{name} (uses warpSize)"):
            self.res.requires.add("subgroups")

    def subgroups_ok(self, node: Node, name: str) -> bool:
        if self.tr.subgroups:
            return True
        self.error(node, name, "needs OpenCL sub-groups (cl_khr_subgroups and friends), which are turned off")
        return False

    def helper_call(
        self,
        node: Node,
        name: str,
        fn: Node,
        arglist: Node | None,
        args: list[Node],
        targs: list[Node] | None = None,
    ) -> None:
        """A call of a __device__ helper: the variant for the memories its pointer (and reference)
        arguments point into, the cooperative-groups handles it is handed (dropped from the call: the
        helper knows its group) and, for a function template, its template arguments (explicit, or
        deduced from the arguments)."""
        template = name in self.tr.template_fns
        helper = self.tr.template_fns[name] if template else self.tr.helpers[name]
        spaces: list[str | None] = []
        addressed: list[Edit] = []  # `&arg` for the reference parameters
        bindings: dict[str, _Group] = {}
        if any(_text(a) in self.refused_groups for a in args):
            return  # a handle whose declaration is reported
        for i, p in enumerate(helper.params):
            arg = args[i] if i < len(args) else None
            group = self.group_of(arg)
            if group is not None:
                multi = group.size > WARP_32
                bindings[p.name] = replace(group, uniform=group.uniform and (not multi or self.uniform(node)))
                spaces.append(None)
                continue
            if p.reference and not p.pointer and not p.const_pointee:
                if self.packed.reference(node, arg, f"parameter {i + 1} of {name}"):
                    return
                space = self.lvalue_space(arg)
                if space is None or arg is None:
                    self.error(
                        node,
                        f"{name}(... {_text(arg)} ...)",
                        f"cannot tell which memory argument {i + 1} of {name} (a reference) lives in",
                    )
                    space = "private"
                elif arg.type in ("identifier", "parenthesized_expression", "subscript_expression"):
                    addressed.append(Edit(arg.start_byte, arg.start_byte, "&"))
                else:
                    addressed.append(Edit(arg.start_byte, arg.start_byte, "&("))
                    addressed.append(Edit(arg.end_byte, arg.end_byte, ")"))
                spaces.append(space)
                continue
            if not p.pointer:
                spaces.append(None)
                continue
            r = self.root(arg)
            if r is not None and r.indirect:
                spaces.append(r.space)
            else:
                self.tr.diag(
                    node,
                    f"{name}(... {_text(arg)} ...)",
                    f"cannot tell which memory argument {i + 1} of {name} points into; assumed __global",
                )
                spaces.append("global")
        subst: dict[str, str] = {}
        if template:
            found = self.template_arguments(helper, args, targs or [], bindings)
            if isinstance(found, str):
                self.error(node, _text(fn), found)
                return
            subst = found
        elif targs:
            self.error(node, _text(fn), f"{name} is no template: called with template arguments")
            return
        for pname, group in bindings.items():
            param = next(p for p in helper.params if p.name == pname)
            why = self.handle_parameter(param, group, set(subst))
            if why:
                self.error(node, f"{name}(... {pname} ...)", why)
                return
        scratch = any(g.size > WARP_32 for g in bindings.values())
        if scratch and not self.use_scratch(node, f"{name}(...)"):
            return
        extra = tuple(f"{k}={v}" for k, v in subst.items()) + tuple(
            f"&{k}={g.key}" for k, g in bindings.items()
        )
        key = (name, (*spaces, *extra))
        base = instance_entry(name, tuple(subst[t] for _, t in helper.tparams)) if template else None
        if template or bindings:
            self.tr.variant_info[key] = (subst, bindings)
        vname = self.tr.variant_name(key, base)
        self.res.calls.setdefault(key)
        if vname != name:
            self.edits.append(Edit.replace(fn, vname))
        if arglist is not None:
            self.edits.extend(e for e in addressed if e.text != ")")
            handles = [
                a for i, a in enumerate(args) if i < len(helper.params) and helper.params[i].name in bindings
            ]
            self.edits.extend(_drop_items(arglist, handles))
            for c in arglist.children:
                if c not in handles:
                    self.visit(c)
            self.edits.extend(e for e in addressed if e.text == ")")
            added = [
                a
                for c in sorted(self.tr.const_uses.get(name, set()))
                for a in (self.tr.textures[c].arguments() if c in self.tr.textures else [c])
            ]
            if scratch:
                added.append(str(self.t["cooperative_groups"]["multi_warp"]["scratch"]))
            if added:
                close = arglist.children[-1]
                sep = ", " if len(args) > len(handles) else ""
                self.edits.append(Edit(close.start_byte, close.start_byte, sep + ", ".join(added)))

    def template_arguments(
        self, helper: _Fn, args: list[Node], targs: list[Node], bindings: dict[str, _Group]
    ) -> dict[str, str] | str:
        """The template arguments of a call of a function template: the explicit ones (`f<T>(x)`), then
        those deduced from the arguments (a parameter of type `T`, `const T&` or `T*`); a group handle
        argument stands for a type parameter of its own.  A string: why porter cannot tell them."""
        subst: dict[str, str] = {}
        names = [t for _, t in helper.tparams]
        for (kind, tname), node in zip(helper.tparams, targs, strict=False):
            value = self.constant(node) if kind == "value" else None
            subst[tname] = str(value) if value is not None else _squash(self.render(node))
        for i, p in enumerate(helper.params):
            tnode = p.node.child_by_field_name("type")
            tname = _squash(_text(tnode)) if tnode is not None else ""
            if tname not in names or tname in subst or i >= len(args):
                continue
            if p.name in bindings:
                subst[tname] = bindings[p.name].key
            elif p.pointer:
                r = self.root(args[i])
                elem = _canonical(r.elem) if r is not None and r.indirect and r.subscripts == 1 else None
                if elem is not None:
                    subst[tname] = elem
            else:
                ty = self.scalar_type(args[i])
                if ty is not None:
                    subst[tname] = ty
        missing = [t for t in names if t not in subst]
        if missing:
            return (
                f"call of the function template {helper.name}: porter cannot tell its template argument "
                f"{', '.join(missing)} (write it out: {helper.name}<...>(...))"
            )
        specialised = self.tr.specialisations.get(helper.name, set())
        if specialised:
            return (
                f"{helper.name} has explicit specialisations ({', '.join(sorted(specialised))}) "
                "porter does not choose between"
            )
        return {t: subst[t] for t in names}

    def handle_parameter(self, param: _Param, group: _Group, tparams: set[str]) -> str:
        """Why a helper's parameter cannot take a group handle ("" when it can): its type must be a
        cooperative-groups type (matching the handle's kind) or a template type parameter."""
        tnode = param.node.child_by_field_name("type")
        if tnode is None:
            return "a group handle passed to a parameter porter cannot read"
        if param.pointer:
            return f"a group handle passed through a pointer ({_squash(_text(param.node))})"
        if _squash(_text(tnode)) in tparams:
            return ""
        kind, targs = _cg_parts(tnode)
        cgt = self.t["cooperative_groups"]
        if kind in cgt["block_types"]:
            return "" if group.block else f"a tile passed as {_squash(_text(tnode))}"
        if kind in cgt["tile_types"]:
            if group.block:
                return f"the thread block passed as {_squash(_text(tnode))}"
            size = self.constant(targs[0]) if targs else group.size
            if size != group.size:
                return f"a tile of {group.size} threads passed as {_squash(_text(tnode))}"
            return ""
        return f"a group handle passed as {_squash(_text(tnode))}"

    # ------------------------------------------------------------------ the function itself

    def translate(self, new_name: str) -> _Result:
        fn = self.fn
        assert fn is not None
        node = fn.node
        quals = self.t["function_qualifiers"]
        inline = False
        for c in node.children:
            if c.type == "launch_bounds":
                self.tr.diag(c, _text(c), "launch bounds dropped (OpenCL has no counterpart)", Severity.INFO)
                self.edits.append(Edit(c.start_byte, self._after_space(c), ""))
            elif not c.is_named and c.type in quals:
                inline = inline or quals[c.type] == "inline"
                self.edits.append(Edit(c.start_byte, self._after_space(c), ""))
            elif c.type == "storage_class_specifier" and quals.get(_text(c)) == "inline":
                inline = True
                self.edits.append(Edit(c.start_byte, self._after_space(c), ""))
            elif fn.kernel and c.type == "storage_class_specifier" and _text(c) == "static":
                self.tr.diag(c, "static", "dropped: OpenCL kernels cannot be static", Severity.INFO)
                self.edits.append(Edit(c.start_byte, self._after_space(c), ""))
        if fn.kernel:
            self.edits.append(Edit(node.start_byte, node.start_byte, "__kernel "))
        elif inline:
            static = next(
                (c for c in node.children if c.type == "storage_class_specifier" and _text(c) == "static"),
                None,
            )
            if static is not None:
                self.edits.append(Edit(static.end_byte, static.end_byte, " inline"))
            else:
                self.edits.append(Edit(node.start_byte, node.start_byte, "static inline "))
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            self.visit_declarator_prefix(decl)
            decl = decl.child_by_field_name("declarator")
        assert decl is not None
        name_node = decl.child_by_field_name("declarator")
        if name_node is not None and new_name != fn.name:
            self.edits.append(Edit.replace(name_node, new_name))
        rtype = node.child_by_field_name("type")
        if rtype is not None:
            self.visit(rtype)
        handles = [p.node for p in fn.params if p.name in self.groups]
        for p in fn.params:
            if p.name not in self.groups:
                self.param(p)
        if fn.body is not None:
            self.visit(fn.body)
        # Added arguments: extern __shared__ arrays, then __constant__ symbols.
        added: list[str] = []
        extern_first = None
        if self.extern_shared:
            extern_first, elem = self.extern_shared[0]
            added.append(f"__local {elem}* {extern_first}")
            self.res.extra.append({"kind": "local", "bytes": "shared_bytes", "symbol": extern_first})
            for other, oelem in self.extern_shared[1:]:
                self.hoisted.append(f"__local {oelem}* {other} = (__local {oelem}*){extern_first};")
        for cname in sorted(self.tr.const_uses.get(fn.name, set())):
            tex = self.tr.textures.get(cname)
            if tex is not None:
                added += tex.params()
                if fn.kernel:
                    self.res.extra += tex.extras()
                continue
            const = self.tr.consts[cname]
            added.append(f"__constant {const.elem}* {cname}")
            if fn.kernel:
                self.res.extra.append(self.const_extra(const))
        if self.scratch_param and not fn.kernel:
            added.append(str(self.t["cooperative_groups"]["multi_warp"]["scratch_parameter"]))
        plist = decl.child_by_field_name("parameters")
        if handles and plist is not None:  # the group handles it was handed: the helper knows its group
            self.edits.extend(_drop_items(plist, handles, "" if added else "void"))
        if added and plist is not None:
            close = plist.children[-1]
            real = [p for p in plist.named_children if p.type != "comment" and p not in handles]
            if len(real) == 1 and _squash(_text(real[0])) == "void":
                self.edits.append(Edit.replace(real[0], ", ".join(added)))
            else:
                sep = ", " if real else ""
                self.edits.append(Edit(close.start_byte, close.start_byte, sep + ", ".join(added)))
        if self.hoisted and fn.body is not None:
            brace = fn.body.children[0]
            indent = "\n    "
            self.edits.append(Edit(brace.end_byte, brace.end_byte, indent + indent.join(self.hoisted)))
        self.res.text = self.tr.apply(node, self.edits)
        self.res.span = (node.start_point[0], node.end_point[0])
        return self.res

    def _after_space(self, node: Node) -> int:
        end = node.end_byte
        data = self.tr.data
        while end < len(data) and data[end : end + 1] in (b" ", b"\t"):
            end += 1
        return end

    def visit_declarator_prefix(self, decl: Node) -> None:
        for c in decl.children:
            if c.type == "type_qualifier":
                self.visit(c)

    def param(self, p: _Param) -> None:
        fn = self.fn
        assert fn is not None
        if p.reference:
            self.reference_param(p)
            return
        if p.pointer:
            space = "global" if fn.kernel else (self.spaces.get(p.name) or "private")
            if space != "private":
                self.edits.append(Edit(p.node.start_byte, p.node.start_byte, f"__{space} "))
            _, chain = _declared(p.node.child_by_field_name("declarator"))
            stars = sum(1 for c in chain if c.type in ("pointer_declarator", "array_declarator"))
            pointee = self.global_pointee(p.node) if space == "global" and stars == 1 else None
            elem = self.type_of(p.node, pointee)
            self.vars[p.name] = _Var(space, elem + "*" * (stars - 1), True)
            if fn.kernel and stars > 1:
                self.error(
                    p.node, _text(p.node), "pointer-to-pointer kernel argument: OpenCL cannot pass one"
                )
            packed = self.packed.of(elem) if space == "global" and stars == 1 else None
            if packed is not None:  # `float3* v` -> `__global float* v`: CUDA's layout (packed.py)
                self.packed.vars[p.name] = packed
                pointee = packed.scalar
                self.res.fp64 = self.res.fp64 or packed.scalar == "double"
            type_node = p.node.child_by_field_name("type")
            for c in p.node.children:
                if pointee is not None and c == type_node:
                    self.edits.append(Edit.replace(c, pointee))
                else:
                    self.visit(c)
            return
        elem = self.type_of(p.node)
        self.vars[p.name] = _Var("private", elem, False)
        type_node = p.node.child_by_field_name("type")
        if fn.kernel and self.packed_argument(p, elem, type_node):
            return
        mapped = self.t["kernel_param_types"].get(_squash(_text(type_node))) if fn.kernel else None
        if mapped is not None and type_node is not None:
            self.edits.append(Edit.replace(type_node, mapped))
            for c in p.node.children:
                if c != type_node:
                    self.visit(c)
        else:
            for c in p.node.children:
                self.visit(c)

    def packed_argument(self, p: _Param, elem: str, type_node: Node | None) -> bool:
        """A kernel's `float3 d`: the host passes CUDA's 12 bytes, OpenCL C's float3 argument takes 16, so the
        argument is a struct of CUDA's layout (`porter_packed_float3 d_packed`) and the kernel's first line
        the float3 `d` (packed.py)."""
        packed = self.packed.of(elem)
        ident, chain = _declared(p.node.child_by_field_name("declarator"))
        if packed is None or type_node is None or ident is None or chain:
            return False
        name = self.tr.safe_name(p.name)
        arg = f"{p.name}_packed"
        self.edits.append(Edit.replace(type_node, _packed.struct_name(packed.scalar)))
        self.edits.append(Edit.replace(ident, arg))
        self.hoisted.append(f"{elem} {name} = {_packed.unpacked(packed, arg)};")
        self.res.packed_structs.add(packed.scalar)
        self.res.fp64 = self.res.fp64 or packed.scalar == "double"
        for c in p.node.children:
            if c not in (type_node, p.node.child_by_field_name("declarator")):
                self.visit(c)
        return True

    def reference_param(self, p: _Param) -> None:
        """`const T& v` becomes the value `const T v` (what it reads cannot change through it);
        `T& x` becomes the pointer `T* x` into the memory of the call's argument (one helper
        variant per memory, as for pointer parameters), its uses `(*x)`, its call sites `&arg`."""
        fn = self.fn
        assert fn is not None
        decl = p.node.child_by_field_name("declarator")
        amp = decl.children[0] if decl is not None and decl.children else None
        inner = decl.named_children[0] if decl is not None and decl.named_children else None
        if (
            fn.kernel
            or p.pointer
            or decl is None
            or decl.type != "reference_declarator"
            or amp is None
            or amp.type != "&"
            or inner is None
            or inner.type != "identifier"
        ):
            self.error(
                p.node, _text(p.node), "C++ reference parameter of this kind: OpenCL C has no references"
            )
            return
        elem = self.type_of(p.node)
        data = self.tr.data
        spaced = (
            data[amp.start_byte - 1 : amp.start_byte].isspace()
            or data[amp.end_byte : amp.end_byte + 1].isspace()
        )
        if p.name != self.tr.safe_name(p.name):
            self.edits.append(Edit.replace(inner, self.tr.safe_name(p.name)))
        if p.const_pointee:
            self.edits.append(Edit.replace(amp, "" if spaced else " "))
            self.vars[p.name] = _Var("private", elem, False)
        else:
            space = self.spaces.get(p.name) or "private"
            if space != "private":
                self.edits.append(Edit(p.node.start_byte, p.node.start_byte, f"__{space} "))
            self.edits.append(Edit.replace(amp, "*"))
            self.vars[p.name] = _Var(space, elem, True, 0)
            self.refs.add(p.name)
        for c in p.node.children:
            if c != decl:
                self.visit(c)

    def lvalue_space(self, node: Node | None) -> str | None:
        """The memory an lvalue lives in (None: porter cannot tell)."""
        if node is None:
            return None
        t = node.type
        if t == "identifier":
            var = self.vars.get(_text(node))
            return var.space if var is not None else None
        if t == "parenthesized_expression":
            return self.lvalue_space(node.named_children[0] if node.named_child_count else None)
        if t == "field_expression":
            base = node.child_by_field_name("argument")
            if _text(node.child_by_field_name("operator")) == "->":
                r = self.root(base)
                return r.space if r is not None and r.indirect else None
            return self.lvalue_space(base)
        if t in ("subscript_expression", "pointer_expression") and not _text(node).startswith("&"):
            r = self.root(node)
            return r.space if r is not None and r.indirect else None
        return None

    def texture_fetch(self, node: Node, name: str, args: list[Node]) -> None:
        """`tex1Dfetch(tex, i)` on a texture reference over linear memory: a plain load of the texture's
        buffer argument, zero outside its bound range (backends/opencl/textures.py).  Any other texture
        fetch (`tex1D`, `tex2D`, `tex3D` ...: the texture unit's addressing, filtering, normalised
        coordinates, CUDA arrays) is refused, naming the texture and why."""
        first = args[0] if args else None
        tname = _text(first) if first is not None and first.type == "identifier" else ""
        if name != "tex1Dfetch":
            why = (
                f"{name} fetches through the texture unit (a CUDA array, filtering, normalised coordinates): "
                "it needs OpenCL images and samplers, which porter does not make"
            )
            if tname in self.tr.textures:
                why += f"; {tname} is bound to linear memory: tex1Dfetch reads it"
            elif tname in self.tr.bad_globals:
                why += f"; {self.tr.bad_globals[tname]}"
            self.error(node, f"{name}({tname or '...'}, ...)", why)
            return
        tex = self.tr.textures.get(tname)
        if tex is None:
            if tname in self.tr.bad_globals:
                self.error(node, f"tex1Dfetch({tname}, ...)", self.tr.bad_globals[tname])
            else:
                shown = _squash(_text(first)) if first is not None else ""
                self.error(
                    node,
                    f"tex1Dfetch({shown}, ...)",
                    "tex1Dfetch of something other than a file-scope texture reference (a texture object): "
                    "porter translates texture references bound to linear memory only",
                )
            return
        if len(args) != 2:
            self.error(node, "tex1Dfetch", f"tex1Dfetch called with {len(args)} arguments")
            return
        self.res.tex_types.add(tex.elem)
        if tex.elem.startswith("double"):
            self.res.fp64 = True
        self.edits.append(Edit.replace(node, tex.fetch(self.render(args[1]))))

    def const_extra(self, c: _Const) -> dict[str, Any]:
        count = " * ".join(_paren(self.tr.expand(d)) for d in c.dims) if c.dims else "1"
        canonical = _canonical(c.elem) or c.elem
        extra: dict[str, Any] = {
            "kind": "constant",
            "symbol": c.name,
            "count": count,
            "bytes": f"{count} * sizeof({canonical})",
            "dtype": self.t["dtypes"].get(canonical, canonical),
        }
        for copy in self.tr.scan.copies if self.tr.scan is not None else ():
            if copy.api.startswith("cudaMemcpyToSymbol") and copy.dst.lstrip("&") == c.name:
                extra["host_source"] = copy.src
                extra["host_bytes"] = copy.bytes
                extra["host_line"] = copy.line
                break
        else:
            self.tr.diag(
                c.node,
                c.name,
                "no cudaMemcpyToSymbol of this __constant__ symbol found in the file",
                Severity.INFO,
            )
        return extra


def _expand(defines: dict[str, str], text: str, depth: int = 0) -> str:
    if depth > 8 or not defines:
        return text
    out = re.sub(
        r"\b[A-Za-z_]\w*\b",
        lambda m: _paren(defines[m.group(0)]) if defines.get(m.group(0)) else m.group(0),
        text,
    )
    return out if out == text else _expand(defines, out, depth + 1)


# --------------------------------------------------------------------------- macros


def _macro_body(tr: _Translator, value: Node, name: str) -> str | None:
    """The macro body with CUDA names translated token by token (None: unchanged)."""
    text = _text(value)
    t = tr.t
    toks = [k for k in c_tokens(text) if k.kind != COMMENT]
    edits: list[tuple[int, int, str]] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        nxt = toks[i + 1].text if i + 1 < len(toks) else ""
        close = _functional_cast_close(tr, toks, i)
        if close is not None:
            # `fp(x)` -> `((fp)(x))`: C++'s functional cast as a C cast
            edits += [(tok.start, tok.start, "(("), (tok.end, tok.end, ")"), (close, close, ")")]
        if tok.kind == NUMBER:
            m = _LL_SUFFIX.match(tok.text)
            if m:
                edits.append((tok.start, tok.end, f"{m.group(1)}{m.group(2)}{m.group(3)[0]}{m.group(4)}"))
        elif tok.kind == IDENT:
            word = tok.text
            if (
                word in t["builtins"]
                and nxt == "."
                and i + 2 < len(toks)
                and toks[i + 2].text in t["builtin_dims"]
            ):
                dim = t["builtin_dims"][toks[i + 2].text]
                call = t["builtins"][word].format(d=dim)
                edits.append((tok.start, toks[i + 2].end, f"(({t['builtin_cast']['type']}){call})"))
                i += 3
                continue
            if word in t["barriers"] and nxt == "(" and i + 2 < len(toks) and toks[i + 2].text == ")":
                edits.append(
                    (
                        tok.start,
                        toks[i + 2].end,
                        t["barriers"][word].format(fences=t["barrier_fences"]["global"]),
                    )
                )
                i += 3
                continue
            if word in t["functions"]:
                edits.append((tok.start, tok.end, t["functions"][word]))
            elif word in t["function_qualifiers"]:
                edits.append(
                    (tok.start, tok.end, t["function_qualifiers"][word].replace("__kernel", "__kernel"))
                )
            elif word == "__shared__":
                edits.append((tok.start, tok.end, "__local"))
            elif word in t["types"]:
                edits.append((tok.start, tok.end, t["types"][word]))
            elif word == "warpSize" and tr.subgroups:
                edits.append((tok.start, tok.end, t["warp"]["warpSize"]["call"]))
            elif (
                word in t["untranslatable"]
                or word == "tex1Dfetch"
                or word in t["atomics"]
                or word in t["warp"]
                or word in t["function_templates"]
            ):
                tr.diag(
                    value,
                    f"#define {name}: {word}",
                    "CUDA name inside a macro body is not translated (the macro works only if unused in kernels)",
                )
        i += 1
    if not edits:
        return None
    edits.sort(key=lambda e: (e[0], e[0] != e[1]))  # stable: insertions before a replacement there
    out = []
    pos = 0
    for s, e, rep in edits:
        out.append(text[pos:s])
        out.append(rep)
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _functional_cast_close(tr: _Translator, toks: list[Token], i: int) -> int | None:
    """Where the functional cast `toks[i](...)` of a macro body ends (None: no such cast): a
    scalar type word or alias (`float`, `unsigned`, `fp`) called with at most one argument, not
    after a word (a declaration `int (x)`, `unsigned long`) nor in front of `(*` (a function
    pointer; `return float(x)` is a cast)."""
    tok = toks[i]
    if tok.kind != IDENT or i + 2 >= len(toks) or toks[i + 1].text != "(" or toks[i + 2].text in ("*", "&"):
        return None
    if _canonical_scalar(tok.text) is None and tok.text not in tr.scalar_aliases:
        return None
    if (
        i > 0
        and toks[i - 1].kind in (IDENT, NUMBER)
        and toks[i - 1].text not in ("return", "case", "else", "do")
    ):
        return None
    depth = 0
    for k in toks[i + 1 :]:
        if k.kind != PUNCT:
            continue
        if k.text in ("(", "[", "{"):
            depth += 1
        elif k.text in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return k.end
        elif k.text == "," and depth == 1:
            return None  # `T(a, b)`: a constructor, no cast
    return None


def _macro_edits(tr: _Translator, referenced: set[str], main_path: str) -> None:
    stack = [tr.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("preproc_def", "preproc_function_def"):
            name = _text(node.child_by_field_name("name"))
            value = node.child_by_field_name("value")
            origin = tr.unit.origin(node.start_point[0])[0]
            if origin != main_path and value is not None and name not in referenced:
                tr.top_edits.append(Edit(node.start_byte, node.end_byte, ""))
                continue
            if value is not None:
                body = _macro_body(tr, value, name)
                if body is not None:
                    tr.top_edits.append(Edit.replace(value, body))
            continue
        if node.type in (
            "preproc_if",
            "preproc_ifdef",
            "preproc_elif",
            "preproc_else",
        ) and "__CUDA_ARCH__" in _text(node.child_by_field_name("condition")):
            tr.diag(
                node, "__CUDA_ARCH__", "__CUDA_ARCH__ is undefined in OpenCL C: the #if takes its host branch"
            )
        if node.type in ("translation_unit", "preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else"):
            stack.extend(reversed(node.named_children))


def _referenced(tr: _Translator, extra_texts: Sequence[str], main_path: str) -> set[str]:
    """Names used by the code, by template arguments, and by the macros that are kept (a fixpoint)."""
    code: set[str] = set()
    bodies: dict[str, set[str]] = {}
    kept: set[str] = set()
    stack = [tr.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("preproc_def", "preproc_function_def"):
            name = _text(node.child_by_field_name("name"))
            value = node.child_by_field_name("value")
            bodies.setdefault(name, set()).update(k.text for k in c_tokens(_text(value)) if k.kind == IDENT)
            if tr.unit.origin(node.start_point[0])[0] == main_path or value is None:
                kept.add(name)
            continue
        if node.type in ("identifier", "type_identifier"):
            code.add(_text(node))
        stack.extend(node.children)
    for text in extra_texts:
        code |= {k.text for k in c_tokens(text) if k.kind == IDENT}
    used = set(code)
    frontier = (kept | code) & set(bodies)
    done: set[str] = set()
    while frontier:
        name = frontier.pop()
        done.add(name)
        new = bodies.get(name, set()) - used
        used |= new
        frontier |= (new & set(bodies)) - done
    return used


# --------------------------------------------------------------------------- assembly


def _assumes_32(tr: _Translator, reached: Sequence[_Result], scan: Any) -> list[int]:
    """Lines of the scan's 32-lane assumptions (hazard warp-size-assumption) inside the kernel or
    the helpers it calls; [0] for a construct whose CUDA result needs 32 lanes (a 32-bit ballot)."""
    lines: list[int] = [0] if any(r.assumes_32 for r in reached) else []
    hazards = [h for h in (scan.hazards if scan is not None else ()) if h.code == "warp-size-assumption"]
    for r in reached:
        first, last = tr.unit.origin(r.span[0]), tr.unit.origin(r.span[1])
        if first[0] != tr.path or last[0] != tr.path:
            continue  # the scan covers the main file only
        lines += [h.line for h in hazards if first[1] <= h.line <= last[1]]
    return sorted(set(lines))


def _note_32(tr: _Translator, name: str, lines: Sequence[int], line_row: int) -> None:
    reason = (
        "assumes 32-wide warps: the OpenCL kernel requires 32-wide sub-groups "
        "(intel_reqd_sub_group_size(32), cl_intel_required_subgroup_size) and is compiled out on "
        "devices that cannot run them"
    )
    for line in lines or [tr.unit.origin(line_row)[1]]:
        where = line or tr.unit.origin(line_row)[1]
        tr.diags.append(Diagnostic(tr.path, where, f"{name}: warp-size-assumption", reason))


# A conditional directive inside parentheses, as the parser is shown it: a comment on the directive's
# line (its continuation lines left empty), written back by _unmask_conditionals.
_MARK = "/*porter:pp"
_MARKED = re.compile(r"/\*porter:pp(\d+)\*/")


def _version_tests(unit: Unit) -> None:
    """Each CUDA version test of `unit`'s conditions that every CUDA porter ports from decides alike
    (``#if CUDART_VERSION < 3000``: cuda2opencl.toml [version_tests]) replaced by its value, its lines kept;
    the others reported: OpenCL C reads the macro as 0 and takes their fallback path."""
    rule = version_rule()
    if rule is None:
        return
    data = unit.text.encode("utf-8", "surrogateescape")
    if rule.pattern.search(data) is None:
        return
    root = parse("cuda", data).root_node
    tests = decided_tests(data, root, rule)
    for test in tests:
        path, line = unit.origin(test.row)
        unit.diagnostics.append(Diagnostic(path, line, test.text, rule.explain(test), rule.severity))
    if rule.fallback_reason:
        for offset, macro in fallback_uses(data, root, rule):
            path, line = unit.origin(data.count(b"\n", 0, offset))
            unit.diagnostics.append(Diagnostic(path, line, macro, rule.fallback_reason, Severity.WARNING))
    if tests:
        edits = [Edit(t.start, t.end, t.replacement(rule.oldest)) for t in tests]
        lines = apply_edits(data, edits).decode("utf-8", "surrogateescape").split("\n")
        assert len(lines) == len(unit.lines), "a version test's replacement keeps its lines"
        unit.lines = lines


def _mask_conditionals(
    unit: Unit, known: dict[str, bool] | None, command_line_known: bool = False
) -> tuple[list[_conditionals.Directive], dict[int, bool | None]]:
    """The conditional directives inside parentheses of `unit` (a parameter list's ``#ifdef``) and the
    value of each branch with the macros above it; each is replaced in `unit` by a marker comment the
    parser reads past, its lines kept."""
    data = unit.text.encode("utf-8", "surrogateescape")
    directives = _conditionals.in_parentheses(data)
    if not directives:
        return [], {}
    if command_line_known:
        known = _conditionals.undefined_by_default(data, directives, known)
    values = _conditionals.branch_values(data, known)
    for i, d in enumerate(directives):
        line = unit.lines[d.row]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        unit.lines[d.row] = f"{indent}{_MARK}{i}*/"
        for extra in range(1, d.rows):
            unit.lines[d.row + extra] = ""
    return directives, values


def _unmask_conditionals(
    text: str, directives: Sequence[_conditionals.Directive], inline: bool = False
) -> str:
    """`text` with each marker of :func:`_mask_conditionals` written back as its directive (on its own
    line); a marker elsewhere (quoted in a comment or a diagnostic) as the directive's words."""
    if not directives or _MARK not in text:
        return text

    def back(m: re.Match[str]) -> str:
        d = directives[int(m.group(1))]
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        alone = not text[start : m.start()].strip() and not text[m.end() : end if end >= 0 else None].strip()
        if alone and not inline:
            return d.text
        return _conditionals.describe(d).replace("*/", "* /")

    return _MARKED.sub(back, text)


def _live_params(
    tr: _Translator, k: _Fn, directives: Sequence[_conditionals.Directive], values: dict[int, bool | None]
) -> tuple[int, str | None]:
    """How many of kernel `k`'s parameters the program's build passes (those its parameter list's
    conditionals leave in), and the refusal when porter cannot decide them (None: none to refuse)."""
    if not directives or not k.params:
        return len(k.params), None
    plist = k.params[0].node.parent or k.params[0].node
    first, last = plist.start_point[0], plist.end_point[0]
    inside = [d for d in directives if first <= d.row <= last]
    if not inside:
        return len(k.params), None
    live, undecided = _conditionals.liveness([p.node.start_point[0] for p in k.params], inside, values)
    if undecided is None:
        return sum(live), None
    path, line = tr.unit.origin(undecided.row)
    construct = _conditionals.describe(undecided)
    reason = (
        f"a preprocessor conditional in the parameter list of {k.name} that porter cannot decide "
        "(its macros are not defined above it, nor by -D/-U): which arguments the program passes is unknown"
    )
    tr.diags.append(Diagnostic(path, line, construct[:120], reason, Severity.ERROR))
    return len(k.params), f"{construct[:120]}: {reason}"


def _guard(text: str, requires: Sequence[str]) -> str:
    """`text` inside ``#if <the requirements' guards>``; unchanged when nothing is required."""
    table = requirements()
    conds = [table[n]["guard"] for n in _closure(set(requires)) if table[n].get("guard")]
    if not conds:
        return text
    cond = " && ".join(conds)
    return f"#if {cond}\n{text}\n#endif /* {cond} */"


def _with_attributes(text: str, requires: Sequence[str]) -> str:
    """A kernel's text with the attributes of its requirements before ``__kernel``."""
    table = requirements()
    attrs = [table[n]["attribute"] for n in _closure(set(requires)) if table[n].get("attribute")]
    if not attrs:
        return text
    head, sep, rest = text.partition("__kernel ")
    return f"{head}{' '.join(attrs)}\n{sep}{rest}" if sep else text


def _comment(lines: Sequence[str]) -> str:
    body = "\n".join(f" *   {line}" for line in lines)
    return f"/* porter: not translated to OpenCL C:\n{body}\n */"


def translate_to_opencl(
    source: str,
    path: str = "<input>",
    *,
    include_dirs: Sequence[str] = (),
    subgroups: bool = True,
    scanned: Scanned | None = None,
    defines: Sequence[str] = (),
    undefines: Sequence[str] = (),
    command_line_known: bool = False,
) -> Translation:
    """Translate every kernel of a CUDA file into one self-contained OpenCL C program; UsageError
    for a file nested too deeply to walk.  ``scanned``: the file's scan and macro table, when the
    caller holds them (else made here).  ``defines``/``undefines``: the build's ``-D NAME[=VALUE]`` and
    ``-U NAME``, which decide the conditionals of parameter lists (:mod:`.conditionals`);
    ``command_line_known``: they are the build's whole command line, so a macro of the program's own
    (:func:`.conditionals.program_macro`) that they do not define is undefined until a file defines it."""
    from porter.errors import too_deeply_nested

    try:
        return _translate_to_opencl(
            source,
            path,
            include_dirs=include_dirs,
            subgroups=subgroups,
            scanned=scanned,
            known=_conditionals.known_from(defines, undefines),
            command_line_known=command_line_known,
        )
    except RecursionError:
        raise too_deeply_nested(path) from None


@dataclass(frozen=True)
class _Launches:
    """The launches of one file of a unit, with its text (whose host templates resolve them)."""

    path: str
    source: str
    launches: tuple[LaunchSite, ...]


_LAUNCH_HINT = re.compile(r"<<<|LaunchKernel")


def _included_launches(unit: Unit, path: str, scanned: Scanned | None, macros: Any) -> list[_Launches]:
    """The launches of each file `unit` inlines (an ``#include "scan.cu"`` whose host code launches
    ``prescan<true, false>``): the compiler instantiates a template kernel for every launch in the
    translation unit, so the OpenCL program holds the instances launched there too.  A file's scan is the
    caller's (``scanned.included``) where it holds one, else made here; a file that names no launch is
    not scanned."""
    from porter.errors import UsageError
    from porter.files import read_text
    from porter.scan import scan_source

    held = {str(Path(p).resolve()): s for p, s in (scanned.included if scanned is not None else ())}
    main = str(Path(path).resolve()) if path != "<input>" else path
    out: list[_Launches] = []
    for inc in dict.fromkeys(unit.included):
        key = str(Path(inc).resolve())
        if key == main:
            continue
        try:
            text = read_text(inc)
        except UsageError:
            continue
        if not _LAUNCH_HINT.search(text):
            continue
        scan = held.get(key)
        if scan is None:
            try:
                scan = scan_source(text.encode("utf-8", "surrogateescape"), inc, "cuda", macros)
            except Exception:  # noqa: BLE001 - the scan is only an aid (its launches); translation goes on
                continue
        if scan.launches:
            out.append(_Launches(inc, text, tuple(scan.launches)))
    return out


def _translate_to_opencl(
    source: str,
    path: str,
    *,
    include_dirs: Sequence[str],
    subgroups: bool,
    scanned: Scanned | None,
    known: dict[str, bool] | None = None,
    command_line_known: bool = False,
) -> Translation:
    from porter.scan import scan_source
    from porter.scan.macros import collect, spelled_out

    t = tables()
    scan: FileScan | None
    if scanned is not None:
        macros, scan = scanned.macros, scanned.scan
    else:
        macros = collect([(path, source.encode("utf-8", "surrogateescape"))], include_dirs)
        try:
            scan = scan_source(source.encode("utf-8", "surrogateescape"), path, "cuda", macros)
        except Exception:  # the scan is only an aid here (launches, copies); translation goes on
            scan = None
    unit = build_unit(
        source,
        path,
        include_dirs,
        frozenset(t["dropped_headers"]["names"]),
        dict(t["unsupported_headers"]),
        # `KERNEL void k()` -> `__global__ void k()`: the translator reads qualifiers from the tree
        rewrite=lambda text: spelled_out(text, macros),
    )
    directives, values = _mask_conditionals(unit, known, command_line_known)
    _version_tests(unit)
    launched = _included_launches(unit, path, scanned, macros)
    tr = _Translator(unit, path, subgroups, scan, source, launched)
    tr.collect()
    instances = tr.run()
    launch_args = [a for launch in tr.launches() for a in launch.template_args]
    _macro_edits(tr, _referenced(tr, launch_args, path), path)

    # Helper variants: emitted where the helper was defined.
    kernels_out: list[TranslatedKernel] = []
    by_kernel: dict[int, list[str]] = {}
    pragmas: set[str] = set()
    helper_fns: set[tuple[str, str]] = set()
    lane_helpers: set[str] = set()  # [warp_helpers] the shuffles call
    tile_reducers: set[tuple[str, str]] = set()  # multi-warp cg::reduce helpers: (operation, type)
    tex_types: set[str] = set()  # element types of the textures fetched from (a fetch helper each)
    packed_structs: set[str] = set()  # scalars of by-value three-component kernel arguments (packed.py)
    fp64 = False
    for k, args, entry, res in instances:
        reached = tr.reach(res)
        errors = [e for r in reached for e in r.errors]
        n, undecided = _live_params(tr, k, directives, values)
        if undecided is not None:
            errors.append(undecided)
        needs = {q for r in reached for q in r.requires}
        if any(_branches.barriers_in_both_branches(r.text) for r in reached):
            needs.add(BRANCH_BARRIERS)  # left out where porter's probe found the device computes them wrongly
        if needs and not errors:
            lines = _assumes_32(tr, reached, scan)
            if lines:
                needs.add(REQD_32)
                _note_32(tr, instance_name(k.name, args), lines, k.line_row)
        requires = tuple(_closure(needs)) if not errors else ()
        kernels_out.append(
            TranslatedKernel(
                name=instance_name(k.name, args),
                entry=entry,
                target=TARGET,
                arg_map=tuple(range(n)) + (None,) * len(res.extra),
                extra_args=tuple(res.extra),
                untranslatable=tuple(dict.fromkeys(errors)),
                requires=requires,
            )
        )
        if errors:
            text = _comment([f"kernel {instance_name(k.name, args)}:", *dict.fromkeys(errors)])
        else:
            text = _guard(_with_attributes(res.text, requires), requires)
            for r in reached:
                pragmas |= r.pragmas
                helper_fns |= r.helpers
                lane_helpers |= r.warp_helpers
                tile_reducers |= r.tile_reducers
                tex_types |= r.tex_types
                packed_structs |= r.packed_structs
                fp64 = fp64 or r.fp64
            table = requirements()
            pragmas |= {table[q]["pragma"] for q in requires if table[q].get("pragma")}
        by_kernel.setdefault(id(k), []).append(text)
    for k in tr.kernels:
        texts = by_kernel.get(id(k))
        if not texts:
            texts = [
                f"/* porter: template kernel {k.name} not instantiated (no launch with known arguments) */"
            ]
        tr.top_edits.append(Edit.replace(k.outer, "\n\n".join(texts)))
    for name, helper in [*tr.helpers.items(), *tr.template_fns.items()]:
        texts = []
        for key, vname in tr.variants.items():
            if key[0] != name:
                continue
            res = tr.variant_results[key]
            reached = tr.reach(res)
            errors = [e for r in reached for e in r.errors]
            if errors:
                texts.append(_comment([f"helper {vname}:", *dict.fromkeys(errors)]))
            else:
                texts.append(_guard(res.text, _closure({q for r in reached for q in r.requires})))
                tex_types |= {ty for r in reached for ty in r.tex_types}
        if not texts and helper.tparams:
            texts = [f"/* porter: function template {name}: no kernel calls it; omitted */"]
        elif not texts:
            texts = [f"/* porter: __device__ {name} is not used by any kernel; omitted */"]
        tr.top_edits.append(Edit.replace(helper.outer, "\n\n".join(texts)))

    body = apply_edits(tr.data, tr.top_edits).decode("utf-8", "surrogateescape")
    prelude = [f"/* OpenCL C translation of {Path(path).name} by porter (CUDA -> OpenCL C 1.2). */"]
    if any(k.requires for k in kernels_out):
        prelude.append(
            "/* Kernels inside #if sub-group conditions exist only when built with -cl-std=CL3.0 (or CL2.0)\n"
            " * on a device with those extensions or features; elsewhere they are left out. */"
        )
    fp64 = fp64 or any(ty.startswith("double") for ty in tex_types)
    needs_fp64 = fp64 or "cl_khr_fp64" in pragmas or any(h == "porter_atomic_add_f64" for h, _ in helper_fns)
    if needs_fp64:
        prelude.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        tr.diags.append(
            Diagnostic(path, 1, "double", "uses double precision: needs cl_khr_fp64", Severity.INFO)
        )
    for ext in sorted(pragmas - {"cl_khr_fp64"}):
        prelude.append(f"#if defined({ext})\n#pragma OPENCL EXTENSION {ext} : enable\n#endif")
    if any("subgroups" in _closure(set(k.requires)) for k in kernels_out):
        prelude.append(
            ptx_subgroups_source()
        )  # sub-groups on a device whose OpenCL lacks them (dialect.toml)
    for helper_name, space in sorted(helper_fns):
        src = t["helpers"][helper_name]["source"].strip("\n")
        prelude.append("\n" + src.replace("{space}", space).replace("{qual}", f"__{space}"))
    prelude += ["\n" + src for src in _textures.fetchers(tex_types)]
    prelude += ["\n" + _packed.struct_source(scalar) for scalar in sorted(packed_structs)]
    if lane_helpers:
        # in the table's order, which defines each helper after those it calls (its `needs`)
        sources = [t["warp_helpers"][h]["source"].strip("\n") for h in t["warp_helpers"] if h in lane_helpers]
        prelude.append("\n" + _guard("\n".join(sources), ["subgroups"]))
    for op, ty in sorted(tile_reducers):
        spec = t["cooperative_groups"]["reduce"][op]
        combine = str(spec["combine"]).format(a="r", b="scratch[w]")
        reducer = str(t["cooperative_groups"]["multi_warp"]["source"]).strip("\n")
        for mark, val in {"{name}": op, "{T}": ty, "{warp}": spec["warp"], "{combine_r}": combine}.items():
            reducer = reducer.replace(mark, str(val))
        prelude.append("\n" + _guard(reducer, _closure(set(spec["requires"]))))
    for macro, definition in t.get("prelude_macros", {}).items():
        if re.search(rf"\b{re.escape(macro)}\b", body):
            prelude.append(definition)
    fast = fast_math_prelude(body)
    if fast:
        prelude.append(fast)
    text = "\n".join(prelude) + "\n\n" + body
    text = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text).strip("\n") + "\n"
    text = _unmask_conditionals(text, directives)
    seen: set[tuple[str, int, str, str]] = set()
    diags: list[Diagnostic] = []
    for d in sorted(tr.diags, key=lambda d: (d.path, d.line)):
        if _MARK in d.construct:
            d = replace(d, construct=_unmask_conditionals(d.construct, directives, inline=True))
        diag_key = (d.path, d.line, d.construct, d.reason)
        if diag_key not in seen:
            seen.add(diag_key)
            diags.append(d)
    return Translation(
        source_path=path, target=TARGET, text=text, kernels=tuple(kernels_out), diagnostics=tuple(diags)
    )
