"""Reading ptxas's verbose report (``-Xptxas -v`` / NVRTC ``--ptxas-options=-v``) into a ResourceReport.

ptxas writes, per entry function::

    ptxas info    : Compiling entry function '_Z5saxpyifPKfPf' for 'sm_90'
    ptxas info    : Function properties for _Z5saxpyifPKfPf
    ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem, 400 bytes cmem[0]
"""

from __future__ import annotations

import re

from porter.backends import ResourceReport

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame")
_SPILL_STORES = re.compile(r"(\d+) bytes spill stores")
_SPILL_LOADS = re.compile(r"(\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def _sections(log: str) -> dict[str, list[str]]:
    """Lines of the report grouped by the entry function they describe."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in log.splitlines():
        match = _ENTRY.search(line)
        if match:
            current = match.group(1)
            sections.setdefault(current, []).append(line)
            continue
        match = _PROPS.search(line)
        if match:
            # properties of a non-entry device function belong to no entry
            current = match.group(1) if match.group(1) in sections else None
            if current:
                sections[current].append(line)
            continue
        if current is not None:
            sections[current].append(line)
    return sections


def _first_int(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return int(match.group(1)) if match else None


def entries(log: str) -> list[str]:
    """Entry functions ptxas compiled, in order."""
    return _ENTRY.findall(log)


def parse_report(log: str, entry: str | None = None) -> ResourceReport | None:
    """The report for `entry` (lowered name); the only/first entry when `entry` is absent from the log."""
    sections = _sections(log)
    if not sections:
        return None
    name = entry if entry in sections else next(iter(sections))
    text = "\n".join(sections[name])
    registers = _first_int(_REGS, text)
    return ResourceReport(
        registers=registers,
        shared_bytes=_first_int(_SMEM, text) or (0 if registers is not None else None),
        spill_stores=_first_int(_SPILL_STORES, text),
        spill_loads=_first_int(_SPILL_LOADS, text),
        stack_bytes=_first_int(_STACK, text),
        raw=text,
    )
