"""CUDA texture references over linear memory -> OpenCL C kernel arguments (the translator's part).

A legacy texture reference ``texture<T, 1, cudaReadModeElementType> name;`` bound with ``cudaBindTexture``
and read with ``tex1Dfetch(name, i)`` is a global array and a size: ``tex1Dfetch`` does no filtering, no
normalisation and no address-mode wrapping, and returns zero outside the bound range (as porter's CPU
runtime and its HIP translation also do).  So each texture a kernel reads becomes two trailing kernel
arguments, named after the texture:

* ``__global const T* name``: the memory bound to it at the launch;
* ``uint name_size``: how many elements of T the binding holds;

and ``tex1Dfetch(name, i)`` becomes ``porter_tex1Dfetch_T(name, name_size, i)``, a plain load that reads
zero outside ``[0, name_size)``.  A ``__device__`` helper that reads a texture takes the same two
parameters, threaded through its callers like a ``__constant__`` variable.  The launch mapping records
them (``extra_args``: ``{"kind": "texture", ...}`` and ``{"kind": "texture_size", ...}``); the host stub
passes the texture's current binding (``porter_opencl::Launch::texref`` / ``texref_size``), and a replay
the captured bound memory.

Refused with the construct and its line: 2-D / 3-D / layered texture references, normalized-float reads,
3-component element types (OpenCL's ``float3`` is 16 bytes, CUDA's 12), textures the host binds to a CUDA
array (``cudaBindTextureToArray``) or to pitched 2-D memory (``cudaBindTexture2D``), host code asking one
for filtering (``cudaFilterModeLinear``) or normalized coordinates, and every fetch through the texture
unit proper (``tex1D``, ``tex2D``, ``tex3D``, layered and cubemap fetches, ``tex1Dfetch<T>`` on a texture
object): those need OpenCL images and samplers, which porter does not make.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_ONE_D = frozenset({"1", "cudaTextureType1D", "0x01", "0x1"})
_ELEMENT_READ = frozenset({"cudaReadModeElementType"})
_VECTOR = re.compile(r"^([a-z]+?)([1-4])$")
SCALAR_BYTES = {
    "char": 1,
    "uchar": 1,
    "short": 2,
    "ushort": 2,
    "int": 4,
    "uint": 4,
    "long": 8,
    "ulong": 8,
    "float": 4,
    "double": 8,
}
FETCH = "porter_tex1Dfetch_{T}"
FETCH_SOURCE = (
    "/* porter: tex1Dfetch on a texture reference bound to linear memory: zero outside the bound range */\n"
    "static inline {T} porter_tex1Dfetch_{T}(__global const {T}* t, uint n, int i)\n"
    "{{\n"
    "    return (uint)i < n ? t[i] : ({T})(0);\n"
    "}}"
)


@dataclass(frozen=True)
class Texture:
    """A texture reference the translator turns into kernel arguments."""

    name: str  # the texture reference (the host variable)
    elem: str  # its OpenCL element type (float, float4, uint ...)
    element_bytes: int
    dtype: str  # NumPy dtype of the element's scalar (float32 for float4)
    param: str = ""  # its buffer parameter: the name, unless OpenCL C reserves it

    @property
    def buffer(self) -> str:
        return self.param or self.name

    @property
    def size_name(self) -> str:
        return f"{self.name}_size"

    def params(self) -> list[str]:
        """The parameters a kernel or helper reading it gets (in this order)."""
        return [f"__global const {self.elem}* {self.buffer}", f"uint {self.size_name}"]

    def arguments(self) -> list[str]:
        """What a call of such a helper passes on."""
        return [self.buffer, self.size_name]

    def extras(self) -> list[dict[str, Any]]:
        """The launch mapping's added arguments for a kernel reading it."""
        common = {"symbol": self.name, "type": self.elem, "element_bytes": self.element_bytes}
        return [
            {"kind": "texture", "param": self.buffer, "dtype": self.dtype, **common},
            {"kind": "texture_size", "param": self.size_name, "dtype": "uint32", **common},
        ]

    def fetch(self, index: str) -> str:
        return f"{FETCH.format(T=self.elem)}({self.buffer}, {self.size_name}, {index})"


def template_args(type_node: Any) -> list[str]:
    """The template arguments of `texture<...>` as written."""
    args = type_node.child_by_field_name("arguments")
    if args is None:
        return []
    return [
        " ".join((c.text or b"").decode("utf-8", "surrogateescape").split())
        for c in args.named_children
        if c.type != "comment"
    ]


def declared(
    name: str,
    args: list[str],
    scalar: Callable[[str], str | None],
    vector_bases: Mapping[str, str],
    dtypes: Mapping[str, str],
    param: str = "",
) -> Texture | str:
    """The texture `name` declared `texture<args...>`, or why it is not translated."""
    if not args:
        return "texture reference without an element type"
    dim = args[1] if len(args) > 1 else "1"
    mode = args[2] if len(args) > 2 else "cudaReadModeElementType"
    fetch_only = "porter translates 1-D texture references over linear memory read with tex1Dfetch only"
    if dim not in _ONE_D:
        shown = f"{dim}-D texture reference" if dim.isdigit() else f"texture reference of type {dim}"
        return f"{shown}: it needs an OpenCL image; {fetch_only}"
    if mode not in _ELEMENT_READ:
        return f"texture reference read as {mode}: {fetch_only} (cudaReadModeElementType)"
    text = args[0]
    base = scalar(text)
    count = 1
    if base is None:
        m = _VECTOR.match(text)
        if m is not None and m.group(1) in vector_bases:
            base, count = vector_bases[m.group(1)], int(m.group(2))
    if base is None or base not in SCALAR_BYTES:
        return f"texture of {text}: no OpenCL C element type porter maps it to"
    if count == 3:
        return f"texture of {text}: OpenCL's {base}3 is {4 * SCALAR_BYTES[base]} bytes, CUDA's {3 * SCALAR_BYTES[base]}"
    elem = base if count == 1 else f"{base}{count}"
    return Texture(name, elem, SCALAR_BYTES[base] * count, dtypes.get(base, base), param)


_ARRAY_BIND = re.compile(r"\b(cudaBindTextureToArray|cudaBindTextureToMipmappedArray)\s*\(\s*&?\s*(\w+)")
_PITCH_BIND = re.compile(r"\b(cudaBindTexture2D)\s*\(\s*[^,()]*(?:\([^()]*\))?[^,()]*,\s*&?\s*(\w+)")
_SAMPLING = re.compile(
    r"\b(\w+)\s*\.\s*(filterMode\s*=\s*\w*FilterModeLinear|normalized\s*=\s*(?:true|[1-9]))"
)


def host_refusals(text: str, names: Iterable[str]) -> dict[str, tuple[int, str, str]]:
    """The texture references among `names` that host code (`text`, comments and strings blanked) binds
    to a CUDA array or pitched memory, or asks for filtering or normalized coordinates: name -> (offset
    of the statement, construct, why), the first one found for each."""
    wanted = set(names)
    out: dict[str, tuple[int, str, str]] = {}
    for pattern, why in (
        (_ARRAY_BIND, "bound to a CUDA array: its fetches need an OpenCL image"),
        (_PITCH_BIND, "bound to pitched 2-D memory: its fetches need an OpenCL image"),
    ):
        for m in pattern.finditer(text):
            if m.group(2) in wanted:
                out.setdefault(m.group(2), (m.start(), f"{m.group(1)}({m.group(2)}, ...)", why))
    for m in _SAMPLING.finditer(text):
        if m.group(1) in wanted:
            construct = f"{m.group(1)}.{' '.join(m.group(2).split())}"
            why = "texture filtering or normalized coordinates: a plain load cannot express them"
            out.setdefault(m.group(1), (m.start(), construct, why))
    return out


def fetchers(types: Iterable[str]) -> list[str]:
    """The prelude's fetch helpers, one per element type read."""
    return [FETCH_SOURCE.format(T=t) for t in sorted(set(types))]


__all__ = ["FETCH", "Texture", "declared", "fetchers", "host_refusals", "template_args"]
