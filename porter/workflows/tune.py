"""`porter optimize FILE [--kernel K] [--capture DIR]` without ``--model``: the autotuner.

The kernel's launches -- a capture's (the program's own sizes and data), else the spec porter infers
from the host code (or the spec file) -- are the inputs; the original kernel at its own geometry gives
the expected outputs; every configuration of :func:`porter.harness.tune.configurations` is validated
on every device here and the validated ones are timed on the first GPU (else the first device, whose
times are then only a ranking on that device): at a capture's largest launch, else at the benchmark size
``porter bench`` uses (``--size`` overrides), beside the performance model's floor -- a time below the
floor is suspect and never chosen.  The output folder (default ``<file>.tuned/`` beside the
file) holds ``report.json`` / ``report.md`` and, when the fastest configuration is not the original's and
the file launches the kernel with ``<<<grid, block>>>`` expressions, the file with that launch rewritten
and ``launch.diff``.  The user's file is never written.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from porter.backends import Device
from porter.backends.spares import warm
from porter.errors import UsageError
from porter.files import reads_once
from porter.harness import tune as T
from porter.harness.trial import Instance, ValidateOptions
from porter.model import KernelSpec, Variant
from porter.plan import make_plan
from porter.results import TunedConfig, TuneReport
from porter.workflows.options import OutputOptions, RunOptions
from porter.workflows.resume import REPORT_NAME, write_atomic


def _instances(spec: KernelSpec, seed: int) -> list[Instance]:
    from porter.harness.trial import all_sizes

    return [
        Instance.draw(spec, size, label, seed + k)
        for k, (size, label) in enumerate(all_sizes(spec, ValidateOptions()))
    ]


def _expected(original: Variant, spec: KernelSpec, instances: Sequence[Instance], devices: Sequence[Device],
              options: ValidateOptions) -> dict[str, list[Any]]:  # fmt: skip
    """What the original leaves at its own geometry, per instance label."""
    from porter.harness.reference import Reference, reference_outputs

    ref = Reference(
        original=original, devices=tuple(d for d in devices if not d.checks), options=options.compile
    )
    from porter.harness.trial import Reject

    out: dict[str, list[Any]] = {}
    for inst in instances:
        logs: list[str] = []
        try:
            expected, _ = reference_outputs(ref, spec, inst, devices[0], options, logs)
        except Reject as rej:  # the original itself does not run at the inferred launches
            if "does not compile" in rej.reason:
                first = next((ln.strip() for ln in rej.log.splitlines() if "error" in ln.lower()), "")
                if original.path:  # the build's own name for the file -> the user's (lines are kept)
                    first = re.sub(r"^[\w.-]*kernel\.cu(?=[:(])", Path(original.path).name, first)
                raise UsageError(
                    f"the original kernel does not compile here ({first or rej.reason}); if it includes headers "
                    "from elsewhere, give their folders with -I DIR"
                ) from None
            raise UsageError(
                f"the original kernel does not run at the launches porter inferred ({rej.reason}); give "
                "--capture DIR (porter capture) or a spec file"
            ) from None
        out[inst.label] = expected
    return out


def _rewrite(
    text: str, line: int, grid: str, block: str, new_grid: str, new_block: str,
    shared: str | None = None, new_shared: str | None = None,
) -> str | None:  # fmt: skip
    """The file with the launch on `line` given the new configuration, or None when its text is not the
    ``<<<grid, block ...`` (``<<<grid, block, shared ...`` when `new_shared` is given) the scan read."""
    lines = text.splitlines(keepends=True)
    if not 1 <= line <= len(lines):
        return None
    head = r"<<<\s*" + re.escape(grid) + r"\s*,\s*" + re.escape(block)
    replacement = f"<<<{new_grid}, {new_block}"
    if new_shared is not None:
        if shared is None:
            return None
        head += r"\s*,\s*" + re.escape(shared)
        replacement += f", {new_shared}"
    pattern = re.compile(head + r"(?=\s*[,>])")
    new, n = pattern.subn(lambda _m: replacement, lines[line - 1], count=1)
    if n != 1:
        return None
    lines[line - 1] = new
    return "".join(lines)


def _row(t: T.Trial) -> TunedConfig:
    m = t.timed
    return TunedConfig(
        t.config.label, list(t.config.block), list(t.config.grid), t.validated, t.time_ms, t.reason,
        t.config.original, list(t.config.flags), bool(m and m.suspect),
        m.achieved_bandwidth if m else None, m.pct_bandwidth if m else None,
        m.pct_measured_bandwidth if m else None, t.config.shared, t.config.source,
        max((v.max_rel_err for v in t.verdicts if v.max_rel_err is not None), default=None) if t.validated else None,
    )  # fmt: skip


def _roofline(cost: Any, device: Device) -> Any:
    """The performance model's floor for the timed launch on the timing device (None without one)."""
    from porter.harness import perfmodel

    entry = perfmodel.entry_for(device) if cost is not None else None
    return perfmodel.roofline(cost, entry) if entry is not None else None


@reads_once
@warm
def tune_file(
    path: str,
    *,
    kernel: str | None = None,
    capture_dir: str | None = None,
    run: RunOptions | None = None,
    output: OutputOptions[TuneReport] | None = None,
    rewrites: Mapping[str, str] | None = None,
    timer: T.Timer | None = None,
    progress: Callable[[str], None] | None = None,
) -> TuneReport:
    """The autotuner on one kernel of `path` (see the module docstring).  ``run``: the include dirs, the
    build's -D (in every compile and in size inference), the devices (None: every one here that runs
    CUDA), the seed of the inputs drawn, the size symbols timed at (``sizes``, ``--size``) and
    ``gpu_elements``; ``output``: the folder
    (default ``<file>.tuned/`` beside it) and ``markdown`` (renders ``report.md``).  ``rewrites``: a
    model's validated rewrites (label -> code) that join the search; ``timer``: times a configuration
    instead of the benchmark (tests)."""
    from porter.harness.bench import benchmark, plan_for
    from porter.harness.cost import estimate
    from porter.harness.spec import split_instance
    from porter.plan import reference_devices
    from porter.workflows.bench import GPU_ELEMENTS, _bench_size
    from porter.workflows.source import pick_kernel

    say = progress or (lambda _m: None)
    run = run or RunOptions()
    output = output or OutputOptions()
    sizes, gpu_elements, out_dir, markdown = run.sizes, run.gpu_elements, output.out_dir, output.markdown
    dirs = (str(Path(path).resolve().parent), *(str(Path(d).resolve()) for d in run.include_dirs))
    source_plan = make_plan(path, "optimize", dirs, defines=run.defines)
    k = pick_kernel(source_plan.scan, kernel, path)
    run_on = list(run.devices) if run.devices is not None else list(reference_devices())
    if not run_on:
        raise UsageError(
            "no device here can run CUDA kernels (no NVIDIA GPU, and the CPU emulator needs g++)"
        )
    options = ValidateOptions(compile=source_plan.compile_options(dirs))
    original = replace(source_plan.original(k.name, "file"), entry=k.qualified)
    if capture_dir is not None:
        from porter import capture
        from porter.harness.replay import build

        launches = capture.by_kernel(capture.load(capture_dir).launches)
        found = launches.get(k.name) or next(
            (v for n, v in launches.items() if split_instance(n)[0] == k.name), None
        )
        if found is None:
            raise UsageError(f"the capture has no launch of {k.name}", path=capture_dir)
        rep = build(found[0].kernel, found, tuple(k.atomics))
        if rep.spec is None:
            raise UsageError(
                f"the capture's launches of {k.name} cannot be replayed: {rep.problem}", path=capture_dir
            )
        spec, instances, expected = rep.spec, list(rep.instances), dict(rep.recorded)
    else:
        spec = source_plan.spec(k.name, dirs)
        instances = _instances(spec, run.seed)
        try:
            expected = _expected(original, spec, instances, run_on, options)
        except UsageError:  # the file's other device code does not build or run (a removed API): alone
            original = replace(source_plan.original(k.name, "alone"), entry=k.qualified)
            expected = _expected(original, spec, instances, run_on, options)
    timing_device = next((d for d in run_on if d.times), run_on[0])
    facts = timing_device.facts
    configs = T.configurations(
        spec, T.grid_stride(k, source_plan.text), facts.max_threads_per_block, facts.multiprocessors,
        T.used_dims(spec, [i.size for i in instances]), [i.size for i in instances],
    )  # fmt: skip
    largest = max(instances, key=lambda i: sum(getattr(v, "nbytes", 0) for v in i.values))
    if capture_dir is not None:
        if sizes:
            raise UsageError("--size is for inferred launches; a capture's are timed at their own size")
        timed_at: Instance | None = largest
        size = dict(largest.size)
    else:  # validated at small sizes, timed where the device's memory system shows
        timed_at, size = (
            None,
            _bench_size(spec, timing_device.size_class, sizes or {}, gpu_elements or GPU_ELEMENTS),
        )
    try:
        cost = estimate(source_plan.text, spec, size, source_plan.scan, kernel=k.name)
    except (ValueError, ArithmeticError):
        cost = None
    variants = {"": original}
    base = list(configs)
    for label, code in (rewrites or {}).items():  # a model's validated rewrites join the search
        variants[label] = replace(original, source=code, entry=k.name, provenance="llm")
        configs += T.joined(base, label)
    flags = T.flag_sets(timing_device.backend)
    say(f"{k.name}: {len(configs)} configuration(s) and {len(flags)} option set(s), timed on "
        f"{timing_device.label} at {', '.join(f'{n}={v}' for n, v in size.items())}")  # fmt: skip

    def bench(c: T.Config, shaped: KernelSpec, device: Device) -> T.Timed:
        inst = None
        if timed_at is not None:
            inst = Instance.given(shaped, timed_at.size, timed_at.label, timed_at.values, timed_at.constants)
        compile_with = replace(
            options.compile, flags=(*options.compile.flags, *c.flags), untrusted=bool(c.source)
        )
        r = benchmark(variants[c.source], shaped, device, size, replace(plan_for(device), compile=compile_with),
                      instance=inst, cost=cost)  # fmt: skip
        if not r.ok or r.timing is None:
            return T.Timed(None, f"not timed: {r.reason}")
        a = r.assessment
        return T.Timed(
            r.timing.median_ms, ("; ".join(r.notes) if r.suspect else ""), r.suspect,
            a.achieved_bandwidth if a else None, a.pct_bandwidth if a else None,
            a.pct_measured_bandwidth if a else None,
        )  # fmt: skip

    validate_at = T.replay_validator(variants, instances, expected, run_on, options)
    result = T.tune(k.name, spec, configs, validate_at, timer or bench, timing_device, flags)
    src = Path(path)
    out = Path(out_dir) if out_dir else src.parent / f"{src.stem}.tuned"
    if out.exists() and not out.is_dir():
        raise UsageError("--out exists and is not a folder", path=str(out))
    out.mkdir(parents=True, exist_ok=True)
    report = TuneReport(
        source=str(src), kernel=k.name, device=result.device, out_dir=str(out),
        spec_source="capture" if capture_dir else spec.source, size=size,
        floor_ms=(r.floor_ms if (r := _roofline(cost, timing_device)) else None), bound=r.bound if r else "",
        configs=[_row(t) for t in result.trials],
        best=result.best.config.label if result.best else "", speedup=result.speedup,
    )  # fmt: skip
    if result.best is not None and result.best.config.flags:
        report.notes.append(f"the fastest needs the compile options {' '.join(result.best.config.flags)}: "
                            "build the kernel with them")  # fmt: skip
    if not timing_device.times:
        report.notes.append(
            f"no GPU here: the times are {timing_device.label}'s, a ranking on that device, not a GPU's"
        )
    best = result.best
    if best is not None and best.config.source:  # this file holds the original kernel, not the rewrite
        report.notes.append(
            f"the fastest is {best.config.source} launched with block ({', '.join(best.config.block)}) and grid "
            f"({', '.join(best.config.grid)}): this file is not rewritten, its kernel is the original"
        )
    elif best is not None and not best.config.original and best.config.launches_as(spec, [size]):
        report.notes.append("the fastest keeps the original's launch geometry: the launch is not rewritten")
    elif best is not None and not best.config.original:
        site = [s for s in source_plan.scan.launches if s.base == k.name and s.via == "chevrons"]
        text = source_plan.text
        if len(site) == 1 and all(b == "1" for b in best.config.block[1:]) and best.config.block[0].isdigit():
            s = site[0]
            new_grid = f"(({s.grid}) * ({s.block}) + {best.config.block[0]} - 1) / {best.config.block[0]}"
            if best.config.grid[0].startswith("min("):
                cap = best.config.grid[0].rsplit(",", 1)[1].strip(" )")
                new_grid = f"min({new_grid}, {cap})"
            new_shared = None
            if best.config.shared is not None:  # in proportion, at a block larger than the original's
                new_shared = f"({s.shared_bytes}) * {best.config.block[0]} / ({s.block})"
            # shared memory larger than only some launches' (a max() of two) is no one launch expression
            by_hand = (best.config.shared or "").startswith("max(")
            rewritten = (
                None
                if by_hand
                else _rewrite(
                    text, s.line, s.grid, s.block, new_grid, best.config.block[0], s.shared_bytes, new_shared
                )
            )
            if rewritten is not None:
                write_atomic(out / src.name, rewritten)
                diff = difflib.unified_diff(text.splitlines(keepends=True), rewritten.splitlines(keepends=True),
                                            f"a/{src.name}", f"b/{src.name}")  # fmt: skip
                write_atomic(out / "launch.diff", "".join(diff))
                report.files = [str(out / src.name), str(out / "launch.diff")]
        if not report.files:
            report.notes.append(
                "the launch is not one <<<grid, block>>> of 1-D expressions in this file: apply the configuration "
                "from report.json by hand"
            )
    write_atomic(out / REPORT_NAME, json.dumps(report.document(), indent=2) + "\n")
    if markdown is not None:
        write_atomic(out / "report.md", markdown(report))
    return report


__all__ = ["tune_file"]
