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
* each global ``__constant__`` / ``__device__`` variable is registered after the file's last line
  (``PORTER_REGISTER_SYMBOL``, backends/porter_capture.h), so a launch's capture holds its contents.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from porter.files import decode_text, encode_text
from porter.includes import HEADER_SUFFIXES, SOURCE_SUFFIXES
from porter.scan.cexpr import TYPE_WORDS


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
    code = blank_comments_and_strings(text)
    conditional = _conditional_lines(code)
    code = re.sub(r"(?m)^[ \t]*#.*(?:\\\n.*)*$", lambda m: " " * len(m.group(0)), code)  # directives
    found: list[tuple[str, bool]] = []
    depth, start = 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                start = i + 1  # a function or namespace body begins: not a declaration
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                start = i + 1
        elif ch == ";" and depth == 0:
            stmt, begin, start = code[start:i], start, i + 1
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
    appended (porter_capture.h: a launch's capture then holds their contents); lines kept."""
    names = namespace_symbols(text) if "__constant__" in text or "__device__" in text else []
    if not names:
        return text
    lines = [
        f"PORTER_REGISTER_SYMBOL({name}, {'true' if constant else 'false'});" for name, constant in names
    ]
    tail = "" if text.endswith("\n") else "\n"
    return text + tail + "#ifdef __cplusplus\n" + "\n".join(lines) + "\n#endif\n"


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


_TYPE_WORDS = TYPE_WORDS | frozenset(  # a parameter's type words beyond the builtin types
    ["const", "volatile", "size_t", "__restrict__", "restrict", "int8_t", "int16_t", "int32_t", "int64_t",
     "uint8_t", "uint16_t", "uint32_t", "uint64_t"]
)  # fmt: skip


def _param_type(param: str) -> str:
    """A parameter's type as written, without its name, default value or blanks."""
    tokens = re.findall(r"[A-Za-z_]\w*|\S", param.split("=", 1)[0])
    while tokens and tokens[-1] == "]" and "[" in tokens:  # an array declarator: its extent is the type's
        tokens = tokens[: len(tokens) - 1 - tokens[::-1].index("[")]
    if len(tokens) > 1 and re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]) and tokens[-1] not in _TYPE_WORDS:
        tokens = tokens[:-1]
    return "".join(tokens)


def _launch_text(callee: str, config: str, has_args: bool, deduced: bool) -> tuple[str, str]:
    """(text replacing ``callee<<<config>>>(``, text replacing the closing parenthesis)."""
    name = " ".join(callee.split())
    label = _c_string(name)
    if deduced:
        head = (
            f"porter_emu::launch_deduced(porter_emu::config({config}), "
            f"[&](auto... porter_p) {{ PORTER_DEDUCED_LAUNCH({name})(porter_p...); }}, {label}"
            + (", " if has_args else "")
        )
        return head, ")"
    head = (
        f"porter_emu::launch_kernel({name}, porter_emu::config({config}), "
        f"decltype(porter_emu::params({name}))("
    )
    return head, f"), {label})"


def rewrite_launches(text: str, deduced: set[str]) -> str:
    """Every ``<<<...>>>`` launch of `text` as a call of the CPU runtime (see the module docstring);
    same line count.  Launches in code are found on the syntax tree, those in macro bodies by tokens."""
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
        result = _rewrite_by_tokens(result, deduced)
    # the tree pass never knows which names are templates: fix those launches up by name
    return _deduce_by_name(result, deduced)


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


def _deduce_by_name(text: str, deduced: set[str]) -> str:
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
        head, close = _launch_text(name, cfg, bool(args.strip()), True)
        pieces.append(text[pos : m.start()] + head + args + close)
        pos = args_close + 1 + len(tail)
    pieces.append(text[pos:])
    return "".join(pieces)


def _matching(blanked: str, open_at: int) -> int:
    """Index of the parenthesis closing the one at `open_at` (-1: none) in text whose comments and
    strings are blanked (:func:`blank_comments_and_strings`, once per text)."""
    depth = 0
    for k in range(open_at, len(blanked)):
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


def _rewrite_by_tokens(text: str, deduced: set[str]) -> str:
    """Launches the syntax tree did not show (macro bodies): callee, ``<<<cfg>>>`` and the argument list
    found by matching brackets on the text with comments and strings blanked."""
    blanked = blank_comments_and_strings(text)
    out: list[str] = []
    pos = 0
    for m in _TOKEN_LAUNCH.finditer(blanked):
        if m.start() < pos:
            continue
        closing = _CLOSE.search(blanked, m.end())
        if closing is None:
            continue
        close, paren = closing.start(), closing.end()
        while paren < len(blanked) and blanked[paren] in " \t\\\n":
            paren += 1
        if paren >= len(blanked) or blanked[paren] != "(":
            continue
        end = _matching(blanked, paren)
        if end < 0:
            continue
        callee = text[m.start(1) : m.end(1)]
        cfg = text[m.end() : close]
        args = text[paren + 1 : end]
        head, tail = _launch_text(callee, cfg, bool(args.strip()), callee.split("::")[-1] in deduced)
        out.append(text[pos : m.start()] + head + args + tail)
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


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


def instrumented_copy(
    source: Sourced, out: Path, rewrite: Callable[[str, set[str]], str]
) -> tuple[Path, list[str], dict[Path, str]]:
    """The program (a :class:`porter.backends.programs.ProgramSource`) copied into ``out/src`` with every source and header text passed through
    ``rewrite(text, deduced)`` (`deduced`: the kernels launched through a lambda, :func:`kernel_names`),
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
    _all, deduced = kernel_names(texts.values())
    for dest, text in texts.items():
        dest.write_bytes(encode_text(rewrite(text, deduced)))
    return scratch, include_dirs, texts
