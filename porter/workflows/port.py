"""`porter port FILE --to hip,opencl`: scan, translate, compile and validate every kernel of a file.

For each requested target the file is translated (the HIP translation also translates the local
headers it includes, written beside it under their own names; the OpenCL translation is one
self-contained ``.cl``).  Outputs go to a folder of their own (default ``<stem>.ported/`` beside
the input); the user's files are never written.  Then, for every kernel (one entry per template
instantiation), each variant is

* compiled for the target's compile-only architectures (HIP: gfx90a and gfx942 where a toolchain
  reaches them) -> status ``compiled`` or ``failed``;
* validated against the ORIGINAL CUDA kernel (the reference runs on the CPU emulator, or CUDA on an
  NVIDIA GPU) on every device that can run the variant (HIP: HIP-on-CUDA / AMD GPUs and the CPU
  emulator; OpenCL: every OpenCL device, the Oclgrind checker included) -> ``validated`` or
  ``failed``;

one row per (target, device).  An untranslatable kernel gets status ``untranslatable`` naming the
construct; a kernel that needs what a device lacks (OpenCL: sub-groups, 32-wide sub-groups; see
``TranslatedKernel.requires``) gets an ``untranslatable`` row for that device naming the need,
and is built with the options its needs take on the devices that have them (``-cl-std=CL3.0``).
A kernel whose spec cannot be inferred gets ``failed`` rows carrying the inference message (with
the spec snippet to write).  ``report.json`` in the output folder is rewritten (atomically) after
every row, so an interrupted run keeps what it verified; every row is stored with the key of what
its verdict depends on (source, headers, spec, translation, options, toolchain, device; made by
:func:`porter.workflows.resume.key_of`), and a re-run asks the previous report's
:class:`~porter.workflows.resume.Ledger` for the key of each row it would make, keeping the validated
rows found -- marked ``"resumed": true`` -- and doing the rest (``fresh``: everything).  Rows of the previous report that still hold stay in report.json until
they are done again, so interrupting a re-run loses nothing either.

With ``model`` (``--model``), what the rules leave is handed to the LLM loop
(:mod:`porter.llm.loop`, task "translate") instead of stopping: an untranslatable kernel (on every
device of the target) and a kernel on the devices lacking what its translation needs (OpenCL: a
warp-shuffle kernel on a device without 32-wide sub-groups).  The model's candidate, screened (the
OpenCL entry and the translated parameter list, no host code, no foreign headers), becomes a Variant
of the target (provenance ``llm:<model>``) validated against the ORIGINAL CUDA kernel on exactly those
devices, then timed there; each such row is ``validated`` or ``failed`` from that verdict and carries
``time_ms`` / ``speedup``; the JSON gains ``usage`` (tokens, cost) summed over every conversation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from porter import plan as planning
from porter.backends import (
    Device,
    get_dialect,
    translation_targets,
)
from porter.backends.spares import warm
from porter.errors import PorterError, UsageError
from porter.files import reads_once
from porter.harness.evaluate import Evaluator
from porter.harness.validate import Reference, ValidateOptions, compile_only, tolerance_for, validate
from porter.llm.base import Provider
from porter.llm.loop import Budget, Event, LoopOptions, run_loop
from porter.llm.prompting import PromptContext
from porter.model import (
    Diagnostic,
    KernelSpec,
    Role,
    Severity,
    Status,
    Translation,
    Variant,
    Verdict,
    to_jsonable,
)
from porter.plan import Plan, Refusal, Units, make_plan
from porter.records import (
    Attempt,
    LoopResult,
    Totals,
    attempt_doc,
    usage_doc,
)
from porter.redact import redact
from porter.results import KernelResult, PortReport, VariantRow, file_digest
from porter.scan.instances import Instance
from porter.scan.macros import MacroTable
from porter.workflows.options import ModelOptions, OutputOptions, RunOptions
from porter.workflows.resume import (
    Ledger,
    check_out_dir,
    key_of,
    sha,
    toolchain_of,
    write_atomic,
)
from porter.workflows.source import includes, sibling_dir, squeeze

TRANSLATED = "translated"  # row status under --translate-only: written, neither compiled nor run
REPORT_NAME = "report.json"
DIAGNOSTICS_NAME = "diagnostics.txt"

Progress = Callable[[str], None]


def known_targets() -> tuple[str, ...]:
    """The dialects there is a rule-based translator into (the backends registry's)."""
    return translation_targets()


# --------------------------------------------------------------------------- arguments


def parse_targets(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"hip,opencl"`` (or a list of such) -> ("hip", "opencl"); UsageError for unknown names."""
    parts = [text] if isinstance(text, str) else list(text)
    names = [n.strip().lower() for p in parts for n in p.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--to needs at least one target ({', '.join(known_targets())})")
    unknown = [n for n in names if n not in known_targets()]
    if unknown:
        raise UsageError(f"unknown target {unknown[0]!r} for --to (choose from {', '.join(known_targets())})")
    return tuple(dict.fromkeys(names))


def default_out_dir(source: str | Path) -> Path:
    return sibling_dir(source, "ported")


# --------------------------------------------------------------------------- translation


@dataclass(frozen=True)
class _Written:
    target: str
    path: Path  # the main translated file
    translation: Translation
    source: str  # what the variant compiles (HIP: device code only; OpenCL: the whole .cl)
    include_dirs: tuple[str, ...]


def _relative_name(header: Path, source_dir: Path, include_dirs: Sequence[str]) -> Path:
    """The name a header is included by: relative to the source's folder or an include dir."""
    resolved = header.resolve()
    for base in (source_dir, *(Path(d).resolve() for d in include_dirs)):
        try:
            return resolved.relative_to(base.resolve())
        except ValueError:
            continue
    return Path(header.name)


def _write(path: Path, text: str, inputs: set[Path]) -> None:
    if path.resolve() in inputs:
        raise UsageError(
            "the output would overwrite an input file; choose another --out folder", path=str(path)
        )
    write_atomic(path, text)


def _diagnostic_line(d: Diagnostic, target: str) -> str:
    return f"{d.path}:{d.line}: {target}: {d.severity.value}: {d.construct}: {d.reason}"


# --------------------------------------------------------------------------- per-kernel units


class _SharedUnit:
    """The device code every HIP kernel of a file is built in, and each kernel's own unit (the
    kernel alone with the helpers it needs: :class:`porter.plan.Units` keyed by every other kernel) for when
    the shared one does not build.  One kernel a compiler rejects (``__syncwarp()``, ``__trap()``
    for gfx90a) then fails alone, with its own log, and the others are compiled and validated
    without it.  ``where``: the compile context (``hip:gfx90a``, a device label) in which the shared
    unit failed; there each kernel goes straight to its own unit."""

    def __init__(self, text: str, kernels: Sequence[str], macros: MacroTable) -> None:
        self.kernels = tuple(dict.fromkeys(kernels))
        self._alone = Units(text, self.kernels, macros)
        self._failed: set[str] = set()

    def alone(self, variant: Variant) -> Variant:
        return replace(variant, source=self._alone.keeping(variant.kernel))

    def _splits(self, variant: Variant) -> bool:
        """Can the variant's kernel be built alone (are there other kernels to leave out)?"""
        return len(self.kernels) > 1 and variant.kernel in self.kernels

    def compile(
        self, variant: Variant, spec: KernelSpec, opts: ValidateOptions, backend: str, where: str
    ) -> Verdict | None:
        """:func:`compile_only` in the shared unit, else (it fails) in the kernel's own unit."""
        if self._splits(variant) and where in self._failed:
            return compile_only(self.alone(variant), spec, opts, backend=backend)
        verdict = compile_only(variant, spec, opts, backend=backend)
        if verdict is None or verdict.compiled or not self._splits(variant):
            return verdict
        self._failed.add(where)
        return compile_only(self.alone(variant), spec, opts, backend=backend)

    def validate(
        self, variant: Variant, spec: KernelSpec, reference: Reference, device: Device, opts: ValidateOptions
    ) -> list[Verdict]:
        """:func:`validate` on one device in the shared unit, else in the kernel's own unit."""
        if self._splits(variant) and device.label in self._failed:
            return validate(self.alone(variant), spec, reference, [device], opts)
        verdicts = validate(variant, spec, reference, [device], opts)
        if not self._splits(variant) or not any(_unit_failure(v) for v in verdicts):
            return verdicts
        self._failed.add(device.label)
        return validate(self.alone(variant), spec, reference, [device], opts)


def _unit_failure(verdict: Verdict) -> bool:
    """Did the variant's unit fail to build (compile, or the emulator refusing a construct)?"""
    if "cannot be emulated" in verdict.reason:
        return True
    return not verdict.compiled and verdict.reason.startswith("compile:")


# --------------------------------------------------------------------------- the model (--model)


def _add_totals(a: Totals, b: Totals) -> Totals:
    return Totals(
        usage=a.usage + b.usage,
        cost_usd=a.cost_usd + b.cost_usd,
        notional_usd=a.notional_usd + b.notional_usd,
        requests=a.requests + b.requests,
        priced=a.priced and b.priced,
    )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name).strip("_") or "kernel"


@dataclass
class _ModelPort:
    """What every conversation of one `porter port --model` run shares."""

    provider: Provider
    options: ModelOptions
    plan: Plan  # the file: its text, scan, macros and translations
    bench: bool
    out: Path
    inputs: set[Path]
    report: PortReport
    say: Progress

    @property
    def model(self) -> str:
        return self.options.name

    @property
    def stem(self) -> str:
        return Path(self.plan.path).stem

    def port(
        self,
        *,
        inst: Instance,
        target: str,
        spec: KernelSpec,
        devices: Sequence[Device],
        reference: Reference,
        options: ValidateOptions,
        why: str,
        lacking: bool,
    ) -> list[VariantRow]:
        """Run the loop for one kernel and target on `devices`; one row per device."""
        from porter.llm.hardware import hardware_fields
        from porter.scan.extract import device_code

        plan, scan, original_text = self.plan, self.plan.scan, self.plan.text
        kernel = {k.name: k for k in scan.kernels}[inst.base]
        tk = plan.translated_kernel(inst, target)
        assert tk is not None  # the caller met it: untranslatable, or lacking on these devices
        translated = plan.translation(target).text
        max_dollars = self.options.max_dollars
        target_dialect = get_dialect(target)
        suffix = target_dialect.suffix
        provenance = f"llm:{self.model}"
        label = f"{inst.name}: {target}"
        if not devices:
            return [
                VariantRow(target, "", Status.UNTRANSLATABLE.value, "", reason=why, provenance=provenance)
            ]
        if max_dollars is not None and self.report.usage.notional_usd >= max_dollars:
            spent = f"dollar budget spent (${self.report.usage.notional_usd:.4f} of ${max_dollars:.4f})"
            return [
                VariantRow(target, "", Status.FAILED.value, d.label, reason=f"{why}; not asked: {spent}")
                for d in devices
            ]
        entry = tk.entry or kernel.name
        signature = target_dialect.model_signature(kernel, tk, translated)
        out_arg = next((a for a in spec.args if a.role is not Role.SCALAR and a.role is not Role.IN), None)
        ctx = PromptContext(
            kernel=kernel,
            path=Path(self.report.source).name,
            source=squeeze(device_code(original_text, macros=plan.macros)),
            dialect=target,
            task="translate",
            hardware=hardware_fields(devices[0], None, dict(spec.sizes[0]) if spec.sizes else {}),
            spec=spec,
            hazards=scan.hazards,
            trials=options.trials,
            rtol=f"{tolerance_for(out_arg.dtype if out_arg else 'float32', spec).rtol:g}",
            constraints=target_dialect.model_constraints(entry, signature, tk, lacking),
            untranslatable=why,
            original_includes=includes(original_text) if target_dialect.single_source else (),
            entry=entry,
            signature=signature,
        )
        template = Variant(
            kernel=inst.base,
            target=target,
            source="",
            entry=entry,
            provenance=provenance,
            arg_map=tk.arg_map or None,  # type: ignore[arg-type]  # None slots: extra arguments
            extra_args=tk.extra_args,
        )
        evaluator = Evaluator(
            spec=spec,
            reference=reference,
            devices=devices,
            options=options,
            template=template,
            scan=scan,
            bench=self.bench,
        )
        remaining = None if max_dollars is None else max_dollars - self.report.usage.notional_usd

        def progress(event: Event) -> None:
            if event.kind == "round":
                self.say(f"{label}: asking {self.model}, round {event.round}")
            elif event.kind == "attempt" and event.attempt is not None:
                a = event.attempt
                reason = " ".join(redact(a.reason).split())[:160]
                self.say(f"{label}: candidate {a.candidate} round {a.round}: {a.status}: {reason}")

        result = run_loop(
            self.provider,
            ctx,
            evaluator,
            LoopOptions(
                candidates=self.options.count(1),
                budget=Budget(rounds=self.options.rounds, max_dollars=remaining),
                max_reply_tokens=self.options.max_reply_tokens,
                stop_when_validated=True,
            ),
            progress=progress,
        )
        self.report.usage = _add_totals(self.report.usage, result.totals)
        paths = self._write_attempts(inst, target, suffix, result)
        self.report.llm.append(
            {
                "kernel": inst.name,
                "target": target,
                "devices": [d.label for d in devices],
                "why": why,
                "rounds": result.rounds,
                "stop_reason": result.stop_reason,
                "notes": list(result.notes),
                "usage": usage_doc(result.totals),
                "attempts": [
                    attempt_doc(a) | {"path": paths.get((a.candidate, a.round), "")} for a in result.attempts
                ],
            }
        )
        return self._rows(inst, target, suffix, devices, why, result, paths, provenance)

    def _write_attempts(
        self, inst: Instance, target: str, suffix: str, result: LoopResult
    ) -> dict[tuple[int, int], str]:
        paths: dict[tuple[int, int], str] = {}
        folder = self.out / "attempts" / f"{_safe(inst.name)}.{target}"
        for a in result.attempts:
            if a.code is not None:
                p = folder / f"candidate{a.candidate}_round{a.round}{suffix}"
                _write(p, redact(a.code), self.inputs)
                paths[(a.candidate, a.round)] = str(p)
        return paths

    def _rows(
        self,
        inst: Instance,
        target: str,
        suffix: str,
        devices: Sequence[Device],
        why: str,
        result: LoopResult,
        paths: dict[tuple[int, int], str],
        provenance: str,
    ) -> list[VariantRow]:
        best = result.best
        chosen: Attempt | None = best
        path = ""
        if best is not None and best.code is not None:
            p = self.out / f"{self.stem}.{_safe(inst.name)}.llm{suffix}"
            comment = get_dialect(target).comment(
                f"{inst.name}: {target} translation by {self.model} (candidate {best.candidate}, round "
                f"{best.round}), validated by porter port against the original"
            )
            _write(p, redact(comment + best.code), self.inputs)
            path = str(p)
        else:
            evaluated = [a for a in result.attempts if a.evaluation is not None and a.evaluation.verdicts]
            chosen = evaluated[-1] if evaluated else None
            if chosen is not None:
                path = paths.get((chosen.candidate, chosen.round), "")
        last = result.attempts[-1] if result.attempts else None
        summary = (
            f"{self.model}: no validated candidate in {result.rounds} round(s) ({result.stop_reason})"
            + (f"; last: {last.status}: {last.reason}" if last is not None else "")
        )
        ev = chosen.evaluation if chosen is not None else None
        verdicts = {v.device: v for v in (ev.verdicts if ev else ())}
        timings = {str(t["device"]): t for t in (ev.timings if ev else ())}
        rows: list[VariantRow] = []
        for d in devices:
            v = verdicts.get(d.label)
            if v is None:
                rows.append(
                    VariantRow(
                        target,
                        path,
                        Status.FAILED.value,
                        d.label,
                        reason=redact(f"{why}; {summary}"),
                        provenance=provenance,
                    )
                )
                continue
            row = _row_from(v, target, path)
            t = timings.get(d.label, {})
            tag = (
                f"{self.model} (candidate {chosen.candidate}, round {chosen.round})"
                if chosen is not None
                else self.model
            )
            reason = f"translated by {tag}: {v.reason}" if best is not None else f"{summary}; {v.reason}"
            rows.append(
                replace(
                    row,
                    reason=redact(reason),
                    logs=tuple(redact(x) for x in row.logs),
                    provenance=provenance,
                    time_ms=t.get("time_ms"),  # type: ignore[arg-type]
                    speedup=t.get("speedup"),  # type: ignore[arg-type]
                )
            )
        return rows


# --------------------------------------------------------------------------- the workflow


def _row_from(verdict: Verdict, target: str, path: str, device: str | None = None) -> VariantRow:
    return VariantRow(
        target=target,
        path=path,
        status=verdict.status.value,
        device=device if device is not None else verdict.device,
        max_rel_err=verdict.max_rel_err,
        trials=verdict.trials,
        reason=verdict.reason,
        toolchain=verdict.toolchain,
        logs=verdict.logs,
    )


@dataclass(frozen=True)
class _Inputs:
    """What this run's verdicts depend on: per (kernel, target) a hash of the source, the headers it
    reaches, the spec, the translation, the reference unit, the options and porter's validation code;
    per (target, device label) the toolchain.  A row's key (:func:`porter.workflows.resume.key_of`)
    covers both, its device and provenance."""

    groups: dict[tuple[str, str], str]
    toolchains: dict[tuple[str, str], str | None]
    compile_labels: frozenset[tuple[str, str]]  # (target, label) of compile-only rows ("hip:gfx90a")

    def key(self, kernel: str, row: VariantRow) -> str:
        """The row's key ("" when an input cannot be told: such a row is never reused)."""
        group = self.groups.get((kernel, row.target))
        chain = self.toolchains.get((row.target, row.device), "" if not row.device else None)
        if group is None or chain is None:
            return ""
        return key_of("port-row", group, row.target, row.device, row.provenance, chain)

    def conversation_key(self, kernel: str, target: str, provenance: str) -> str:
        """The key of the model's conversations for `kernel` / `target` ("" when its inputs cannot be
        told): they go with the rows they made when those are kept."""
        group = self.groups.get((kernel, target))
        return "" if group is None else key_of("port-llm", group, target, provenance)

    def keys(self, kernel: str, provenances: Sequence[str]) -> list[str]:
        """The key of every row this run may make for `kernel` (each target, device label and
        provenance), in the order it makes them."""
        found: list[str] = []
        for name, target in self.groups:
            if name != kernel:
                continue
            labels = ["", *(label for t, label in self.toolchains if t == target)]
            for label in labels:
                for provenance in provenances:
                    key = self.key(kernel, VariantRow(target, "", "", label, provenance=provenance))
                    if key:
                        found.append(key)
        return found

    def reusable(self, row: VariantRow) -> bool:
        """A verdict worth keeping: validated on a device, or compiled for a compile-only target."""
        if (row.target, row.device) in self.compile_labels:
            return row.status == Status.COMPILED.value
        return row.status == Status.VALIDATED.value


def _run_inputs(
    plan: Plan,
    *,
    targets: Sequence[str],
    written: Mapping[str, _Written],
    specs: Mapping[str, tuple[KernelSpec | None, str | None]],
    options: ValidateOptions,
    ref_devices: Sequence[Device],
    run_devices: Mapping[str, Sequence[Device]],
    archs: Mapping[str, Sequence[str]],
    settings_key: object,
) -> _Inputs:
    """The keys of this run's rows: `plan`'s source, its instances of `targets` and the unit each
    is validated against (:meth:`porter.plan.Plan.original_unit`), with everything else given."""
    from porter.cache import headers_digest

    instances, source = plan.instances(targets), plan.text
    ref_options = plan.compile_options(plan.compile_dirs)

    chains: dict[tuple[str, str], str | None] = {}
    labels: set[tuple[str, str]] = set()
    for t in targets:
        if not run_devices[t] and not archs[t]:  # then the variant is only compiled, for the default arch
            chains[(t, t)] = toolchain_of(t)
            labels.add((t, t))
        for arch in archs[t]:
            chains[(t, f"{t}:{arch}")] = toolchain_of(t, None, arch)
            labels.add((t, f"{t}:{arch}"))
        for d in run_devices[t]:
            chains[(t, d.label)] = toolchain_of(d.backend, d)
    refs = [(d.label, toolchain_of(d.backend, d)) for d in ref_devices]
    groups: dict[tuple[str, str], str] = {}
    if any(chain is None for _, chain in refs):
        return _Inputs(groups, chains, frozenset(labels))
    common = sha(  # (porter's own code is in every key: resume.key_of)
        source,
        headers_digest(source, ref_options.include_dirs),
        to_jsonable(ref_options),
        refs,
        to_jsonable(options),
        settings_key,
    )
    unit = {t: sha(w.source, headers_digest(w.source, w.include_dirs)) for t, w in written.items()}
    for inst in instances:
        spec, why = specs[inst.name]
        reference = plan.original_unit(inst.base, targets) if spec is not None else ""
        for t in targets:
            w = written[t]
            tk = planning.translated_kernel(w.translation, inst)
            groups[(inst.name, t)] = sha(
                common,
                inst.name,
                inst.base,
                list(inst.template_args),
                t,
                to_jsonable(spec) if spec is not None else why,
                to_jsonable(tk),
                unit[t],
                list(w.include_dirs),
                reference,
            )
    return _Inputs(groups, chains, frozenset(labels))


def _earlier_row(doc: Mapping[str, Any]) -> VariantRow | None:
    """A row of the earlier report.json (a variant's object, its key and file hash in it) as it was
    stored, marked resumed; None when the object is not one."""
    try:
        return VariantRow(
            target=str(doc["target"]),
            path=str(doc["path"]),
            status=str(doc["status"]),
            device=str(doc["device"]),
            max_rel_err=doc.get("max_rel_err"),
            trials=int(doc.get("trials") or 0),
            reason=str(doc.get("reason", "")),
            toolchain=str(doc.get("toolchain", "")),
            logs=tuple(str(x) for x in doc.get("logs") or ()),
            provenance=str(doc.get("provenance", "translate")),
            time_ms=doc.get("time_ms"),
            speedup=doc.get("speedup"),
            key=str(doc["key"]),
            file_sha=str(doc.get("file_sha", "")),
            resumed=True,
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


class _Recorder:
    """Adds rows and rewrites report.json after each, atomically.

    Each row is stored with its key (:class:`_Inputs`) and file hash in its own object.  The rows of
    the previous report (``ledger``) stored under a key this run computes again (same source, options,
    toolchain...; for a row of one of ``provenances``) stay in report.json, as they were, until their
    kernel and target are done again -- an interrupted re-run loses nothing -- and :meth:`kept` hands
    back the validated ones so they are not redone."""

    def __init__(
        self,
        report: PortReport,
        out_dir: Path,
        inputs: set[Path],
        run_inputs: _Inputs | None = None,
        ledger: Ledger | None = None,
        provenances: Sequence[str] = ("translate",),
    ):
        self.report, self.out_dir, self.inputs = report, out_dir, inputs
        self.run_inputs, self.ledger = run_inputs, ledger if ledger is not None else Ledger()
        self.pending: dict[str, list[VariantRow]] = {}
        if run_inputs is not None:
            for name in dict.fromkeys(kernel for kernel, _ in run_inputs.groups):
                still = [r for key in run_inputs.keys(name, provenances) for r in self.earlier(key)]
                if still:
                    self.pending[name] = still
        self.current: tuple[str, str] | None = None
        self.done: set[tuple[str, str]] = set()

    def earlier(self, key: str) -> list[VariantRow]:
        """The previous report's rows stored under `key` (the ledger's), as they were."""
        return [r for doc in self.ledger.rows(key) if (r := _earlier_row(doc)) is not None]

    def begin(self, kernel: KernelResult, target: str) -> None:
        """`kernel` and `target` are being done: the previous rows of the group before it are superseded."""
        if self.current is not None:
            self.done.add(self.current)
        self.current = (kernel.name, target)

    def kept(self, kernel: str, target: str, devices: Sequence[str], provenance: str) -> list[VariantRow]:
        """The previous run's rows for `kernel` / `target` on every one of `devices`, when each is a
        verdict worth keeping for exactly this run's inputs and its file is unchanged; [] otherwise."""
        if self.run_inputs is None or not devices:
            return []
        found: list[VariantRow] = []
        for device in devices:
            key = self.run_inputs.key(kernel, VariantRow(target, "", "", device, provenance=provenance))
            rows = self.earlier(key)
            if not rows or not all(self.run_inputs.reusable(r) for r in rows):
                return []
            if any(r.file_sha != file_digest(r.path) for r in rows):
                return []
            found.extend(rows)
        return found

    def add(self, kernel: KernelResult, row: VariantRow) -> None:
        if self.run_inputs is not None and not row.resumed:
            row = replace(row, key=self.run_inputs.key(kernel.name, row), file_sha=file_digest(row.path))
        kernel.variants.append(row)
        self.save()

    def _rows(self, kernel: KernelResult) -> list[VariantRow]:
        """The kernel's rows so far, and the previous ones of groups not done yet (not when complete)."""
        pending = self.pending.get(kernel.name)
        if not pending or self.report.complete:
            return kernel.variants
        slots = {(r.target, r.device, r.provenance) for r in kernel.variants}
        waiting = [
            r
            for r in pending
            if (kernel.name, r.target) not in self.done and (r.target, r.device, r.provenance) not in slots
        ]
        return [*kernel.variants, *waiting]

    def save(self) -> None:
        report = self.report
        if self.pending and not report.complete:
            report = replace(report, kernels=[KernelResult(k.name, self._rows(k)) for k in report.kernels])
        text = json.dumps(to_jsonable(report.full_document()), indent=2) + "\n"
        _write(self.out_dir / REPORT_NAME, redact(text), self.inputs)


@reads_once
@warm
def port_file(
    path: str,
    targets: Sequence[str] | None = None,  # None: every translation target
    *,
    run: RunOptions | None = None,
    output: OutputOptions[PortReport] | None = None,
    model: ModelOptions | None = None,
    progress: Progress | None = None,
    translate_only: bool = False,
    bench: bool = True,
    plan: Plan | None = None,
    translate_options: Mapping[str, Mapping[str, str]] | None = None,
) -> PortReport:
    """Port every kernel of ``path`` to each target; see the module docstring.  ``run``: the include
    dirs, the build's -D and the validation options (its devices are every one here); ``output``: the
    output folder and ``fresh``.  ``model`` hands what the rules leave to the LLM loop; ``bench``: its
    validated translations are then timed.
    A previous report.json in the output folder is resumed (see :mod:`porter.workflows.resume`):
    its rows that still hold for these inputs are kept, the rest is done again; ``fresh`` ignores it.
    ``plan``: the plan of ``path`` when the caller has made it (bench/h200_port.py: the variants it then
    asks the plan for, :meth:`porter.plan.Plan.variant_for`, compile the translations written here).
    ``translate_options``: translator options per target (``{"hip": {"launch": "ggl"}}``)."""
    say = progress or (lambda _msg: None)
    run = run or RunOptions()
    output = output or OutputOptions()
    options, include_dirs = run.validation(), run.include_dirs
    out_dir, fresh = output.out_dir, output.fresh
    model_name = model.name if model is not None else None
    targets = parse_targets(list(known_targets() if targets is None else targets))
    if model is not None:
        if translate_only:
            raise UsageError("--model validates the model's translations; it cannot go with --translate-only")
        if model.count(1) < 1:
            raise UsageError("--candidates must be at least 1")
        if model.rounds < 1:
            raise UsageError("--rounds must be at least 1")
    for d in include_dirs:
        if not Path(d).is_dir():
            raise UsageError("include directory not found (-I)", path=str(d))
    plan = plan or make_plan(path, "port", include_dirs, translate_options, defines=options.compile.defines)
    macros, scan = plan.macros, plan.scan
    src_path = Path(path)
    out = Path(out_dir) if out_dir is not None else default_out_dir(src_path)
    check_out_dir(out, src_path, "port")  # before any work: a usable folder, never one of the user's
    ledger = Ledger.of(out, "port", fresh)  # the rows of the previous report in this folder, by key
    provider = model.provider() if model is not None else None

    translations: dict[str, Translation] = {}
    headers: dict[str, dict[Path, Translation]] = {}
    failed: dict[str, str] = {}  # target -> why its translator failed: its rows say so, the rest goes on
    for target in targets:
        say(f"translating {src_path.name} to {target}")
        try:
            translations[target], headers[target] = plan.translation_files(target)
        except UsageError:
            raise
        except (PorterError, ImportError) as err:
            why = str(err) if isinstance(err, PorterError) else f"{target} translation failed: {err}"
            failed[target] = why.removeprefix(f"{path}: ")
            say(f"{failed[target]}; the other targets go on")
    all_targets, targets = targets, tuple(t for t in targets if t not in failed)

    # never written over: the input, every header it reaches, every header a translator read
    inputs = {src_path.resolve(), *(Path(h).resolve() for h in plan.unit.headers)}
    inputs |= {h.resolve() for hs in headers.values() for h in hs}
    report = PortReport(
        source=path, out_dir=str(out), targets=all_targets, translate_only=translate_only, model=model_name
    )
    report.diagnostics.extend(
        Diagnostic(path, 1, f"{t} translator", why, Severity.ERROR) for t, why in failed.items()
    )
    written: dict[str, _Written] = {}
    src_dir = src_path.resolve().parent
    planned = [out / REPORT_NAME, out / DIAGNOSTICS_NAME]
    for target in targets:
        planned.append(out / f"{src_path.stem}{get_dialect(target).suffix}")
        planned.extend(out / _relative_name(h, src_dir, include_dirs) for h in headers[target])
    clash = next((p for p in planned if p.resolve() in inputs), None)
    if clash is not None:  # checked before anything is written
        raise UsageError(
            "the output would overwrite an input file; choose another --out folder", path=str(clash)
        )
    if not ledger:  # report.json first: from now on the folder is known as a porter output
        _Recorder(report, out, inputs).save()
    for target in targets:
        tr = translations[target]
        main = out / f"{src_path.stem}{get_dialect(target).suffix}"
        _write(main, tr.text, inputs)
        for header, htr in headers[target].items():
            _write(out / _relative_name(header, src_dir, include_dirs), htr.text, inputs)
            report.diagnostics.extend(htr.diagnostics)
        report.diagnostics.extend(tr.diagnostics)
        report.outputs[target] = str(main)
        # a single-source variant is pruned and reduced to device code below
        written[target] = _Written(target, main, tr, tr.text, plan.variant_dirs(target, out))
    diag_lines = [f"{path}:1: {t}: error: {why}" for t, why in failed.items()] + [
        _diagnostic_line(d, t)
        for t in targets
        for d in (*(d for h in headers[t].values() for d in h.diagnostics), *translations[t].diagnostics)
    ]
    _write(out / DIAGNOSTICS_NAME, "\n".join(diag_lines) + ("\n" if diag_lines else ""), inputs)

    instances = plan.instances(targets)

    run_devices = {t: ([] if translate_only else planning.run_devices(t)) for t in targets}
    archs = {t: ([] if translate_only else planning.compile_archs(t)) for t in targets}
    ref_devices = () if translate_only else planning.reference_devices()

    units: dict[str, _SharedUnit] = {}  # single-source targets (HIP): the translated file's device code
    for t, w in list(written.items()):
        if not get_dialect(t).single_source:
            continue
        # only what this target cannot build leaves its unit: a kernel OpenCL C cannot take (a C++
        # template type) still has its HIP variant validated
        drop = plan.untranslatable([t])
        written[t] = replace(w, source=plan.variant_source(t))
        # each kernel alone, for when a construct of one stops the compiler for all
        units[t] = _SharedUnit(w.source, [i.base for i in instances if i.base not in drop], macros)
    asker = (
        _ModelPort(
            provider=provider,
            options=model,
            plan=plan,
            bench=bench,
            out=out,
            inputs=inputs,
            report=report,
            say=say,
        )
        if model is not None and provider is not None
        else None
    )
    kernels_by_name = {k.name: k for k in scan.kernels}

    def reference_for(base: str) -> Reference:
        """The original with `base` kept (an untranslatable kernel is pruned from the shared unit)."""
        return plan.reference(base, targets, ref_devices)

    def ask(
        inst: Instance,
        target: str,
        spec: KernelSpec,
        devices: Sequence[Device],
        why: str,
        lacking: bool,
        opts: ValidateOptions,
    ) -> list[VariantRow]:
        assert asker is not None and run_inputs is not None
        provenance = f"llm:{model_name}"
        conversations = run_inputs.conversation_key(inst.name, target, provenance)
        kept = recorder.kept(inst.name, target, [d.label for d in devices], provenance)
        if kept:  # the model's translation validated earlier on every one of them, for these inputs
            say(f"{inst.name}: {target}: {model_name}'s translation validated earlier, same inputs; kept")
            report.llm.extend({**e, "resumed": True} for e in recorder.ledger.rows(conversations))
            return kept
        asked = len(report.llm)
        rows = asker.port(
            inst=inst,
            target=target,
            spec=spec,
            devices=devices,
            reference=reference_for(inst.base),
            options=opts,
            why=why,
            lacking=lacking,
        )
        for entry in report.llm[asked:]:  # the conversations, under the key a re-run asks the ledger for
            if conversations:
                entry["key"] = conversations
        return rows

    def keep(result: KernelResult, target: str, labels: Sequence[str]) -> bool:
        """Add the previous run's rows for `labels` when they still hold (then they are not redone)."""
        rows = recorder.kept(result.name, target, labels, "translate")
        for row in rows:
            recorder.add(result, row)
        if rows:
            say(f"{result.name}: {target} on {', '.join(labels)}: {rows[0].status} earlier; kept")
        return bool(rows)

    specs = {inst.name: (None, None) if translate_only else plan.spec_or_reason(inst) for inst in instances}
    run_inputs = (
        None
        if translate_only
        else _run_inputs(
            plan,
            targets=targets,
            written=written,
            specs=specs,
            options=options,
            ref_devices=ref_devices,
            run_devices=run_devices,
            archs=archs,
            settings_key={"bench": bench},
        )
    )
    provenances = ("translate", *((f"llm:{model_name}",) if model_name is not None else ()))
    recorder = _Recorder(report, out, inputs, run_inputs, ledger, provenances)
    report.kernels = [KernelResult(inst.name) for inst in instances]
    recorder.save()
    if recorder.pending:
        held = sum(len(rows) for rows in recorder.pending.values())
        say(f"resuming {out / REPORT_NAME}: {held} row(s) still hold for these inputs")

    for inst, result in zip(instances, report.kernels, strict=True):
        spec, why_no_spec = specs[inst.name]
        for target in all_targets:
            recorder.begin(result, target)
            if target in failed:
                recorder.add(result, VariantRow(target, "", Status.FAILED.value, "", reason=failed[target]))
                continue
            w = written[target]
            rel = str(w.path)
            made = plan.variant_for(inst, target, out_dir=out, path=rel)
            if isinstance(made, Refusal) and made.stage != "construct":
                recorder.add(result, VariantRow(target, rel, Status.FAILED.value, "", reason=made.reason))
                continue
            if isinstance(made, Refusal):  # a construct the rules cannot take
                why = made.reason
                if asker is not None and spec is not None and inst.base in kernels_by_name:
                    say(f"{inst.name}: {target}: untranslatable by rules; asking {model_name}")
                    opts = replace(options, compile=replace(options.compile, include_dirs=w.include_dirs))
                    for row in ask(inst, target, spec, run_devices[target], why, False, opts):
                        recorder.add(result, row)
                    continue
                if asker is not None:
                    why += f"; not handed to {model_name}: {why_no_spec or 'no spec'}"
                recorder.add(result, VariantRow(target, rel, Status.UNTRANSLATABLE.value, "", reason=why))
                continue
            variant = made.variant
            if translate_only:
                recorder.add(
                    result,
                    VariantRow(target, rel, TRANSLATED, "", reason=f"entry {variant.entry}; not compiled"),
                )
                continue
            if spec is None:
                recorder.add(
                    result, VariantRow(target, rel, Status.FAILED.value, "", reason=why_no_spec or "")
                )
                continue
            opts = replace(options, compile=replace(options.compile, include_dirs=made.compile.include_dirs))
            for arch in archs[target]:
                if keep(result, target, [f"{target}:{arch}"]):
                    continue
                say(f"{inst.name}: compiling {target} for {arch}")
                arch_opts = replace(opts, compile=replace(opts.compile, arch=arch))
                if target in units:
                    verdict = units[target].compile(variant, spec, arch_opts, target, f"{target}:{arch}")
                else:
                    verdict = compile_only(variant, spec, arch_opts, backend=target)
                if verdict is not None:
                    recorder.add(result, _row_from(verdict, target, rel, f"{target}:{arch}"))
            reference = reference_for(inst.base)
            lacking: list[
                tuple[Device, Refusal]
            ] = []  # devices without what the variant needs, for the model
            for device in run_devices[target]:
                on_device = plan.variant_for(inst, target, device, out_dir=out, path=rel)
                if isinstance(on_device, Refusal) and asker is not None and inst.base in kernels_by_name:
                    lacking.append((device, on_device))
                    continue
                if isinstance(on_device, Refusal):
                    recorder.add(
                        result,
                        VariantRow(
                            target, rel, Status.UNTRANSLATABLE.value, device.label, reason=on_device.reason
                        ),
                    )
                    continue
                if keep(result, target, [device.label]):
                    continue
                say(f"{inst.name}: validating {target} on {device.label}")
                if target in units:
                    verdicts = units[target].validate(on_device.variant, spec, reference, device, opts)
                else:
                    verdicts = validate(on_device.variant, spec, reference, [device], opts)
                for verdict in verdicts:
                    recorder.add(result, _row_from(verdict, target, rel))
            if lacking:
                tails = [r.reason.split("; ", 1) for _, r in lacking]
                why = tails[0][0] + "; " + "; ".join(t[-1] for t in tails)
                say(
                    f"{inst.name}: {target}: {len(lacking)} device(s) lack what the rules need; asking {model_name}"
                )
                for row in ask(inst, target, spec, [d for d, _ in lacking], why, True, opts):
                    recorder.add(result, row)
            if not run_devices[target] and not archs[target] and not keep(result, target, [target]):
                if target in units:
                    verdict = units[target].compile(variant, spec, opts, target, target)
                else:
                    verdict = compile_only(variant, spec, opts, backend=target)
                if verdict is None:
                    recorder.add(
                        result,
                        VariantRow(
                            target,
                            rel,
                            Status.FAILED.value,
                            "",
                            reason=f"no {target} toolchain or device here",
                        ),
                    )
                else:
                    recorder.add(result, _row_from(verdict, target, rel, target))
    report.complete = True
    recorder.save()
    return report
