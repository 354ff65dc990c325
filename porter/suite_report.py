"""A suite's outcome (``porter port --suite``): each program's run and the summary of their reports.

Each program is ported by its own ``porter port``; the summary reads what those wrote (each
``OUT/<name>/report.json``, a ``porter-program-report/1`` or, for a single file, a
``porter-port-report/1``) and counts nothing anew: the kernel instances per target are the report's own
``kernel_counts`` (:meth:`porter.results.ProgramReport.kernel_counts`), the verdicts its ``verdicts``.
The document (``summary.json``, schema ``porter-suite-summary/1``) is described in docs/REPORT_FORMAT.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from porter.results import REPLAY_RANK, SCHEMAS

# How a program's port ended, as the suite saw it:
#   done         porter port finished (exit 0 or 1) and its report is complete
#   resumed      not run again: an earlier run of the suite finished it for the same inputs
#   timed-out    killed at the entry's `timeout`; its report keeps what it verified before
#   interrupted  stopped by Ctrl-C (or SIGTERM); its report keeps what it verified before
#   error        porter port stopped on bad input (exit 2), an internal error, or left no complete report
#   not-started  the suite was interrupted before it began (or, in a summary written mid-run, has not yet)
#   running      (a summary written mid-run only) its port is under way
SUITE_STATUSES = ("done", "resumed", "timed-out", "interrupted", "error", "not-started", "running")
COUNTED = tuple(REPLAY_RANK)  # failed, validated, compiled, not-replayable
TOP_REASONS = 10


@dataclass
class SuiteProgramResult:
    name: str
    paths: tuple[str, ...]
    out: str  # its output folder, OUT/<name>
    targets: tuple[str, ...]
    status: str = "not-started"  # one of SUITE_STATUSES
    exit_code: int | None = None  # porter port's
    seconds: float | None = None  # its wall time (for `resumed`: the run that made the report)
    reason: str = ""  # why not done: the timeout, porter's one-line error, the signal
    log: str = ""  # what porter port printed (stdout and stderr)
    gpu: str = ""  # the GPU its port was pinned to ("NAME (uid)"), "" when none was
    # with --executor ray: each stage's Ray node, [{"stage": "port" | "cpu" | "gpu", "node": "HOST (id)"}]
    ran_on: list[dict[str, str]] = field(default_factory=list)
    report: Mapping[str, Any] | None = None  # its report.json as read (None when there is none)
    # GPU timings that were contended in the suite's pass (other programs used the GPU) and taken again, the
    # GPU quiet, once every program had finished (porter.workflows.suite); 0 when none was
    timed_again: int = 0

    @property
    def anchor(self) -> str:
        return f"program-{self.name}"

    @property
    def finished(self) -> bool:
        return self.status in ("done", "resumed")

    @property
    def failing(self) -> bool:
        """Whether it makes the suite fail (exit 1)."""
        return self.status in ("timed-out", "error") or bool(self.finished and self.exit_code)


@dataclass
class SuiteReport:
    suite: str  # the suite file
    out_dir: str
    jobs: int
    programs: list[SuiteProgramResult] = field(default_factory=list)
    seconds: float = 0.0  # this run's wall time
    chart: str = ""  # summary.png ("" when not drawn)
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        return not self.interrupted and all(
            p.status not in ("not-started", "interrupted", "running") for p in self.programs
        )

    @property
    def exit_code(self) -> int:
        """0: every program finished and its port exited 0; 1 otherwise."""
        return 1 if any(p.failing for p in self.programs) or not self.complete else 0

    def targets(self) -> list[str]:
        return list(dict.fromkeys(t for p in self.programs for t in p.targets))

    def document(self) -> dict[str, Any]:
        """``summary.json`` (and ``--json``): docs/REPORT_FORMAT.md, "The suite summary"."""
        programs = [program_doc(p) for p in self.programs]
        targets = self.targets()
        statuses = {s: sum(1 for p in self.programs if p.status == s) for s in SUITE_STATUSES}
        return {
            "schema": SCHEMAS["suite"],
            "suite": self.suite,
            "out": self.out_dir,
            "jobs": self.jobs,
            "seconds": round(self.seconds, 3),
            "targets": targets,
            "counts": {"programs": len(self.programs), **{s: n for s, n in statuses.items() if n}},
            "programs": programs,
            "totals": totals(programs, targets),
            "reasons": top_reasons(programs),
            "stages": stage_totals(programs),
            "chart": self.chart,
            "complete": self.complete,
            "exit_code": self.exit_code,
        }


@dataclass
class SuiteProgress:
    """What a progress view shows while a suite runs: programs done (in any way), running (name -> seconds
    so far), left, and the time left at the pace so far."""

    total: int
    jobs: int
    done: list[SuiteProgramResult] = field(default_factory=list)
    running: dict[str, float] = field(default_factory=dict)
    left: int = 0
    eta_s: float | None = None

    @property
    def failures(self) -> list[SuiteProgramResult]:
        return [p for p in self.done if p.failing]


def program_doc(p: SuiteProgramResult) -> dict[str, Any]:
    """One program's row: how its port ended and, per target, what its report says."""
    report = p.report or {}
    counts = kernel_counts(report)
    verdicts = (
        report.get("program", {}).get("verdicts", {}) if isinstance(report.get("program"), dict) else {}
    )
    ratios = time_ratios(report)
    targets: dict[str, Any] = {}
    for t in p.targets:
        c = counts.get(t, {})
        verdict = verdicts.get(t) or {}
        targets[t] = {
            "verdict": verdict.get("status", ""),
            "detail": verdict.get("detail", ""),
            "kernels": {
                "instances": int(c.get("instances", 0)),
                **{s: int(c.get(s, 0)) for s in COUNTED},
                "unlaunched": int(c.get("unlaunched", 0)),
            },
            "reasons": dict(c.get("reasons", {})),
            "time_ratio": ratios.get(t, {}),
        }
    original = counts.get("original", {})
    return {
        "name": p.name,
        "anchor": p.anchor,
        "paths": list(p.paths),
        "out": p.out,
        "report": f"{p.out}/report.json" if p.report is not None else "",
        "log": p.log,
        "status": p.status,
        "reason": p.reason,
        "exit_code": p.exit_code,
        "seconds": None if p.seconds is None else round(p.seconds, 3),
        "gpu": p.gpu,
        "ran_on": [dict(r) for r in p.ran_on],
        "timed_again": p.timed_again,
        "report_complete": bool(report.get("complete", False)),
        "stages": {
            k: float(v) for k, v in (report.get("stages") or {}).items() if isinstance(v, int | float)
        },
        "original": {
            "instances": int(original.get("instances", 0)),
            **{s: int(original.get(s, 0)) for s in COUNTED},
        },
        "targets": targets,
    }


def contended_timings(report: Mapping[str, Any] | None) -> int:
    """How many of a port report's replay rows carry a GPU time taken while the GPU was not porter's alone."""
    kernels = (report or {}).get("kernels") or []
    return sum(
        1
        for k in kernels
        if isinstance(k, Mapping)
        for r in k.get("replays") or []
        if isinstance(r, Mapping) and r.get("contended") and r.get("time_ms") is not None
    )


def stage_totals(programs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each stage's wall seconds summed over the programs' reports (what the stage costs the suite when its
    programs run one at a time; docs/BENCHMARKS.md's scaling model reads them)."""
    out: dict[str, float] = {}
    for p in programs:
        for stage, seconds in p.get("stages", {}).items():
            out[stage] = round(out.get(stage, 0.0) + seconds, 3)
    return out


def kernel_counts(report: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Per variant, a report's kernel instances as it counts them: a program report's own
    ``kernel_counts``; for a single file's report, each kernel once per target by :data:`REPLAY_RANK`
    (failed on any device, else validated, else compiled, else not replayable: untranslatable and the
    like, with their reason)."""
    if report.get("schema") != SCHEMAS["port"]:
        found = report.get("kernel_counts", {})
        return found if isinstance(found, dict) else {}
    best: dict[str, dict[str, tuple[str, str]]] = {}
    for k in report.get("kernels", []):
        for v in k.get("variants", []):
            status = v.get("status", "") if v.get("status") in REPLAY_RANK else "not-replayable"
            mine = best.setdefault(v.get("target", ""), {})
            name = k.get("name", "")
            if name not in mine or REPLAY_RANK[status] < REPLAY_RANK[mine[name][0]]:
                mine[name] = (status, f"{v.get('status', '')}: {v.get('reason', '')}".strip(": "))
    out: dict[str, Mapping[str, Any]] = {}
    for target, rows in best.items():
        doc: dict[str, Any] = {"instances": len(rows), **{s: 0 for s in COUNTED}}
        reasons: dict[str, int] = {}
        for status, reason in rows.values():
            doc[status] += 1
            if status != "validated":
                head = reason.split(":", 1)[0] or "no reason given"
                reasons[head] = reasons.get(head, 0) + 1
        doc["reasons"] = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        out[target] = doc
    return out


def time_ratios(report: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per target and device, the port's run seconds over the original's on the device it was compared
    with (``against``), summed over the runs where both have seconds and the port's run was compared."""
    program = report.get("program")
    if not isinstance(program, dict):
        return {}
    sums: dict[tuple[str, str], list[float]] = {}
    for run in program.get("runs", []):
        originals = {o.get("device"): o for o in run.get("originals", []) if o}
        first = run.get("original") or {}
        for v in run.get("variants", []):
            if v.get("status") not in ("matches", "differs") or v.get("seconds") is None:
                continue
            base = originals.get(v.get("against") or v.get("device"), first)
            if not base or not base.get("seconds"):
                continue
            acc = sums.setdefault((v.get("target", ""), v.get("device", "")), [0.0, 0.0])
            acc[0] += float(v["seconds"])
            acc[1] += float(base["seconds"])
    out: dict[str, dict[str, float]] = {}
    for (target, device), (port, original) in sorted(sums.items()):
        if original > 0:
            out.setdefault(target, {})[device] = round(port / original, 3)
    return out


def totals(programs: Sequence[Mapping[str, Any]], targets: Sequence[str]) -> dict[str, Any]:
    """Per target: programs by verdict and kernel instances by status, over every program."""
    out: dict[str, Any] = {}
    for t in targets:
        verdicts: dict[str, int] = {}
        kernels = {"instances": 0, **{s: 0 for s in COUNTED}, "unlaunched": 0}
        ported = 0
        for p in programs:
            row = p["targets"].get(t)
            if row is None:
                continue
            ported += 1
            verdict = row["verdict"] or ("no-run" if p["status"] in ("done", "resumed") else p["status"])
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
            for key in kernels:
                kernels[key] += row["kernels"].get(key, 0)  # (a summary resumed from before "unlaunched": 0)
        out[t] = {"programs": ported, "verdicts": verdicts, "kernels": kernels}
    return out


def top_reasons(programs: Sequence[Mapping[str, Any]], limit: int = TOP_REASONS) -> list[dict[str, Any]]:
    """The reasons kernel instances were not validated, over every program and target, most instances
    first: each with its count, the targets and the programs (their anchors) it came from."""
    found: dict[str, dict[str, Any]] = {}
    for p in programs:
        for target, row in p["targets"].items():
            for reason, n in row["reasons"].items():
                entry = found.setdefault(
                    reason, {"reason": reason, "instances": 0, "targets": [], "programs": []}
                )
                entry["instances"] += n
                if target not in entry["targets"]:
                    entry["targets"].append(target)
                if p["name"] not in entry["programs"]:
                    entry["programs"].append(p["name"])
    ranked = sorted(found.values(), key=lambda e: (-e["instances"], e["reason"]))
    return ranked[:limit]
