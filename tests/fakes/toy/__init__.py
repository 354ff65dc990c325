"""A test-only target, "toy": a dialect whose translator copies the CUDA source behind a banner, and a
backend that runs that dialect with no devices and no compiler.

Everything porter needs to know about it is in this folder; :func:`register` makes it known through
the public registration functions, :func:`unregister` forgets it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from porter.backends import (
    Availability,
    BackendBase,
    Binary,
    CompileOptions,
    Device,
    Program,
    ToolchainMissing,
    register_backend,
    register_dialect,
    unregister,
)
from porter.backends.dialect import Dialect, DialectFacts, load_facts

from porter.model import TranslatedKernel, Translation
from porter.source import Scanned

NAME = "toy"
PACKAGE = "fakes.toy"
DEFAULT_OPTIONS = CompileOptions()
BANNER = "/* toy translation of {name} */\n"


class ToyDialect(Dialect):
    name: ClassVar[str] = NAME
    package: ClassVar[str] = PACKAGE
    suffixes: ClassVar[tuple[str, ...]] = (".toy",)
    translates: ClassVar[bool] = True

    def translate(
        self,
        source: str,
        path: str,
        include_dirs: Sequence[str] = (),
        options: object = None,
        *,
        scanned: Scanned | None = None,
    ) -> Translation:
        from pathlib import Path

        from porter.scan import scan_source

        scan = scanned.scan if scanned is not None else scan_source(source.encode("utf-8"), path, "cuda")
        kernels = tuple(TranslatedKernel(name=k.name, entry=k.name, target=NAME) for k in scan.kernels)
        return Translation(path, NAME, BANNER.format(name=Path(path).name) + source, kernels)


class ToyBackend(BackendBase):
    name: ClassVar[str] = NAME
    runs: ClassVar[tuple[str, ...]] = (NAME,)
    package: ClassVar[str] = PACKAGE

    @property
    def dialect(self) -> DialectFacts:
        return load_facts(PACKAGE)

    def availability(self) -> Availability:
        return Availability(
            name=NAME, compile=False, run=False, toolchain="", hint=self.install_hints()["compile"]
        )

    def devices(self) -> list[Device]:
        return []

    def toolchain_id(self, device: Device | None = None, arch: str | None = None) -> str:
        return ""

    def compile(
        self,
        source: str,
        entry: str,
        options: CompileOptions = DEFAULT_OPTIONS,
        device: Device | None = None,
    ) -> Binary:
        raise ToolchainMissing(self.install_hints()["compile"])

    def load(self, binary: Binary, device: Device) -> Program:
        raise ToolchainMissing(self.install_hints()["run"])

    def alloc(self, nbytes: int, device: Device) -> Any:
        raise ToolchainMissing(self.install_hints()["run"])

    def to_device(self, array: np.ndarray, device: Device) -> Any:
        raise ToolchainMissing(self.install_hints()["run"])

    def to_host(self, buffer: Any, dtype: Any, shape: Sequence[int]) -> np.ndarray:
        raise ToolchainMissing(self.install_hints()["run"])

    def synchronize(self, device: Device) -> None:
        return None

    def flush_cache(self, device: Device) -> None:
        return None


def register() -> None:
    register_dialect(NAME, ToyDialect)
    register_backend(NAME, ToyBackend)


__all__ = ["NAME", "ToyBackend", "ToyDialect", "register", "unregister"]
