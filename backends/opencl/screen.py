"""Screening model-written OpenCL C: compiled alone at run time, so no CUDA, no host API, and the
kernel and its parameters must be those the harness launches (see :func:`porter.llm.loop.screen`,
which calls :func:`screen` after its generic checks)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from porter.backends import runtime_prefixes

from porter.model import Kernel
from porter.records import Rejection, Screened, strip_comments

_CL_ADDRESS_SPACES = {
    "__global": "global",
    "global": "global",
    "__constant": "constant",
    "constant": "constant",
    "__local": "local",
    "local": "local",
    "__private": "private",
    "private": "private",
}
_CL_DROPPED = {"const", "volatile", "restrict", "__restrict", "__restrict__", "__read_only", "__write_only"}
_CL_TYPE_NAMES = {
    "unsigned int": "uint",
    "unsigned": "uint",
    "unsigned char": "uchar",
    "unsigned short": "ushort",
    "unsigned long": "ulong",
    "signed char": "char",
    "signed int": "int",
    "signed": "int",
    "long long": "long",
    "unsigned long long": "ulong",
}
# CUDA spellings that cannot appear in OpenCL C.
_CUDA_IN_OPENCL = re.compile(
    r"__global__|__device__|__shared__|__syncthreads|\b(?:threadIdx|blockIdx|blockDim|gridDim)\b|<<<"
)


def opencl_param_key(param: str) -> str:
    """An OpenCL parameter's launch-relevant shape: address space, base type and pointer depth, without
    qualifiers or the name: ``__global const float* restrict in`` -> ``global float*``."""
    text = re.sub(r"\b__attribute__\s*\(\(.*?\)\)", " ", param)
    text = text.replace("*", " * ").replace("[", " [ ")
    words = text.split()
    if "[" in words:  # `float a[]` is a pointer
        words = words[: words.index("[")] + ["*"]
    space = ""
    kept: list[str] = []
    for w in words:
        if w in _CL_ADDRESS_SPACES:
            space = _CL_ADDRESS_SPACES[w]
        elif w not in _CL_DROPPED:
            kept.append(w)
    stars = kept.count("*")
    names = [w for w in kept if w != "*"]
    if len(names) > 1:
        names = names[:-1]  # the last word is the parameter's name
    base = _CL_TYPE_NAMES.get(" ".join(names), " ".join(names))
    if stars and not space:
        space = "private"
    return " ".join(x for x in (space, base + "*" * stars) if x)


def opencl_params(code: str, entry: str) -> list[str] | None:
    """The parameter texts of ``__kernel void <entry>(...)`` in `code` (comments already stripped), or
    None when there is no such kernel."""
    m = re.search(
        rf"\b(?:__kernel|kernel)\b[^;{{}}]*?\bvoid\s+{re.escape(entry)}\s*\(([^)]*)\)", code, re.DOTALL
    )
    if m is None:
        return None
    inner = m.group(1).strip()
    if inner in ("", "void"):
        return []
    return [p.strip() for p in inner.split(",")]


def screen(code: str, original: Kernel, entry: str, signature: Sequence[str]) -> Screened | Rejection:
    """OpenCL C is compiled alone at run time: no CUDA, no host API; the kernel and its parameters must
    be those the harness launches."""
    text = strip_comments(code)
    cuda = _CUDA_IN_OPENCL.search(text)
    if cuda is not None:
        return Rejection(f"`{cuda.group(0)}` is CUDA, not OpenCL C: write the kernel in OpenCL C only")
    api = re.search(r"\b((?:" + "|".join(runtime_prefixes()) + r")[A-Z]\w*)\s*\(", text)
    if api is not None:
        return Rejection(
            f"the block calls {api.group(1)}(): host code is not accepted, only OpenCL C device code"
        )
    params = opencl_params(text, entry)
    if params is None:
        return Rejection(f"the block has no `__kernel void {entry}(...)`")
    if not signature:
        if len(params) < len(original.params):
            return Rejection(
                f"`{entry}` must keep the original's {len(original.params)} parameters in order; "
                f"yours has {len(params)}"
            )
        return Screened(code if code.endswith("\n") else code + "\n", original)
    want = list(signature)
    if len(params) != len(want):
        return Rejection(
            f"`{entry}` must take exactly {len(want)} parameters ({', '.join(want)}); yours has "
            f"{len(params)} ({', '.join(params) or 'none'})"
        )
    for i, (a, b) in enumerate(zip(want, params, strict=True), 1):
        if opencl_param_key(a) != opencl_param_key(b):
            return Rejection(
                f"parameter {i} of `{entry}` must be `{a}` (same address space and type, same order); "
                f"yours is `{b}`"
            )
    return Screened(code if code.endswith("\n") else code + "\n", original)
