"""``porter verify PORT --against ORIGINAL``: a port someone else wrote, checked against its original.

Most CUDA code that reaches AMD was ported by hand or by hipify.  This judges such a port exactly as
porter judges its own: the original and the port are built as programs with every program toolchain
here (the CPU runtime at 32 lanes and, for HIP, at 64; HIP-on-CUDA and hipcc where present), each
``--run`` is run and compared by the rules of :mod:`porter.harness.outputs`, the original's launches
are captured, and each kernel of the port that corresponds to an original kernel -- the same name,
and as many parameters of the same kinds -- is replayed on those launches on every device and width
of the port's language (:mod:`porter.workflows.program_replay`).  What cannot be matched is listed:
an original kernel the port lacks (or whose signature differs), a port kernel with no original.

The port is copied into the output folder (``<out>/<target>``) and built there; neither program is
ever written to.  The report is the program report of ``porter port DIR`` (docs/REPORT_FORMAT.md) with
``build.port`` naming the port, so every view, the resume ledger and the counts apply unchanged.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from porter.backends import CompileOptions, get_dialect
from porter.defines import BuildFlags
from porter.errors import UsageError
from porter.model import Kernel, Variant
from porter.plan import PlannedVariant, Refusal
from porter.program import Program, ProgramFile, discover
from porter.results import ProgramKernel, ProgramReport
from porter.workflows.program import Hooks, save_report
from porter.workflows.program_plan import ProgramPlan
from porter.workflows.program_replay import replay_program
from porter.workflows.program_run import ProgramRuns, build_and_run, check_toolchains, require_jail
from porter.workflows.program_timers import timer_rule
from porter.workflows.resume import Ledger, check_out_dir, is_porter_output, write_atomic

MARKDOWN_NAME = "report.md"


class PortMatch:
    """The kernels of the port, by name, each with its file: what corresponds to an original kernel."""

    def __init__(self, plan: ProgramPlan) -> None:
        self.plan = plan
        self.kernels: dict[str, tuple[ProgramFile, Kernel]] = {}
        for f in plan.program.files:
            scan = plan.scan(f)
            for k in scan.kernels if scan is not None else ():
                self.kernels.setdefault(k.name, (f, k))

    def of(self, original: Kernel | None, name: str) -> tuple[ProgramFile, Kernel] | str:
        """The port's kernel for the original kernel `name` (its scan `original`), or why there is none."""
        found = self.kernels.get(name)
        if found is None:
            return f"the port defines no kernel {name}"
        f, k = found
        if original is not None and _signature(original) != _signature(k, port=True):
            return (
                f"the port's {name} ({f.rel}:{k.line}) takes ({', '.join(p.type for p in k.params)}), the "
                f"original ({', '.join(p.type for p in original.params)}): not the same kernel"
            )
        return found


def _signature(k: Kernel, port: bool = False) -> tuple[tuple[bool, int], ...]:
    """What must agree between an original kernel and its port: each parameter a pointer or not, and
    the size class of its type's words (``float*`` and ``float *__restrict__`` agree, ``float*`` and
    ``double*`` do not).  A port kernel's leading ``hipLaunchParm`` is not counted (see
    :func:`launch_parm`)."""
    params = k.params[1:] if port and launch_parm(k) else k.params
    return tuple((p.pointer, _width(p.type)) for p in params)


def launch_parm(k: Kernel) -> bool:
    """Whether the kernel's first parameter is HIP 1.x's ``hipLaunchParm``: ports written for HIP's
    first launch macro, ``hipLaunchKernel(k, grid, block, shared, stream, args...)``, declare
    ``k(hipLaunchParm lp, args...)`` and the macro passes ``lp`` itself (HIP's nvcc path: ``0``), so
    the kernel the program launches takes the original's arguments."""
    return bool(k.params) and k.params[0].type.replace("const", "").strip() == "hipLaunchParm"


_LAUNCH_PARM = r"\(\s*(?:const\s+)?hipLaunchParm\b\s*(?:const\s+)?(\w*)\s*(?:,|(?=\)))"


def drop_launch_parm(code: str, name: str) -> str:
    """`code` with the kernel `name`'s leading ``hipLaunchParm`` parameter taken out of each of its
    declarations, and its definition given the parameter as a local holding ``0`` (what HIP's launch
    macro passed), so it is launched with the original's arguments; line numbers unchanged."""
    out: list[str] = []
    pos = 0
    for m in re.finditer(rf"(?<![\w.>]){re.escape(name)}\s*" + _LAUNCH_PARM, code):
        open_at = code.index("(", m.start())
        out.append(code[pos : open_at + 1] + "\n" * code.count("\n", open_at, m.end()))
        pos = m.end()
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        body = re.match(r"[^;{]*?\{", code[i:])  # a definition (after any qualifiers), not a declaration
        if body is not None and m.group(1):
            at = i + body.end()
            out.append(code[pos:at] + f" hipLaunchParm {m.group(1)} = 0; (void){m.group(1)};")
            pos = at
    out.append(code[pos:])
    return "".join(out)


_WIDE = ("double", "long", "int64", "uint64", "size_t", "ptrdiff_t", "8")


def _width(ctype: str) -> int:
    words = ctype.replace("*", " ").replace("&", " ").split()
    base = [
        w for w in words if w not in ("const", "volatile", "__restrict__", "restrict", "unsigned", "signed")
    ]
    text = " ".join(base)
    if any(w in text for w in _WIDE):
        return 8
    if any(w in text for w in ("half", "short", "int16", "uint16", "__half")):
        return 2
    if any(w in text for w in ("char", "bool", "int8", "uint8")):
        return 1
    return 4


class VerifyPlan(ProgramPlan):
    """The original's plan, whose `target` variant of a kernel is the port's own kernel (its file's
    device code in the copied port tree), not a translation."""

    def __init__(self, original: Program, port: PortMatch, target: str, tree: Path, jobs: int) -> None:
        super().__init__(original, None, jobs)
        self.port, self.target, self.tree = port, target, tree

    def variant(
        self, target: str, name: str, kernel: str, rel: str, out: Path, said: str = ""
    ) -> PlannedVariant | Refusal:
        from porter.scan.extract import device_code

        if target != self.target:
            return Refusal("kernel", f"verify checks the {self.target} port only")
        found = self.port.of(self.kernel_scan(kernel, rel), kernel)
        if isinstance(found, str):
            return Refusal("kernel", found)
        f, k = found
        text = self.port.plan.text(f)
        if text is None:
            return Refusal("kernel", f"cannot read {f.rel} of the port")
        dest = self.tree / f.rel
        options = CompileOptions(
            include_dirs=self.port.plan.program.mirrored_dirs(self.tree, dest),
            defines=self.port.plan.defines_for(f),
        )
        entry = name if "<" in name else k.name
        code = device_code(text)
        if launch_parm(k):
            code = drop_launch_parm(code, k.name)
        return PlannedVariant(
            Variant(name, target, code, entry, "user", str(dest)),
            options,
            headers=self.port.plan.tree_digest(None, f),
        )


def verify_program(
    port_paths: Sequence[str],
    against: Sequence[str],
    *,
    target: str = "hip",
    flags: BuildFlags | None = None,
    out_dir: str | None = None,
    jobs: int = 0,
    fresh: bool = False,
    run: ProgramRuns | None = None,
    hooks: Hooks | None = None,
) -> ProgramReport:
    """Check the port `port_paths` against the original `against`; see the module docstring."""
    flags, hooks = flags or BuildFlags(), hooks or Hooks()
    run = ProgramRuns(jobs=jobs) if run is None else replace(run, jobs=jobs)
    say = hooks.progress or (lambda _msg: None)
    try:
        dialect = get_dialect(target)
    except KeyError as err:
        raise UsageError(f"--to {target}: {err.args[0]}") from None
    if not dialect.single_source:
        raise UsageError(
            f"verify checks ports written in a single-source language (HIP); a hand-written {target} port calls "
            f"its own host API, which porter does not build (porter port --to {target} writes and checks its own)"
        )
    if not against:
        raise UsageError("give the original with --against")
    skip = [out_dir] if out_dir is not None else []
    original = discover(
        against, flags.include_dirs, skip=skip, defines=flags.defines, undefines=flags.undefines,
        is_output=is_porter_output,
    )  # fmt: skip
    port = discover(
        port_paths, flags.include_dirs, skip=skip, defines=flags.defines, undefines=flags.undefines,
        is_output=is_porter_output,
    )  # fmt: skip
    roots = {original.root.resolve(), port.root.resolve()}
    if len(roots) == 1 or any(a.is_relative_to(b) for a in roots for b in roots if a != b):
        raise UsageError("the port and the original must be two folders, neither inside the other")
    out = Path(out_dir) if out_dir is not None else port.root.parent / f"{port.root.name}.verified"
    out = out.absolute()
    for program in (original, port):
        check_out_dir(out, program.root / ".", "verify")
        if any(f.path.resolve().is_relative_to(out.resolve()) for f in program.files):
            raise UsageError("the output folder holds input files; choose another --out", path=str(out))
    if run.toolchains is not None:
        check_toolchains(run.toolchains, (target,))
    if run.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    require_jail()
    tree = out / target
    port_plan = ProgramPlan(port, None, jobs if jobs > 0 else (os.cpu_count() or 1), dialect=target)
    matches = PortMatch(port_plan)
    if not matches.kernels:
        raise UsageError(f"the port defines no kernel: nothing to verify in {port.root}")
    plan = VerifyPlan(original, matches, target, tree, jobs if jobs > 0 else (os.cpu_count() or 1))
    if run.runs:  # the lines the original prints from a timer are not compared (scan/timers.py), as in port
        run = replace(run, rule=timer_rule(plan, run.rule))
    report = ProgramReport(root=str(original.root), out_dir=str(out), targets=(target,))
    report.build = {
        "flags_from": original.flags_from or "none",
        "include_dirs": list(original.include_dirs),
        "defines": list(original.defines),
        "define_origins": dict(original.define_origins),
        "built": f"the original and the {target} port given (not translated by porter) built as programs",
        "port": str(port.root),
    }
    ledger = Ledger.of(out, "program", fresh)
    saved = ""

    def save() -> None:
        nonlocal saved
        saved = save_report(out, report, saved)

    _copy_port(port, tree)
    report.kernels = _kernels(plan, matches, target, report)
    save()
    say(f"verifying the {target} port {port.root} against {original.root}")
    # the copy as a program of its own: include folders the port reached (under its root) are in the copy
    dirs = [
        str(tree / Path(d).resolve().relative_to(port.root))
        if Path(d).resolve().is_relative_to(port.root)
        else d
        for d in port.include_dirs
    ]
    units = [str(tree / u.rel) for u in port.units]
    mirrored = discover(units or [str(tree)], dirs, defines=flags.defines, undefines=flags.undefines)
    build_and_run(
        original, out, report, run, ledger=ledger, say=say, skip=[Path(p) for p in skip], save=save,
        trees={target: mirrored},
    )  # fmt: skip
    replay_program(plan, out, report, say, save, ledger)
    report.build["port_hazards"] = wave_hazards(port_plan, report, target)
    if hooks.chart is not None and report.runs:
        report.chart = hooks.chart(report, out)
    report.complete = True
    save()
    if hooks.markdown is not None:
        write_atomic(out / MARKDOWN_NAME, hooks.markdown(report))
    return report


def wave_hazards(port: ProgramPlan, report: ProgramReport, target: str) -> list[dict[str, str | int]]:
    """The wave-size hazards of the port's code (its plan scans its files as `target`), each with what
    the runs at 64 lanes say of it: inside a kernel, that kernel's replay at 64 lanes (failed: the hazard is a
    defect there; validated: not on the launches the program made); elsewhere (host code, a device
    function), the program's runs at 64 lanes."""
    from porter.plan import wavefront_devices
    from porter.scan.hazards import WAVE_CODES

    wide = {d.label for d in wavefront_devices(target) if d.facts.warp_size == 64}
    runs = [v for r in report.runs for v in r.variants if v.variant == target and v.device in wide]
    found: list[dict[str, str | int]] = []
    for f in port.program.files:
        scan = port.scan(f) if f.kind in ("source", "header") else None
        if scan is None:
            continue
        for h in scan.hazards:
            if h.code not in WAVE_CODES:
                continue
            kernel = next((k for k in scan.kernels if k.line <= h.line <= k.end_line), None)
            found.append(
                {"file": str(f.rel), "line": h.line, "code": h.code, "message": h.message,
                 "at_64": _at_64(kernel.name if kernel else "", report, target, wide, runs)}
            )  # fmt: skip
    return found


def _at_64(kernel: str, report: ProgramReport, target: str, wide: set[str], runs: Sequence[object]) -> str:
    if kernel:
        rows = [r for k in report.kernels if k.name == kernel for r in k.replays if r.variant == target]
        at = [r for r in rows if r.device in wide]
        failed = [r for r in at if r.status == "failed"]
        if failed:
            return f"a defect: {kernel} fails at 64 lanes ({failed[0].reason[:160]})"
        if any(r.status == "validated" for r in at):
            return f"not a defect on the program's launches: {kernel} validated at 64 lanes"
        why = next((r.reason for r in rows if r.reason), "no replay at 64 lanes here")
        return f"not judged at 64 lanes: {why[:160]}"
    statuses = {getattr(v, "status", "") for v in runs}
    if "differs" in statuses or "failed" in statuses:
        return "possibly a defect: the program's run at 64 lanes differs from the original"
    if statuses == {"matches"}:
        return "not a defect in the runs given: the program matches the original at 64 lanes"
    return "not judged: no run at 64 lanes here"


def _copy_port(port: Program, tree: Path) -> None:
    """The port's files as its folder holds them, under `tree` (a fresh copy: the builds write beside
    them, never in the user's folder)."""
    if tree.exists():
        shutil.rmtree(tree)
    for f in port.files:
        dest = tree / f.rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f.path, dest)


def _kernels(plan: VerifyPlan, matches: PortMatch, target: str, report: ProgramReport) -> list[ProgramKernel]:
    """Every original kernel with what corresponds to it in the port; the port's kernels no original
    kernel has are the report's notes."""
    kernels: dict[str, ProgramKernel] = {}
    for f in plan.program.files:
        for name, line in plan.facts(f).kernels:
            if name in kernels:
                continue
            row = kernels[name] = ProgramKernel(name, str(f.rel), line)
            found = matches.of(plan.kernel_scan(name, str(f.rel)), name)
            row.targets[target] = (
                found
                if isinstance(found, str)
                else f"matched: {found[0].rel}:{found[1].line} of the port"
                + (
                    " (its hipLaunchParm left out: HIP's hipLaunchKernel passed it)"
                    if launch_parm(found[1])
                    else ""
                )
            )
    for name, (f, k) in sorted(matches.kernels.items()):
        if name not in kernels:
            report.notes.append(
                f"the port's kernel {name} ({f.rel}:{k.line}) has no kernel of that name in the original: "
                "not replayed (its launches are judged by the program's runs)"
            )
    return sorted(kernels.values(), key=lambda k: (k.file, k.line, k.name))


__all__ = ["PortMatch", "VerifyPlan", "drop_launch_parm", "launch_parm", "verify_program"]
