"""compute-sanitizer, the checker of CUDA kernels on NVIDIA GPUs: the command a checking run is
started under and what its log says.  The harness runs each pass (:data:`PASSES`) once per variant."""

from __future__ import annotations

import re
import shutil

PASSES = ("memcheck", "racecheck")
_ERRORS = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error")
_RACECHECK = re.compile(r"RACECHECK SUMMARY:.*?\((\d+)\s+errors?")


def tool() -> str | None:
    """The compute-sanitizer executable, or None when it is not installed."""
    return shutil.which("compute-sanitizer")


def wrapper(path: str, check: str, log_path: str) -> tuple[str, ...]:
    """The command prefix that runs a child under compute-sanitizer's `check`, its log to `log_path`."""
    return (path, "--tool", check, "--target-processes", "all", "--print-limit", "20", "--log-file", log_path)


def pointless(check: str, static_shared: int | None, dynamic_shared: int) -> str:
    """Why `check` can find nothing in a launch ("" when it can, or when that is not known): racecheck looks
    for hazards on shared memory only, so a kernel without any -- none static by ptxas's report, none dynamic
    at this launch -- gives it nothing to watch."""
    if check == "racecheck" and static_shared == 0 and dynamic_shared == 0:
        return (
            "the kernel has no shared memory (0 bytes static by ptxas, 0 dynamic at this launch), and racecheck "
            "looks for shared-memory hazards only"
        )
    return ""


def error_count(text: str, check: str) -> int | None:
    """The errors the log of `check` reports (None: no summary in it)."""
    m = _ERRORS.search(text)
    errors = int(m.group(1)) if m else None
    if check == "racecheck":
        rm = _RACECHECK.search(text)
        if rm:
            errors = max(errors or 0, int(rm.group(1)))
    return errors


def first_error(text: str) -> str:
    """The first reported error line of a log ("" when none is recognisable)."""
    return next(
        (
            ln.strip("= ").strip()
            for ln in text.splitlines()
            if "=========" in ln and ("Invalid" in ln or "hazard" in ln.lower() or "Error" in ln)
        ),
        "",
    )
