"""The plan of one CUDA source: unit -> kernel instances -> specs -> one translation per dialect ->
variants.  Every workflow that runs kernels (port, bench, check, optimize) starts from a
:class:`Plan` and asks it, never the disk or a translator, for what it needs:

* the unit (:class:`porter.source.SourceUnit`: bytes, text, headers, macro table, scan), read once;
* the translation into each dialect, made on first need and kept (an error is kept too, so a
  dialect that cannot take the file is tried once per command);
* the kernel instances (one per template instantiation launched, :mod:`porter.scan.instances`);
* each instance's spec, behind the one precedence rule (:func:`porter.harness.spec.spec_for`), the
  spec file loaded once;
* the original as the reference each variant is validated against, in the unit a kernel is
  validated in (without the kernels some target could not take);
* each target's variant of each instance on a device, or why there is none
  (:meth:`Plan.variant_for`: a :class:`PlannedVariant` with its compile options, or a
  :class:`Refusal`) -- the one way port, bench and the benchmark scripts get a translated variant.

Nothing here runs a kernel or writes a file: that is the workflows' and the harness's work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from porter.backends import SOURCE_DIALECT, CompileOptions, Device, get_backend, get_dialect, runners
from porter.errors import PorterError, UsageError
from porter.harness.spec import find_spec_file, load_spec_file, spec_for
from porter.harness.validate import Reference
from porter.model import FileScan, KernelSpec, TranslatedKernel, Translation, Variant
from porter.scan.instances import Instance, kernel_instances
from porter.scan.macros import MacroTable
from porter.source import SourceUnit, load

# --------------------------------------------------------------------------- devices


def devices_of(backend: str) -> list[Device]:
    """The devices `backend` has here (none when it cannot even list them)."""
    try:
        return list(get_backend(backend).devices())
    except Exception:  # noqa: BLE001 - a backend that cannot list devices has none here
        return []


def run_devices(target: str) -> list[Device]:
    """Every device here that runs `target` code, in the registry's backend order."""
    devices: list[Device] = []
    for b in runners(target):
        devices.extend(d for d in devices_of(b) if d not in devices)
    return devices


def wavefront_devices(target: str) -> list[Device]:
    """Devices that run `target` code with the other wavefront widths its dialect runs at (HIP: 64 on
    AMD CDNA, 32 on NVIDIA), where a backend emulates them (its ``wavefront_device(width)``): so code
    that still assumes 32 lanes is caught without an AMD GPU."""
    from porter.backends import get_dialect

    facts = get_dialect(target).facts
    widths = (
        {w for w in (facts.warp_size, facts.warp_size_hip_on_cuda) if isinstance(w, int)} if facts else set()
    )
    found: list[Device] = []
    for b in runners(target):
        make = getattr(get_backend(b), "wavefront_device", None)
        for width in sorted(widths):
            device = make(width) if make is not None else None
            if device is not None and device not in found:
                found.append(device)
    return found


def reference_devices() -> tuple[Device, ...]:
    """The devices the original (source dialect) runs on as the reference; checkers are not among them."""
    return tuple(d for b in runners(SOURCE_DIALECT) for d in devices_of(b) if not d.checks)


def compile_archs(target: str) -> list[str]:
    """The archs the backends running `target` compile its variants for here without such a device."""
    archs: list[str] = []
    for b in runners(target):
        try:
            found = get_backend(b).compile_archs()
        except Exception:  # noqa: BLE001 - a backend that cannot be imported compiles for nothing here
            continue
        archs.extend(a for a in found if a not in archs)
    return archs


def lacking(target: str, device: Device, requires: Sequence[str]) -> list[str]:
    """What of `requires` `device` lacks (backends without requirements lack nothing)."""
    if not requires:
        return []
    return list(get_backend(target).missing_requirements(device, requires))


def needs_reason(
    target: str, kernel: str, device: Device, requires: Sequence[str], lacks: Sequence[str]
) -> str:
    """ "reduce_sum needs relative sub-group shuffles, 32-wide sub-groups (...); <device> has none"."""
    words: Callable[..., str] = get_backend(target).describe_requirements
    said = words(lacks, device)
    plain = said == words(lacks)  # (not: it has them, but porter's probe found them wrong)
    tail = "has none of them" if set(lacks) >= set(requires) and plain else f"lacks {said}"
    return f"{kernel} needs {words(requires)}; {device.label} {tail}"


def requirement_options(target: str, device: Device, requires: Sequence[str]) -> tuple[str, ...]:
    """The build options what a variant needs takes on `device` (OpenCL: ``-cl-std=CL3.0``)."""
    if not requires:
        return ()
    return tuple(get_backend(target).requirement_options(device, requires))


# --------------------------------------------------------------------------- device-code units


_OPAQUE_TYPES = ("texture", "surface")  # legacy texture/surface references: no device-side data


def _joined(data: bytes, ranges: Sequence[tuple[int, int]]) -> bytes:
    pieces, pos = [], 0
    for start, end in sorted(ranges):
        if start < pos:
            continue
        pieces += [data[pos:start], b"\n" * data.count(b"\n", start, end)]
        pos = end
    pieces.append(data[pos:])
    return b"".join(pieces)


def prune_kernels(text: str, drop: Sequence[str], macros: MacroTable | None = None) -> str:
    """``text`` without the kernels named in ``drop`` (untranslatable ones) and, when any is
    dropped, without top-level texture/surface references; line numbers unchanged.  A kernel is
    validated in a unit holding only what can be built, as the other kernels' constructs would
    stop the emulator or a compiler before it reaches the kernel under test."""
    if not drop:
        return text
    from porter.grammars import parse
    from porter.scan import scan_source

    data = text.encode("utf-8", "surrogateescape")
    scan = scan_source(data, "<unit>.cu", "cuda", macros)
    ranges = [
        (k.start_byte, k.end_byte) for k in scan.kernels if k.name in drop and k.end_byte > k.start_byte
    ]
    root = parse("cuda", data).root_node
    for node in root.children:
        if node.type != "declaration":
            continue
        kind = node.child_by_field_name("type")
        head = (
            data[kind.start_byte : kind.end_byte].decode("utf-8", "surrogateescape")
            if kind is not None
            else ""
        )
        if head.split("<", 1)[0].strip() in _OPAQUE_TYPES:
            ranges.append((node.start_byte, node.end_byte))
    return _joined(data, ranges).decode("utf-8", "surrogateescape")


def device_unit(text: str, drop: Sequence[str], macros: MacroTable) -> str:
    """The device code of ``text`` without the kernels in ``drop``."""
    from porter.scan.extract import device_code

    return device_code(prune_kernels(text, drop, macros), macros=macros)


class Units:
    """The device code a program's kernels are validated in: without the kernels some target
    could not take (their constructs would stop a compiler or the emulator before the kernel
    under test), but always with the kernel at hand.  Each distinct unit is cut once."""

    def __init__(self, text: str, drop: Sequence[str], macros: MacroTable) -> None:
        self.text, self.drop, self.macros = text, tuple(drop), macros
        self._cut: dict[tuple[str, ...], str] = {}

    def keeping(self, base: str) -> str:
        others = tuple(d for d in self.drop if d != base)
        if others not in self._cut:
            self._cut[others] = device_unit(self.text, others, self.macros)
        return self._cut[others]


def _squash(text: str) -> str:
    return " ".join(text.split())


def translated_kernel(tr: Translation, inst: Instance) -> TranslatedKernel | None:
    """The translation's kernel for `inst` (HIP: one per template, whatever the instantiation)."""
    exact = next((tk for tk in tr.kernels if _squash(tk.name) == _squash(inst.name)), None)
    if exact is not None:
        return exact
    return next((tk for tk in tr.kernels if tk.name == inst.base), None)


# --------------------------------------------------------------------------- planned variants


@dataclass(frozen=True)
class PlannedVariant:
    """A variant ready to build, from a :class:`Plan` or a program's plan
    (:class:`porter.workflows.program_plan.ProgramPlan`): ``variant`` (its ``options``: the build
    options what it needs takes on the device it was planned for, ``-cl-std=CL3.0``), ``compile``, how
    its compiles are made (where they look for headers, the build's macros), ``requires``: what it needs
    of a device (a device-only port's launch mapping: sub-groups...) when it was planned for none, and
    ``headers``: a digest of what it includes, in the keys of what is made from it."""

    variant: Variant
    compile: CompileOptions
    requires: tuple[str, ...] = ()
    headers: str = ""


RefusalStage = Literal["translator", "kernel", "construct", "device"]


@dataclass(frozen=True)
class Refusal:
    """Why the plan has no variant of an instance for a target (on a device): ``reason`` in one line,
    as a report row says it, and what refused it -- the ``translator`` (it failed, or is not
    installed), the translation (``kernel``: it holds no such kernel; ``construct``: one it could not
    take) or the ``device`` (it lacks what the variant needs: sub-groups, fp64)."""

    stage: RefusalStage
    reason: str


# --------------------------------------------------------------------------- the plan


class Plan:
    """Everything known about one CUDA source before anything runs; see the module docstring."""

    def __init__(self, unit: SourceUnit, options: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.unit = unit
        self.options = {k: dict(v) for k, v in (options or {}).items()}  # target -> translator options
        self.src_dir = Path(unit.path).resolve().parent
        self._made: dict[str, tuple[Translation, dict[Path, Translation]] | PorterError] = {}
        self._specs: dict[str, KernelSpec] | PorterError | None = None
        self._instances: dict[tuple[str, ...], list[Instance]] = {}
        self._originals: dict[tuple[str, ...], Units] = {}
        self._sources: dict[tuple[str, str], str] = {}  # (target, unit) -> what its variants compile

    # ------------------------------------------------------------------ the unit

    @property
    def path(self) -> str:
        return self.unit.path

    @property
    def text(self) -> str:
        return self.unit.text

    @property
    def scan(self) -> FileScan:
        return self.unit.scan

    @property
    def macros(self) -> MacroTable:
        return self.unit.macros

    @property
    def include_dirs(self) -> tuple[str, ...]:
        return self.unit.include_dirs

    @property
    def defines(self) -> tuple[str, ...]:
        """The build's ``-D NAME[=VALUE]``: every compile of the original and its variants gets them."""
        return self.unit.defines

    def compile_options(self, include_dirs: Sequence[str]) -> CompileOptions:
        """How a compile of this unit (the original, or a variant of it) is made: `include_dirs` and the
        build's macros."""
        return CompileOptions(include_dirs=tuple(include_dirs), defines=self.defines)

    @property
    def compile_dirs(self) -> tuple[str, ...]:
        """Where the compiles of the original look for headers: its folder, then the include dirs
        (each once: bench and optimize name the folder among them)."""
        return tuple(dict.fromkeys((str(self.src_dir), *(str(Path(d).resolve()) for d in self.include_dirs))))

    def kernel_names(self) -> list[str]:
        return [k.name for k in self.scan.kernels]

    # ------------------------------------------------------------------ translations

    def translation(self, target: str) -> Translation:
        """The file translated into `target` (made once); PorterError when the translator fails."""
        return self.translation_files(target)[0]

    def header_translations(self, target: str) -> dict[Path, Translation]:
        """The local headers' translations (dialects that translate headers), by input path."""
        return self.translation_files(target)[1]

    def translation_files(self, target: str) -> tuple[Translation, dict[Path, Translation]]:
        if target not in self._made:
            try:
                self._made[target] = get_dialect(target).translate_files(self.unit, self.options.get(target))
            except PorterError as err:
                self._made[target] = err
            except ImportError:
                raise
            except Exception as err:  # noqa: BLE001 - a translator crash is the user's one-line error
                self._made[target] = PorterError(
                    f"{target} translation failed: {type(err).__name__}: {err}", path=self.path
                )
        made = self._made[target]
        if isinstance(made, PorterError):
            raise made
        return made

    def untranslatable(self, targets: Sequence[str]) -> list[str]:
        """The kernels some of `targets`' translations could not take (they leave the shared units)."""
        return sorted(
            {
                inst.base
                for inst in self.instances(targets)
                for t in targets
                if (tk := translated_kernel(self.translation(t), inst)) is not None and tk.untranslatable
            }
        )

    # ------------------------------------------------------------------ kernels and specs

    def instances(self, targets: Sequence[str] = ()) -> list[Instance]:
        """Every kernel, one entry per template instantiation (also those `targets`' translators
        found that the launch analysis did not)."""
        key = tuple(targets)
        if key not in self._instances:
            names = [tk.name for t in key for tk in self.translation(t).kernels]
            self._instances[key] = kernel_instances(self.scan, self.text, names)
        return self._instances[key]

    def file_specs(self) -> dict[str, KernelSpec]:
        """The spec file's entries (loaded once; {} without a spec file); PorterError when it is bad."""
        if self._specs is None:
            spec_path = find_spec_file(self.path)
            try:
                self._specs = load_spec_file(spec_path) if spec_path is not None else {}
            except PorterError as err:
                self._specs = err
        if isinstance(self._specs, PorterError):
            raise self._specs
        return self._specs

    def spec(self, kernel: str | Instance, include_dirs: Sequence[str] | None = None) -> KernelSpec:
        """How to run `kernel` (a name, ``axpby<float>``, or an instance): the spec file's entry, else
        inference (:func:`porter.harness.spec.spec_for`); PorterError with the inference message."""
        name = kernel.name if isinstance(kernel, Instance) else kernel
        dirs = self.include_dirs if include_dirs is None else tuple(include_dirs)
        spec = spec_for(self.path, self.scan, name, dirs, specs=self.file_specs(), defines=self.defines)
        if (
            isinstance(kernel, Instance)
            and kernel.template_args
            and tuple(spec.template_args) != kernel.template_args
        ):
            spec = replace(spec, template_args=kernel.template_args)
        return spec

    def spec_or_reason(self, inst: Instance) -> tuple[KernelSpec | None, str | None]:
        """The instance's spec, or None and why there is none (an inference crash fails it alone)."""
        try:
            return self.spec(inst), None
        except PorterError as err:
            return None, str(err)
        except Exception as err:  # noqa: BLE001 - an inference crash fails this kernel only
            return None, f"spec inference failed: {type(err).__name__}: {err}"

    # ------------------------------------------------------------------ the original

    def original(self, base: str, unit: Literal["alone", "file"] = "alone") -> Variant:
        """The original kernel as a variant: in its own device code (``alone``: the kernel with what
        it needs) or in the whole file's (``file``)."""
        from porter.scan.extract import device_code

        kernels = (base,) if unit == "alone" else ()
        return self._original(base, device_code(self.text, kernels=kernels, macros=self.macros))

    def _original(self, base: str, source: str) -> Variant:
        return Variant(
            kernel=base,
            target=SOURCE_DIALECT,
            source=source,
            entry=self.scan.entry(base),
            provenance="original",
            path=self.path,
        )

    def original_unit(self, base: str, targets: Sequence[str]) -> str:
        """The file's device code without the kernels some of `targets` could not take, `base` kept."""
        key = tuple(targets)
        if key not in self._originals:
            self._originals[key] = Units(self.text, self.untranslatable(key), self.macros)
        return self._originals[key].keeping(base)

    def reference(self, base: str, targets: Sequence[str], devices: Sequence[Device]) -> Reference:
        """The original with `base` kept (:meth:`original_unit`) as the reference on `devices`."""
        original = self._original(base, self.original_unit(base, targets))
        return Reference(
            original=original, devices=tuple(devices), options=self.compile_options(self.compile_dirs)
        )

    # ------------------------------------------------------------------ variants

    def variant_source(self, target: str, unit: Literal["file", "alone"] = "file", base: str = "") -> str:
        """What a `target` variant compiles (made once): a single-source dialect's translation reduced
        to device code -- without the kernels it could not take (``file``), or kernel `base` alone
        with what it needs (``alone``) --; a device-only dialect's whole translation."""
        key = (target, "" if unit == "file" else base)
        if key not in self._sources:
            text = self.translation(target).text
            if not get_dialect(target).single_source:
                self._sources[key] = text
            elif unit == "file":
                self._sources[key] = device_unit(text, self.untranslatable([target]), self.macros)
            else:
                from porter.scan.extract import device_code

                self._sources[key] = device_code(text, kernels=(base,), macros=self.macros)
        return self._sources[key]

    def variant_dirs(self, target: str, out_dir: str | Path | None = None) -> tuple[str, ...]:
        """Where a `target` variant's compiles look for headers (its translated headers in `out_dir`
        first, when they were written there; then the original's); none for a device-only dialect."""
        if not get_dialect(target).single_source:
            return ()
        if out_dir is None:
            return self.compile_dirs
        return (str(Path(out_dir).resolve()), *self.compile_dirs)

    def translated_kernel(self, inst: Instance, target: str) -> TranslatedKernel | None:
        """`target`'s translated kernel for `inst` (PorterError / ImportError when the translator
        fails or is missing; None when its translation has no such kernel)."""
        return translated_kernel(self.translation(target), inst)

    def variant_for(
        self,
        inst: Instance,
        target: str,
        device: Device | None = None,
        *,
        out_dir: str | Path | None = None,
        path: str = "",
        unit: Literal["file", "alone"] = "file",
    ) -> PlannedVariant | Refusal:
        """The `target` variant of `inst` that `device` runs (None: one only compiled, for no device
        in particular), with its compile options; or why there is none (:class:`Refusal`).

        ``out_dir``: where the translation's headers were written (its compiles look there first);
        ``path``: the file the variant is reported by; ``unit``: the device code it compiles -- the
        translation's (``file``, without the kernels it could not take) or the kernel's own
        (``alone``)."""
        try:
            tk = self.translated_kernel(inst, target)
        except PorterError as err:
            return Refusal("translator", str(err).removeprefix(f"{self.path}: "))
        except ImportError as err:
            return Refusal("translator", f"{target} translation failed: {err}")
        if tk is None:
            return Refusal("kernel", f"the {target} translation has no kernel {inst.name}")
        if tk.untranslatable:
            return Refusal("construct", "; ".join(tk.untranslatable))
        needs = tuple(tk.requires)
        build: tuple[str, ...] = ()
        if device is not None:
            lacks = lacking(target, device, needs)
            if lacks:
                return Refusal("device", needs_reason(target, inst.name, device, needs, lacks))
            build = requirement_options(target, device, needs)
        variant = Variant(
            kernel=inst.base,
            target=target,
            source=self.variant_source(target, unit, inst.base),
            entry=tk.entry,
            provenance="translate",
            path=path,
            arg_map=tk.arg_map or None,  # type: ignore[arg-type]  # None slots: extra arguments
            extra_args=tk.extra_args,
            options=build,
        )
        return PlannedVariant(variant, self.compile_options(self.variant_dirs(target, out_dir)))


def make_plan(
    path: str,
    command: str,
    include_dirs: Sequence[str] = (),
    options: Mapping[str, Mapping[str, str]] | None = None,
    defines: Sequence[str] = (),
    *,
    unity: bool = False,
) -> Plan:
    """The plan of the CUDA source at `path` (:func:`porter.source.load`: UsageError for bad input);
    ``options``: translator options per target (UsageError for one its translator does not take);
    ``defines``: the build's ``-D NAME[=VALUE]``."""
    for target, opts in (options or {}).items():
        try:
            get_dialect(target).check_options(opts)
        except ValueError as err:
            raise UsageError(str(err)) from None
    return Plan(load(path, command, include_dirs, defines, unity=unity), options)
