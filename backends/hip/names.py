"""HIP runtime names as the CUDA names they rename: the header that lets a HIP program build on a CUDA
runtime (porter's CPU runtime, or NVIDIA's through porter's HIP-on-CUDA headers).

Generated from porter's one CUDA->HIP table (``cuda2hip.toml``), so the two directions never drift.
"""

from __future__ import annotations

import functools
import re

from porter.backends import load_data

NAMES_HEADER = "porter_hip_names.h"
# HIP-on-CUDA's driver-style calls (hipModuleLaunchKernel...): function objects that header defines, which the
# names header must not redefine; the CPU runtime, without that header, keeps the runtime's name where there is one
DRIVER_HEADER = "porter_hip_driver.h"
# a CUDA driver API name (cuda.h: CUresult's CUDA_ERROR_*, CUdeviceptr, cuMemAlloc ...), not the runtime's cuda*
_DRIVER = re.compile(r"CU[A-Za-z_]|cu[A-Z]")
# runtime names CUDA 13 removed that the HIPIFY tables (cuda_removed) do not mark yet: the driver's twin wins
_CUDA13_REMOVED = frozenset({"cudaDevAttrCooperativeMultiDeviceLaunch"})
_GROUPS = ("runtime", "types", "constants", "errors", "runtime_removed")


@functools.cache
def hip_names_header() -> str:
    """porter_hip_names.h: every HIP runtime name of porter's CUDA->HIP table as the CUDA name the
    runtime defines (``#define hipMalloc cudaMalloc``), so a HIP program builds on the same runtime."""
    table = load_data("porter.backends.hip", "cuda2hip.toml")
    groups = _GROUPS
    seen: dict[str, str] = {}
    for group in groups:
        for cuda, hip in (table.get("rename", {}).get(group) or {}).items():
            if isinstance(hip, str) and re.fullmatch(r"[A-Za-z_]\w*", hip) and hip != cuda:
                seen.setdefault(hip, cuda)
    # then the generated API tables (cuda2hip_api.toml), for names no hand entry spells and that porter's
    # HIP-on-CUDA headers do not declare themselves.  Of several CUDA names for one HIP name the one CUDA still
    # has wins (not removed: cudaGraphNodeTypeCount over the driver's CU_GRAPH_NODE_TYPE_COUNT, removed in CUDA 11),
    # then the one HIP's own NVIDIA-platform headers use (hipArray -> cudaArray, not the driver's CUarray_st;
    # hipMipmappedArray_t -> CUmipmappedArray), then the runtime API's over the driver's (hipError_t is cudaError_t
    # and hipDeviceGetAttribute is cudaDeviceGetAttribute, so hipErrorNotFound is cudaErrorSymbolNotFound, not
    # CUresult's CUDA_ERROR_NOT_FOUND, and hipComputeMode is cudaComputeMode, the type of hipComputeModeDefault), then
    # one not deprecated, then the first by name.  A name the CPU runtime declares itself (its replay stubs)
    # is defined only for HIP-on-CUDA (PORTER_HIP_ON_CUDA, set by porter's hip/hip_runtime.h).
    from porter.backends.hip.translate import API_FAMILIES

    api = load_data("porter.backends.hip", "cuda2hip_api.toml")
    hip_on_cuda_words, cpu_words, driver_words = _own_header_words()
    chosen: dict[str, tuple[tuple[int, int, int, int, str], str]] = {}
    runtime_only: dict[
        str, tuple[tuple[int, int, int, int, str], str]
    ] = {}  # the same, of the runtime's names
    candidates: dict[str, set[str]] = {}
    for family in API_FAMILIES:
        for cuda, row in (api.get(family) or {}).items():
            hip = row.get("hip")
            if (
                isinstance(hip, str)
                and row.get("status") in ("supported", "deprecated")
                and row.get("in_hip", True)
                and re.fullmatch(r"[A-Za-z_]\w*", hip)
                and hip != cuda
                and hip not in seen
                and hip not in hip_on_cuda_words
            ):
                rank = (
                    1 if row.get("cuda_removed") or cuda in _CUDA13_REMOVED else 0,
                    0 if "headers" in str(row.get("from", "")) else 1,
                    1 if _DRIVER.match(cuda) else 0,
                    1 if row.get("status") == "deprecated" else 0,
                    cuda,
                )
                if hip not in chosen or rank < chosen[hip][0]:
                    chosen[hip] = (rank, cuda)
                if not _DRIVER.match(cuda) and (hip not in runtime_only or rank < runtime_only[hip][0]):
                    runtime_only[hip] = (rank, cuda)
                candidates.setdefault(hip, set()).add(cuda)
    # a struct follows its handle: hipMipmappedArray_t is CUmipmappedArray, so hipMipmappedArray is CUmipmappedArray_st
    for hip, (rank, cuda) in list(chosen.items()):
        if hip.endswith("_t") and _DRIVER.match(cuda) and f"{cuda}_st" in candidates.get(hip[:-2], ()):
            chosen[hip[:-2]] = (rank, f"{cuda}_st")
    nvidia_only: dict[str, str] = {}
    cpu_only: dict[str, str] = {}  # where HIP-on-CUDA takes a driver name: the runtime's, for the CPU runtime
    c_only: dict[str, str] = {}  # porter_hip_driver.h's names in a C file (that header is C++): the CUDA name
    for hip, (_, cuda) in chosen.items():
        if hip in driver_words:  # HIP-on-CUDA's porter_hip_driver.h defines it
            c_only[hip] = cuda
            if hip not in cpu_words and not _DRIVER.match(cuda):
                cpu_only[hip] = cuda
            elif hip not in cpu_words and hip in runtime_only:
                cpu_only[hip] = runtime_only[hip][1]
        elif hip in cpu_words or _DRIVER.match(
            cuda
        ):  # the CPU runtime has neither its stubs' names nor cuda.h
            nvidia_only[hip] = cuda
            if hip not in cpu_words and hip in runtime_only:
                cpu_only[hip] = runtime_only[hip][1]
        else:
            seen[hip] = cuda
    lines = [
        "// Generated by porter from backends/hip/cuda2hip.toml and cuda2hip_api.toml; do not edit.",
        "#pragma once",
    ]
    own = {"hipDeviceProp_t", "hipGetDeviceProperties"}  # HIP-on-CUDA defines its own (CUDA 13 lacks fields)
    # a name porter's hip/hip_runtime.h defines already (its CUDA 13 forms of hipMemAdvise, the graph calls...) keeps
    # that definition
    lines += [_define(hip, cuda) for hip, cuda in sorted(seen.items()) if hip not in own]
    lines += ["#ifndef PORTER_HIP_OWN_DEVICE_PROP"]
    lines += [f"#define {hip} {cuda}" for hip, cuda in sorted(seen.items()) if hip in own]
    lines += ["#endif"]
    if nvidia_only or cpu_only or c_only:
        lines += ["#if defined(PORTER_HIP_ON_CUDA)"]
        lines += [_define(hip, cuda) for hip, cuda in sorted(nvidia_only.items())]
        lines += ["#if !defined(__cplusplus)"] if c_only else []
        lines += [_define(hip, cuda) for hip, cuda in sorted(c_only.items())]
        lines += ["#endif"] if c_only else []
        lines += ["#else"] if cpu_only else []
        lines += [_define(hip, cuda) for hip, cuda in sorted(cpu_only.items())]
        lines += ["#endif"]
    lines += ["#define hipLaunchParm int"]  # a name HIP spells without a CUDA twin in the table
    # hipGetErrorName answers with HIP's names (a program printing them prints what ROCm would)
    errors = {c: h for c, h in (table.get("rename", {}).get("errors") or {}).items() if isinstance(h, str)}
    lines.append("#undef hipGetErrorName")
    lines.append("static inline const char* porter_hip_error_name(cudaError_t e) {")
    lines.append("    switch (e) {")
    lines += [f'    case {cuda}: return "{hip}";' for cuda, hip in errors.items()]
    lines.append("    default: return cudaGetErrorName(e);")
    lines.append("    }")
    lines.append("}")
    lines.append("#define hipGetErrorName porter_hip_error_name")
    return "\n".join(lines) + "\n"


def _define(hip: str, cuda: str) -> str:
    return f"#ifndef {hip}\n#define {hip} {cuda}\n#endif"


@functools.cache
def _own_header_words() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The identifiers porter's own runtime headers spell outside comments: (HIP-on-CUDA's but its driver header's,
    the CPU runtime's, HIP-on-CUDA's driver header's)."""
    from importlib import resources

    def words(package: str, folder: str, only: str = "", but: str = "") -> frozenset[str]:
        root = resources.files(package).joinpath(folder) if folder else resources.files(package)
        found: set[str] = set()
        for node in root.iterdir():
            if node.name.endswith((".h", ".hpp")) and node.name != but and (not only or node.name == only):
                text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", node.read_text(encoding="utf-8"), flags=re.DOTALL)
                found |= set(re.findall(r"\b[A-Za-z_]\w*\b", text))
        return frozenset(found)

    return (
        words("porter.backends.hip", "include/hip", but=DRIVER_HEADER),
        words("porter.backends.cpu", ""),
        words("porter.backends.hip", "include/hip", only=DRIVER_HEADER),
    )


__all__ = ["NAMES_HEADER", "hip_names_header"]
