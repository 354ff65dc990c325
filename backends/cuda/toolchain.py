"""Finding the CUDA compilers and headers: NVRTC from pip (cuda-bindings), nvcc, the toolkit headers.

Headers for NVRTC (which ships none of its own in CUDA 13): the toolkit's ``include`` directory
(``cuda_runtime.h``, ``cuda_fp16.h``, ``cooperative_groups.h``...) and its ``cccl`` directory
(``cuda/std/...``), located in this order: cuda-pathfinder (pip wheels such as
nvidia-cuda-runtime, then CUDA_HOME/CUDA_PATH, then a system toolkit), the environment variables
in facts.toml, the directory next to a real ``nvcc``, then the fixed candidates in facts.toml.
Last comes porter's own ``include/`` with minimal C headers (stdint.h, math.h, limits.h...), which
NVRTC lacks and legacy device code includes.  Everything here is cached and never raises.
"""

from __future__ import annotations

import os
import re
import shutil
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from porter.backends import load_data


@cache
def facts() -> dict[str, Any]:
    return load_data("porter.backends.cuda", "facts.toml")


# what CUDA 13 removed from the runtime API that older programs use, restored (force-included into the
# original's nvcc builds: its capturing build, a kernel replay's nvcc build of a unit with host code)
LEGACY_HEADER = "porter_cuda_legacy.h"


def legacy_header() -> str:
    return str(resources.files("porter.backends.cuda").joinpath(LEGACY_HEADER))


def shim_include_dir() -> str:
    """porter's minimal C headers for NVRTC (stdint.h, math.h, ...)."""
    return str(resources.files("porter.backends.cuda").joinpath("include"))


@cache
def nvrtc_version() -> str | None:
    """'13.5' when NVRTC loads through cuda-bindings, else None."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return None
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception:  # the shared library may be missing even when the binding imports
        return None
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return None
    return f"{major}.{minor}"


@cache
def nvcc_path() -> str | None:
    return shutil.which("nvcc")


@cache
def nvcc_version() -> str | None:
    """'13.0' from ``nvcc --version``, else None."""
    path = nvcc_path()
    if path is None:
        return None
    from porter.toolcache import tool_output

    match = re.search(r"release (\d+\.\d+)", tool_output([path, "--version"])[1])
    return match.group(1) if match else None


def _has_runtime_header(path: str | Path) -> bool:
    return Path(path, "cuda_runtime.h").is_file()


def _pathfinder_dir(name: str) -> str | None:
    try:
        import cuda.pathfinder as pathfinder
    except ImportError:
        return None
    for fn_name in ("locate_nvidia_header_directory", "find_nvidia_header_directory"):
        fn = getattr(pathfinder, fn_name, None)
        if fn is None:
            continue
        try:
            found = fn(name)
        except Exception:  # pathfinder raises its own errors for "not found"
            continue
        path = getattr(found, "abs_path", found)
        if isinstance(path, str) and path:
            return path
    return None


@cache
def toolkit_include_dirs() -> tuple[str, ...]:
    """The CUDA headers NVRTC needs: (include, include/cccl) when found, else ()."""
    candidates: list[str] = []
    found = _pathfinder_dir("cudart")
    if found:
        candidates.append(found)
    for var in facts()["toolkit_root_env"]:
        root = os.environ.get(var)
        if root:
            candidates.append(os.path.join(root, "include"))
    nvcc = nvcc_path()
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent / "include"))
    candidates.extend(facts()["toolkit_include_candidates"])
    include = next((c for c in candidates if _has_runtime_header(c)), None)
    if include is None:
        return ()
    dirs = [include]
    cccl = _pathfinder_dir("cccl") or os.path.join(include, "cccl")
    if Path(cccl, "cuda", "std").is_dir():
        dirs.append(cccl)
    return tuple(dirs)


def nvrtc_include_dirs(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """User dirs first, then the toolkit's, then porter's C-header shims."""
    return (*extra, *toolkit_include_dirs(), shim_include_dir())
