"""The comparison rule of a program's runs, with the lines the program prints from a timer masked, and those it
prints from a property of its device known (not compared where a port runs on another device).

The plan holds each file's text and scan, read and made once; the timers are found in those texts (with the
scan's macro table applied, as the scan parsed them: :func:`porter.scan.macros.mask`), one file right after its
scan, and the rule that goes on to the runs (:class:`porter.workflows.program_run.ProgramRuns`) carries the
patterns: nothing downstream reads a file again to learn them.
"""

from __future__ import annotations

from collections.abc import Iterator

from porter.files import encode_text
from porter.harness.outputs import Rule, default_rule, with_timers
from porter.scan.macros import mask
from porter.scan.timers import printed_timers_and_properties
from porter.workflows.program_plan import ProgramPlan


def _texts(plan: ProgramPlan) -> Iterator[tuple[str, bytes]]:
    """(name, bytes as the scan parsed them) of each source and header, one at a time."""
    for f in plan.program.files:
        if f.kind == "other":
            continue
        text = plan.text(f)
        if text is None:
            continue
        scanned = plan.scanned(f)
        data = encode_text(text)
        yield str(f.rel), (mask(data, scanned.macros).source if scanned is not None else data)


def timer_rule(plan: ProgramPlan, rule: Rule | None = None) -> Rule:
    """`rule` (None: the default) with the stdout lines the plan's program prints from a timer masked, and those
    it prints from a property of its device (``cudaGetDeviceProperties``' fields ...) known."""
    timers, properties = printed_timers_and_properties(_texts(plan))
    return with_timers(rule or default_rule(), timers, properties)


__all__ = ["timer_rule"]
