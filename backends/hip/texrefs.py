"""CUDA texture references -> HIP, deterministically, for what a plain load can express.

Current HIP (and CUDA 12) removed texture references.  A 1-D texture reference over linear memory read
with ``tex1Dfetch`` is in effect a global pointer and a size, so it is translated as one:

* ``texture<T, 1, cudaReadModeElementType> name;`` at file scope -> ``__device__ porter_texref<T> name;``
  (the pointer and its size in bytes; the fields host code sets -- ``normalized``, ``filterMode``,
  ``addressMode[]``, ``channelDesc`` -- are kept so those statements build, and mean nothing to a fetch,
  as they meant nothing to CUDA's ``tex1Dfetch``);
* ``cudaBindTexture(offset, name, ptr, [desc,] bytes)`` (or the C forms, ``&name`` and ``&desc``) ->
  ``porter_bind_texture(...)``: the pointer and size copied to the device symbol (``hipMemcpyToSymbol``);
  ``cudaUnbindTexture(name)`` clears them;
* ``tex1Dfetch(name, i)`` -> ``porter_tex1Dfetch(name, i)``: a plain load, zero outside the bound range
  as CUDA's fetch is (a texture object's ``tex1Dfetch<T>(obj, i)`` is HIP's own and stays).

The helpers are written once per translation unit (an ``#ifndef`` guard) just before the file's first
texture reference, followed by ``#line`` so every line keeps its number; the layout -- pointer, then
bytes -- is the one porter's CPU runtime gives its own ``texture<>``, so a replay binds either alike.

Refused with the construct and its line (an error diagnostic, as before): 2-D / 3-D / layered texture
references, normalized-float reads, a texture reference outside file scope, and host code asking a
translated texture for filtering (``cudaFilterModeLinear``) or normalized coordinates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from porter.backends.launches import blank_comments_and_strings

from porter.model import Severity

HELPERS = """#ifndef PORTER_TEXREF_DEFINED
#define PORTER_TEXREF_DEFINED
// porter: a 1-D texture reference over linear memory, as a pointer and its size (HIP has no texture references)
struct porter_texref_desc { template <class D> porter_texref_desc& operator=(const D&) { return *this; } };  // a channel descriptor, unread
template <class T> struct porter_texref { const T* ptr; size_t bytes; int normalized; int filterMode; int addressMode[3]; porter_texref_desc channelDesc; };
template <class T> __device__ __forceinline__ T porter_tex1Dfetch(const porter_texref<T>& t, int i) { return t.ptr != nullptr && i >= 0 && (size_t)i < t.bytes / sizeof(T) ? t.ptr[i] : T(); }
template <class T> static inline hipError_t porter_bind_texture(size_t* offset, const porter_texref<T>& t, const void* p, size_t bytes = ~(size_t)0) { porter_texref<T> v = {}; v.ptr = (const T*)p; v.bytes = p != nullptr ? bytes : 0; if (offset != nullptr) *offset = 0; return hipMemcpyToSymbol(t, &v, sizeof v); }
template <class T, class D> static inline hipError_t porter_bind_texture(size_t* offset, const porter_texref<T>& t, const void* p, const D& /* channel descriptor */, size_t bytes) { return porter_bind_texture(offset, t, p, bytes); }
template <class T> static inline hipError_t porter_unbind_texture(const porter_texref<T>& t) { return porter_bind_texture((size_t*)nullptr, t, nullptr, 0); }
template <class T, class D> static inline hipError_t porter_bind_texture(size_t* offset, const porter_texref<T>* t, const void* p, const D* /* channel descriptor */, size_t bytes) { return porter_bind_texture(offset, *t, p, bytes); }
template <class T> static inline hipError_t porter_unbind_texture(const porter_texref<T>* t) { return porter_unbind_texture(*t); }
#endif
"""

_ONE_D = frozenset({"1", "cudaTextureType1D", "0x01", "0x1", "hipTextureType1D"})
_ELEMENT = frozenset({"cudaReadModeElementType", "hipReadModeElementType"})
_FILE_SCOPE = frozenset(
    {
        "translation_unit",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "linkage_specification",
    }
)


@dataclass
class TextureRewrite:
    """What the rewrite of one file's texture references produced (byte offsets into its source)."""

    edits: list[tuple[int, int, str]] = field(default_factory=list)
    handled: list[tuple[int, int]] = field(default_factory=list)  # spans the name loop leaves alone
    diagnostics: list[tuple[int, str, str, Severity]] = field(default_factory=list)  # offset, construct, why
    names: list[str] = field(default_factory=list)  # the texture references translated


def _template_args(node) -> list[str]:
    args = node.child_by_field_name("arguments")
    if args is None:
        return []
    return [
        c.text.decode("utf-8", "surrogateescape").strip() for c in args.named_children if c.type != "comment"
    ]


def _declarations(node):
    """Every ``texture<...> name;`` declaration node under `node`."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "declaration":
            t = n.child_by_field_name("type")
            if t is not None and t.type == "template_type":
                name = t.child_by_field_name("name")
                if name is not None and name.text == b"texture":
                    yield n, t
                    continue
        stack.extend(reversed(n.children))


def rewrite_textures(src: bytes, root, line_starts: list[int]) -> TextureRewrite:
    """The edits that translate `src`'s 1-D texture references (its tree `root`), and what is refused."""
    out = TextureRewrite()
    if b"texture" not in src:
        return out
    first = True
    refused: list[tuple[str, int, int]] = []  # texture references left as written: name, line, where declared
    for decl, ttype in _declarations(root):
        args = _template_args(ttype)
        dim = args[1] if len(args) > 1 else "1"
        mode = args[2] if len(args) > 2 else "cudaReadModeElementType"
        why = ""
        if not args:
            why = "texture reference without an element type"
        elif dim not in _ONE_D:
            why = f"{dim}-D texture reference: only 1-D texture references over linear memory become plain loads"
            if not dim.isdigit():
                why = f"texture reference of type {dim}: only 1-D texture references over linear memory become plain loads"
        elif mode not in _ELEMENT:
            why = f"texture reference read as {mode}: only element-type reads (cudaReadModeElementType) become plain loads"
        elif decl.parent is None or decl.parent.type not in _FILE_SCOPE:
            why = "texture reference outside file scope: only file-scope ones become __device__ variables"
        if why:
            out.diagnostics.append((decl.start_byte, "texture", why, Severity.ERROR))
            out.handled.append((ttype.start_byte, ttype.end_byte))
            refused += [
                (
                    c.text.decode("utf-8", "surrogateescape"),
                    _line_of(line_starts, decl.start_byte),
                    decl.end_byte,
                )
                for c in decl.children_by_field_name("declarator")
                if c.type == "identifier"
            ]
            continue
        names = [
            c.text.decode("utf-8", "surrogateescape")
            for c in decl.children_by_field_name("declarator")
            if c.type == "identifier"
        ]
        quals = " ".join(
            c.text.decode("utf-8", "surrogateescape")
            for c in decl.children
            if c.type == "storage_class_specifier"
        )
        element = args[0]
        text = f"{quals + ' ' if quals else ''}__device__ porter_texref<{element}> {', '.join(names)};"
        start = decl.start_byte
        if first:  # the helpers, once, on lines of their own before the declaration's line
            line = _line_of(line_starts, start)
            at = line_starts[line - 1]
            out.edits.append((at, at, HELPERS + f"#line {line}\n"))
            first = False
        out.edits.append((start, decl.end_byte, text))
        out.handled.append((start, decl.end_byte))
        out.names += names
        out.diagnostics.append(
            (
                start,
                f"texture<{', '.join(args)}>",
                f"texture reference -> __device__ porter_texref<{element}> (a pointer and its size): "
                "cudaBindTexture copies them to the symbol, tex1Dfetch is a plain load, zero out of range",
                Severity.INFO,
            )
        )
    original = src.decode("utf-8", "surrogateescape")
    text = blank_comments_and_strings(original)  # same characters, comments and strings blanked
    for name, line, after in refused:  # each use marks the code reading it (a kernel) as not translated
        for m in re.finditer(rf"\b{re.escape(name)}\b", text):
            at = len(original[: m.start()].encode("utf-8", "surrogateescape"))
            if at >= after:
                why = f"reads the texture reference {name} (line {line}), which HIP cannot express"
                out.diagnostics.append((at, name, why, Severity.ERROR))
    if out.names:
        alternatives = "|".join(re.escape(n) for n in out.names)
        for m in re.finditer(
            rf"\b({alternatives})\s*\.\s*(filterMode\s*=\s*\w*FilterModeLinear|normalized\s*=\s*(?:true|[1-9]))",
            text,
        ):
            at = len(original[: m.start()].encode("utf-8", "surrogateescape"))
            out.diagnostics.append(
                (
                    at,
                    m.group(0),
                    "texture filtering or normalized coordinates: a plain load cannot express them",
                    Severity.ERROR,
                )
            )
    return out


def _line_of(line_starts: list[int], offset: int) -> int:
    from bisect import bisect_right

    return bisect_right(line_starts, offset)


__all__ = ["HELPERS", "TextureRewrite", "rewrite_textures"]
