"""Porter's temporary folders: one per porter process, removed when it ends and, after a SIGKILL, by the
next porter that starts.

The command line calls :func:`start` first. It removes the folders of porter processes that are no
longer alive, makes this process's own (``porter-run-XXXXXXXX`` in the system's temporary folder, 0700)
with a marker naming its owner (pid, start time in clock ticks since boot, pid namespace, boot id), and
points :mod:`tempfile` and ``TMPDIR`` there, so every temporary folder or file porter and the tools it
starts make (job folders, compile scratch, probes) lies inside it. :func:`finish` removes it: at exit,
and after Ctrl-C or SIGTERM.

At start a folder is removed only when all of these hold: its name starts with ``porter-run-``; it is a
folder (not a link) of this user; its marker reads as porter writes it; and its owner is gone (the
machine was restarted since, or no process of this pid namespace has that pid and start time). Anything
else is left alone: the folder of a live porter, of a porter in another pid namespace (a container
sharing /tmp), and everything porter did not make.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "porter-run-"
MARKER = "porter-owner"
_MARKER_MAX = 4096

_root: Path | None = None
_owner = 0  # the pid that made _root (a forked child inherits the module, never the folder)
_saved: tuple[str | None, str | None] = (None, None)  # tempfile.tempdir and TMPDIR before start()


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(_MARKER_MAX).strip()
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22); None when there
    is no such process, or only its zombie (killed, not yet reaped)."""
    text = _read(f"/proc/{pid}/stat")
    if text is None or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _boot_id() -> str | None:
    return _read("/proc/sys/kernel/random/boot_id")


def owner_of(pid: int) -> dict[str, str]:
    """What a marker records of the process `pid` (absent fields: unknown here)."""
    found = {"pid": str(pid), "start": _start_time(pid), "pidns": _pid_namespace(), "boot": _boot_id()}
    return {k: v for k, v in found.items() if v}


def _marker_text(owner: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in owner.items())


def _parse(text: str) -> dict[str, str] | None:
    owner: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or key not in ("pid", "start", "pidns", "boot") or key in owner:
            return None
        owner[key] = value
    return owner if owner.get("pid", "").isdigit() and "start" in owner else None


def _gone(owner: dict[str, str]) -> bool:
    """Whether the process a marker names has ended (False whenever that cannot be known here)."""
    boot = _boot_id()
    if boot and owner.get("boot") and owner["boot"] != boot:
        return True  # made before the machine last started
    if owner.get("pidns") != _pid_namespace() or not os.path.isdir("/proc/self"):
        return False  # another pid namespace's porter, or no /proc: cannot tell
    return _start_time(int(owner["pid"])) != owner["start"]  # no such process, or its pid was reused


def stale(folder: Path) -> bool:
    """Whether `folder` is a porter run folder of this user whose process has ended."""
    if not folder.name.startswith(PREFIX):
        return False
    try:
        st = os.lstat(folder)
        marker = os.lstat(folder / MARKER)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    if not stat.S_ISREG(marker.st_mode) or marker.st_uid != os.geteuid() or marker.st_size > _MARKER_MAX:
        return False
    text = _read(str(folder / MARKER))
    owner = _parse(text) if text is not None else None
    return owner is not None and _gone(owner)


def sweep(base: str | None = None) -> list[Path]:
    """Remove the run folders in `base` (default: the system's temporary folder) whose porter has ended;
    the folders removed."""
    folder = Path(base or tempfile.gettempdir())
    removed = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        path = folder / name
        if name.startswith(PREFIX) and stale(path):
            shutil.rmtree(path, ignore_errors=True)  # never follows a link out of the folder
            removed.append(path)
    return removed


def start() -> Path | None:
    """Sweep, make this process's run folder and send every temporary file there (once per process);
    None when no folder could be made (temporary files then go where they always did)."""
    global _root, _owner, _saved
    if _root is not None and _owner == os.getpid():
        return _root
    base = tempfile.gettempdir()
    sweep(base)
    try:
        root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
        (root / MARKER).write_text(_marker_text(owner_of(os.getpid())), encoding="ascii")
    except OSError:
        return None
    _root, _owner = root, os.getpid()
    _saved = (tempfile.tempdir, os.environ.get("TMPDIR"))
    tempfile.tempdir = str(root)
    os.environ["TMPDIR"] = str(root)
    atexit.register(finish)
    return root


def finish() -> None:
    """Remove this process's run folder and point temporary files back where they went before."""
    global _root
    if _root is None or _owner != os.getpid():
        return
    root, _root = _root, None
    tempdir, env = _saved
    tempfile.tempdir = tempdir
    if env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = env
    with contextlib.suppress(OSError):
        shutil.rmtree(root, ignore_errors=True)


def root() -> Path | None:
    """This process's run folder, if :func:`start` made one."""
    return _root if _owner == os.getpid() else None


__all__ = ["MARKER", "PREFIX", "finish", "owner_of", "root", "start", "stale", "sweep"]
