"""Kernel launches and global symbols of a CUDA/HIP program, rewritten for porter's launch wrappers.

Shared by every program toolchain that instruments a program's own host code: the CPU runtime (which
runs every launch itself) and the capturing nvcc build (backends/cuda/porter_capture_cuda.h, which
records a launch and then makes it).  The user's files are never touched: these functions map a text to
a text, keeping every line where it was so compiler messages point at the user's lines.

* every launch ``k<<<g, b, s, st>>>(args)`` becomes ``porter_emu::launch_kernel(k,
  porter_emu::config(g, b, s, st), decltype(porter_emu::params(k))(args), "k")`` -- found on the
  syntax tree (tree-sitter), or in a macro body by its tokens; a template kernel whose arguments deduce
  its parameters (or an overloaded one) goes through a generic lambda instead, whose body launches it as
  ``PORTER_DEDUCED_LAUNCH(k)(args...)`` (the wrapper header defines the macro: a plain call on the CPU
  runtime, a ``<<<...>>>`` launch on a GPU);
* a launch through the runtime's API -- ``cudaLaunchKernel(f, grid, block, args, smem, stream)``,
  ``cudaLaunchCooperativeKernel`` and their HIP spellings -- calls ``porter_emu::launch_args`` /
  ``launch_args_cooperative`` instead, which find the kernel's parameter types in porter's registry
  when ``f`` is a ``void*``;
* each global ``__constant__`` / ``__device__`` variable is registered after the file's last line
  (``PORTER_REGISTER_SYMBOL``, backends/porter_capture.h), so a launch's capture holds its contents,
  and so is each kernel the file defines at global scope (``PORTER_REGISTER_KERNEL``: its name and
  parameter types by its address, for launches through pointers and ``void*``).

A launch the text cannot show whole -- a macro holding only ``<<<g, b>>>`` or only ``k<<<g, b>>>``
with the arguments after the macro's use, or a macro whose kernel is one of its parameters when a
kernel needs deducing -- is left as written: the CPU runtime rewrites it after preprocessing
(:func:`rewrite_preprocessed`, the unit's ``#line`` markers keeping the user's file and line), a GPU
build launches it uncaptured.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from porter.files import decode_text, encode_text
from porter.includes import HEADER_SUFFIXES, SOURCE_SUFFIXES


class Sourced(Protocol):
    """What :func:`instrumented_copy` reads of a program (porter.backends.programs.ProgramSource)."""

    @property
    def tree(self) -> Path: ...
    @property
    def files(self) -> tuple[str, ...]: ...
    @property
    def include_dirs(self) -> tuple[str, ...]: ...
    @property
    def original_root(self) -> Path | None: ...


_TEMPLATE_KERNEL = re.compile(
    r"\btemplate\s*<[^;{}]*>\s*(?:(?:static|inline|extern|__host__|__device__|__launch_bounds__\s*\([^)]*\))\s+)*"
    r"__global__\s+(?:(?:static|inline|__launch_bounds__\s*\([^)]*\))\s+)*void\s+([A-Za-z_]\w*)\s*\("
)
_KERNEL = re.compile(
    r"__global__\s+(?:(?:static|inline|__launch_bounds__\s*\([^)]*\))\s+)*void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s+)?([A-Za-z_]\w*)\s*\("
)


def blank_comments_and_strings(source: str) -> str:
    """The source with comments and string/char literals replaced by spaces (newlines kept).

    Same length as the input, so positions found in the result index the original.
    """
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "/" and i + 1 < n and source[i + 1] == "/":
            j = source.find("\n", i)
            j = n if j < 0 else j
            _blank(out, i, j)
            i = j
        elif c == "/" and i + 1 < n and source[i + 1] == "*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            _blank(out, i, j)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            _blank(out, i, j)
            i = j
        else:
            i += 1
    return "".join(out)


def _blank(out: list[str], start: int, end: int) -> None:
    for k in range(start, end):
        if out[k] != "\n":
            out[k] = " "


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_SYMBOL_SKIP = re.compile(r"\b(extern|typedef|template|__shared__|texture|surface|using|static_assert)\b")
_SYMBOL_KIND = re.compile(r"\b(__constant__|__device__)\b")


def namespace_symbols(text: str) -> list[tuple[str, bool]]:
    """(name, is __constant__) of every ``__constant__`` / ``__device__`` variable the file defines at
    global scope (not inside a namespace, a class or a function; not extern)."""
    code, conditional = _global_code(text)
    found: list[tuple[str, bool]] = []
    for begin, end, ender in _global_statements(code):
        if ender != ";":
            continue
        stmt = code[begin:end]
        kind = _SYMBOL_KIND.search(stmt)
        if kind is None or _SYMBOL_SKIP.search(stmt):
            continue
        if code.count("\n", 0, begin + len(stmt) - len(stmt.lstrip())) in conditional:
            continue  # behind an #if: it may not exist in this build
        head = stmt.split("=", 1)[0]
        if "(" in head or "<" in head:  # a function, or a template type: not followed
            continue
        for part in head.split(","):
            m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$", part.strip())
            if m and m.group(1) not in ("__constant__", "__device__"):
                found.append((m.group(1), "__constant__" in stmt))
    return found


_TEXTURE_DECL = re.compile(
    r"^\s*(?:static\s+)?texture\s*<[^;{}]*>\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*$"
)


def namespace_textures(text: str) -> list[str]:
    """The names of the texture references (``texture<T, 1, cudaReadModeElementType> tex;``) the file
    defines at global scope, outside any ``#if`` block."""
    if "texture" not in text:
        return []
    code, conditional = _global_code(text)
    found: list[str] = []
    for begin, end, ender in _global_statements(code):
        stmt = code[begin:end]
        if ender != ";" or "texture" not in stmt:
            continue
        m = _TEXTURE_DECL.match(stmt)
        if m is None or code.count("\n", 0, begin + len(stmt) - len(stmt.lstrip())) in conditional:
            continue
        found += [n.strip() for n in m.group(1).split(",")]
    return found


def _global_code(text: str) -> tuple[str, set[int]]:
    """`text` with comments, strings and directives blanked, and its lines inside an ``#if``."""
    code = blank_comments_and_strings(text)
    conditional = _conditional_lines(code)
    code = re.sub(r"(?m)^[ \t]*#.*(?:\\\n.*)*$", lambda m: " " * len(m.group(0)), code)  # directives
    return code, conditional


def _global_statements(code: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, ";" or "{") of each statement at global scope of blanked `code`: a declaration, or
    the head of a function, namespace or class body (whose contents are not global statements)."""
    depth, start = 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                yield start, i, "{"
                start = i + 1
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                start = i + 1
        elif ch == ";" and depth == 0:
            yield start, i, ";"
            start = i + 1


def global_kernels(text: str, deduced: Iterable[str] = ()) -> list[str]:
    """The kernels `text` defines at global scope (not in a namespace, a class or an ``#if``; not a
    template, nor a name in `deduced`: an overload), in order: those porter registers by address."""
    if "__global__" not in text:
        return []
    skip = set(deduced)
    code, conditional = _global_code(text)
    found: list[str] = []
    for begin, end, ender in _global_statements(code):
        head = code[begin:end]
        if ender != "{" or "__global__" not in head or re.search(r"\btemplate\b", head):
            continue
        m = _KERNEL.search(head)
        if m is None or m.group(1) in skip or m.group(1) in found or not head.rstrip().endswith(")"):
            continue
        if code.count("\n", 0, begin + m.start()) in conditional:
            continue
        found.append(m.group(1))
    return found


def register_kernels(text: str, deduced: Iterable[str] = ()) -> str:
    """`text` with a registration of each kernel it defines at global scope appended
    (:func:`global_kernels`; porter_capture.h: the kernel's name and parameter types by its address);
    lines kept."""
    names = global_kernels(text, deduced)
    if not names:
        return text
    tail = "" if text.endswith("\n") else "\n"
    body = "\n".join(f"PORTER_REGISTER_KERNEL({name});" for name in names)
    return text + tail + "#ifdef __cplusplus\n" + body + "\n#endif\n"


def _conditional_lines(code: str) -> set[int]:
    """The (0-based) lines inside an ``#if``/``#ifdef``/``#ifndef`` block, an include guard aside."""
    lines = code.split("\n")
    directives = [(n, line.strip()) for n, line in enumerate(lines) if line.lstrip().startswith("#")]
    guard = None
    if len(directives) >= 2 and re.match(r"#\s*ifndef\s+(\w+)", directives[0][1]):
        name = directives[0][1].split()[-1]
        if re.match(rf"#\s*define\s+{re.escape(name)}\b", directives[1][1]):
            guard = directives[0][0]
    inside: set[int] = set()
    depth, last = 0, 0
    for n, d in directives:
        if depth > 0:
            inside.update(range(last, n))
        if re.match(r"#\s*if", d) and n != guard:
            depth += 1
        elif re.match(r"#\s*endif", d) and depth > 0:
            depth -= 1
        last = n
    return inside


def register_symbols(text: str) -> str:
    """`text` with a registration of each of its global ``__constant__`` / ``__device__`` variables
    and texture references appended (porter_capture.h: a launch's capture then holds their contents,
    a texture's being the memory bound to it); lines kept."""
    names = namespace_symbols(text) if "__constant__" in text or "__device__" in text else []
    textures = namespace_textures(text)
    if not names and not textures:
        return text
    lines = [
        f"PORTER_REGISTER_SYMBOL({name}, {'true' if constant else 'false'});" for name, constant in names
    ]
    if textures:  # a runtime whose texture references are memory it can read (porter's CPU runtime)
        lines += [
            "#ifdef PORTER_REGISTER_TEXTURE",
            *(f"PORTER_REGISTER_TEXTURE({n});" for n in textures),
            "#endif",
        ]
    tail = "" if text.endswith("\n") else "\n"
    return text + tail + "#ifdef __cplusplus\n" + "\n".join(lines) + "\n#endif\n"


@dataclass(frozen=True)
class Kernels:
    """What the rewrite needs to know of a program's kernels (:func:`program_kernels`)."""

    names: frozenset[str] = frozenset()
    deduced: frozenset[str] = frozenset()  # launched through a lambda: templates and overloads
    labels: Mapping[str, str] = field(default_factory=dict)  # a template kernel -> "k<T, N>"


def program_kernels(texts: Iterable[str]) -> Kernels:
    """The kernels of a program's texts: every name, those launched through a lambda, and each
    template kernel's name with its template parameters (``clamp<T>``: the label of a launch that
    deduces them, which a replay resolves from the captured argument types)."""
    texts = list(texts)
    names, deduced = kernel_names(texts)
    labels: dict[str, str] = {}
    for text in texts:
        blanked = blank_comments_and_strings(text)
        for m in _TEMPLATE_KERNEL.finditer(blanked):
            head = blanked[m.start() : m.end()]
            open_at = head.index("<")
            params = _template_params(head[open_at:])
            if params:
                labels.setdefault(m.group(1), f"{m.group(1)}<{', '.join(params)}>")
    return Kernels(frozenset(names), frozenset(deduced), labels)


def _template_params(angle: str) -> list[str]:
    """The parameter names of a template's ``<...>`` list (``<typename T, int N = 4>``: T, N)."""
    depth, close = 0, -1
    for k, c in enumerate(angle):
        depth += c == "<"
        depth -= c == ">"
        if depth == 0:
            close = k
            break
    if close < 0:
        return []
    found = []
    for part in split_top(angle[1:close]):
        decl = part.split("=", 1)[0].strip()
        m = re.search(r"([A-Za-z_]\w*)\s*$", decl)
        if m is None or m.group(1) in ("typename", "class") or "..." in decl:
            return []
        found.append(m.group(1))
    return found


def split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets."""
    parts, depth, last = [], 0, 0
    for k, c in enumerate(text):
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[last:k])
            last = k + 1
    parts.append(text[last:])
    return [p for p in parts if p.strip()]


def kernel_names(texts: Iterable[str]) -> tuple[set[str], set[str]]:
    """(every kernel name, those launched through a lambda: templates and overloads) of the texts.

    An overload is a name defined with two different parameter lists; a prototype (a header's
    declaration) and its definition are one kernel."""
    signatures: dict[str, set[str]] = {}
    templates: set[str] = set()
    for text in texts:
        blanked = blank_comments_and_strings(text)
        for m in _KERNEL.finditer(blanked):
            close = _matching(blanked, m.end() - 1)
            params = blanked[m.end() : close] if close > 0 else ""
            types = tuple(_param_type(p) for p in params.split(","))
            signatures.setdefault(m.group(1), set()).add(repr(types))
        templates.update(m.group(1) for m in _TEMPLATE_KERNEL.finditer(blanked))
    deduced = templates | {name for name, sigs in signatures.items() if len(sigs) > 1}
    return set(signatures), deduced


@functools.cache
def _type_words() -> frozenset[str]:
    """A parameter's type words: the builtin types and these.  (porter.scan is imported here, not at the top:
    a kernel child loads this module through the CPU emulator's and never parses a parameter.)"""
    from porter.scan.cexpr import TYPE_WORDS

    return TYPE_WORDS | frozenset(
        ["const", "volatile", "size_t", "__restrict__", "restrict", "int8_t", "int16_t", "int32_t", "int64_t",
         "uint8_t", "uint16_t", "uint32_t", "uint64_t"]
    )  # fmt: skip


def _param_type(param: str) -> str:
    """A parameter's type as written, without its name, default value or blanks."""
    tokens = re.findall(r"[A-Za-z_]\w*|\S", param.split("=", 1)[0])
    while tokens and tokens[-1] == "]" and "[" in tokens:  # an array declarator: its extent is the type's
        tokens = tokens[: len(tokens) - 1 - tokens[::-1].index("[")]
    if len(tokens) > 1 and re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]) and tokens[-1] not in _type_words():
        tokens = tokens[:-1]
    return "".join(tokens)


_DEDUCED_CALL = "PORTER_DEDUCED_LAUNCH({})"  # the wrapper header's macro: how the lambda launches


def _launch_text(
    callee: str,
    config: str,
    has_args: bool,
    deduced: bool,
    label: str | None = None,
    call: str = _DEDUCED_CALL,
) -> tuple[str, str]:
    """(text replacing ``callee<<<config>>>(``, text replacing the closing parenthesis); `label`: the
    C expression naming the launch (default: the callee as a string); `call`: how a deduced launch's
    lambda calls the kernel (``{}``: its name)."""
    name = " ".join(callee.split())
    label = label or _c_string(name)
    if deduced:
        head = (
            f"porter_emu::launch_deduced(porter_emu::config({config}), "
            f"[&](auto... porter_p) {{ {call.format(name)}(porter_p...); }}, {label}"
            + (", " if has_args else "")
        )
        return head, ")"
    head = (
        f"porter_emu::launch_kernel({name}, porter_emu::config({config}), "
        f"decltype(porter_emu::params({name}))("
    )
    return head, f"), {label})"


def _deduced_label(name: str, labels: Mapping[str, str]) -> str:
    """A deduced launch's label: the template kernel with its parameters (``k<T>``), else its name."""
    return _c_string(labels.get(name.split("::")[-1], name) if "<" not in name else name)


_API = re.compile(
    r"(?<![\w.>])(?:::\s*)?(cudaLaunchKernel|hipLaunchKernel|cudaLaunchCooperativeKernel|"
    r"hipLaunchCooperativeKernel)(\s*\()"
)


def rewrite_api_launches(text: str) -> str:
    """Every call of the runtime's launch functions (``cudaLaunchKernel(f, grid, block, args, smem,
    stream)``, the cooperative one, their HIP spellings) as a call of porter's ``launch_args`` /
    ``launch_args_cooperative``; same length per line."""
    if "LaunchKernel" not in text and "LaunchCooperativeKernel" not in text:
        return text
    blanked = blank_comments_and_strings(text)
    out: list[str] = []
    pos = 0
    for m in _API.finditer(blanked):
        cooperative = "Cooperative" in m.group(1)
        out.append(text[pos : m.start()])
        out.append("porter_emu::launch_args_cooperative" if cooperative else "porter_emu::launch_args")
        pos = m.start(2)
    out.append(text[pos:])
    return "".join(out)


def rewrite_launches(text: str, deduced: Iterable[str], labels: Mapping[str, str] | None = None) -> str:
    """Every ``<<<...>>>`` launch of `text` as a call of porter's launch wrappers (see the module
    docstring), and every launch through the runtime's API; same line count.  Launches in code are found
    on the syntax tree, those in macro bodies by tokens; `labels` names deduced template launches
    (:class:`Kernels`)."""
    deduced = set(deduced)
    labels = labels or {}
    text = rewrite_api_launches(text)
    if not re.search(r"<\s*<\s*<", text):
        return text
    from porter.grammars import parse

    data = encode_text(text)
    tree = parse("cuda", data)
    edits: list[tuple[int, int, str]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if (
            node.type == "kernel_call_syntax"
            and node.parent is not None
            and node.parent.type == "call_expression"
        ):
            edit = _tree_launch(data, node)
            if edit:
                edits += edit
                continue
        stack.extend(node.children)
    out = data
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + encode_text(new) + out[end:]
    result = decode_text(out)
    if re.search(r"<\s*<\s*<", blank_comments_and_strings(result)):
        result = _rewrite_by_tokens(result, deduced, labels, _macro_spans(result))
    # the tree pass never knows which names are templates: fix those launches up by name
    return _deduce_by_name(result, deduced, labels)


def _tree_launch(data: bytes, config: Any) -> list[tuple[int, int, str]] | None:
    call = config.parent
    fn = call.child_by_field_name("function")
    arglist = call.child_by_field_name("arguments")
    if fn is None or arglist is None or not arglist.children:
        return None
    open_tok = next((c for c in config.children if c.type == "<<<"), None)
    close_tok = next((c for c in config.children if c.type == ">>>"), None)
    if open_tok is None or close_tok is None or arglist.children[0].type != "(":
        return None
    callee = decode_text(data[fn.start_byte : fn.end_byte])
    cfg = decode_text(data[open_tok.end_byte : close_tok.start_byte])
    has_args = any(c.type != "comment" for c in arglist.named_children)
    head, tail = _launch_text(callee, cfg, has_args, False)
    span = decode_text(data[fn.start_byte : arglist.children[0].end_byte])
    lost = span.count("\n") - head.count("\n")
    close = arglist.children[-1]
    if close.type != ")":
        return None
    return [
        (fn.start_byte, arglist.children[0].end_byte, head + "\n" * max(lost, 0)),
        (close.start_byte, close.end_byte, tail),
    ]


_DEDUCE_MARK = re.compile(r"porter_emu::launch_kernel\(([A-Za-z_][\w:]*), porter_emu::config\(", re.DOTALL)


def _deduce_by_name(text: str, deduced: set[str], labels: Mapping[str, str]) -> str:
    """A typed launch of a kernel in `deduced` (a bare template name) rewritten to the lambda form."""
    if not deduced:
        return text
    pieces: list[str] = []
    pos = 0
    blanked = blank_comments_and_strings(text)
    for m in _DEDUCE_MARK.finditer(text):
        name = m.group(1)
        if name.split("::")[-1] not in deduced or m.start() < pos:
            continue
        cfg_end = _matching(blanked, m.end() - 1)
        if cfg_end < 0:
            continue
        lead = ", decltype(porter_emu::params(" + name + "))("
        if not text.startswith(lead, cfg_end + 1):
            continue
        args_open = cfg_end + len(lead)
        args_close = _matching(blanked, args_open)
        tail = ", " + _c_string(name) + ")"
        if args_close < 0 or not text.startswith(tail, args_close + 1):
            continue
        cfg = text[m.end() : cfg_end]
        args = text[args_open + 1 : args_close]
        head, close = _launch_text(name, cfg, bool(args.strip()), True, _deduced_label(name, labels))
        pieces.append(text[pos : m.start()] + head + args + close)
        pos = args_close + 1 + len(tail)
    pieces.append(text[pos:])
    return "".join(pieces)


def _matching(blanked: str, open_at: int, end: int | None = None) -> int:
    """Index of the parenthesis closing the one at `open_at` (-1: none before `end`) in text whose
    comments and strings are blanked (:func:`blank_comments_and_strings`, once per text)."""
    depth = 0
    for k in range(open_at, len(blanked) if end is None else end):
        c = blanked[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return k
    return -1


_TOKEN_LAUNCH = re.compile(r"((?:::)?[A-Za-z_][\w:]*(?:\s*<[^<>;{}()]*>)?)\s*<\s*<\s*<")
_CLOSE = re.compile(r">\s*>\s*>")
_DEFINE = re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+[A-Za-z_]\w*(\([^)\n]*\))?")


def _macro_spans(text: str) -> list[tuple[int, int, tuple[str, ...] | None]]:
    """(start, end, parameters or None: an object-like macro) of each ``#define`` of `text`, its
    continued lines included."""
    blanked = blank_comments_and_strings(text)
    spans: list[tuple[int, int, tuple[str, ...] | None]] = []
    for m in _DEFINE.finditer(blanked):
        line = m.start()
        while True:
            nl = blanked.find("\n", line)
            end = len(blanked) if nl < 0 else nl
            if nl < 0 or not blanked[line:nl].rstrip(" \t").endswith("\\"):
                break
            line = nl + 1
        params = None
        if m.group(1) is not None:
            params = tuple(p.strip() for p in m.group(1)[1:-1].split(",") if p.strip())
        spans.append((m.start(), end, params))
    return spans


def _rewrite_by_tokens(
    text: str,
    deduced: set[str],
    labels: Mapping[str, str],
    macros: list[tuple[int, int, tuple[str, ...] | None]],
    call: str = _DEDUCED_CALL,
) -> str:
    """Launches the syntax tree did not show (macro bodies, preprocessed code): callee, ``<<<cfg>>>``
    and the argument list found by matching brackets on the text with comments and strings blanked.
    In a macro body the whole launch must lie in the body; a launch whose kernel is a parameter of the
    macro is named by the argument (``#k``), and is left as written when a kernel of the program needs
    deducing (the macro's use decides which kernel it is: preprocessing shows it)."""
    blanked = blank_comments_and_strings(text)
    out: list[str] = []
    pos = 0
    for m in _TOKEN_LAUNCH.finditer(blanked):
        if m.start() < pos:
            continue
        macro = next((mac for mac in macros if mac[0] <= m.start() < mac[1]), None)
        limit = macro[1] if macro is not None else len(blanked)
        closing = _CLOSE.search(blanked, m.end(), limit)
        if closing is None:
            continue
        close, paren = closing.start(), closing.end()
        while paren < limit and blanked[paren] in " \t\\\n":
            paren += 1
        if paren >= limit or blanked[paren] != "(":
            continue
        end = _matching(blanked, paren, limit)
        if end < 0:
            continue
        callee = text[m.start(1) : m.end(1)]
        base = callee.split("<", 1)[0].strip().split("::")[-1]
        label = None
        if macro is not None and macro[2] is not None and base in macro[2]:
            if deduced:
                continue  # the kernel is the macro's argument: which one, only its use says
            label = "#" + base if callee.strip() == base else None
        cfg = text[m.end() : close]
        args = text[paren + 1 : end]
        is_deduced = "<" not in callee and base in deduced
        if is_deduced:
            label = _deduced_label(callee, labels)
        head, tail = _launch_text(callee, cfg, bool(args.strip()), is_deduced, label, call)
        lost = text[close:paren].count("\n")  # the lines between the chevrons and the arguments
        out.append(text[pos : m.start()] + head + args + tail + ("\\\n" if macro else "\n") * lost)
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"[ \d]*$', re.MULTILINE)


def rewrite_preprocessed(
    text: str,
    deduced: Iterable[str],
    within: str,
    labels: Mapping[str, str] | None = None,
    call: str = "{}",
) -> str:
    """A unit's preprocessed text (``g++ -E``: every macro expanded, ``# N "file"`` markers kept) with
    every launch left in the code of files under `within` rewritten by tokens; the other files' code
    (the system's and porter's headers) is left as it is.  Lines kept, so the markers still name the
    user's file and line.  `call`: how a deduced launch's lambda calls the kernel, macros being
    expanded already (``{}``: by its name, as on the CPU runtime)."""
    deduced = set(deduced)
    labels = labels or {}
    marks = list(_MARKER.finditer(text))
    pieces: list[str] = []
    pos = 0
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        name = m.group(2)
        if not name.startswith(within) or not re.search(r"<\s*<\s*<", text[m.end() : end]):
            continue
        pieces.append(text[pos : m.end()])
        pieces.append(_rewrite_by_tokens(text[m.end() : end], deduced, labels, [], call))
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def has_launch_syntax(text: str) -> bool:
    """Whether `text` still holds ``<<<`` outside comments and strings (a launch left as written)."""
    return bool(re.search(r"<\s*<\s*<", text)) and bool(
        re.search(r"<\s*<\s*<", blank_comments_and_strings(text))
    )


def files_of(folder: Path, limit: int = 5000) -> list[Path]:
    """The files under `folder` (hidden folders skipped), sorted, at most `limit`."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            found.append(Path(dirpath) / name)
            if len(found) >= limit:
                return found
    return found


def instrument(text: str, kernels: Kernels) -> str:
    """A program text as every capturing build compiles it: launches rewritten
    (:func:`rewrite_launches`), its global ``__constant__`` / ``__device__`` variables and its kernels
    registered (:func:`register_symbols`, :func:`register_kernels`); lines kept."""
    rewritten = rewrite_launches(text, kernels.deduced, kernels.labels)
    return register_kernels(register_symbols(rewritten), kernels.deduced)


def instrumented_copy(
    source: Sourced, out: Path, rewrite: Callable[[str, Kernels], str]
) -> tuple[Path, list[str], dict[Path, str]]:
    """The program (a :class:`porter.backends.programs.ProgramSource`) copied into ``out/src`` with every
    source and header text passed through ``rewrite(text, kernels)`` (:func:`program_kernels`),
    other files as they are; include folders outside the program's root copied (their headers only)
    under ``out/include/<n>``.  Returns (the copy, the include folders as it sees them, every original
    text by the path of its rewritten copy).  The user's files are only read."""
    scratch = out / "src"
    for stale in (scratch, out / "include"):  # a header deleted since the last build must not linger
        if stale.exists():
            shutil.rmtree(stale)
    root = source.original_root or source.tree
    # the files to rewrite: the tree, then include folders outside it (their headers only)
    listed = [source.tree / f for f in source.files] if source.files else files_of(source.tree)
    copies: list[tuple[Path, Path]] = [
        (p, scratch / p.relative_to(source.tree)) for p in listed if p.is_file()
    ]
    include_dirs: list[str] = []
    for n, d in enumerate(source.include_dirs):
        p = Path(d)
        if p.is_relative_to(root):
            include_dirs.append(str(scratch / p.relative_to(root)))
            continue
        dest = out / "include" / str(n)
        copies += [(f, dest / f.relative_to(p)) for f in files_of(p) if f.suffix.lower() in HEADER_SUFFIXES]
        include_dirs.append(str(dest))
    texts: dict[Path, str] = {}
    for src, dest in copies:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix.lower() in HEADER_SUFFIXES | SOURCE_SUFFIXES and src.is_file():
            data = src.read_bytes()
            if b"\0" not in data:
                texts[dest] = decode_text(data)
                continue
        if src.is_file():
            shutil.copy2(src, dest)
    kernels = program_kernels(texts.values())
    for dest, text in texts.items():
        dest.write_bytes(encode_text(rewrite(text, kernels)))
    return scratch, include_dirs, texts
