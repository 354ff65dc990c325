"""The wall clock of a program's runs: each starts at one instant (the original's second run nine days later).

Porter runs a program's original twice and leaves out of every comparison what differs between those two runs
(clocks, random seeds: porter.harness.outputs).  A program that seeds its random numbers from ``time(0)`` (Rodinia's
particlefilter) printed the same in two runs started in one second and differently in the next, so whether such a
line was compared, and whether a port's run matched it, depended on when the runs happened.  Every run is therefore
started with ``clock_shift.c`` preloaded: ``time()``, ``gettimeofday()`` and ``clock_gettime(CLOCK_REALTIME)``
start at :data:`EPOCH` when the program starts and run on at the real pace (durations are unchanged), so the
original's first run and every port's see the same instant -- a ``time(0)`` seed, a date: the same, and compared --
and the original's second run starts :data:`SHIFT_S` later, so that what a program derives from the clock still
shows as varying between the original's own runs.  The shim is built with the system's C compiler into the port's
own output folder; where none builds it (or for a program linked statically) the runs see the real clock.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from importlib import resources
from pathlib import Path

# nine days, three hours and 17 seconds: a seed from the second, a date, an hour of the day all change
SHIFT_S = 9 * 86400 + 3 * 3600 + 17
# the second every compared run's wall clock starts in (2026-01-01 00:00:00 UTC; the shim, reading EPOCH_ENV, starts it
# half a second in, so a read just after the start or of the coarse clock is still in it)
EPOCH = 1_767_225_600
EPOCH_ENV = "PORTER_CLOCK_EPOCH"
SOURCE = "clock_shift.c"
COMPILERS = ("cc", "gcc", "clang")
BUILD_TIMEOUT_S = 60


def source_text() -> str:
    return resources.files("porter.sandbox").joinpath(SOURCE).read_text(encoding="utf-8")


def pinned(folder: Path, later: bool = False) -> tuple[dict[str, str], tuple[str, ...]] | None:
    """The environment and the readable folder that make a run's wall clock start at :data:`EPOCH` (`later`:
    :data:`SHIFT_S` after it, the original's second run) and run on at its real pace: every run of a program
    porter compares starts at one instant, so what a program derives from the clock (a ``time(0)`` seed) is the
    same in the original's first run and in each port's, and differs in the second; None where the shim is not
    built."""
    built = _shim(folder)
    if built is None:
        return None
    return {"LD_PRELOAD": built[0], EPOCH_ENV: str(EPOCH + (SHIFT_S if later else 0))}, built[1]


def _shim(folder: Path) -> tuple[str, tuple[str, ...]] | None:
    """The shim's library, built once into `folder`, and the folder a jailed run must read; None where no C
    compiler here builds it."""
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
    return str(lib), (str(folder),)


__all__ = ["EPOCH", "EPOCH_ENV", "SHIFT_S", "pinned"]
