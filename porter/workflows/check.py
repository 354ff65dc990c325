"""`porter check VARIANT --against ORIGINAL`: validate a kernel variant against the original program.

How to run the kernel comes from ORIGINAL (its spec file, else inference from its host code).
The original runs as the reference on every device that can run it (the CPU emulator here, the
GPU where there is one); the variant runs on every device of its backend (the emulator for CUDA
and HIP, every OpenCL device including the Oclgrind checker).  Exit status: 0 when the variant is
validated on at least one device and rejected on none, 1 otherwise.

With ``--capture DIR`` (a capture of the original program's run: ``porter capture``, docs/CAPTURE_FORMAT.md)
the variant is judged on the captured launches instead (:mod:`porter.harness.replay`): the program's own
sizes, types and data, compared with what the original left; no spec is inferred.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from porter.backends import (
    SOURCE_DIALECT,
    dialect_names,
    dialect_of_suffix,
    dialect_of_text,
    get_backend,
    get_dialect,
)
from porter.backends import runners as registered_runners
from porter.backends.spares import warm
from porter.errors import UsageError
from porter.files import reads_once
from porter.harness.spec import find_spec_file, split_instance
from porter.harness.validate import Reference, ValidateOptions, compile_only, validate
from porter.model import KernelSpec, Variant, Verdict
from porter.plan import devices_of, make_plan, reference_devices
from porter.results import CheckResult


def language_of(path: str, text: str = "") -> str:
    """The dialect of a variant file: the one whose runtime header it includes, else its extension's
    (the registry's dialects')."""
    lang = dialect_of_suffix(Path(path).suffix)
    if lang is not None:  # a known extension: the runtime header the file includes may say better
        lang = dialect_of_text(Path(path).suffix, text)
    if lang is None:
        known = sorted(x for n in dialect_names() for x in get_dialect(n).suffixes)
        raise UsageError(
            f"cannot tell the variant's language from its extension (use {', '.join(known)})",
            path=path,
        )
    return lang


def _read(path: str) -> str:
    from porter.files import read_text

    return read_text(path)  # UsageError: missing, not a regular file, too large, not UTF-8


def _replay_of(capture_dir: str, name: str, base: str, atomics: Sequence[str] = ()) -> Any:
    """The replay of kernel `name` from the capture folder; UsageError when it holds none of it or
    none of its launches can be replayed."""
    from porter import capture
    from porter.harness.replay import build

    launches = capture.by_kernel(capture.load(capture_dir).launches)
    found = launches.get(name) or next(
        (las for k, las in launches.items() if split_instance(k)[0] == base), None
    )
    if found is None:
        raise UsageError(
            f"the capture has no launch of {name} (it has {', '.join(launches) or 'none'})", path=capture_dir
        )
    rep = build(found[0].kernel, found, atomics)
    if rep.spec is None:
        raise UsageError(
            f"the capture's launches of {name} cannot be replayed: {rep.problem}", path=capture_dir
        )
    return rep


def _prestart(language: str, backend: str | None, options: ValidateOptions, replaying: bool) -> None:
    """Start a warm child for each device the variant will run on (porter.backends.spares)."""
    from porter.backends.isolate import Job, prestart
    from porter.plan import wavefront_devices

    runners = [b for b in registered_runners(language) if backend is None or b == backend]
    devices = [d for b in runners for d in devices_of(b)]
    if replaying:
        devices += [d for d in wavefront_devices(language) if d.backend in runners]
    for d in devices:
        if not d.checks:
            prestart(Job(d.backend, "", "", options.compile, d), options.timeout_s)


def _pick_kernel(names: Sequence[str], kernel: str | None, original: str, variant_text: str) -> str:
    if kernel is not None:
        if (
            kernel not in names and split_instance(kernel)[0] not in names
        ):  # "axpby<float>": one instantiation
            raise UsageError(
                f"no kernel named {kernel!r} (kernels: {', '.join(names) or 'none'})", path=original
            )
        return kernel
    if not names:
        raise UsageError("no __global__ kernel found", path=original)
    if len(names) == 1:
        return names[0]
    present = [n for n in names if n in variant_text]
    if len(present) == 1:
        return present[0]
    raise UsageError(f"several kernels ({', '.join(names)}); choose one with --kernel", path=original)


def _gate(variant: Variant, spec: KernelSpec, options: ValidateOptions) -> Verdict | None:
    """A failed verdict when the variant does not build as device code for a real GPU compiler of its
    dialect (or none is here to tell); None when it does, or when its dialect is compiled by device
    compilers only (OpenCL C)."""
    from porter.harness.gate import device_build_check
    from porter.harness.trial import entry_name
    from porter.model import Status

    gate = device_build_check(replace(variant, entry=entry_name(variant, spec)), options.compile)
    if gate.ok:
        return None
    return Verdict(
        kernel=spec.kernel, target=variant.target, device="", backend=variant.target, toolchain=gate.toolchain,
        compiled=False, executed=False, correct=False, status=Status.FAILED, reason=gate.reason,
        logs=(gate.log,) if gate.log.strip() else (),
    )  # fmt: skip


@reads_once
@warm
def run_check(
    variant_path: str,
    original_path: str,
    *,
    kernel: str | None = None,
    backend: str | None = None,
    include_dirs: Sequence[str] = (),
    options: ValidateOptions | None = None,
    capture_dir: str | None = None,
) -> CheckResult:
    from porter.scan.extract import device_code
    from porter.workflows.source import qualifier_macros

    options = options or ValidateOptions()
    language_of(variant_path)  # an unknown extension is refused before the file is read
    variant_text = _read(variant_path)
    language = language_of(variant_path, variant_text)
    _read(original_path)  # UsageError: missing, not a regular file, too large, not UTF-8
    if Path(original_path).suffix.lower() not in get_dialect(SOURCE_DIALECT).suffixes:
        raise UsageError("the original must be a CUDA source (.cu)", path=original_path)
    dialect = get_dialect(language)
    dirs = (str(Path(original_path).resolve().parent), *include_dirs)
    if not options.compile.include_dirs and dialect.single_source:
        variant_dirs = (str(Path(variant_path).resolve().parent), *dirs)
        options = replace(options, compile=replace(options.compile, include_dirs=variant_dirs))
    _prestart(language, backend, options, capture_dir is not None)  # up while porter reads and plans
    plan = make_plan(original_path, "check", include_dirs, defines=options.compile.defines)
    macros = plan.macros
    name = _pick_kernel(plan.kernel_names(), kernel, original_path, variant_text)
    base, instance_args = split_instance(name)
    if base not in variant_text:
        raise UsageError(f"the variant has no kernel named {base!r} (use --kernel)", path=variant_path)
    atomics = next((tuple(k.atomics) for k in plan.scan.kernels if k.name == base), ())
    replayed = _replay_of(capture_dir, name, base, atomics) if capture_dir is not None else None
    spec = replayed.spec if replayed is not None and replayed.spec is not None else plan.spec(name)
    spec_file = find_spec_file(original_path) if replayed is None else None
    original = plan.original(base, "alone")
    entry = base
    # the variant's headers too: an #include of a FIFO or a device is refused before any compiler sees it
    variant_macros = macros.merged(qualifier_macros(variant_path, include_dirs))
    if not dialect.single_source:  # a device-only language (OpenCL C): the whole file is device code
        variant_source = variant_text
        if instance_args and not dialect.templates:  # the translation names each instantiation
            named = dialect.instance_entry(base, instance_args)
            if named in variant_text:
                entry = named
    else:
        from porter.scan import scan_source

        variant_source = device_code(variant_text, kernels=(base,), macros=variant_macros)
        # a HIP or CUDA variant may keep the kernel in a namespace, as the original does
        entry = scan_source(
            variant_text.encode("utf-8", "surrogateescape"), variant_path, "cuda", variant_macros
        ).entry(base)
    variant = Variant(
        kernel=base, target=language, source=variant_source, entry=entry, provenance="user", path=variant_path
    )

    runners = registered_runners(language)
    if backend is not None:
        if backend not in runners:
            raise UsageError(
                f"a {language} variant runs on {' or '.join(runners)}, not on backend {backend!r}",
                path=variant_path,
            )
        runners = (backend,)
    # the variant is code porter did not write: built as untrusted code everywhere, and only once a
    # real GPU compiler has built it as device code (nothing runs what that compiler refuses)
    options = replace(options, compile=replace(options.compile, untrusted=True))
    refused = _gate(variant, spec, options)
    if refused is not None:
        return CheckResult(
            variant=variant_path, original=original_path, kernel=name, language=language, spec=spec,
            spec_file=str(spec_file) if spec_file else None, verdicts=(refused,),
        )  # fmt: skip
    reference = Reference(original=original, devices=reference_devices(), options=plan.compile_options(dirs))
    verdicts: list[Verdict] = []
    if replayed is not None:
        from porter.harness.replay import replay
        from porter.plan import wavefront_devices

        devices = [d for b in runners for d in devices_of(b)]
        devices += [d for d in wavefront_devices(language) if d.backend in runners]
        verdicts = replay(variant, replayed, devices, options)
        runners = ()
    for b in runners:
        devices = devices_of(b)
        if devices:
            verdicts.extend(validate(variant, spec, reference, devices, options))
        elif get_backend(b).builds_without_device:  # compile-only here: does the variant at least build?
            built = compile_only(variant, spec, options, backend=b)
            if built is not None:
                verdicts.append(built)
    return CheckResult(
        variant=variant_path,
        original=original_path,
        kernel=name,
        language=language,
        spec=spec,
        spec_file=str(spec_file) if spec_file else None,
        verdicts=tuple(verdicts),
    )
