"""CUDA C++ as a dialect: the language of porter's inputs (no translator into it)."""

from __future__ import annotations

from typing import ClassVar

from porter.backends.dialect import Dialect


class CudaDialect(Dialect):
    name: ClassVar[str] = "cuda"
    package: ClassVar[str] = "porter.backends.cuda"
    suffixes: ClassVar[tuple[str, ...]] = (".cu", ".cuh")
