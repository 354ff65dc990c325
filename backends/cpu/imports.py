"""What an emulated kernel's shared object takes from the process it is loaded into.

A kernel porter did not write is built into a ``.so`` that the job's child loads beside the C library
and the Python interpreter.  Whatever the source spelled -- ``extern "C" __device__ char** environ;``,
an ``asm`` label, a ``weakref`` alias -- what it can reach there is exactly the set of its undefined
dynamic symbols.  :func:`refused_imports` reads that set from the built file (binutils' ``nm``, which
comes with g++) and names every symbol outside the dialect's ``[untrusted]`` allow-list (``imports``,
and the functions of the C math library).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

NM_TIMEOUT_S = 60


class ImportCheckUnavailable(RuntimeError):
    """The symbols of a built kernel cannot be read here (no ``nm``)."""


def _nm(args: list[str]) -> list[tuple[str, str]]:
    """(type letter, name without version) of each symbol line of ``nm -D`` with `args`."""
    tool = shutil.which("nm")
    if tool is None:
        raise ImportCheckUnavailable("nm (binutils) is not installed: apt-get install binutils")
    proc = subprocess.run([tool, "-D", *args], capture_output=True, text=True, timeout=NM_TIMEOUT_S)
    if proc.returncode != 0:
        raise ImportCheckUnavailable(f"nm failed: {proc.stderr.strip()[:300]}")
    found = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            found.append((parts[-2], parts[-1].split("@", 1)[0]))
    return found


@cache
def _library_functions(compiler: str, library: str) -> frozenset[str]:
    """The functions a shared library defines (``T``/``W``/``i`` symbols), found where `compiler` links
    it from (``g++ -print-file-name=libm.so.6``); empty when it is not found."""
    try:
        proc = subprocess.run(
            [compiler, f"-print-file-name={library}"], capture_output=True, text=True, timeout=NM_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    path = Path(proc.stdout.strip())
    if not path.is_absolute() or not path.is_file():
        return frozenset()
    return frozenset(name for kind, name in _nm(["--defined-only", str(path)]) if kind in "TWi")


def undefined_symbols(shared_object: Path) -> list[str]:
    """The undefined dynamic symbols of `shared_object` (weak ones included), without versions."""
    return sorted({name for kind, name in _nm(["--undefined-only", str(shared_object)]) if kind in "Uwv"})


def refused_imports(shared_object: Path, rules: Mapping[str, Any], compiler: str) -> list[str]:
    """The symbols `shared_object` (built by `compiler`) takes from outside that the ``[untrusted]``
    rules do not allow."""
    allowed = set(rules.get("imports", ()))
    library = str(rules.get("math_library", ""))
    maths = _library_functions(compiler, library) if library else frozenset()
    return [name for name in undefined_symbols(shared_object) if name not in allowed and name not in maths]


__all__ = ["ImportCheckUnavailable", "refused_imports", "undefined_symbols"]
