"""What AddressSanitizer said of the original's run: a memory error in the program's own code, in words.

Where a port's run differs from the original's, the original is built once more with a toolchain that can
sanitize it (the CPU runtime: ``cpu-runtime-asan``, :meth:`porter.backends.cpu.program.CpuProgramToolchain.sanitized`)
and run with the same arguments (:mod:`porter.workflows.program_run`).  An error AddressSanitizer reports there
-- a read past the end of a heap allocation, a use after free -- makes the original's own output depend on what
lies beyond its memory, which another runtime lays out otherwise: the port's run may differ for no fault of
the port.  :func:`defect` turns the report into one line naming the access, the file and line it happened at
and where the memory came from, both as the user's tree names them; only errors of memory the program itself
allocated or declared are named, with a frame in the program's own files (the runtime's fibers run kernels
on stacks AddressSanitizer may misjudge: those kinds are not believed).
"""

from __future__ import annotations

import re

# the kinds believed (docs/REPORT_FORMAT.md, "original_defects"): memory of the program's own allocations
KINDS = (
    "heap-buffer-overflow",
    "heap-use-after-free",
    "global-buffer-overflow",
    "double-free",
    "attempting double-free",
    "alloc-dealloc-mismatch",
)

_ERROR = re.compile(r"ERROR: AddressSanitizer: (attempting [\w-]+|[\w-]+)")
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.M)
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)(?::\d+)?\s*$", re.M)
_REGION = re.compile(r"is located (\d+) bytes? (to the right of|to the left of|inside of) (\d+)-byte region")


def defect(stderr: str, tree: str) -> str:
    """The first memory error AddressSanitizer reported in `stderr` of the program built from `tree` (the
    folder its sources were compiled in), in one line; "" when it reported none porter believes (see the
    module docstring)."""
    found = _ERROR.search(stderr)
    if found is None:
        return ""
    kind = found.group(1)
    if not any(kind.startswith(k) for k in KINDS):
        return ""
    report = stderr[found.start() :]
    prefix = tree.rstrip("/") + "/"
    where, allocated = _own_frame(report, prefix, "allocated by"), ""
    if where is None:  # nowhere in the program's own files: the runtime's, not believed
        return ""
    said = f"AddressSanitizer: {kind}"
    access = _ACCESS.search(report)
    if access is not None:
        said += f", a {access.group(1)} of {access.group(2)} byte{'s' if access.group(2) != '1' else ''}"
    said += f" at {where}"
    region = _REGION.search(report)
    tail = report.partition("allocated by")[2]
    if tail:
        allocated = _own_frame(tail, prefix) or ""
    if region is not None:
        offset, side, size = region.groups()
        side = {"to the right of": "past the end of", "to the left of": "before"}.get(side, "inside")
        said += f", {offset} byte{'s' if offset != '1' else ''} {side} a {size}-byte region"
        said += f" allocated at {allocated}" if allocated else ""
    return said


def _own_frame(report: str, prefix: str, stop: str = "") -> str | None:
    """The first stack frame (before `stop`, when given) in a file under `prefix`, as ``file:line (in
    function)`` with the file relative to it; None when there is none."""
    text = report.split(stop, 1)[0] if stop else report
    for function, path, line in _FRAME.findall(text):
        if path.startswith(prefix):
            return f"{path[len(prefix) :]}:{line} (in {function})"
    return None


__all__ = ["KINDS", "defect"]
