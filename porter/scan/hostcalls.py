"""Host functions, their call sites and local declarations: what spec inference needs to follow a
launch made inside a host helper (``run_axpby<float>(n, ...)`` launching ``axpby<T><<<...>>>``).

The scan records launches, allocations and assignments; this adds, from the same source text,
each function's parameters and template parameters, every call of a named function (arguments,
explicit template arguments, the enclosing function) and every local declaration with its type
(``T *d_x, *d_y;`` included, which carries no value).  :func:`deduce_template_args` matches a
function's parameter types against argument types the way C++ deduction does for the plain
cases (``T``, ``T*``, ``const T*``, ``T&``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tree_sitter import Node

from porter.grammars import parse
from porter.scan.nodes import (
    enclosing_function,
    function_declarator,
    function_name,
    node_text,
    squash,
    template_param_names,
)

_QUALIFIER_WORDS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|static|inline)\b")
_FLOAT_LITERAL = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+[eE][-+]?\d+|\d+\.\d*[eE][-+]?\d+)([fFlL]?)$")
_INT_LITERAL = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|\d+)([uUlL]*)$")


@dataclass(frozen=True)
class HostFunction:
    name: str
    params: tuple[tuple[str, str], ...]  # (name, declared type without the name), in order
    template_params: tuple[str, ...]  # names: "T", "BLOCK"
    line: int
    end_line: int


@dataclass(frozen=True)
class HostCall:
    callee: str
    args: tuple[str, ...]  # argument expressions as written
    template_args: tuple[str, ...]  # explicit template arguments as written ("float", "256")
    line: int
    function: str | None  # the enclosing function


@dataclass(frozen=True)
class Declaration:
    var: str
    type: str  # "float*", "const T*", "dim3"
    line: int
    function: str | None


@dataclass(frozen=True)
class HostCode:
    functions: tuple[HostFunction, ...] = ()
    calls: tuple[HostCall, ...] = ()
    declarations: tuple[Declaration, ...] = ()

    def function(self, name: str | None, nargs: int | None = None) -> HostFunction | None:
        """The definition named `name` (the one taking `nargs` arguments when overloaded)."""
        found = [f for f in self.functions if f.name == name]
        if nargs is not None and len(found) > 1:
            found = [f for f in found if len(f.params) == nargs] or found
        return found[0] if found else None

    def calls_of(self, name: str) -> list[HostCall]:
        return [c for c in self.calls if c.callee == name]

    def declared_type(self, var: str, function: str | None, before_line: int) -> str | None:
        """The type `var` was declared with in `function` (the last declaration before the line)."""
        cands = [d for d in self.declarations if d.var == var and d.function == function]
        if not cands:
            cands = [d for d in self.declarations if d.var == var and d.function is None]
        if not cands:
            return None
        before = [d for d in cands if d.line <= before_line]
        return max(before or cands, key=lambda d: d.line).type


def declared(declarator: Node | None) -> tuple[str | None, str]:
    """(name, pointer/reference suffix) of a declarator: `*d_x` -> ("d_x", "*")."""
    suffix = ""
    node = declarator
    while node is not None:
        t = node.type
        if t in ("identifier", "field_identifier"):
            return node_text(node), suffix
        if t in ("pointer_declarator", "abstract_pointer_declarator", "array_declarator"):
            suffix += "*"
        elif t in ("reference_declarator", "abstract_reference_declarator"):
            suffix += "&"
        elif t == "init_declarator":
            pass
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next(
                (c for c in node.named_children if c.type.endswith("declarator") or c.type == "identifier"),
                None,
            )
        node = nxt
    return None, suffix


def _base_type(decl: Node) -> str:
    """The declaration's type specifier with its qualifiers: `const T`."""
    parts = []
    for c in decl.children:
        if c.type in (
            "type_qualifier",
            "primitive_type",
            "type_identifier",
            "sized_type_specifier",
            "template_type",
            "qualified_identifier",
        ):
            parts.append(node_text(c))
    type_node = decl.child_by_field_name("type")
    if type_node is not None and node_text(type_node) not in parts:
        parts.append(node_text(type_node))
    return squash(" ".join(parts))


@lru_cache(maxsize=32)
def host_code(source: str) -> HostCode:
    """Functions, calls and declarations of a CUDA/C++ source (parsed with tree-sitter)."""
    tree = parse("cuda", source.encode("utf-8", "surrogateescape"))
    functions: list[HostFunction] = []
    calls: list[HostCall] = []
    decls: list[Declaration] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        t = node.type
        if t == "function_definition":
            name = function_name(node)
            fdecl = function_declarator(node)
            if name and fdecl is not None:
                tparams: tuple[str, ...] = ()
                if node.parent is not None and node.parent.type == "template_declaration":
                    plist = node.parent.child_by_field_name("parameters")
                    tparams = template_param_names(plist) if plist is not None else ()
                params = []
                plist = fdecl.child_by_field_name("parameters")
                for p in plist.named_children if plist is not None else []:
                    if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
                        continue
                    pname, suffix = declared(p.child_by_field_name("declarator"))
                    ptype = squash(_base_type(p) + suffix)
                    if pname is None:
                        if ptype == "void":
                            continue
                        pname = ""
                    params.append((pname, ptype))
                    decls.append(Declaration(pname, ptype, node.start_point[0] + 1, name))
                functions.append(
                    HostFunction(name, tuple(params), tparams, node.start_point[0] + 1, node.end_point[0] + 1)
                )
        elif t == "declaration":
            base = _base_type(node)
            where = enclosing_function(node)
            for d in node.children_by_field_name("declarator"):
                var, suffix = declared(d)
                if var:
                    decls.append(Declaration(var, squash(base + suffix), node.start_point[0] + 1, where))
        elif t == "call_expression":
            fn = node.child_by_field_name("function")
            has_chevrons = any(c.type == "kernel_call_syntax" for c in node.children)
            if fn is not None and not has_chevrons:
                targs: tuple[str, ...] = ()
                if fn.type == "template_function":
                    name_node = fn.child_by_field_name("name")
                    ta = fn.child_by_field_name("arguments")
                    targs = tuple(squash(node_text(a)) for a in (ta.named_children if ta is not None else []))
                else:
                    name_node = fn
                arglist = node.child_by_field_name("arguments")
                args = tuple(
                    squash(node_text(a)) for a in (arglist.named_children if arglist is not None else [])
                )
                calls.append(
                    HostCall(
                        squash(node_text(name_node)),
                        args,
                        targs,
                        node.start_point[0] + 1,
                        enclosing_function(node),
                    )
                )
        stack.extend(reversed(node.children))
    return HostCode(tuple(functions), tuple(calls), tuple(decls))


# ----------------------------------------------------------------------------- types


def type_shape(ctype: str) -> tuple[str, int]:
    """(base type without qualifiers, pointer depth): `const float *` -> ("float", 1); `T&` -> ("T", 0)."""
    depth = ctype.count("*") + ctype.count("[")
    base = re.sub(r"[*&\[\]]", " ", _QUALIFIER_WORDS.sub(" ", ctype))
    return squash(base), depth


def substitute_types(text: str, mapping: Mapping[str, str]) -> str:
    """Whole-word replacement of template parameter names in C text."""
    if not mapping:
        return text
    pattern = re.compile(
        r"\b(" + "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r")\b"
    )
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def literal_type(expr: str) -> str | None:
    """The C type of a literal or a cast: `2.0f` -> float, `1.5` -> double, `3` -> int, `(float)x` -> float."""
    text = expr.strip()
    m = re.match(r"^\(\s*([A-Za-z_][\w\s]*?)\s*\)\s*[\w(]", text)
    if m and m.group(1) not in ("sizeof",):
        return squash(m.group(1))
    m = re.match(r"^static_cast\s*<\s*([^<>]+?)\s*>", text)
    if m:
        return squash(m.group(1))
    m = _FLOAT_LITERAL.match(text)
    if m:
        return "float" if m.group(2) in ("f", "F") else "double"
    m = _INT_LITERAL.match(text)
    if m:
        suffix = m.group(2).lower()
        if "ll" in suffix:
            return "unsigned long long" if "u" in suffix else "long long"
        if "l" in suffix:
            return "unsigned long" if "u" in suffix else "long"
        return "unsigned int" if "u" in suffix else "int"
    if text in ("true", "false"):
        return "bool"
    return None


def deduce_template_args(
    template_params: Sequence[str],
    param_types: Sequence[str],
    args: Sequence[str],
    type_of: Callable[[str], str | None],
) -> dict[str, str]:
    """Template parameter -> C type, deduced from argument types where a parameter's type is `T`,
    `T*`, `const T*`, `T&`...; `type_of` gives an argument expression's type (None: unknown)."""
    out: dict[str, str] = {}
    wanted = set(template_params)
    for ptype, arg in zip(param_types, args, strict=False):
        pbase, pdepth = type_shape(ptype)
        if pbase not in wanted or pbase in out:
            continue
        atype = type_of(arg)
        if atype is None:
            continue
        abase, adepth = type_shape(atype)
        if adepth == pdepth and abase:
            out[pbase] = abase
    return out
