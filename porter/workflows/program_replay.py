"""Each kernel of a ported program validated from the launches its original's run captured.

After ``port --run``, the original's run on the CPU runtime has recorded its launches (``runs/<key>/
capture/``, docs/CAPTURE_FORMAT.md).  For every kernel captured (:func:`porter.harness.replay.build`):

1. the **original kernel** is replayed first, on every device that runs CUDA here: the capture must
   reproduce with it (a kernel reading something the capture lacks -- a ``__constant__`` symbol, a
   texture -- does not, and then no variant is judged on it: ``not-replayable`` with the reason);
2. each **port** is replayed on every device that runs its target (the HIP file that defines the
   kernel, built as device code with the mirrored tree's include folders; the OpenCL unit holding it,
   through its launch mapping), and judged by the validator's checks against what the original left.

Every verdict lands in the report's kernel (``kernels[].replays``); a failed one fails the port.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from porter import capture
from porter.backends import CompileOptions, Device, get_dialect
from porter.errors import UsageError
from porter.files import decode_text, read_input
from porter.harness import replay as replaying
from porter.harness.trial import ValidateOptions
from porter.model import Status, Variant, Verdict
from porter.program import SOURCE_SUFFIXES, Program
from porter.results import KernelReplay, ProgramKernel, ProgramReport

Progress = Callable[[str], None]
LOG_TAIL = 4000  # characters of a failed replay's log kept in report.json


def _launches(report: ProgramReport) -> tuple[list[capture.Launch], list[str]]:
    """Every launch the original's runs captured, each labelled with its --run's number, and the keys of
    the runs that captured them (what the capture depends on)."""
    found: list[capture.Launch] = []
    keys: list[str] = []
    for n, run in enumerate(report.runs, 1):
        # one capture per --run: from the real hardware where the original ran on it
        for rec in sorted(run.originals, key=lambda r: r.capture_kind != "gpu"):
            if not rec.capture:
                continue
            try:
                cap = capture.load(rec.capture)
            except UsageError as err:
                report.notes.append(f"run {n}: the capture is unreadable: {err}")
                continue
            report.notes += [f"run {n}: {p}" for p in cap.problems]
            found += [replace(la, run=n) for la in cap.launches]
            keys.append(rec.key)
            break  # one capture per --run
    return found, keys


def _text(path: Path) -> str | None:
    """One of porter's outputs (a port written earlier in this command), or None."""
    try:
        return decode_text(path.read_bytes())
    except OSError:
        return None


def _user_text(path: Path) -> str | None:
    """One of the user's files, read as every other stage reads it (:func:`porter.files.read_input`:
    regular files under the size cap, once per command), or None when it cannot be."""
    try:
        return decode_text(read_input(path))
    except UsageError:
        return None


def _scanned(program: Program, kernels: Mapping[str, ProgramKernel]) -> dict[str, Any]:
    """The scan of each kernel porter found, by name (template parameters, parameter types, atomics)."""
    from porter.scan import scan_source

    found: dict[str, Any] = {}
    for pk in kernels.values():
        text = _user_text(program.root / pk.file)
        if text is None:
            continue
        path = str(program.root / pk.file)
        for k in scan_source(text.encode("utf-8", "surrogateescape"), path, "cuda").kernels:
            if k.name == pk.name:
                found[k.name] = k
    return found


def resolved_launches(launches: Sequence[capture.Launch], scanned: Mapping[str, Any]) -> list[capture.Launch]:
    """The launches, each named by the kernel instance it ran (``axpby<T>`` written in a host template
    becomes ``axpby<float>``, deduced from the captured argument types)."""
    out = []
    for la in launches:
        base = la.kernel.split("<", 1)[0].strip()
        k = scanned.get(base) or scanned.get(base.rsplit("::", 1)[-1])
        if k is not None and k.template_params:
            la = replace(
                la, kernel=replaying.instance_name(la, k.template_params, [p.type for p in k.params])
            )
        out.append(la)
    return out


def build_replay(name: str, launches: Sequence[capture.Launch], atomics: Sequence[str]) -> replaying.Replay:
    """The replay of `name`'s launches; a capture porter cannot read is its reason, never raised."""
    try:
        return replaying.build(name, launches, atomics=atomics)
    except (ValueError, KeyError, TypeError, OSError) as err:
        return replaying.Replay(
            name, None, problem=f"the capture cannot be read ({type(err).__name__}: {err})"
        )


def variant_name(variant: Variant) -> str:
    return "original" if variant.provenance == "original" else variant.target


def _key(
    name: str, variant: Variant, copts: CompileOptions, devices: Sequence[Device], run_keys: Sequence[str]
) -> str:
    """Everything a replay verdict depends on: the captured runs (their keys), the variant's code and
    build, its headers, the devices' toolchains and porter's own code; "" when a toolchain is unknown."""
    from porter.cache import headers_digest
    from porter.workflows.resume import code_fingerprint, sha, toolchain_of

    chains = [toolchain_of(d.backend, d) for d in devices]
    if any(c is None for c in chains):
        return ""
    return sha(
        "kernel-replay", code_fingerprint(), name, list(run_keys), variant.target, variant.source, variant.entry,
        list(variant.arg_map or ()), list(variant.extra_args), list(copts.include_dirs), list(copts.defines),
        headers_digest(variant.source, copts.include_dirs), [d.label for d in devices], chains,
    )  # fmt: skip


def _row_from(doc: Mapping[str, Any], key: str) -> KernelReplay:
    def number(name: str) -> float | None:
        value = doc.get(name)
        return float(value) if isinstance(value, int | float) else None

    return KernelReplay(
        str(doc.get("variant", "")), str(doc.get("device", "")), str(doc.get("status", "")),
        str(doc.get("reason", "")), int(doc.get("launches") or 0), int(doc.get("held_back") or 0),
        tuple(doc.get("checks") or ()), wavefront=int(doc.get("wavefront") or 0),
        instance=str(doc.get("instance") or ""), log=str(doc.get("log") or ""), time_ms=number("time_ms"),
        time_iqr_ms=number("time_iqr_ms"), speedup=number("speedup"), floor_ms=number("floor_ms"),
        timed_at=str(doc.get("timed_at") or ""), key=key, resumed=True,
    )  # fmt: skip


# The device kinds a validated replay is timed on: times elsewhere say nothing about GPU speed.
TIMED_KINDS: tuple[str, ...] = ("gpu",)


def _timed(
    row: KernelReplay, variant: Variant, copts: CompileOptions, device: Device, rep: replaying.Replay,
    original: tuple[Variant, CompileOptions],
) -> KernelReplay:  # fmt: skip
    """`row` with the variant's time at its largest captured launch on `device` (the original's on the
    same device beside it, and the model's floor); a failed timing says why in ``timed_at``."""
    from porter.harness.bench import CPU_PLAN, GPU_PLAN
    from porter.harness.cost import estimate
    from porter.plan import run_devices

    source, options = original

    def cost_at(spec: Any, size: dict[str, int]) -> Any:  # the original's work: one floor for every port
        try:
            return estimate(source.source, spec, size, kernel=source.entry)
        except Exception:  # noqa: BLE001 - a launch the model cannot cost: the time stands alone
            return None

    plan = replace(GPU_PLAN if device.times else CPU_PLAN, compile=copts)
    same = variant.source == source.source and variant.entry == source.entry
    found = replaying.timed(
        variant, rep, device, plan, original=None if same else source, original_options=options,
        reference_devices=run_devices("cuda"), cost_at=cost_at, most=1,
    )  # fmt: skip
    if not found:
        return replace(row, timed_at="not timed: nothing to time")
    res = found[0]
    at = ", ".join(f"{k}={v}" for k, v in res.size.items())
    if not res.ok or res.timing is None:
        return replace(row, timed_at=f"not timed at {at}: {res.reason}")
    floor = res.assessment.floor_ms if res.assessment is not None else None
    return replace(
        row, time_ms=res.timing.median_ms, time_iqr_ms=res.timing.iqr_ms, speedup=res.speedup,
        floor_ms=floor, timed_at=at,
    )  # fmt: skip


def _verdict_row(variant: str, v: Verdict, rep: replaying.Replay) -> KernelReplay:
    if v.status is Status.VALIDATED:
        status = "validated"
    elif v.status is Status.COMPILED:
        status = "compiled"
    elif v.reason.startswith("not replayable"):
        status = "not-replayable"
    else:
        status = "failed"
    held = len(rep.spec.hidden_sizes) if rep.spec else 0
    log = "\n".join(v.logs)[-LOG_TAIL:] if status == "failed" else ""
    return KernelReplay(
        variant, v.device or v.backend, status, v.reason, len(rep.instances), held, tuple(v.checks), log=log
    )


class _Variants:
    """The variant of one kernel for the original and for each target, from the port's outputs."""

    def __init__(
        self,
        program: Program,
        out: Path,
        entries: Mapping[str, Mapping[str, tuple[str, str]]],
        said: Mapping[str, Mapping[str, str]] | None = None,
    ):
        self.program, self.out, self.entries = program, out, entries
        self.said = said or {}  # kernel or instance name -> target -> what its translation said
        self.homes: dict[str, str] = {}  # kernel file -> home (each unit's includes walked once)

    def home(self, pk: ProgramKernel) -> str:
        if pk.file not in self.homes:
            self.homes[pk.file] = self._home(pk)
        return self.homes[pk.file]

    def _home(self, pk: ProgramKernel) -> str:
        """The file whose device code is built to run the kernel: the file defining it, unless that is
        a source file another unit includes (a unity build: myocyte's kernel.cu needs main.cu's types),
        then the first unit that reaches it."""
        from porter.includes import reachable

        f = self.program.by_path(self.program.root / pk.file)
        if f is None or f.kind == "source" or f.path.suffix not in SOURCE_SUFFIXES:
            return pk.file
        for unit in self.program.units:
            found = reachable(
                [(str(unit.path), None)],
                self.program.include_dirs,
                quoted_only=True,
                allow=self.program.may_read,
            )
            if any(Path(p).resolve() == f.path.resolve() for p, _ in found):
                return str(unit.rel)
        return pk.file

    def original(self, pk: ProgramKernel, name: str) -> tuple[Variant, CompileOptions] | str:
        from porter.scan.extract import device_code

        path = self.program.root / self.home(pk)
        text = _user_text(path)
        if text is None:
            return f"cannot read {pk.file}"
        dirs = self.program.mirrored_dirs(self.program.root, path)  # the tree as it is: its own folders
        return Variant(name, "cuda", device_code(text), name, "original", str(path)), CompileOptions(
            include_dirs=dirs, defines=self.program.defines_for(self.home(pk))
        )

    def port(
        self, target: str, pk: ProgramKernel, name: str
    ) -> tuple[Variant, CompileOptions, tuple[str, ...]] | str:
        """The port's variant, how to build it, and what it needs of a device (its launch mapping's
        ``requires``; a single-source port needs nothing beyond its target)."""
        dialect = get_dialect(target)
        known = self.entries.get(target, {})
        entry_file = known.get(name) or known.get(pk.name)
        if entry_file is None:  # what the translator said of this instance, else of the kernel
            said = self.said.get(name, {}).get(target, "") or pk.targets.get(target, "")
            return (
                f"the {target} port: {said}"
                if said.startswith("untranslatable")
                else (f"the {target} port has no translation of {pk.name}")
            )
        entry, rel = entry_file
        if dialect.single_source:
            from porter.scan.extract import device_code

            home = self.home(pk)
            dest = self.out / target / home
            text = _text(dest)
            if text is None:
                return f"the {target} port has no {home}"
            dirs = self.program.mirrored_dirs(self.out / target, dest)
            if "<" in name and "<" not in entry:
                entry = name
            variant = Variant(name, target, device_code(text), entry, "translate", str(dest))
            return variant, CompileOptions(include_dirs=dirs, defines=self.program.defines_for(home)), ()
        cl = self.out / target / Path(rel).with_name(Path(rel).stem + dialect.suffix)
        mapping_path = cl.with_name(cl.stem + ".launch.json")
        text = _text(cl)
        try:
            mapping = json.loads(mapping_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return f"the {target} port has no launch mapping for {rel}"
        tk: dict[str, Any] | None = next(
            (k for k in mapping.get("kernels", ()) if k.get("name") in (name, pk.name)), None
        )
        if text is None or tk is None:
            return f"the {target} output of {rel} does not hold {pk.name}"
        variant = Variant(
            name, target, text, str(tk.get("entry") or pk.name), "translate", str(cl),
            arg_map=tuple(tk.get("arg_map") or ()), extra_args=tuple(tk.get("extra_args") or ()),
        )  # fmt: skip
        # the program's -D macros: a size the kernel takes from one is the same in the OpenCL build
        own = self.program.defines_for(self.home(pk))
        return variant, CompileOptions(defines=own), tuple(tk.get("requires") or ())


def replay_program(
    program: Program,
    out: Path,
    report: ProgramReport,
    entries: Mapping[str, Mapping[str, tuple[str, str]]],
    say: Progress,
    save: Callable[[], None],
    earlier: Mapping[str, Any] | None = None,
    timeout: float = 120.0,
) -> None:
    """Validate every captured kernel's original and ports from the capture; see the module docstring."""
    from porter.plan import lacking, run_devices, wavefront_devices

    launches, run_keys = _launches(report)
    if not launches:
        return
    previous: dict[str, list[Mapping[str, Any]]] = {}
    for k_doc in (earlier or {}).get("kernels") or ():
        for row in (k_doc.get("replays") if isinstance(k_doc, dict) else None) or ():
            if isinstance(row, dict) and row.get("key"):
                previous.setdefault(str(row["key"]), []).append(row)

    def judged(
        variant: Variant,
        copts: CompileOptions,
        devices: Sequence[Device],
        replay_of: Callable[[], replaying.Replay],
        name: str,
        original: tuple[Variant, CompileOptions],
    ) -> list[KernelReplay]:
        """The verdicts of `variant` on `devices`, reused from the previous report when its key matches
        (then the capture's arrays are not even read: `replay_of` builds the replay on first need)."""
        key = _key(name, variant, copts, devices, run_keys)
        old = previous.get(key) if key else None
        if old:
            say(f"{name}: {variant_name(variant)} replayed earlier with the same inputs; kept")
            return [replace(_row_from(d, key), instance=name) for d in old]
        rep = replay_of()
        verdicts = replaying.replay(variant, rep, devices, ValidateOptions(compile=copts, timeout_s=timeout))
        width = {d.label: d.facts.warp_size for d in devices}
        rows = [
            replace(
                _verdict_row(variant_name(variant), v, rep),
                key=key,
                wavefront=width.get(v.device, 0),
                instance=name,
            )
            for v in verdicts
        ]
        by_label = {d.label: d for d in devices}
        for i, row in enumerate(rows):
            device = by_label.get(row.device)
            if row.status == "validated" and device is not None and device.kind in TIMED_KINDS:
                say(f"{name}: timing {variant_name(variant)} on {device.label} at a captured launch")
                rows[i] = _timed(row, variant, copts, device, rep, original)
        save()
        return rows

    kernels = {k.name: k for k in report.kernels}
    scanned = _scanned(program, kernels)
    launches = resolved_launches(launches, scanned)
    variants = _Variants(program, out, entries, {k.name: k.targets for k in report.kernels})
    grouped = capture.by_kernel(launches)
    for k in report.kernels:
        k.replays = []
    for n, (name, las) in enumerate(grouped.items(), 1):
        base = name.split("<", 1)[0].strip()
        pk = kernels.get(base) or kernels.get(base.rsplit("::", 1)[-1])
        if pk is None:
            report.notes.append(f"captured launches of {name}: not a kernel porter found in the program")
            continue
        say(f"replaying {name} ({len(las)} captured launch(es)): {n}/{len(grouped)}")
        k_scan = scanned.get(pk.name)
        atomics = tuple(k_scan.atomics) if k_scan is not None else ()
        replay_of = functools.cache(functools.partial(build_replay, name, las, atomics))  # on first need only

        original = variants.original(pk, name)
        if isinstance(original, str):
            pk.replays.append(KernelReplay("original", "", "not-replayable", original, instance=name))
            continue
        variant, copts = original
        rows = judged(variant, copts, run_devices("cuda"), replay_of, name, original)
        pk.replays += rows
        if not any(r.status == "validated" for r in rows):
            first = rows[0] if rows else None
            if first is None:
                why = "no device here runs the original kernel"
            elif first.status == "not-replayable":
                why = first.reason  # the capture's own limits: the same for every variant
            else:
                why = f"the original kernel's replay does not reproduce the captured run: {first.reason}"
            for target in report.targets:
                pk.replays.append(KernelReplay(target, "", "not-replayable", why, instance=name))
            continue
        for target in report.targets:
            made = variants.port(target, pk, name)
            if isinstance(made, str):
                pk.replays.append(KernelReplay(target, "", "not-replayable", made, instance=name))
                continue
            variant, copts, requires = made
            # every device of the target, and its other wavefront widths where emulated (HIP: 64 lanes)
            devices = [
                d
                for d in [*run_devices(target), *wavefront_devices(target)]
                if not lacking(target, d, requires)
            ]
            pk.replays += judged(variant, copts, devices, replay_of, name, original)
    captured_on = {name: las[0].device for name, las in grouped.items() if las}
    for k in report.kernels:
        for row in k.replays:
            row.captured_on = captured_on.get(row.instance, "")


__all__ = ["build_replay", "replay_program", "resolved_launches"]
