"""Make a pip-installed Intel CPU OpenCL runtime visible to the ICD loader.

``pip install intel-opencl-rt`` puts ``libintelocl.so`` and the libraries it needs (TBB, the
compiler runtime; found through its ``$ORIGIN`` RUNPATH) into ``<prefix>/lib`` and writes an
``etc/OpenCL/vendors/intel-cpu.icd`` naming a placeholder path, so no ICD loader finds it.  Before
OpenCL is first used, :func:`register_intel_cpu_runtime` writes an ICD directory under porter's
cache folder holding an entry for that library beside copies of every entry the loader would
otherwise read (the system's ``/etc/OpenCL/vendors`` and whatever ``OCL_ICD_VENDORS`` already
names), and points ``OCL_ICD_VENDORS`` at it; child processes inherit it.

``PORTER_NO_INTEL_OCL=1`` turns this off; ``INTEL_OPENCL_RT`` names the library (or its folder)
when it lives somewhere else.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import site
import stat
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ENV_DISABLE = "PORTER_NO_INTEL_OCL"
ENV_RUNTIME = "INTEL_OPENCL_RT"
ENV_VENDORS = "OCL_ICD_VENDORS"
SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")
LIBRARY = "libintelocl.so"
ICD_NAME = "porter-intel-cpu.icd"


@dataclass(frozen=True)
class Registration:
    """What :func:`register_intel_cpu_runtime` did (for `porter doctor` and tests)."""

    runtime: Path | None  # the Intel library found, or None
    vendors_dir: Path | None  # the ICD folder OCL_ICD_VENDORS now names, or None when untouched
    reason: str  # one line: what was done or why not


def _prefixes() -> list[Path]:
    out = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    with contextlib.suppress(Exception):  # no user base (embedded interpreters)
        out.append(Path(site.getuserbase()))
    return list(dict.fromkeys(out))


def _library_in(folder: Path) -> Path | None:
    """`folder`/libintelocl.so (or a versioned libintelocl.so.N...) when it is a file."""
    plain = folder / LIBRARY
    if plain.is_file():
        return plain
    versioned = sorted(p for p in folder.glob(LIBRARY + ".*") if p.is_file() and not p.name.endswith(".py"))
    return versioned[0] if versioned else None


def find_intel_cpu_runtime(prefixes: Sequence[Path] | None = None) -> Path | None:
    """The real path of a pip-installed ``libintelocl.so``, or None.

    ``$INTEL_OPENCL_RT`` (the library or its folder) wins; then ``<prefix>/lib`` of this
    interpreter's prefixes (a venv's and its base's) and of the user base (``pip --user``)."""
    env = os.environ.get(ENV_RUNTIME, "").strip()
    candidates: list[Path] = []
    if env:
        given = Path(env).expanduser()
        found = _library_in(given) if given.is_dir() else (given if given.is_file() else None)
        return found.resolve() if found is not None else None
    for prefix in prefixes if prefixes is not None else _prefixes():
        candidates += [prefix / "lib", prefix / "lib64"]
    for folder in candidates:
        found = _library_in(folder)
        if found is not None:
            return found.resolve()
    return None


def _icd_files(location: Path) -> list[Path]:
    """The .icd files an ICD loader reads from `location` (a folder, or one .icd file)."""
    if location.is_file():
        return [location]
    if location.is_dir():
        return sorted(p for p in location.iterdir() if p.suffix == ".icd" and p.is_file())
    return []


def _library_of(icd: Path) -> str:
    try:
        return icd.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0].strip()
    except (OSError, IndexError):
        return ""


def existing_entries(
    env_value: str | None = None, system_dir: Path = SYSTEM_VENDORS
) -> list[tuple[str, str]]:
    """(file name, library line) of every ICD entry the loader would read without porter:
    the system's folder and each location in ``OCL_ICD_VENDORS`` (colon-separated), deduplicated
    by library."""
    value = os.environ.get(ENV_VENDORS, "") if env_value is None else env_value
    locations = [system_dir, *(Path(p) for p in value.split(os.pathsep) if p.strip())]
    entries: list[tuple[str, str]] = []
    seen: set[str] = set()
    for location in locations:
        for icd in _icd_files(location):
            library = _library_of(icd)
            if not library or library in seen:
                continue
            seen.add(library)
            entries.append((icd.name, library))
    return entries


def build_vendors_dir(runtime: Path | None, entries: Sequence[tuple[str, str]], root: Path) -> Path:
    """A folder under `root` holding `entries` plus one for `runtime` (when given); content-addressed,
    so the same inputs give the same folder, and written atomically (a temporary folder renamed)."""
    files: dict[str, str] = {}
    for name, library in entries:
        stem, n = name, 1
        while stem in files or stem == ICD_NAME:
            n += 1
            stem = f"{Path(name).stem}-{n}.icd"
        files[stem] = library
    if runtime is not None:
        files[ICD_NAME] = str(runtime)
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:16]
    target = root / "opencl-icd" / digest
    if _holds(target, files):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".icd-", dir=target.parent))  # 0700: nobody else adds a file
    for name, library in files.items():
        (tmp / name).write_text(library + "\n", encoding="utf-8")
    if os.path.lexists(target) and not _holds(target, files):
        # a folder that says more or other than porter wrote (an .icd planted beside porter's makes
        # the loader open any library): never used, replaced when it can be, else this run's is used
        shutil.rmtree(target, ignore_errors=True)
        with contextlib.suppress(OSError):
            target.unlink()
        if os.path.lexists(target):
            return tmp
    try:
        os.replace(tmp, target)
    except OSError:  # another process made it first (a non-empty folder cannot be replaced)
        if not _holds(target, files):
            return tmp
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _holds(folder: Path, files: dict[str, str]) -> bool:
    """Whether `folder` is the user's own private folder holding exactly `files` (name -> library)."""
    try:
        st = os.lstat(folder)
        names = set(os.listdir(folder))
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022 or names != set(files):
        return False
    return all(
        not (folder / name).is_symlink() and _library_of(folder / name) == lib for name, lib in files.items()
    )


def _cache_root() -> Path:
    from porter.cache import default_root

    root = default_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = Path(tempfile.mkstemp(dir=root)[1])
        probe.unlink()
        return root
    except OSError:
        return Path(tempfile.gettempdir()) / f"porter-{os.getuid()}"


def _drop_intel_from_environment(root: Path | None = None) -> None:
    """The opt-out must hold in child processes too: a parent porter process may have registered
    the runtime and passed its folder down through ``OCL_ICD_VENDORS``.  Point the variable at the
    same entries without Intel's (never raises)."""
    if not os.environ.get(ENV_VENDORS, "").strip():
        return
    try:
        entries = existing_entries()
        kept = [(n, lib) for n, lib in entries if not Path(lib).name.startswith(LIBRARY)]
        if len(kept) == len(entries):
            return
        os.environ[ENV_VENDORS] = str(build_vendors_dir(None, kept, root or _cache_root()))
    except Exception:  # noqa: BLE001 - discovery must never take porter down
        return


def register_intel_cpu_runtime(root: Path | None = None) -> Registration:
    """Point ``OCL_ICD_VENDORS`` at a folder that adds a pip-installed Intel CPU runtime to the
    entries already visible; call before OpenCL enumerates platforms.  Never raises."""
    if os.environ.get(ENV_DISABLE, "").strip():
        _drop_intel_from_environment()
        return Registration(None, None, f"{ENV_DISABLE} is set: the Intel CPU runtime is not registered")
    try:
        runtime = find_intel_cpu_runtime()
        if runtime is None:
            return Registration(None, None, "no pip-installed Intel CPU OpenCL runtime (intel-opencl-rt)")
        entries = existing_entries()
        known = [lib for _, lib in entries]
        if any(Path(lib).name.startswith(LIBRARY) for lib in known):
            return Registration(runtime, None, "an Intel CPU OpenCL runtime is already registered")
        folder = build_vendors_dir(runtime, entries, root or _cache_root())
        os.environ[ENV_VENDORS] = str(folder)
        return Registration(runtime, folder, f"registered {runtime} through {ENV_VENDORS}={folder}")
    except Exception as err:  # noqa: BLE001 - discovery must never take porter down
        return Registration(None, None, f"registering the Intel CPU runtime failed: {err}")
