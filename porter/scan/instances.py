"""Kernel instances: each kernel of a file once per template instantiation it is launched with.

* :func:`template_instantiations`: the template-argument tuples each templated kernel is launched
  with, following template parameters of enclosing host templates to the calls that instantiate
  them (``run_axpby<float>(...)`` launching ``axpby<T><<<...>>>``) and to their explicit
  instantiations (``template void run_axpby<float>(...);``, or ``template void run_axpby(float*, ...);``
  whose arguments are deduced from parameters spelled ``T``, ``T*`` or ``const T*``).
* :func:`kernel_instances`: every kernel of a scan as :class:`Instance` entries (``axpby<float>``,
  ``axpby<double>``, ``vector_add``), the plan's unit of work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from porter.grammars import parse
from porter.model import FileScan, LaunchSite
from porter.scan.nodes import enclosing_function, function_name, node_text, squash, template_param_names

_MAX_DEPTH = 6


def instance_name(kernel: str, args: Sequence[str]) -> str:
    """`axpby<float>`: the CUDA spelling of one instantiation."""
    return f"{kernel}<{', '.join(args)}>" if args else kernel


def spelled(name: str) -> str:
    """An instance's name without blanks or integer-literal suffixes: a capture names the instance as the
    compiler does (``reduce6<int, 256u, true>`` for an ``unsigned int`` parameter), porter as the launch or
    instantiation wrote it (``reduce6<int, 256, true>``); both spell ``reduce6<int,256,true>``."""
    return re.sub(r"\b(\d+)[uUlL]+\b", r"\1", "".join(name.split()))


@dataclass
class Instantiations:
    found: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)  # kernel -> arg tuples
    unresolved: list[tuple[str, int, str]] = field(default_factory=list)  # (kernel, line, why)


@dataclass
class _HostTemplates:
    params: dict[str, tuple[str, ...]] = field(default_factory=dict)  # function -> template parameter names
    # function -> [(template args, enclosing function of the call)]; an explicit instantiation is a
    # call from no function
    calls: dict[str, list[tuple[tuple[str, ...], str | None]]] = field(default_factory=dict)
    param_types: dict[str, tuple[str, ...]] = field(default_factory=dict)  # template -> its parameters' types
    deduced: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)  # `template void f(int*);`
    # function ("" at file scope) -> its `constexpr`/`const` integral names with constant values, in order
    constants: dict[str, dict[str, int]] = field(default_factory=dict)


def _host_templates(source: str) -> _HostTemplates:
    tree = parse("cuda", source.encode("utf-8", "surrogateescape"))
    out = _HostTemplates()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "template_declaration":
            plist = node.child_by_field_name("parameters")
            fn = next((c for c in node.named_children if c.type == "function_definition"), None)
            if plist is not None and fn is not None:
                name = function_name(fn)
                if name:
                    out.params[name] = template_param_names(plist)
                    out.param_types[name] = _param_types(fn.child_by_field_name("declarator"))
        elif node.type == "template_instantiation":
            _explicit_instantiation(node, out)
        elif node.type == "declaration":
            _constant(node, out)
        elif node.type == "call_expression":
            fn_node = node.child_by_field_name("function")
            if fn_node is not None and fn_node.type == "template_function":
                name = node_text(fn_node.child_by_field_name("name"))
                targs = fn_node.child_by_field_name("arguments")
                args = tuple(
                    squash(node_text(a)) for a in (targs.named_children if targs is not None else [])
                )
                out.calls.setdefault(name, []).append((args, enclosing_function(node)))
        stack.extend(reversed(node.children))
    for name, instantiations in out.deduced.items():
        for types in instantiations:
            fixed = _deduce(out.params.get(name, ()), out.param_types.get(name, ()), types)
            if fixed is not None:
                out.calls.setdefault(name, []).append((fixed, None))
    return out


_INTEGRAL = re.compile(r"^(?:(?:un)?signed|int|long|short|char|size_t|u?int(?:8|16|32|64)_t|bool)$")


def _constant(node: Node, out: _HostTemplates) -> None:
    """`constexpr int groups = 2;` (or `const unsigned k = 4 * groups;`): an integral name whose value the
    launches' template arguments may use (``multi_warp_cg_reduce<T, 256, 256 / groups>``)."""
    words = [node_text(c) for c in node.children if c.type in ("type_qualifier", "storage_class_specifier")]
    kind = node.child_by_field_name("type")
    if not ({"constexpr", "const"} & set(words)) or kind is None:
        return
    if not all(_INTEGRAL.match(w) for w in node_text(kind).split()):
        return
    scope = enclosing_function(node) or ""
    known = {**out.constants.get("", {}), **out.constants.get(scope, {})}
    for d in node.children_by_field_name("declarator"):
        name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
        if d.type != "init_declarator" or name is None or name.type != "identifier" or value is None:
            continue
        folded = fold_integer(_substitute(squash(node_text(value)), {k: str(v) for k, v in known.items()}))
        if folded is not None:
            out.constants.setdefault(scope, {})[node_text(name)] = known[node_text(name)] = folded


def fold_integer(text: str) -> int | None:
    """The value of `text` when it is integer arithmetic on literals (``1024 / 2``, ``(1 << 5) - 1``), as C
    computes it (division truncates toward zero); None for anything else."""
    import ast

    cleaned = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text.strip())
    if not cleaned or not re.fullmatch(r"[0-9\s+\-*/%()<>&|^~]+", cleaned) or "//" in cleaned:
        return None
    try:
        tree = ast.parse(cleaned, mode="eval")
    except SyntaxError:
        return None

    def value(n: ast.AST) -> int:
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd, ast.Invert)):
            v = value(n.operand)
            return -v if isinstance(n.op, ast.USub) else ~v if isinstance(n.op, ast.Invert) else v
        if isinstance(n, ast.BinOp):
            a, b = value(n.left), value(n.right)
            if isinstance(n.op, ast.Div | ast.Mod):
                if b == 0:
                    raise ZeroDivisionError
                q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
                return q if isinstance(n.op, ast.Div) else a - b * q
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b, ast.BitAnd: a & b, ast.BitOr: a | b,
                   ast.BitXor: a ^ b}  # fmt: skip
            if type(n.op) in ops:
                return ops[type(n.op)]
            if isinstance(n.op, ast.LShift | ast.RShift) and 0 <= b < 64:
                return a << b if isinstance(n.op, ast.LShift) else a >> b
        raise ValueError(ast.dump(n))

    try:
        return value(tree.body)
    except (ValueError, ZeroDivisionError, RecursionError):
        return None


def _declarator(node: Node | None) -> Node | None:
    """The function_declarator under `node` (through pointer and reference declarators)."""
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    return node


def _param_types(declarator: Node | None) -> tuple[str, ...]:
    """Each parameter's type as written, its name left out (`const T *`, `int`)."""
    fn = _declarator(declarator)
    plist = fn.child_by_field_name("parameters") if fn is not None else None
    out = []
    for p in plist.named_children if plist is not None else []:
        if p.type != "parameter_declaration":
            continue
        text = node_text(p)
        name = p.child_by_field_name("declarator")
        while name is not None and name.type not in ("identifier", "abstract_pointer_declarator"):
            name = name.child_by_field_name("declarator")
        if name is not None and name.type == "identifier":
            cut = name.start_byte - p.start_byte
            text = text[:cut] + text[cut + (name.end_byte - name.start_byte) :]
        out.append(squash(text.replace("*", " * ").replace("&", " & ")))
    return tuple(out)


def _explicit_instantiation(node: Node, out: _HostTemplates) -> None:
    """`template void reduce<int>(...);` (its arguments) or `template void reduce(int*, ...);` (its
    parameter types, for :func:`_deduce`)."""
    fn = _declarator(node.child_by_field_name("declarator"))
    target = fn.child_by_field_name("declarator") if fn is not None else None
    if target is None:
        return
    if target.type == "template_function":
        targs = target.child_by_field_name("arguments")
        args = tuple(squash(node_text(a)) for a in (targs.named_children if targs is not None else []))
        out.calls.setdefault(node_text(target.child_by_field_name("name")), []).append((args, None))
    elif target.type == "identifier":
        out.deduced.setdefault(node_text(target), []).append(_param_types(fn))


def _deduce(params: Sequence[str], written: Sequence[str], given: Sequence[str]) -> tuple[str, ...] | None:
    """The template arguments an explicit instantiation's parameter types `given` fix, where the
    template's own parameters (`written`) spell a template parameter as `T`, `T *` or `const T *`;
    None unless every template parameter is fixed, and fixed once."""
    if not params or len(written) != len(given):
        return None
    found: dict[str, str] = {}
    for mine, theirs in zip(written, given, strict=True):
        words, other = mine.split(), theirs.split()
        for p in params:
            if p not in words:
                continue
            at = words.index(p)
            head, tail = words[:at], words[at + 1 :]
            if other[: len(head)] != head or (tail and other[len(other) - len(tail) :] != tail):
                return None
            arg = " ".join(other[len(head) : len(other) - len(tail)])
            if not arg or found.setdefault(p, arg) != arg:
                return None
    return tuple(found[p] for p in params) if all(p in found for p in params) else None


def _substitute(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in mapping) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def _resolve(
    args: tuple[str, ...], function: str | None, host: _HostTemplates, depth: int
) -> tuple[list[tuple[str, ...]], str | None]:
    """Concrete tuples for `args` written inside `function`, or why they cannot be found."""
    params = host.params.get(function or "", ())
    used = [p for p in params if any(re.search(rf"\b{re.escape(p)}\b", a) for a in args)]
    if not used:
        return [args], None
    if depth >= _MAX_DEPTH:
        return [], f"template arguments {', '.join(args)} depend on templates nested too deeply"
    calls = host.calls.get(function or "", [])
    if not calls:
        return [], (
            f"template arguments {', '.join(args)} depend on the template parameters of {function}, "
            "which is never called with explicit template arguments nor explicitly instantiated"
        )
    out: list[tuple[str, ...]] = []
    why = None
    for call_args, caller in calls:
        if len(call_args) < len(params):
            why = f"{function} is called without explicit template arguments (deduced types are not followed)"
            continue
        mapping = dict(zip(params, call_args, strict=False))
        concrete = tuple(_substitute(a, mapping) for a in args)
        found, sub_why = _resolve(concrete, caller, host, depth + 1)
        out.extend(found)
        why = why or sub_why
    return out, (why if not out else None)


def template_instantiations(
    source: str, launches: Sequence[LaunchSite], templated: Sequence[str]
) -> Instantiations:
    """Template-argument tuples per templated kernel, in first-seen order, from the launch sites."""
    result = Instantiations()
    wanted = set(templated)
    host: _HostTemplates | None = None
    for launch in launches:
        if launch.kernel not in wanted:
            continue
        if not launch.template_args:
            result.unresolved.append(
                (
                    launch.kernel,
                    launch.line,
                    "launched without explicit template arguments (deduction is not followed)",
                )
            )
            continue
        if host is None:
            host = _host_templates(source)
        tuples, why = _resolve(tuple(squash(a) for a in launch.template_args), launch.function, host, 0)
        if why is not None:
            result.unresolved.append((launch.kernel, launch.line, why))
        seen = result.found.setdefault(launch.kernel, [])
        for t in tuples:
            t = _with_constants(t, host, launch.function)
            if t not in seen:
                seen.append(t)
    return result


def _with_constants(args: tuple[str, ...], host: _HostTemplates, function: str | None) -> tuple[str, ...]:
    """`args` with the launching function's (and the file's) integral constants put in and each argument
    that is then integer arithmetic folded to its value: ``256 / numOfMultiWarpGroups`` -> ``128``, the
    instance as the compiler names it (and a name the host code of a port can spell anywhere)."""
    known = {
        k: str(v) for k, v in {**host.constants.get("", {}), **host.constants.get(function or "", {})}.items()
    }
    out = []
    for a in args:
        folded = fold_integer(_substitute(a, known)) if re.search(r"[A-Za-z_(/*%+<>-]", a) else None
        out.append(str(folded) if folded is not None else a)
    return tuple(out)


@dataclass(frozen=True)
class Instance:
    """One kernel as it runs: ``axpby<float>`` of template kernel ``axpby``, or ``vector_add``."""

    name: str  # "axpby<float>" or "vector_add"
    base: str  # the CUDA kernel name
    template_args: tuple[str, ...]


def kernel_instances(scan: FileScan, source: str, translated: Iterable[str] = ()) -> list[Instance]:
    """Every kernel of `scan`, one entry per template instantiation launched with known arguments, in
    the file's kernel order.  ``translated``: the kernel names a translator produced (``axpby<int>``),
    whose instantiations the launch analysis did not find are added (kept in order)."""
    templated = [k.name for k in scan.kernels if k.template_params]
    found = template_instantiations(source, scan.launches, templated).found if templated else {}
    seen: dict[str, Instance] = {}
    for k in scan.kernels:
        tuples = found.get(k.name) or []
        if not k.template_params or not tuples:
            seen.setdefault(k.name, Instance(k.name, k.name, ()))
            continue
        for args in tuples:
            name = instance_name(k.name, args)
            seen.setdefault(name, Instance(name, k.name, tuple(args)))
    bases = {k.name for k in scan.kernels}
    for name in translated:
        base = name.split("<", 1)[0]
        covered = "<" not in name and any(i.base == base for i in seen.values())
        if name not in seen and not covered and base in bases:
            args = tuple(a.strip() for a in name[len(base) + 1 : -1].split(",")) if "<" in name else ()
            seen[name] = Instance(name, base, args)
    order = {k.name: i for i, k in enumerate(scan.kernels)}
    return sorted(seen.values(), key=lambda inst: order.get(inst.base, len(order)))
