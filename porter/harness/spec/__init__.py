"""KernelSpec: how to run a kernel -- from a spec file next to the source, or inferred from host code.

Order of precedence (see docs/SPEC_FORMAT.md):

1. ``<source>.porter.toml`` or ``porter.toml`` in the source's directory (:func:`load_spec_file`);
2. inference from the file's own host code (:func:`infer_spec`): the launch site gives the
   arguments and the geometry; ``cudaMalloc``/``malloc`` sizes give the array shapes in size
   symbols; host assignments and ``#define``s give the values; copies and ``const`` give roles.

When inference falls short, :class:`~porter.errors.PorterError` names the file and line, says
what is missing and carries a ready-to-edit spec file snippet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from porter.harness.spec.file import DIR_SPEC, SPEC_SUFFIX, find_spec_file, load_spec_file, normalise_dtype
from porter.harness.spec.infer import infer_constants, infer_spec
from porter.harness.spec.names import split_instance, squash_name
from porter.harness.spec.render import spec_snippet
from porter.harness.spec.sizes import (
    CPU_ELEMENTS,
    DEFAULT_TARGET_ELEMENTS,
    GPU_ELEMENTS,
    MAX_LAUNCH_DIM,
    MAX_SIZE_VALUE,
    MIN_SCALABLE,
    check_size,
    choose_sizes,
    geometry,
    memory_bytes,
    scalable_symbols,
    scale_size,
    timing_size,
)
from porter.model import FileScan, KernelSpec


def spec_for(
    source: str | Path,
    scan: FileScan,
    kernel: str,
    include_dirs: Sequence[str] = (),
    *,
    specs: Mapping[str, KernelSpec] | None = None,
    defines: Sequence[str] = (),
) -> KernelSpec:
    """The spec file's entry for `kernel` when there is one, else the inferred spec: the one
    precedence rule every workflow follows.

    `kernel` may name one instantiation (``axpby<float>``): the instantiation's own entry, else the
    kernel's entry when its ``template_args`` are the same, else inference from the launches with
    those template arguments.  ``specs``: the spec file's entries when the caller has loaded them
    already (else the file beside `source` is found and loaded).  A spec-file entry that lists no
    ``constants`` gets the ``__constant__`` symbols the kernel reads, inferred from the source (when
    they can be: else it stays as written).  ``defines``: the build's ``-D NAME[=VALUE]``, which win over
    the file's ``#define``s in inference."""
    base, wanted = split_instance(kernel)
    if specs is None:
        spec_path = find_spec_file(source)
        specs = load_spec_file(spec_path) if spec_path is not None else {}
    spec = specs.get(kernel) or next(
        (v for k, v in specs.items() if squash_name(k) == squash_name(kernel) and k != kernel), None
    )
    if spec is not None and wanted is not None and tuple(map(squash_name, spec.template_args)) != wanted:
        spec = replace(spec, template_args=wanted)  # the instantiation's own entry names its arguments
    # The kernel's own entry serves an instantiation it names (template_args = [...]).
    if (
        spec is None
        and wanted is not None
        and base in specs
        and tuple(map(squash_name, specs[base].template_args)) == wanted
    ):
        spec = specs[base]
    if spec is not None:
        if not spec.constants:
            consts, missing = infer_constants(scan, base, include_dirs=include_dirs, defines=defines)
            if consts and not missing:
                names = ", ".join(c.name for c in consts)
                spec = replace(spec, constants=consts, notes=(*spec.notes, f"constants inferred: {names}"))
        return spec
    if wanted is not None:  # the launches with these template arguments first
        same = tuple(
            ls
            for ls in scan.launches
            if ls.base == base and tuple(map(squash_name, ls.template_args)) == wanted
        )
        if same:
            scan = replace(scan, launches=same + tuple(ls for ls in scan.launches if ls.base != base))
    return infer_spec(scan, kernel, include_dirs=include_dirs, defines=defines)


__all__ = [
    "CPU_ELEMENTS",
    "DEFAULT_TARGET_ELEMENTS",
    "GPU_ELEMENTS",
    "DIR_SPEC",
    "MAX_LAUNCH_DIM",
    "MAX_SIZE_VALUE",
    "MIN_SCALABLE",
    "SPEC_SUFFIX",
    "check_size",
    "choose_sizes",
    "find_spec_file",
    "geometry",
    "infer_constants",
    "infer_spec",
    "load_spec_file",
    "memory_bytes",
    "normalise_dtype",
    "spec_for",
    "scalable_symbols",
    "scale_size",
    "spec_snippet",
    "split_instance",
    "timing_size",
]
