"""HIP C++ as a dialect: the rule-based translator (:mod:`.translate`) and what model output in HIP is
held to (the generic C++ screening: device code only, the original's kernel signature)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from porter.backends.dialect import Dialect

if TYPE_CHECKING:
    from porter.model import TranslatedKernel, Translation
    from porter.source import Scanned, SourceUnit


class HipDialect(Dialect):
    name: ClassVar[str] = "hip"
    package: ClassVar[str] = "porter.backends.hip"
    suffixes: ClassVar[tuple[str, ...]] = (".hip",)
    translates: ClassVar[bool] = True
    translates_headers: ClassVar[bool] = True
    # launches as written (<<<>>>) or as AMD's hipify tools write them when asked (hipLaunchKernelGGL)
    translate_options: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType(
        {"launch": ("chevrons", "ggl")}
    )

    def translate(
        self,
        source: str,
        path: str,
        include_dirs: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        *,
        scanned: Scanned | None = None,
    ) -> Translation:
        from porter.backends.hip.translate import translate_to_hip

        launch = self.check_options(options or {})["launch"]
        scan = scanned.scan if scanned is not None else None
        return translate_to_hip(source, path, include_dirs=include_dirs, launch=launch, scan=scan)

    def translate_files(
        self, unit: SourceUnit, options: Mapping[str, str] | None = None
    ) -> tuple[Translation, dict[Path, Translation]]:
        from porter.backends.hip.translate import translate_hip_files

        launch = self.check_options(options or {})["launch"]
        held = {unit.path: unit.data, **unit.headers}
        files = translate_hip_files(
            unit.path, include_dirs=unit.include_dirs, held=held, launch=launch, scan=unit.scan
        )
        main_key = next(iter(files))
        return files[main_key], {k: v for k, v in files.items() if k != main_key}

    def model_constraints(
        self, entry: str, signature: Sequence[str], tk: TranslatedKernel, lacking: bool
    ) -> str:
        return (
            f"keep the kernel name `{entry}` and the original's parameters (names, types, order); HIP C++ "
            "device code only, including `hip/hip_runtime.h` if you need it."
        )
