"""Every report porter's commands return: the workflows build them, the views render them.

Both sides import this module and neither imports the other (`porter.workflows` never imports
`porter.report`, and the views never import a workflow).  Each type carries the methods that derive its
outcome (``exit_code``) and its stable JSON documents (``document`` for ``--json``, ``full_document`` for
``report.json``); terminal tables and Markdown stay in the views.  The figures the harness computes and the
reports carry (cost estimate, roofline, assessment, occupancy, benchmark result) are defined here too, so
the harness, the workflows and the views share one definition.  This module imports the model, the
backends' types, the sandbox summary and the LLM loop's attempt types -- never the harness, a workflow or a
view.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from porter import sandbox
from porter.model import RACED_WORDS, UNCOMPARED, UNMAPPED_API, Status, to_jsonable
from porter.records import VALIDATED, Totals, attempt_doc, trade_off, usage_doc
from porter.redact import redact

if TYPE_CHECKING:
    from porter.backends import Availability
    from porter.model import Diagnostic, KernelSpec, Timing, Verdict
    from porter.records import Attempt, Evaluation, LoopResult

# The "schema" field of each command's report.json (reports written before it are recognised by shape).
SCHEMAS = {
    "port": "porter-port-report/1",
    "optimize": "porter-optimize-report/1",
    "program": "porter-program-report/1",
    "lift": "porter-lift-report/1",
    "tune": "porter-tune-report/1",
    "generate": "porter-generate-report/1",
    "suite": "porter-suite-summary/1",  # summary.json of `porter port --suite` (porter/suite_report.py)
}


# --------------------------------------------------------------------------- report identity


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes, "" when there is no such file."""
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def code_sha(code: str | None) -> str:
    """The key of a candidate's code (what the loop's evaluation of it depends on, besides the inputs)."""
    return hashlib.sha256((code or "").encode("utf-8", "surrogateescape")).hexdigest()


# --------------------------------------------------------------------------- doctor


@dataclass(frozen=True)
class DoctorReport:
    backends: tuple[Availability, ...]
    sandbox: tuple[sandbox.Layer, ...] = ()  # the layers every child that runs code gets here


# --------------------------------------------------------------------------- check


@dataclass(frozen=True)
class CheckResult:
    variant: str
    original: str
    kernel: str
    language: str
    spec: KernelSpec
    spec_file: str | None
    verdicts: tuple[Verdict, ...]

    @property
    def exit_code(self) -> int:
        validated = any(v.status is Status.VALIDATED for v in self.verdicts)
        rejected = any(v.status is Status.FAILED for v in self.verdicts)
        return 0 if validated and not rejected else 1


# --------------------------------------------------------------------------- port


@dataclass(frozen=True)
class VariantRow:
    target: str  # "hip" | "opencl"
    path: str  # the translated file
    status: str  # a Status value, or "translated" under --translate-only
    device: str  # device label, "hip:gfx90a" for a compile-only build, "" when nothing ran
    max_rel_err: float | None = None
    trials: int = 0
    reason: str = ""
    toolchain: str = ""
    logs: tuple[str, ...] = ()
    provenance: str = "translate"  # "translate" (the rules) or "llm:<model>"
    time_ms: float | None = None  # median time on the device (LLM rows, after validation)
    speedup: float | None = None  # the original's time / this one on the same device, where both ran
    # Resuming (report.json only, in the row's own object): the key of everything the verdict depends
    # on, the sha256 of the file at `path` when it was reached, and whether it was kept from a previous
    # run's report.
    key: str = ""
    file_sha: str = ""
    resumed: bool = False


@dataclass
class KernelResult:
    name: str  # the CUDA kernel, with template arguments for an instantiation: "block_sum<128>"
    variants: list[VariantRow] = field(default_factory=list)


@dataclass
class PortReport:
    source: str
    out_dir: str
    targets: tuple[str, ...]
    translate_only: bool
    kernels: list[KernelResult] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # target -> main translated file
    diagnostics: list[Diagnostic] = field(default_factory=list)
    complete: bool = False
    model: str | None = None  # --model: what the rules leave goes to the LLM loop
    usage: Totals = field(default_factory=Totals)  # summed over every conversation
    llm: list[dict[str, Any]] = field(default_factory=list)  # one entry per conversation (report.json)

    def rows(self) -> list[VariantRow]:
        return [r for k in self.kernels for r in k.variants]

    def unmapped_api(self) -> list[Diagnostic]:
        """The CUDA API names a translator left as written for want of an equivalent (``--strict``)."""
        return [d for d in self.diagnostics if d.code == UNMAPPED_API]

    @property
    def exit_code(self) -> int:
        """0: no row failed, no kernel is untranslatable, and every (kernel, target) ran or built
        somewhere (a device lacking what a kernel needs is fine when another device validated
        it); 1 otherwise."""
        if not self.rows():
            return 1
        for k in self.kernels:
            for target in dict.fromkeys(r.target for r in k.variants):
                mine = [r for r in k.variants if r.target == target]
                untranslatable = [r for r in mine if r.status == Status.UNTRANSLATABLE.value]
                if any(r.status == Status.FAILED.value for r in mine):
                    return 1
                if len(untranslatable) == len(mine) or any(not r.device for r in untranslatable):
                    return 1
        return 0

    def document(self) -> dict[str, Any]:
        """The stable JSON schema of ``porter port --json``; with a model, every row also has
        ``time_ms``, ``speedup`` and ``provenance``, and the document a ``usage`` object."""
        doc = self._base_document()
        if self.model is None:
            return doc
        for k_doc, k in zip(doc["kernels"], self.kernels, strict=True):
            for v_doc, r in zip(k_doc["variants"], k.variants, strict=True):
                v_doc.update(time_ms=r.time_ms, speedup=r.speedup, provenance=r.provenance)
        provider, _, name = self.model.partition(":")
        doc["usage"] = usage_doc(self.usage, provider, name)
        return doc

    def _base_document(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kernels": [
                {
                    "name": k.name,
                    "variants": [
                        {
                            "target": r.target,
                            "path": r.path,
                            "status": r.status,
                            "device": r.device,
                            "max_rel_err": r.max_rel_err,
                            "trials": r.trials,
                            "reason": r.reason,
                        }
                        for r in k.variants
                    ],
                }
                for k in self.kernels
            ],
        }

    def full_document(self) -> dict[str, Any]:
        """``report.json``: the schema above plus logs, diagnostics and whether the run finished."""
        doc = self.document()
        for k_doc, k in zip(doc["kernels"], self.kernels, strict=True):
            for v_doc, r in zip(k_doc["variants"], k.variants, strict=True):
                v_doc["toolchain"] = r.toolchain
                v_doc["logs"] = list(r.logs)
                # the row's key and its file's hash: a re-run's ledger finds the row by them
                v_doc.update(key=r.key, file_sha=r.file_sha)
                if r.resumed:
                    v_doc["resumed"] = True
        doc["schema"] = SCHEMAS["port"]
        doc["out"] = self.out_dir
        doc["targets"] = list(self.targets)
        doc["outputs"] = dict(self.outputs)
        doc["translate_only"] = self.translate_only
        doc["complete"] = self.complete
        doc["exit_code"] = self.exit_code
        doc["diagnostics"] = to_jsonable(self.diagnostics)
        if self.model is not None:
            doc["model"] = self.model
            doc["llm"] = list(self.llm)
        doc["sandbox"] = sandbox.summary()  # the layers every child that compiled or ran code had
        return doc


# --------------------------------------------------------------------------- port of a program

# A program file's status for one target: "translated" (written, not built here), "copied" (nothing to
# translate: written unchanged), "compiled" (built by a real compiler), "failed" (translation or build
# failed: see reason and log), "untranslatable" (a construct the rules cannot take), "none" (the target
# has nothing to write for this file: a device-only dialect for a unit that reaches no kernel).
FILE_STATUSES = ("translated", "copied", "compiled", "failed", "untranslatable", "none")


@dataclass
class FileTarget:
    path: str  # the output file ("" when none was written)
    status: str  # one of FILE_STATUSES
    reason: str = ""
    diagnostics: tuple[Diagnostic, ...] = ()
    toolchain: str = ""  # the compiler behind "compiled"/"failed" builds
    log: str = ""
    key: str = (
        ""  # what the build verdict depends on (report.json only): a re-run with the same key reuses it
    )
    resumed: bool = False  # reused from the previous report.json in the output folder


@dataclass
class ProgramFileResult:
    path: str  # relative to the program root
    kind: str  # "source", "header", "other"
    targets: dict[str, FileTarget] = field(default_factory=dict)


@dataclass
class ProgramKernel:
    name: str
    file: str  # relative to the root: where the kernel is defined (a header, often)
    line: int
    targets: dict[str, str] = field(default_factory=dict)  # target -> translated / untranslatable: why
    replays: list[KernelReplay] = field(default_factory=list)  # verdicts from the captured launches


@dataclass
class KernelReplay:
    """One variant of a program's kernel judged on the launches the original's run captured
    (porter.harness.replay): ``validated``, ``failed`` (with the check), ``compiled`` (no device here
    runs it) or ``not-replayable`` (why)."""

    variant: str  # "original" (the capture reproduced by the original kernel) or a target
    device: str
    status: str
    reason: str = ""
    launches: int = 0  # captured launches it ran
    held_back: int = 0  # of which held back from any author (other runs, other sizes)
    checks: tuple[str, ...] = ()
    wavefront: int = 0  # the lanes per warp / wavefront the device ran it with (0: not known)
    instance: str = ""  # the kernel instance the launches ran ("axpby<float>"), as captured
    captured_on: str = ""  # the device of the original's run the launches were captured from
    log: str = ""  # a failure's log (the compiler's, the checker's): its tail
    # a validated variant timed on a GPU at its largest captured launch (porter.harness.replay.timed):
    # median and IQR of the device-event times, against the original on the same device, the floor
    time_ms: float | None = None
    time_iqr_ms: float | None = None
    # the original timed beside it, in the same session, on the same device, the same way: the speedup
    # is original_ms / time_ms, the two times shown (never a time of another session)
    original_ms: float | None = None
    speedup: float | None = None
    floor_ms: float | None = None
    timed_at: str = ""  # the launch timed ("gx=20, gy=10, ...") or why none was
    contended: str = ""  # why the GPU was not porter's alone while timed ("" when it was)
    key: str = ""  # what the verdict depends on: a re-run with the same key reuses it
    resumed: bool = False


@dataclass
class ProgramBuild:
    """One build of the original or a port with one program toolchain."""

    variant: str  # "original" or a target ("hip")
    toolchain: str  # the toolchain's name: "cpu-runtime", "nvcc", "hip-on-cuda", "hipcc"
    status: str  # "built", "failed", "refused" (a construct it cannot provide), "unavailable"
    device: str = ""  # the device label its executables run on ("" when they cannot run here)
    reason: str = ""
    toolchain_id: str = ""  # name and version behind the verdict
    executables: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    commands: list[str] = field(default_factory=list)
    log: str = ""  # report.json only
    key: str = ""  # what the build depends on (report.json only): a re-run with the same key reuses it
    resumed: bool = False
    captures: bool = False  # its runs can record their launches (an instrumented build)


@dataclass
class RunResult:
    """One run of one build: the original's (status "ran", "failed") or a port's, compared with it."""

    variant: str
    toolchain: str
    device: str
    status: str  # original: "ran" | "failed" | "not-run"; port: "matches" | "differs" | "failed" | "not-run"
    exit: int | None = None
    seconds: float | None = None
    reason: str = ""
    differences: list[str] = field(default_factory=list)
    against: str = ""  # the device of the original run it was compared with
    varies: list[str] = field(default_factory=list)  # an original's: what differs between two of its runs
    stdout_tail: str = ""
    stderr_tail: str = ""
    key: str = ""
    resumed: bool = False
    capture: str = ""  # an original's: the folder of the launches it recorded (docs/CAPTURE_FORMAT.md)
    capture_kind: str = ""  # the kind of device that capture ran on ("gpu", "emulator")


@dataclass
class ProgramRun:
    args: str
    executable: str
    original: RunResult | None = None  # the first original run (the reference where no other is closer)
    originals: list[RunResult] = field(default_factory=list)  # the original on every device that ran it
    variants: list[RunResult] = field(default_factory=list)


@dataclass
class CapturedRun:
    """One --run of `porter capture`: where its capture is and what it kept."""

    args: str
    folder: str  # "" when the run captured nothing
    exit: int | None
    status: str  # the run's: "ran" | "failed"
    reason: str = ""
    kernels: dict[str, list[int]] = field(default_factory=dict)  # kernel -> its launches kept


@dataclass
class CaptureReport:
    """`porter capture`: the build and every captured run."""

    root: str
    out_dir: str
    build: str  # the build's status and reason
    runs: list[CapturedRun] = field(default_factory=list)
    device: str = ""  # the device the runs were captured on
    notes: list[str] = field(default_factory=list)  # how the build and runs were confined, when not fully

    @property
    def exit_code(self) -> int:
        return 0 if self.runs and all(r.folder and r.status == "ran" for r in self.runs) else 1


# A program port's stages, in order (ProgramReport.stages): finding and scanning the files and planning each
# kernel's variants; writing the translations (and compiling each unit's kernels); building the original and
# the ports as programs and running them (captures included); replaying each captured kernel instance on every
# device, of which ``timing`` is the time spent timing validated replays on devices whose times count (summed
# over kernels judged side by side, so it can exceed the replay's wall time).
STAGES = ("plan", "translate", "build and run", "replay", "timing")
_CLOCKS = threading.Lock()


@dataclass
class ProgramReport:
    root: str
    out_dir: str
    targets: tuple[str, ...]
    files: list[ProgramFileResult] = field(default_factory=list)
    kernels: list[ProgramKernel] = field(default_factory=list)
    build: dict[str, Any] = field(default_factory=dict)
    builds: list[ProgramBuild] = field(default_factory=list)
    runs: list[ProgramRun] = field(default_factory=list)
    chart: str = ""  # the PNG of run times ("" when none was drawn)
    notes: list[str] = field(default_factory=list)
    complete: bool = False
    # wall seconds per stage of this port (STAGES, in order), summed where a stage is entered more than once
    stages: dict[str, float] = field(default_factory=dict)
    # memory errors of the original's own code a sanitized run of it found (porter.workflows.program_sanitizer)
    original_defects: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def clock(self, stage: str) -> Iterator[None]:
        """Add the wall time of the ``with`` body to ``stages[stage]`` (also when the body raises)."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}")
        start = time.monotonic()
        try:
            yield
        finally:
            with _CLOCKS:  # kernels judged side by side add their timings at once
                self.stages[stage] = round(self.stages.get(stage, 0.0) + time.monotonic() - start, 3)

    def verdicts(self) -> dict[str, dict[str, str]]:
        """Per target, the program-level verdict of its runs: ``matches`` (every run agreed with the
        original on some device; the devices are named), ``differs``, ``failed`` or ``not-run``."""
        out: dict[str, dict[str, str]] = {}
        if not self.runs:
            return out
        # original kernels whose replay found their results depend on warp-shuffle lanes CUDA leaves
        # undefined: a port's program that differs may read those lanes as its device defines them
        undefined = self._originals_failing("undefined")
        # original kernels that gave two different results on one input (a race, an uninitialised read): the
        # program's own output may move with them, the original's run as much as the port's
        # (or whose replay is judged by what its racing stores leave: checks.Raced)
        racing = sorted({*self._originals_failing("deterministic"), *self._originals_racing()})
        for target in self.targets:
            mine = [v for r in self.runs for v in r.variants if v.variant == target]
            differs = [v for v in mine if v.status == "differs"]
            failed = [v for v in mine if v.status == "failed"]
            if differs:  # the first real difference (not a note on what it was compared with), and where
                said = [d for d in differs[0].differences if not d.startswith("(")] or differs[0].differences
                detail = f"on {differs[0].device}: {(said or ['?'])[0]}"
                if undefined:
                    detail += (
                        f" (the original's {', '.join(undefined)} "
                        f"{'depends' if len(undefined) == 1 else 'depend'} on warp-shuffle lanes CUDA leaves "
                        "undefined, which a device may read otherwise: see the kernel replays)"
                    )
                if self.original_defects:
                    detail += (
                        f" (the original's own code has a memory error, so its output depends on memory it does "
                        f"not own, which another runtime lays out otherwise: {self.original_defects[0]})"
                    )
                if racing:
                    detail += (
                        f" (the original's {', '.join(racing)} {'gives' if len(racing) == 1 else 'give'} "
                        "different results in two runs on one input, a race or an uninitialised read, so its "
                        "program's output may differ from run to run: see the kernel replays)"
                    )
                out[target] = {"status": "differs", "detail": detail}
            elif failed:
                detail = failed[0].reason
                # a port stopped or crashed: what the original reads past its memory may be what stopped it
                if self.original_defects:
                    detail += f" (the original's own code has a memory error: {self.original_defects[0]})"
                out[target] = {"status": "failed", "detail": detail}
            elif all(
                any(v.variant == target and v.status == "matches" for v in r.variants) for r in self.runs
            ):
                devices = sorted({v.device for v in mine if v.status == "matches"})
                # what the runs left out because it varies between the original's own runs (model.UNCOMPARED)
                left = sorted(
                    {
                        c
                        for v in mine
                        if v.status == "matches"
                        for c in v.reason.split("; ")
                        if c.startswith(UNCOMPARED)
                    }
                )
                detail = ", ".join(devices) + "".join(f" ({c})" for c in left[:2])
                out[target] = {"status": "matches", "detail": detail}
            else:
                reasons = [v.reason for v in mine if v.reason] or ["no build of the port runs here"]
                out[target] = {"status": "not-run", "detail": reasons[0]}
        return out

    def _originals_failing(self, check: str) -> list[str]:
        """The original kernel instances whose replay failed the check `check` (its reason begins ``check:``)."""
        return self._originals(lambda r: r.status == "failed" and r.reason.startswith(f"{check}:"))

    def _originals_racing(self) -> list[str]:
        """The original kernel instances validated by what their racing stores leave (checks.Raced)."""
        return self._originals(lambda r: r.status == "validated" and RACED_WORDS in r.reason)

    def _originals(self, which: Callable[[KernelReplay], bool]) -> list[str]:
        """The original kernel instances one of whose replay rows `which` picks, sorted."""
        return sorted(
            {
                r.instance or k.name
                for k in self.kernels
                for r in k.replays
                if r.variant == "original" and which(r)
            }
        )

    def kernel_counts(self) -> dict[str, dict[str, Any]]:
        """Per variant ("original", then each target), its kernel instances judged on the captured
        launches: ``instances`` and how many are ``validated`` / ``failed`` / ``compiled`` /
        ``not-replayable``, of which ``unlaunched`` no run launched, with ``reasons`` (the first clause of each
        reason -> instances).  An
        instance judged on several devices counts once: failed if it failed on any, else validated if
        it validated on any, else compiled, else not replayable."""
        rank = REPLAY_RANK
        best: dict[str, dict[tuple[str, str], KernelReplay]] = {}
        for k in self.kernels:
            for r in k.replays:
                name = (k.file, r.instance or k.name)  # (two programs of a folder: one name, two kernels)
                mine = best.setdefault(r.variant, {})
                if name not in mine or rank.get(r.status, 4) < rank.get(mine[name].status, 4):
                    mine[name] = r
        order = ["original", *self.targets]
        out: dict[str, dict[str, Any]] = {}
        for variant in sorted(best, key=lambda v: order.index(v) if v in order else len(order)):
            rows = best[variant].values()
            doc: dict[str, Any] = {"instances": len(rows)}
            for status in rank:
                doc[status] = sum(1 for r in rows if r.status == status)
            # of the not replayable: instances compiled (a template's every instantiation) that no run launched
            doc["unlaunched"] = sum(
                1 for r in rows if r.status == "not-replayable" and NOT_LAUNCHED in r.reason
            )
            reasons: dict[str, int] = {}
            for r in rows:
                if r.status != "validated":
                    reasons[_reason_kind(r.reason)] = reasons.get(_reason_kind(r.reason), 0) + 1
            doc["reasons"] = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
            out[variant] = doc
        return out

    def unmapped_api(self) -> list[Diagnostic]:
        """The CUDA API names a translator left as written for want of an equivalent (``--strict``)."""
        return [
            d for f in self.files for t in f.targets.values() for d in t.diagnostics if d.code == UNMAPPED_API
        ]

    def counts(self, target: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            t = f.targets.get(target)
            if t is not None:
                out[t.status] = out.get(t.status, 0) + 1
        return out

    @property
    def exit_code(self) -> int:
        """0: every file translated, copied or built; 1: something failed or is untranslatable."""
        bad = {"failed", "untranslatable"}
        if any(v["status"] in ("differs", "failed") for v in self.verdicts().values()):
            return 1
        # a port judged wrong on the captured launches (the original's own replay failing is the
        # capture's limit, reported, not the port's failure)
        if any(r.status == "failed" and r.variant != "original" for k in self.kernels for r in k.replays):
            return 1
        return 1 if any(t.status in bad for f in self.files for t in f.targets.values()) else 0

    def document(self) -> dict[str, Any]:
        """The stable document of ``docs/REPORT_FORMAT.md`` (``--json`` and ``report.json``)."""
        return {
            "schema": SCHEMAS["program"],
            "program": {
                "root": self.root,
                "out": self.out_dir,
                "targets": list(self.targets),
                "files": [
                    {
                        "path": f.path,
                        "kind": f.kind,
                        "targets": {
                            name: {
                                "path": t.path,
                                "status": t.status,
                                "reason": t.reason,
                                "toolchain": t.toolchain,
                                "diagnostics": [
                                    {
                                        "line": d.line,
                                        "severity": d.severity.value,
                                        "construct": d.construct,
                                        "reason": d.reason,
                                    }
                                    for d in t.diagnostics
                                ],
                            }
                            for name, t in f.targets.items()
                        },
                    }
                    for f in self.files
                ],
                "build": {
                    **dict(self.build),
                    "programs": [
                        {k: v for k, v in to_jsonable(b).items() if k not in ("log", "key", "resumed")}
                        for b in self.builds
                    ],
                },
                "runs": [
                    {
                        "args": r.args,
                        "executable": r.executable,
                        "original": _run_doc(r.original) if r.original else None,
                        "originals": [_run_doc(o) for o in r.originals],
                        "variants": [_run_doc(v) for v in r.variants],
                    }
                    for r in self.runs
                ],
                "verdicts": self.verdicts(),
                "original_defects": list(self.original_defects),
                "chart": self.chart,
            },
            "kernel_counts": self.kernel_counts(),
            "kernels": [to_jsonable(k) for k in self.kernels],
            "notes": list(self.notes),
            "stages": {s: self.stages[s] for s in STAGES if s in self.stages},
            "complete": self.complete,
            "exit_code": self.exit_code,
        }

    def full_document(self) -> dict[str, Any]:
        """``report.json``: the document plus each build's log."""
        doc = self.document()
        for f_doc, f in zip(doc["program"]["files"], self.files, strict=True):
            for name, t in f.targets.items():
                if t.log:
                    f_doc["targets"][name]["log"] = t.log
                if t.key:
                    f_doc["targets"][name]["key"] = t.key
                if t.resumed:
                    f_doc["targets"][name]["resumed"] = True
        for b_doc, b in zip(doc["program"]["build"]["programs"], self.builds, strict=True):
            b_doc.update({"log": b.log, "key": b.key, "resumed": b.resumed})
        for r_doc, r in zip(doc["program"]["runs"], self.runs, strict=True):
            for v_doc, v in zip(
                [*r_doc["originals"], *r_doc["variants"]], [*r.originals, *r.variants], strict=True
            ):
                v_doc.update({"key": v.key, "resumed": v.resumed})
        doc["sandbox"] = sandbox.summary()
        return to_jsonable(doc)


# program_replay's reason for an instance no run launched (a template's instantiations the program compiles)
NOT_LAUNCHED = "none of the program's runs launched it"
# how an instance judged on several devices counts: the first status here that any of its rows has
REPLAY_RANK = {"failed": 0, "validated": 1, "compiled": 2, "not-replayable": 3}


def _reason_kind(reason: str) -> str:
    """A replay reason's first clause: what groups like reasons in the counts ("no launch to replay")."""
    text = reason.strip()
    for prefix in ("not replayable: ", "not-replayable: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    # which launch or run said it is not the kind of reason: "launch 1 (run 1): its allocations exceed ..."
    text = re.sub(r"^(launch \d+ \(run \d+\)|run( \d+)?): ", "", text)
    head = re.split(r"[:;(]", text, maxsplit=1)[0].strip()
    return (head or text or "no reason given")[:80]


def _run_doc(r: RunResult) -> dict[str, Any]:
    doc = {k: v for k, v in to_jsonable(r).items() if k not in ("key", "resumed")}
    doc["target"] = doc.pop("variant")
    return doc


# --------------------------------------------------------------------------- bench


@dataclass(frozen=True)
class KernelCost:
    kernel: str
    size: dict[str, int]
    threads: int  # launched threads (grid x block)
    bytes_read: int
    bytes_written: int
    flops: dict[str, float]  # per dtype ("float32", "float64", "float16", "bfloat16"), whole launch
    flops_per_thread: dict[str, float]
    tensor: bool = False  # the source issues matrix (tensor-core / MFMA) instructions
    notes: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    @property
    def intensity(self) -> float:
        """FLOPs per byte of compulsory traffic."""
        return self.total_flops / self.bytes if self.bytes else math.inf


@dataclass(frozen=True)
class Roofline:
    device: str  # table key
    device_name: str
    floor_ms: float | None  # None: no roofline (the emulator) or nothing to count
    memory_ms: float | None
    compute_ms: float | None
    bound: str  # "memory" | "compute" | ""
    bandwidth: float | None  # bytes/s used for the floor (datasheet)
    peak_flops: float | None  # effective FLOP/s for the kernel's dtype mix
    note: str = ""


@dataclass(frozen=True)
class Assessment:
    median_ms: float
    floor_ms: float | None
    bound: str
    achieved_bandwidth: float | None  # bytes/s: compulsory bytes / time
    pct_bandwidth: float | None  # of the datasheet bandwidth
    pct_measured_bandwidth: float | None  # of the measured device-copy bandwidth, when the table has one
    achieved_flops: float | None
    pct_compute: float | None  # of the peak rate for the kernel's dtype mix
    pct_of_floor: float | None  # floor / time: 100% = at the roofline
    suspect: bool
    reason: str = ""


@dataclass(frozen=True)
class Occupancy:
    active_blocks: int
    fraction: float
    limiter: str
    registers: int | None
    shared_bytes: int  # static + dynamic per block
    block_threads: int

    @property
    def block_bytes(self) -> int | None:
        """Shared memory plus registers (4 bytes each, per thread) of one block; None when the
        registers are not known."""
        return None if self.registers is None else self.shared_bytes + self.registers * 4 * self.block_threads


@dataclass(frozen=True)
class BenchResult:
    kernel: str
    target: str
    provenance: str
    backend: str
    device: str  # Device.label
    device_name: str
    device_kind: str
    size: dict[str, int]
    ok: bool
    reason: str = ""
    toolchain: str = ""
    timing: Timing | None = None
    times_ms: tuple[float, ...] = ()
    rounds: int = 0
    representative: bool = True  # False on the CPU emulator / CPU devices: not GPU speed
    revalidated: bool | None = None  # None: not re-validated (see revalidation)
    revalidation: str = ""
    roofline: Roofline | None = None
    assessment: Assessment | None = None
    occupancy: Occupancy | None = None
    baseline_ms: float | None = None  # the reference's median on the same device
    speedup: float | None = None  # baseline / this; None when either is missing or suspect
    # why the device was not porter's alone while this (or the baseline beside it) was timed: other
    # timings of porter at once, other processes on the GPU (porter.harness.contention); "" when it was
    contended: str = ""
    notes: tuple[str, ...] = ()
    logs: tuple[str, ...] = ()

    @property
    def suspect(self) -> bool:
        return bool(self.assessment and self.assessment.suspect)


@dataclass(frozen=True)
class KernelBench:
    kernel: str
    spec_source: str = ""  # "spec-file" | "inferred"
    error: str = ""  # why the kernel could not be set up (no spec...)
    size: dict[str, int] = field(default_factory=dict)  # the GPU benchmark size (predictions)
    cost: KernelCost | None = None
    predictions: tuple[Roofline, ...] = ()
    results: tuple[BenchResult, ...] = ()

    @property
    def benchmarked(self) -> bool:
        return any(r.ok for r in self.results)


@dataclass(frozen=True)
class BenchReport:
    path: str
    kernels: tuple[KernelBench, ...]
    devices: tuple[str, ...] = ()  # labels of the devices benchmarked on
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------- optimize


ORIGINAL, REWRITE, TUNED = "original", "rewrite", "tuned"


@dataclass(frozen=True)
class Contender:
    """One entry of optimize's trade-off pool, all timed by the same evaluator (device, size, timing
    plan): the original kernel (the reference: error 0), a validated rewrite of the model's, or a
    configuration of the launch search (``--tune``: the original's kernel or the model's fastest rewrite
    at another launch geometry or with other compile options, validated by the search)."""

    kind: str  # ORIGINAL | REWRITE | TUNED
    label: str
    code: str  # the kernel's device code (the original's: the input file's device code)
    evaluation: Evaluation
    attempt: Attempt | None = None  # the model's attempt: a rewrite's, or the one a tuned rewrite is of
    launch: TunedConfig | None = None  # a tuned configuration: its block, grid, shared memory and options

    def document(self) -> dict[str, Any]:
        ev = self.evaluation
        doc: dict[str, Any] = {
            "kind": self.kind,
            "label": self.label,
            "time_ms": ev.time_ms,
            "speedup": ev.speedup,
            "memory_bytes": ev.memory_bytes,
            "max_rel_err": ev.max_rel_err,
            "device": ev.device,
            "timings": to_jsonable(ev.timings),
        }
        if self.attempt is not None:
            doc.update(candidate=self.attempt.candidate, round=self.attempt.round)
        if self.launch is not None:
            doc["launch"] = {"block": self.launch.block, "grid": self.launch.grid, "shared": self.launch.shared,
                             "flags": self.launch.flags}  # fmt: skip
        return doc


@dataclass(frozen=True)
class Selected:
    role: str  # one of ROLES
    contender: Contender
    path: str  # its file (the original's: the input file, never written)


@dataclass
class OptimizeReport:
    source: str
    kernel: str
    model: str
    out_dir: str
    devices: tuple[str, ...]
    loop: LoopResult
    selected: list[Selected] = field(default_factory=list)
    baselines: dict[str, float | None] = field(default_factory=dict)  # device label -> original's ms
    floors: dict[str, float | None] = field(default_factory=dict)  # device label -> roofline floor ms
    attempt_paths: dict[tuple[int, int], str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Resuming: candidates a previous run validated for the same inputs that this run did not meet
    # again (their files by code_sha), the code_sha of every candidate whose evaluation was taken from
    # the previous report instead of run again, and the key of those inputs (resume.key_of): every
    # validated candidate's row in report.json is stored under it.
    kept: list[Attempt] = field(default_factory=list)
    kept_paths: dict[str, str] = field(default_factory=dict)
    resumed: set[str] = field(default_factory=set)
    identity: str = ""
    # `--tune`: the launch-geometry search over the original and the model's fastest rewrite
    tuned: TuneReport | None = None
    chart: str = ""  # tradeoffs.png, when a rewrite was validated and timed
    # the original timed as every candidate is (None before it was), and --tune's fastest configurations
    # timed the same way: both join the validated rewrites in the trade-off set
    original: Contender | None = None
    configurations: list[Contender] = field(default_factory=list)

    def rewrites(self) -> list[Contender]:
        """This run's distinct validated candidates, then the kept ones."""
        seen: dict[str, Contender] = {}
        for a in (*self.loop.attempts, *self.kept):
            if a.status == VALIDATED and a.evaluation is not None and (a.code or "") not in seen:
                label = f"candidate {a.candidate} (round {a.round})" + (", kept" if self.is_kept(a) else "")
                seen[a.code or ""] = Contender(REWRITE, label, a.code or "", a.evaluation, attempt=a)
        return list(seen.values())

    def pool(self) -> list[Contender]:
        """What the trade-off set is chosen from: the rewrites and the tuned configurations, then the
        original (which wins a role only by being strictly better); empty without a rewrite or
        configuration, as the original alone is no trade-off."""
        proposals = [*self.rewrites(), *self.configurations]
        return [*proposals, *([self.original] if proposals and self.original is not None else [])]

    def roles(self) -> dict[str, Contender]:
        """best (the fastest rewrite or configuration: what this run proposes), fastest, least_memory and
        most_precise (of the whole pool, the original included)."""
        pool = self.pool()
        proposals = [c for c in pool if c.kind != ORIGINAL]
        if not proposals:
            return {}
        return {"best": trade_off(proposals)["fastest"], **trade_off(pool)}

    @property
    def best(self) -> Attempt | None:
        """The model's fastest validated rewrite (what ``--tune`` adds to its search)."""
        fastest = trade_off(self.rewrites()).get("fastest")
        return fastest.attempt if fastest is not None else None

    def is_kept(self, attempt: Attempt) -> bool:
        return any(attempt is k for k in self.kept)

    def path_of(self, attempt: Attempt) -> str:
        if self.is_kept(attempt):
            return self.kept_paths.get(code_sha(attempt.code), "")
        return self.attempt_paths.get((attempt.candidate, attempt.round), "")

    def is_resumed(self, attempt: Attempt) -> bool:
        """Whether the attempt's verdict comes from the previous run's report (not run again)."""
        if self.is_kept(attempt):
            return True
        return attempt.evaluation is not None and code_sha(attempt.code) in self.resumed

    @property
    def exit_code(self) -> int:
        """0: a validated rewrite or configuration exists; 1: none."""
        return 0 if self.roles() else 1

    def rows(self) -> list[dict[str, Any]]:
        """One row per (selected file, device); without a validated candidate, each candidate's last
        attempt as a failed row."""
        rows: list[dict[str, Any]] = []
        for sel in self.selected:
            c = sel.contender
            ev = c.evaluation
            timings = {str(t["device"]): t for t in ev.timings}
            common: dict[str, Any] = {
                "target": "cuda",
                "path": sel.path,
                "role": sel.role,
                "kind": c.kind,
                "label": c.label,
            }
            if c.attempt is not None:
                common.update(candidate=c.attempt.candidate, round=c.attempt.round)
                if self.is_resumed(c.attempt):
                    common["resumed"] = True
            if c.kind == REWRITE:
                for v in ev.verdicts:
                    t = timings.get(v.device, {})
                    rows.append(common | {"status": v.status.value, "device": v.device, "max_rel_err": v.max_rel_err,
                                          "trials": v.trials, "reason": v.reason, "time_ms": t.get("time_ms"),
                                          "speedup": t.get("speedup")})  # fmt: skip
                continue
            # the original (the reference) and a tuned configuration (validated by the launch search): a
            # row per device that timed it
            for t in ev.timings:
                rows.append(common | {"status": "original" if c.kind == ORIGINAL else Status.VALIDATED.value,
                                      "device": t["device"], "max_rel_err": ev.max_rel_err, "trials": 0,
                                      "reason": ev.reason, "time_ms": t.get("time_ms"),
                                      "speedup": t.get("speedup")})  # fmt: skip
        if self.selected:
            return rows
        last: dict[int, Attempt] = {}
        for a in self.loop.attempts:
            last[a.candidate] = a
        for a in last.values():
            got = a.evaluation
            rows.append(
                {
                    "target": "cuda",
                    "path": self.attempt_paths.get((a.candidate, a.round), ""),
                    "status": Status.FAILED.value,
                    "device": got.device if got else "",
                    "max_rel_err": got.max_rel_err if got else None,
                    "trials": max((v.trials for v in got.verdicts), default=0) if got else 0,
                    "reason": redact(f"{a.status}: {a.reason}"),
                    "time_ms": None,
                    "speedup": None,
                    "role": "candidate",
                    "candidate": a.candidate,
                    "round": a.round,
                }
            )
        return rows

    def document(self) -> dict[str, Any]:
        """The JSON of ``porter optimize --json``: port's schema plus time_ms, speedup and usage."""
        provider, _, model = self.model.partition(":")
        doc = {
            "source": self.source,
            "kernels": [{"name": self.kernel, "variants": self.rows()}],
            "usage": usage_doc(self.loop.totals, provider, model),
        }
        if self.tuned is not None:
            doc["tuned"] = self.tuned.document()
        return doc

    def full_document(self) -> dict[str, Any]:
        """``report.json``: the document plus every attempt, the budget outcome and the baselines."""
        doc = self.document()
        doc.update(
            model=self.model,
            out=self.out_dir,
            devices=list(self.devices),
            rounds=self.loop.rounds,
            stop_reason=self.loop.stop_reason,
            baselines_ms=dict(self.baselines),
            floors_ms=dict(self.floors),
            outputs={s.role: s.path for s in self.selected},
            tradeoffs={s.role: s.contender.label for s in self.selected},
            contenders=[c.document() | {"path": self.contender_path(c)} for c in self.pool()],
            chart=self.chart,
            attempts=[
                attempt_doc(a)
                | {"path": self.path_of(a)}
                | ({"resumed": True} if self.is_resumed(a) else {})
                | ({"kept": True} if self.is_kept(a) else {})
                for a in (*self.loop.attempts, *self.kept)
            ],
            notes=[*self.loop.notes, *self.notes],
            exit_code=self.exit_code,
            schema=SCHEMAS["optimize"],
            resume={"identity": self.identity, "validated": self._validated_docs()},
            sandbox=sandbox.summary(),  # the layers the children that ran model code had
        )
        return doc

    def contender_path(self, c: Contender) -> str:
        """A contender's file: its role's, else a rewrite's attempt file, the original's input file."""
        chosen = next((s.path for s in self.selected if s.contender.label == c.label), "")
        if chosen or c.kind == TUNED:
            return chosen
        if c.kind == ORIGINAL:
            return self.source
        return self.path_of(c.attempt) if c.attempt is not None else ""

    def _validated_docs(self) -> list[dict[str, Any]]:
        """Every distinct validated candidate with its evaluation and file: what a re-run keeps."""
        docs: dict[str, dict[str, Any]] = {}
        for a in (*self.loop.attempts, *self.kept):
            key = code_sha(a.code)
            path = self.path_of(a)
            if a.status != VALIDATED or a.evaluation is None or not path or key in docs:
                continue
            docs[key] = {
                "key": self.identity,  # the key of the inputs: a re-run's ledger finds the row by it
                "code_sha": key,
                "path": path,
                "file_sha": file_digest(path),
                "candidate": a.candidate,
                "round": a.round,
                "evaluation": to_jsonable(a.evaluation),
            }
        return list(docs.values())


# --------------------------------------------------------------------------- lift


@dataclass
class LiftedFunction:
    """One function `porter lift` made kernels of: its patterns, the files written for each target, the
    sizes it was judged at, and a verdict per target and device."""

    function: str
    line: int
    patterns: tuple[str, ...]
    kernels: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)  # target -> the kernels' file
    sizes: dict[str, int] = field(default_factory=dict)
    hidden: list[dict[str, int]] = field(default_factory=list)
    notes: tuple[str, ...] = ()
    verdicts: list[Verdict] = field(default_factory=list)
    reference_s: float = 0.0  # seconds the Python function took at the visible size
    key: str = ""  # everything the verdicts depend on: a re-run with the same key keeps them
    resumed: bool = False

    @property
    def validated(self) -> bool:
        return any(v.status is Status.VALIDATED for v in self.verdicts)

    @property
    def failed(self) -> bool:
        return any(v.status is Status.FAILED for v in self.verdicts) or not self.verdicts


@dataclass(frozen=True)
class RefusedFunction:
    function: str
    line: int
    reason: str


@dataclass
class LiftReport:
    source: str
    out_dir: str
    targets: tuple[str, ...]
    module: str = ""  # the generated drop-in module ("" when nothing was validated)
    functions: list[LiftedFunction] = field(default_factory=list)
    refused: list[RefusedFunction] = field(default_factory=list)
    complete: bool = False

    def document(self) -> dict[str, Any]:
        """report.json (schema ``porter-lift-report/1``)."""
        functions = []
        for f in self.functions:
            doc: dict[str, Any] = to_jsonable(f)
            doc["validated"] = f.validated
            functions.append(doc)
        return {
            "schema": SCHEMAS["lift"],
            "source": self.source,
            "out": self.out_dir,
            "targets": list(self.targets),
            "module": self.module,
            "functions": functions,
            "refused": [to_jsonable(r) for r in self.refused],
            "complete": self.complete,
            "exit_code": self.exit_code,
        }

    @property
    def exit_code(self) -> int:
        """0: every lifted function validated somewhere and rejected nowhere (refusals are reported, not
        failures); 1 otherwise, or when nothing could be lifted."""
        if not self.functions:
            return 1
        return 0 if all(f.validated and not f.failed for f in self.functions) else 1


# --------------------------------------------------------------------------- tune


@dataclass
class TunedConfig:
    label: str
    block: list[str]
    grid: list[str]
    validated: bool
    time_ms: float | None
    reason: str
    original: bool = False
    flags: list[str] = field(default_factory=list)  # compile options beside the geometry
    suspect: bool = False  # timed below the performance model's floor: never chosen
    achieved_bandwidth: float | None = None  # bytes/s of compulsory traffic
    pct_bandwidth: float | None = None  # of the device's datasheet bandwidth
    pct_measured_bandwidth: float | None = None  # of its measured device copy
    # dynamic shared memory bytes when not the original's (in proportion to a larger block)
    shared: str | None = None
    source: str = ""  # whose kernel: "" the original's, else the label of a rewrite joining the search
    max_rel_err: float | None = None  # the largest relative error against the original, where validated


@dataclass
class TuneReport:
    """`porter optimize` without a model: each launch configuration tried, validated and timed."""

    source: str
    kernel: str
    device: str  # where the times were taken
    out_dir: str
    spec_source: str  # "capture" | "spec-file" | "inferred"
    size: dict[str, int] = field(default_factory=dict)  # where the times were taken
    floor_ms: float | None = None  # the performance model's floor there, on the timing device
    bound: str = ""  # "memory" | "compute": what sets the floor
    configs: list[TunedConfig] = field(default_factory=list)
    best: str = ""
    speedup: float | None = None  # the original's time / the best's, on `device`
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 when the original's configuration (at least) validated and was timed."""
        return 0 if self.best else 1

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = to_jsonable(self)
        return {"schema": SCHEMAS["tune"], **doc, "exit_code": self.exit_code}


# --------------------------------------------------------------------------- generate


@dataclass
class Estimate:
    """The performance model's floor for the reference's work on one device of the table, before any
    candidate runs."""

    device: str
    floor_ms: float | None
    bound: str
    note: str = ""


@dataclass
class Candidate:
    """One kernel `porter generate` judged: who wrote it, where it is, and what it measured."""

    label: str
    provenance: str  # "rules" (porter lift's) | "llm:<model>"
    validated: bool
    reason: str
    file: str = ""
    time_ms: float | None = None  # median on `device`
    device: str = ""  # the first GPU, else the first device that times
    floor_ms: float | None = None  # the model's floor on `device`
    times: dict[str, float] = field(default_factory=dict)  # median ms on each device that timed it
    pct_of_peak: dict[str, float] = field(default_factory=dict)  # floor / time, on devices of the table
    suspect: bool = False  # a time under the floor: never reported as a speed
    memory_bytes: int | None = None  # device bytes allocated + static shared memory per block
    max_rel_err: float | None = None  # against the Python reference
    precision: str = ""  # "" (the reference's) | "float16" | "bfloat16"
    verdicts: list[Verdict] = field(default_factory=list)


@dataclass
class GenerateReport:
    description: str
    reference: str
    requirements: str
    out_dir: str
    targets: tuple[str, ...]
    timing_size: dict[str, int] = field(default_factory=dict)  # where GPUs time (and the estimates hold)
    estimates: list[Estimate] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    tradeoffs: dict[str, str] = field(default_factory=dict)  # fastest / least_memory / most_precise -> label
    chart: str = ""
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    notes: list[str] = field(default_factory=list)
    rejected: list[Candidate] = field(default_factory=list)  # the model's candidates that did not validate

    @property
    def exit_code(self) -> int:
        """0 when at least one candidate validated."""
        return 0 if any(c.validated for c in self.candidates) else 1

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = to_jsonable(self)
        doc.pop("rejected", None)  # (they are among the candidates)
        return {"schema": SCHEMAS["generate"], **doc, "exit_code": self.exit_code}
