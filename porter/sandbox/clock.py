"""A run that sees the wall clock shifted (the original's second run of a program).

Porter runs a program's original twice and leaves out of every comparison what differs between those two runs
(clocks, random seeds: porter.harness.outputs).  A program that seeds its random numbers from ``time(0)`` (Rodinia's
particlefilter) prints the same in two runs started in one second and differently in the next, so whether such a
line was left out depended on when the runs happened.  The second run is therefore started with ``clock_shift.c``
preloaded: ``time()``, ``gettimeofday()`` and ``clock_gettime(CLOCK_REALTIME)`` return :data:`SHIFT_S` seconds
later than the real clock and run on at its pace (durations are unchanged), so whatever a program derives from the
wall clock differs between its two runs, every time, and is left out.  The shim is built with the system's C
compiler into the port's own output folder; where none builds it, the second run sees the real clock (as before).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from importlib import resources
from pathlib import Path

# nine days, three hours and 17 seconds: a seed from the second, a date, an hour of the day all change
SHIFT_S = 9 * 86400 + 3 * 3600 + 17
ENV = "PORTER_CLOCK_SHIFT"
SOURCE = "clock_shift.c"
COMPILERS = ("cc", "gcc", "clang")
BUILD_TIMEOUT_S = 60


def source_text() -> str:
    return resources.files("porter.sandbox").joinpath(SOURCE).read_text(encoding="utf-8")


def shifted(folder: Path) -> tuple[dict[str, str], tuple[str, ...]] | None:
    """The environment and the readable folder that make a run see the wall clock :data:`SHIFT_S` later: the
    shim built once into `folder` (named by its source's digest); None where no C compiler here builds it."""
    text = source_text()
    lib = folder / f"porter_clock_shift-{hashlib.sha256(text.encode()).hexdigest()[:12]}.so"
    if not lib.is_file():
        compiler = next((found for c in COMPILERS if (found := shutil.which(c))), None)
        if compiler is None:
            return None
        folder.mkdir(parents=True, exist_ok=True)
        src = folder / SOURCE
        src.write_text(text, encoding="utf-8")
        partial = lib.with_suffix(".so.part")
        try:
            done = subprocess.run(
                [compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(src), "-ldl"],
                capture_output=True, timeout=BUILD_TIMEOUT_S, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0 or not partial.is_file():
            return None
        partial.replace(lib)
    return {"LD_PRELOAD": str(lib), ENV: str(SHIFT_S)}, (str(folder),)


__all__ = ["ENV", "SHIFT_S", "shifted"]
