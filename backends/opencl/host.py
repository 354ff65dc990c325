"""The host side of an OpenCL program port: the program's own files, with each kernel's body replaced by a
host stub that launches its OpenCL translation, and device-only functions removed.

`porter port DIR --to opencl` writes, beside each unit's ``.cl`` (its kernels in OpenCL C) and its
``.launch.json`` (the launch mapping), every file of the program through :func:`host_text`:

* a ``__global__`` function keeps its signature (template header, parameters, qualifiers as written); its
  body becomes ``porter_opencl::Launch`` calls setting the OpenCL kernel's arguments in the translation's
  order (``arg_map``: a CUDA parameter, or an added ``__local`` buffer sized by the launch's dynamic shared
  memory, or a ``__constant__`` variable passed as a buffer, or the memory bound to a texture reference and
  its element count) and enqueueing it.  A template kernel gets one
  branch per instance the translation made (``if constexpr``), each naming its entry (``axpby_float``);
* a function that is only ``__device__`` is blanked (it runs only inside kernels, which are OpenCL C now);
* everything else is kept byte for byte, and every line stays where it was, so a compiler's message about
  the host code names the user's line.

The launches themselves are left as written: the OpenCL program toolchain rewrites them as porter's CPU
runtime does (backends/launches.py) and its runtime header (``porter_opencl.h``) serves the CUDA runtime
API over OpenCL.  A kernel the translator could not translate gets a stub that fails when launched; the
toolchain refuses to build a program holding one (:func:`untranslatable`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from porter.backends.launches import split_top
from porter.backends.opencl.conditionals import in_parentheses

from porter.files import decode_text, encode_text
from porter.model import TranslatedKernel

# what the host stubs of a unit are generated from: kernel name -> [(its OpenCL kernel, the .cl file)]
Entries = Mapping[str, Sequence[tuple[TranslatedKernel, str]]]

_TYPE_PARAM = re.compile(r"^\s*(?:typename|class)\b")


@dataclass(frozen=True)
class _Kernel:
    name: str
    params: tuple[str, ...]  # parameter names, "" where unnamed
    template: tuple[tuple[str, bool], ...]  # (name, is a type) per template parameter
    body: tuple[int, int]  # byte range of the body's braces
    # the parameter list as written when it holds preprocessor conditionals: ("arg", name) and
    # ("directive", its text) in order; () when it holds none
    layout: tuple[tuple[str, str], ...] = ()


def entries_of(
    translations: Iterable[tuple[str, Sequence[TranslatedKernel]]],
) -> dict[str, list[tuple[TranslatedKernel, str]]]:
    """Kernel name -> its translated instances with the ``.cl`` file (relative to the port) holding each,
    from (``.cl`` path, kernels) per unit; the first unit holding an instance wins."""
    out: dict[str, list[tuple[TranslatedKernel, str]]] = {}
    seen: set[str] = set()
    for cl, kernels in translations:
        for tk in kernels:
            if tk.name in seen:
                continue
            seen.add(tk.name)
            out.setdefault(tk.name.split("<", 1)[0].strip(), []).append((tk, cl))
    return out


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _declared_name(node: Any) -> str:
    """The identifier a (parameter) declarator declares, or ""."""
    while node is not None and node.type not in ("identifier", "field_identifier"):
        inner = node.child_by_field_name("declarator")
        if inner is None:
            found = [c for c in node.named_children if c.type == "identifier"]
            return found[0].text.decode() if found else ""
        node = inner
    return node.text.decode() if node is not None else ""


def _specifiers(node: Any) -> set[str]:
    """The CUDA function qualifiers among a definition's own nodes (the body and declarator aside)."""
    return {
        c.text.decode()
        for c in node.children
        if c.type not in ("compound_statement", "function_declarator")
        and c.text.decode() in ("__global__", "__device__", "__host__")
    }


def _function_name(definition: Any) -> str:
    decl = definition.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    if decl is None:
        return ""
    name = decl.child_by_field_name("declarator")
    return name.text.decode().split("::")[-1] if name is not None else ""


def _params(definition: Any) -> tuple[str, ...]:
    decl = definition.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    if plist is None:
        return ()
    out = []
    for p in plist.named_children:
        if p.type == "comment":
            continue
        if p.type == "parameter_declaration" and p.text.decode().strip() == "void":
            continue
        out.append(_declared_name(p.child_by_field_name("declarator")))
    return tuple(out)


def _layout(definition: Any, directives: Sequence[tuple[int, str]]) -> tuple[tuple[str, str], ...]:
    """The parameter list of `definition` with the conditional `directives` ((offset, text), masked from
    the parse) that lie inside it, in order; () when none does."""
    decl = definition.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    if plist is None:
        return ()
    inside = [(at, ("directive", text)) for at, text in directives if plist.start_byte < at < plist.end_byte]
    if not inside:
        return ()
    params = [
        (p.start_byte, ("arg", _declared_name(p.child_by_field_name("declarator"))))
        for p in plist.named_children
        if p.type != "comment"
        and not (p.type == "parameter_declaration" and p.text.decode().strip() == "void")
    ]
    return tuple(item for _, item in sorted([*params, *inside]))


def _template(definition: Any) -> tuple[tuple[str, bool], ...]:
    parent = definition.parent
    if parent is None or parent.type != "template_declaration":
        return ()
    plist = parent.child_by_field_name("parameters")
    out = []
    for p in plist.named_children if plist is not None else ():
        text = p.text.decode()
        name = re.findall(r"[A-Za-z_]\w*", text.split("=", 1)[0])
        out.append((name[-1] if name else "", bool(_TYPE_PARAM.match(text)) or p.type.startswith("type_")))
    return tuple(out)


def _functions(root: Any) -> list[Any]:
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            found.append(node)
            continue  # no kernels inside functions
        stack.extend(node.children)
    return found


def _stub(k: _Kernel, instances: Sequence[tuple[TranslatedKernel, str]]) -> list[str]:
    """The statements of `k`'s host stub, one per line."""

    def launch(tk: TranslatedKernel, cl: str, indent: str) -> list[str]:
        if tk.untranslatable:
            why = "; ".join(tk.untranslatable)
            return [f"{indent}porter_opencl::untranslatable({_c_string(tk.name)}, {_c_string(why)});"]
        if k.layout:
            return _conditional_launch(k, tk, cl, indent)
        calls, extras = [], iter(tk.extra_args)
        for slot in tk.arg_map or tuple(range(len(k.params))):
            if slot is None:
                calls.append(_extra_call(next(extras, {})))
            elif 0 <= int(slot) < len(k.params) and k.params[int(slot)]:
                calls.append(f".arg({k.params[int(slot)]})")
            else:
                why = f"parameter {slot} of {k.name} has no name the host stub can pass"
                return [f"{indent}porter_opencl::untranslatable({_c_string(tk.name)}, {_c_string(why)});"]
        head = (
            f"{indent}porter_opencl::Launch porter_launch({_c_string(tk.entry or tk.name)}, {_c_string(cl)});"
        )
        return [head, f"{indent}porter_launch{''.join(calls)}.run();"]

    if not k.template:
        if not instances:
            return [
                "porter_opencl::untranslatable("
                + _c_string(k.name)
                + ", "
                + _c_string("no unit's OpenCL translation holds it (diagnostics.txt says why)")
                + ");"
            ]
        tk, cl = instances[0]
        return launch(tk, cl, "")
    lines: list[str] = []
    for tk, cl in instances:
        inner = tk.name[tk.name.index("<") + 1 : tk.name.rindex(">")] if "<" in tk.name else ""
        args = [a.strip() for a in split_top(inner)]
        if len(args) != len(k.template):
            continue
        tests = [
            f"std::is_same_v<{name}, {arg}>" if is_type else f"({name}) == ({arg})"
            for (name, is_type), arg in zip(k.template, args, strict=True)
        ]
        lines.append(f"{'else ' if lines else ''}if constexpr ({' && '.join(tests)}) {{")
        lines += launch(tk, cl, "    ")
        lines.append("}")
    why = _c_string("no launch of this instance was seen when porter translated the program")
    if lines:
        return [*lines, f"else {{ porter_opencl::no_instance({_c_string(k.name)}, {why}); }}"]
    # no instance at all: a program that launches it cannot run (untranslatable() refuses it)
    why = _c_string(
        "launched with template arguments porter could not resolve, so no instance was translated"
    )
    return [f"porter_opencl::no_instances({_c_string(k.name)}, {why});"]


def _extra_call(extra: Mapping[str, Any]) -> str:
    """The stub's call that passes an argument the translation added (TranslatedKernel.extra_args)."""
    kind = extra.get("kind")
    if kind == "constant":
        return f".symbol({extra.get('symbol')})"
    if kind == "texture":  # the memory bound to the texture reference now
        symbol = str(extra.get("symbol"))
        return f".texref({symbol}, {_c_string(symbol)})"
    if kind == "texture_size":  # how many elements that binding holds
        return f".texref_size({extra.get('symbol')})"
    return ".local()"


def _extra_calls(extras: Iterable[Mapping[str, Any]]) -> list[str]:
    return [_extra_call(extra) for extra in extras]


def _conditional_launch(k: _Kernel, tk: TranslatedKernel, cl: str, indent: str) -> list[str]:
    """The launch of a kernel whose parameter list holds preprocessor conditionals: its arguments set in
    the order written, under the same directives (the ``.cl`` kernel keeps them too, so the host's and
    the device's preprocessors take the same branches), then the added arguments."""
    slots = list(tk.arg_map or ())
    mapped = [s for s in slots if s is not None]
    trailing = slots[len(mapped) :] if slots else []
    if mapped != list(range(len(mapped))) or any(s is not None for s in trailing):
        why = (
            f"the parameter list of {k.name} holds preprocessor conditionals and its translation "
            "reorders the arguments: the host stub cannot follow the directives"
        )
        return [f"{indent}porter_opencl::untranslatable({_c_string(tk.name)}, {_c_string(why)});"]
    if any(kind == "arg" and not name for kind, name in k.layout):
        why = f"a parameter of {k.name} has no name the host stub can pass"
        return [f"{indent}porter_opencl::untranslatable({_c_string(tk.name)}, {_c_string(why)});"]
    lines = [
        f"{indent}porter_opencl::Launch porter_launch({_c_string(tk.entry or tk.name)}, {_c_string(cl)});"
    ]
    group: list[str] = []
    for kind, value in k.layout:
        if kind == "arg":
            group.append(f".arg({value})")
            continue
        if group:
            lines.append(f"{indent}porter_launch{''.join(group)};")
            group = []
        lines.append(value)  # a directive: at the line's start
    lines.append(f"{indent}porter_launch{''.join(group)}{''.join(_extra_calls(tk.extra_args))}.run();")
    return lines


def host_text(text: str, entries: Entries) -> str:
    """`text` (a CUDA file of the program) as the OpenCL port's host code; same line count."""
    from porter.grammars import parse

    data = encode_text(text)
    if b"__global__" not in data and b"__device__" not in data:
        return text
    # conditionals inside parentheses (a kernel's parameter list): blanked for the parser, kept in the text
    directives = [(d.start, d.text) for d in in_parentheses(data)]
    shown = bytearray(data)
    for d in in_parentheses(data) if directives else ():
        shown[d.start : d.end] = re.sub(rb"[^\n]", b" ", data[d.start : d.end])
    tree = parse("cuda", bytes(shown))
    edits: list[tuple[int, int, bytes]] = []
    for fn in _functions(tree.root_node):
        words = _specifiers(fn)
        body = fn.child_by_field_name("body")
        if body is None:
            continue
        if "__global__" in words:
            k = _Kernel(
                _function_name(fn),
                _params(fn),
                _template(fn),
                (body.start_byte, body.end_byte),
                _layout(fn, directives) if directives else (),
            )
            old = data[body.start_byte : body.end_byte]
            lines = _stub(k, entries.get(k.name, ()))
            rows = old.count(b"\n")
            if len(lines) + 1 <= rows or any(line.startswith("#") for line in lines):
                # (directives need lines of their own, even where that moves the lines below)
                stub = (
                    "{\n"
                    + "".join(f"{'' if line.startswith('#') else '    '}{line}\n" for line in lines)
                    + "\n" * max(0, rows - len(lines) - 1)
                    + "}"
                )
            else:
                stub = "{ " + " ".join(line.strip() for line in lines) + " }" + "\n" * rows
            edits.append((body.start_byte, body.end_byte, encode_text(stub)))
        elif "__device__" in words and "__host__" not in words:
            whole = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else fn
            old = data[whole.start_byte : whole.end_byte]
            edits.append((whole.start_byte, whole.end_byte, b"\n" * old.count(b"\n")))
    out = data
    for start, end, replacement in sorted(edits, reverse=True):
        out = out[:start] + replacement + out[end:]
    return decode_text(out)


_STUB_REFUSED = re.compile(r'porter_opencl::untranslatable\("((?:[^"\\]|\\.)*)", "((?:[^"\\]|\\.)*)"\)')
_HOST_SUFFIXES = frozenset(
    {".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".c", ".cc", ".cpp", ".cxx", ".inc", ".inl"}
)


def untranslatable(tree: Path) -> str:
    """'cannot translate: <kernel>: <reason> (<file> line N)' for the first kernel of the port that has no
    OpenCL translation -- in the launch mappings (``*.launch.json`` under `tree`: the construct's line),
    else a host stub that can only fail (a kernel no unit's translation holds) -- or ''."""
    found = _untranslatable_mapped(tree)
    if found:
        return found
    for path in sorted(tree.rglob("*")):
        if path.suffix.lower() not in _HOST_SUFFIXES or not path.is_file():
            continue
        data = path.read_bytes()
        if b"porter_opencl::untranslatable(" not in data:
            continue
        text = decode_text(data)
        m = _STUB_REFUSED.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            return f"cannot translate: {m.group(1)}: {m.group(2)} ({path.relative_to(tree)} line {line})"
    return _launched_without_instances(tree)


_NO_INSTANCES = re.compile(r'porter_opencl::no_instances\("((?:[^"\\]|\\.)*)", "((?:[^"\\]|\\.)*)"\)')


def _launched_without_instances(tree: Path) -> str:
    """The refusal for a template kernel the translation made no instance of, when a file of the port
    launches it (``k<...><<<``), or ''."""
    stubs: list[tuple[str, str, str]] = []
    texts: list[str] = []
    for path in sorted(tree.rglob("*")):
        if path.suffix.lower() not in _HOST_SUFFIXES or not path.is_file():
            continue
        text = decode_text(path.read_bytes())
        texts.append(text)
        for m in _NO_INSTANCES.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            stubs.append((m.group(1), m.group(2), f"{path.relative_to(tree)} line {line}"))
    for name, why, where in stubs:
        launch = re.compile(rf"(?<![\w:]){re.escape(name)}\s*<[^;{{}}]*?>\s*<<<")
        if any(launch.search(text) for text in texts):
            return f"cannot translate: {name}: {why} ({where})"
    return ""


def _untranslatable_mapped(tree: Path) -> str:
    for mapping in sorted(tree.rglob("*.launch.json")):
        try:
            doc = json.loads(mapping.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        errors: dict[str, dict[str, object]] = {}  # each construct where it is first met (the file's order)
        for e in doc.get("errors", ()):
            if isinstance(e, dict):
                errors.setdefault(str(e.get("what")), e)
        for k in doc.get("kernels", ()):
            for why in k.get("untranslatable") or ():
                at = errors.get(str(why))
                where = f" ({at.get('file')} line {at.get('line')})" if at else ""
                return f"cannot translate: {k.get('name')}: {why}{where}"
    return ""


__all__ = ["Entries", "entries_of", "host_text", "untranslatable"]
