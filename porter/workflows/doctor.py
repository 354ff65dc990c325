"""`porter doctor`: which backends can compile and run here, with what, and what to install otherwise.

Each backend is probed in its own child process (:func:`porter.backends.isolate.probe_backend`), all at
once: an import error, a crashing driver or a hanging device query becomes a row that can neither
compile nor run, with the reason and an install hint, never a traceback.
"""

from __future__ import annotations

import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from porter import sandbox
from porter.backends import BACKEND_NAMES, Availability
from porter.backends.isolate import probe_backend

PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DoctorReport:
    backends: tuple[Availability, ...]
    sandbox: tuple[sandbox.Layer, ...] = ()  # the layers every child that runs code gets here


@cache
def install_hints() -> dict[str, dict[str, str]]:
    text = resources.files("porter.workflows").joinpath("doctor.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def with_hint(found: Availability) -> Availability:
    """Fill in a one-line install hint for whatever the backend cannot do, when it gave none."""
    if found.compile and found.run:
        return found
    hints = install_hints().get(found.name, {})
    missing = "compile" if not found.compile else "run"
    install = hints.get(missing, "")
    if not found.hint:
        return replace(found, hint=install)
    if not found.toolchain and not found.compile and install and install not in found.hint:
        # the probe failed outright: say what to install, then why
        return replace(found, hint=f"{install} ({found.hint})")
    return found


def doctor(names: tuple[str, ...] = BACKEND_NAMES, timeout_s: float = PROBE_TIMEOUT_S) -> DoctorReport:
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        found = list(pool.map(lambda name: probe_backend(name, timeout_s), names))
    return DoctorReport(tuple(with_hint(a) for a in found), sandbox.layers())
