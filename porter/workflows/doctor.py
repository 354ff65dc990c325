"""`porter doctor`: which backends can compile and run here, with what, and what to install otherwise.

Each backend is probed in its own child process (:func:`porter.backends.isolate.probe_backend`), all at
once: an import error, a crashing driver or a hanging device query becomes a row that can neither
compile nor run, with the reason and an install hint, never a traceback.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from porter import sandbox
from porter.backends import Availability, backend_names
from porter.backends import install_hints as backend_install_hints
from porter.backends.isolate import probe_backend
from porter.results import DoctorReport

PROBE_TIMEOUT_S = 60.0


def install_hints() -> dict[str, dict[str, str]]:
    """Every registered backend's install hints (``[install_hints]`` of its dialect.toml)."""
    return {name: backend_install_hints(name) for name in backend_names()}


def with_hint(found: Availability) -> Availability:
    """Fill in a one-line install hint for whatever the backend cannot do, when it gave none."""
    if found.compile and found.run:
        return found
    hints = backend_install_hints(found.name)
    missing = "compile" if not found.compile else "run"
    install = hints.get(missing, "")
    if not found.hint:
        return replace(found, hint=install)
    if not found.toolchain and not found.compile and install and install not in found.hint:
        # the probe failed outright: say what to install, then why
        return replace(found, hint=f"{install} ({found.hint})")
    return found


def doctor(names: tuple[str, ...] | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> DoctorReport:
    names = backend_names() if names is None else names
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        found = list(pool.map(lambda name: probe_backend(name, timeout_s), names))
    return DoctorReport(tuple(with_hint(a) for a in found), sandbox.layers())
