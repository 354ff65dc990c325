"""`porter bench FILE`: the roofline floor of every kernel on every device of the table, then the
measured time on every device here that can run it, with % of peak and the suspect flag.

For each kernel of a CUDA file (spec from the spec file or inferred from the host code): the
static cost (:func:`porter.harness.cost.estimate`) at the benchmark size gives the predicted
floor on each device of the table; the original kernel is benchmarked on each present CUDA GPU
and on the CPU emulator, and its HIP / OpenCL translations (when the translators are installed)
on the HIP and OpenCL devices, with the speedup against the original on the same physical device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from porter.backends import (
    SOURCE_DIALECT,
    CompileOptions,
    Device,
    backend_names,
    get_backend,
    get_dialect,
    runners,
)
from porter.backends.isolate import probe_backend
from porter.backends.spares import warm
from porter.errors import PorterError, UsageError
from porter.files import reads_once
from porter.harness import perfmodel
from porter.harness.bench import CPU_PLAN, GPU_PLAN, BenchPlan, benchmark
from porter.harness.cost import estimate
from porter.harness.spec import (
    GPU_ELEMENTS,
    MAX_SIZE_VALUE,
    check_size,
    geometry,
    timing_size,
)
from porter.harness.validate import Reference
from porter.model import KernelSpec, Variant
from porter.plan import Plan, Refusal, make_plan
from porter.results import BenchReport, BenchResult, KernelBench, KernelCost, Roofline
from porter.scan import cexpr
from porter.scan.instances import Instance, instance_name

PROBE_TIMEOUT_S = 60.0


def backend_order() -> tuple[str, ...]:
    """Every registered backend, those running the originals first: they are the baselines."""
    first = runners(SOURCE_DIALECT)
    return (*first, *(b for b in backend_names() if b not in first))


# --------------------------------------------------------------------------- sizes


def _bench_size(
    spec: KernelSpec, device_kind: str, overrides: Mapping[str, int], gpu_elements: int
) -> dict[str, int]:
    base = dict(spec.sizes[0]) if spec.sizes else {}
    if overrides:
        unknown = set(overrides) - set(base) if base else set()
        if unknown:
            raise UsageError(
                f"--size: {', '.join(sorted(unknown))} not a size symbol of {spec.kernel} "
                f"(symbols: {', '.join(sorted(base)) or 'none'})"
            )
        size = {**base, **overrides}
        try:  # a value its scalar's type cannot hold, buffers larger than memory...
            check_size(spec, size)
        except ValueError as err:
            shown = ", ".join(f"{k}={v}" for k, v in overrides.items())
            raise UsageError(f"--size {shown}: {spec.kernel} cannot run at {size}: {err}") from None
        return size
    return timing_size(spec, device_kind, gpu_elements=gpu_elements)


# --------------------------------------------------------------------------- devices and variants


def present_devices(backends: Sequence[str] | None = None) -> list[Device]:
    """Devices that can run kernels here (probed in child processes), originals' backends first."""
    names = [b for b in backend_order() if backends is None or b in backends]
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        found = list(pool.map(lambda n: probe_backend(n, PROBE_TIMEOUT_S), names))
    return [d for a in found if a.run for d in a.devices if not d.checks]


def _variant_for(
    device: Device, original: Variant, plan: Plan, spec: KernelSpec, options: CompileOptions
) -> tuple[Variant, CompileOptions] | str:
    """The variant that runs on `device` and how it is compiled, or why there is none: the original
    (with `options`) where the device runs the source dialect, else the plan's translated variant
    (:meth:`porter.plan.Plan.variant_for`) of the kernel, in its own device code."""
    backend = device.backend
    runs = tuple(get_backend(backend).runs)
    if SOURCE_DIALECT in runs:
        return original, options
    if not runs:
        return f"backend {backend} runs no dialect"
    inst = Instance(instance_name(spec.kernel, spec.template_args), spec.kernel, tuple(spec.template_args))
    made = plan.variant_for(inst, runs[0], device, unit="alone")
    if isinstance(made, Refusal):
        if made.stage == "construct":
            return f"untranslatable to {backend}: {made.reason}"
        if made.stage == "device":
            return f"untranslatable on {device.label}: {made.reason}"
        return made.reason
    return made.variant, made.compile


# --------------------------------------------------------------------------- the workflow


def predictions(cost: KernelCost, devices: Sequence[Device] = ()) -> tuple[Roofline, ...]:
    """The floor on every accelerator of the table, plus the table entries of present devices."""
    entries = {e.key: e for e in perfmodel.gpu_entries()}
    for d in devices:
        e = perfmodel.entry_for(d)
        if e is not None:
            entries.setdefault(e.key, e)
    return tuple(perfmodel.roofline(cost, e) for e in entries.values())


@reads_once
@warm
def bench_file(
    path: str,
    *,
    kernel: str | None = None,
    backends: Sequence[str] | None = None,
    sizes: Mapping[str, int] | None = None,
    include_dirs: Sequence[str] = (),
    devices: Sequence[Device] | None = None,
    plan: BenchPlan = GPU_PLAN,
    gpu_elements: int = GPU_ELEMENTS,
    capture: str | None = None,
    defines: Sequence[str] = (),
) -> BenchReport:
    """Every kernel of `path` (or `kernel`) timed on every device here: at seeded inputs of the
    benchmark size, or with `capture` (``porter capture``'s folder) at the launches the program's own
    run made, with their data (:func:`_bench_captured`).  ``defines``: the build's ``-D NAME[=VALUE]``."""
    if backends is not None:
        bad = [b for b in backends if b not in backend_names()]
        if bad:
            raise UsageError(f"unknown backend {', '.join(bad)}; choose from {', '.join(backend_names())}")
    if Path(path).suffix.lower() not in get_dialect(SOURCE_DIALECT).suffixes and Path(path).exists():
        raise UsageError("porter bench takes a CUDA source (.cu)", path=path)
    # the compiles search the source's folder and the include dirs: so does the macro table
    dirs = (str(Path(path).resolve().parent), *(str(Path(d).resolve()) for d in include_dirs))
    # a unit whose kernels are source files it includes (a unity build) is timed as that build
    source_plan = make_plan(path, "bench", dirs, defines=defines, unity=True)
    names = source_plan.kernel_names()
    if kernel is not None and kernel not in names:
        raise UsageError(f"no kernel named {kernel!r} (kernels: {', '.join(names) or 'none'})", path=path)
    options = source_plan.compile_options(dirs)
    if devices is None:
        devices = present_devices(tuple(backends) if backends else None)
    elif backends:
        devices = [d for d in devices if d.backend in backends]
    order = backend_order()
    devices = sorted(devices, key=lambda d: order.index(d.backend) if d.backend in order else len(order))
    originals = runners(SOURCE_DIALECT)
    ref_devices = tuple(d for d in devices if d.backend in originals)
    if capture is not None:
        if sizes:
            raise UsageError("--size and --capture exclude each other: a capture's launches have their sizes")
        kernels = _bench_captured(source_plan, capture, kernel, options, devices, ref_devices, plan)
    else:
        kernels = [
            _bench_kernel(source_plan, name, options, devices, ref_devices, sizes or {}, plan, gpu_elements)
            for name in ([kernel] if kernel else names)
        ]
    if sizes and all(k.error.startswith("--size") for k in kernels):
        raise UsageError(kernels[0].error, path=path)
    notes = () if devices else ("no device here can run kernels: predictions only",)
    return BenchReport(
        path=path, kernels=tuple(kernels), devices=tuple(d.label for d in devices), notes=notes
    )


def _bench_kernel(
    source_plan: Plan,
    name: str,
    options: CompileOptions,
    devices: Sequence[Device],
    ref_devices: tuple[Device, ...],
    overrides: Mapping[str, int],
    plan: BenchPlan,
    gpu_elements: int,
) -> KernelBench:
    scan = source_plan.scan
    try:
        spec = source_plan.spec(name, options.include_dirs)
    except UsageError:
        raise
    except PorterError as err:
        return KernelBench(kernel=name, error=str(err).splitlines()[0])
    original = source_plan.original(name, "alone")
    device_text = original.source
    try:
        gpu_size = _bench_size(spec, "gpu", overrides, gpu_elements)
    except UsageError as err:
        return KernelBench(kernel=name, spec_source=spec.source, error=str(err))
    try:
        geometry(spec, gpu_size)
        cost = estimate(device_text, spec, gpu_size, scan, kernel=name)
    except (cexpr.ExprError, ValueError) as err:
        return KernelBench(kernel=name, spec_source=spec.source, error=f"spec at size {gpu_size}: {err}")
    reference = Reference(original=original, devices=ref_devices, options=options)
    results: list[BenchResult] = []
    baselines: dict[str, BenchResult] = {}
    for device in devices:
        size = gpu_size if device.times else _bench_size(spec, device.size_class, overrides, gpu_elements)
        found = _variant_for(device, original, source_plan, spec, options)
        if isinstance(found, str):
            results.append(_not_timed(name, device, size, found))
            continue
        variant, compile_with = found
        dev_cost = cost if size == gpu_size else estimate(device_text, spec, size, scan, kernel=name)
        dev_plan = replace(plan if device.times else CPU_PLAN, compile=compile_with)
        base = baselines.get(device.name) if variant is not original else None
        result = benchmark(
            variant, spec, device, size, dev_plan, reference=reference, cost=dev_cost, baseline=base
        )
        if variant is original and result.ok:
            baselines.setdefault(device.name, result)
        results.append(result)
    return KernelBench(
        kernel=name,
        spec_source=spec.source,
        size=gpu_size,
        cost=cost,
        predictions=predictions(cost, devices),
        results=tuple(results),
    )


def _not_timed(kernel: str, device: Device, size: dict[str, int], why: str) -> BenchResult:
    """The row of a device that has no variant of the kernel to time (no translation, no translator)."""
    return BenchResult(
        kernel=kernel, target=device.backend, provenance="translate", backend=device.backend,
        device=device.label, device_name=device.name, device_kind=device.kind, size=size, ok=False,
        reason=why, representative=device.times,
    )  # fmt: skip


def _bench_captured(
    source_plan: Plan,
    folder: str,
    only: str | None,
    options: CompileOptions,
    devices: Sequence[Device],
    ref_devices: tuple[Device, ...],
    plan: BenchPlan,
) -> list[KernelBench]:
    """Each captured kernel of the file timed at its captured launches (the largest three sizes), on
    every device, against the original on the same device and the model's floor at that launch."""
    from porter import capture as capturing
    from porter.harness import replay as replaying
    from porter.harness.spec.names import split_instance
    from porter.workflows.program_replay import build_replay, resolved_launches

    scanned = {k.name: k for k in source_plan.scan.kernels}
    launches = resolved_launches(capturing.load(folder).launches, scanned)
    grouped = capturing.by_kernel(launches)
    names = set(source_plan.kernel_names())
    out: list[KernelBench] = []
    for instance, las in grouped.items():
        base = instance.split("<", 1)[0].strip().rsplit("::", 1)[-1]
        if base not in names or (only is not None and only not in (base, instance)):
            continue
        info = scanned.get(base)
        rep = build_replay(instance, las, tuple(info.atomics) if info is not None else ())
        if rep.spec is None:
            out.append(
                KernelBench(kernel=instance, spec_source="capture", error=f"not replayable: {rep.problem}")
            )
            continue
        original = replace(source_plan.original(base, "alone"), kernel=instance, entry=instance)
        # the kernel as the translations know it: its name and the instance's template arguments
        args = split_instance(instance)[1] or ()
        as_written = replace(rep.spec, kernel=base, template_args=args)
        device_text = original.source

        def cost_at(
            spec: KernelSpec, size: dict[str, int], base: str = base, text: str = device_text
        ) -> KernelCost | None:
            try:
                return estimate(text, spec, size, source_plan.scan, kernel=base)
            except (cexpr.ExprError, ValueError, KeyError, TypeError):
                return None  # the model cannot cost this launch: no floor, the times stand alone

        largest = replaying.timing_instances(rep, 1)
        cost = cost_at(rep.spec, largest[0].size) if largest else None
        results: list[BenchResult] = []
        for device in devices:
            found = _variant_for(device, original, source_plan, as_written, options)
            if isinstance(found, str):
                results.append(_not_timed(instance, device, dict(largest[0].size) if largest else {}, found))
                continue
            variant, compile_with = found
            if get_dialect(variant.target).single_source and "<" in instance and "<" not in variant.entry:
                variant = replace(variant, entry=instance)  # OpenCL names its instances itself
            dev_plan = replace(plan if device.times else CPU_PLAN, compile=compile_with)
            results += replaying.timed(
                variant, rep, device, dev_plan, original=original if variant is not original else None,
                original_options=options, reference_devices=ref_devices, cost_at=cost_at,
            )  # fmt: skip
        out.append(
            KernelBench(
                kernel=instance,
                spec_source="capture",
                size=dict(largest[0].size) if largest else {},
                cost=cost,
                predictions=predictions(cost, devices) if cost is not None else (),
                results=tuple(results),
            )  # fmt: skip
        )
    if not out:
        raise UsageError(f"the capture holds no launch of {only or 'any kernel of this file'}", path=folder)
    return out


def parse_sizes(items: Sequence[str]) -> dict[str, int]:
    """`SYM=VAL` strings (VAL an integer expression such as 1<<20) to a size binding."""
    out: dict[str, int] = {}
    for item in items:
        sym, sep, value = item.partition("=")
        if not sep or not sym.strip().isidentifier():
            raise UsageError(f"--size expects SYM=VALUE, got {item!r}")
        try:
            v = cexpr.eval_text(value.strip())
        except (cexpr.ExprError, ZeroDivisionError) as err:
            raise UsageError(f"--size {item!r}: {err}") from None
        if not isinstance(v, int) or v <= 0:
            raise UsageError(f"--size {item!r}: the value must be a positive integer")
        if v > MAX_SIZE_VALUE:
            raise UsageError(f"--size {item!r}: the value must be at most {MAX_SIZE_VALUE} (2**63 - 1)")
        out[sym.strip()] = v
    return out
