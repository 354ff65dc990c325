"""The program-toolchain contract: build a whole program (host code and kernels) and say where it runs.

A backend that can build whole programs in a dialect returns :class:`ProgramToolchain` objects from
``program_toolchains()`` (the CPU backend: g++ with porter's CPU runtime, for CUDA and HIP programs;
the CUDA backend: nvcc; the HIP backend: hipcc for AMD GPUs and nvcc through porter's HIP-on-CUDA
headers).  :func:`toolchains_for` asks every registered backend, so the program workflow never names
a target.  A build never raises for a program that does not build: it returns a
:class:`BuiltProgram` whose ``ok`` is false and whose ``log`` says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from porter.backends import Device


@dataclass(frozen=True)
class ProgramSource:
    """What to build: a program's tree (the original's root, or a mirrored port of it)."""

    tree: Path
    units: tuple[str, ...]  # translation units, relative to the tree
    include_dirs: tuple[str, ...] = ()  # absolute; those under the original's root are mapped into the tree
    defines: tuple[str, ...] = ()
    language: str = "cuda"  # the dialect its files are written in
    original_root: Path | None = None  # the root `include_dirs` refer to (None: the tree itself)


@dataclass(frozen=True)
class BuiltProgram:
    ok: bool
    toolchain: str  # name and version: "g++ 14.2 + porter cpu runtime", "nvcc 13.0 sm_90"
    executables: Mapping[str, str] = field(default_factory=dict)  # name -> absolute path
    log: str = ""
    commands: tuple[str, ...] = ()
    reason: str = ""  # one line when not ok ("cannot emulate: cuBLAS (main.cu line 3)")
    refused: bool = False  # a construct this toolchain cannot provide, found before building
    env: Mapping[str, str] = field(default_factory=dict)  # what running an executable needs


class ProgramToolchain(Protocol):
    name: str  # "cpu-runtime", "nvcc", "hip-on-cuda", "hipcc"
    backend: str  # the backend owning it

    def languages(self) -> tuple[str, ...]: ...

    def unavailable(self) -> str:
        """Why it cannot build here ("" when it can)."""
        ...

    def device(self) -> Device | None:
        """The device its executables run on here (None: it only builds)."""
        ...

    def build(self, source: ProgramSource, out: Path) -> BuiltProgram: ...


def toolchains_for(language: str) -> list[ProgramToolchain]:
    """Every program toolchain of every registered backend that builds `language`, in registration
    order (a backend that cannot be imported contributes none)."""
    from porter.backends import backend_names, get_backend

    found: list[ProgramToolchain] = []
    for name in backend_names():
        try:
            chains = get_backend(name).program_toolchains()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a backend that cannot be imported builds nothing here
            continue
        found.extend(c for c in chains if language in c.languages())
    return found


__all__ = ["BuiltProgram", "ProgramSource", "ProgramToolchain", "toolchains_for"]
