"""The capture folder: every kernel launch of a program's run, as the CPU runtime recorded it.

Format (``docs/CAPTURE_FORMAT.md``, schema ``porter-capture/1``)::

    <capture>/manifest.json           the run (command line, program, toolchain) and every launch kept
    <capture>/launches/k<K>-s<S>.json one record per launch, as the runtime wrote it
    <capture>/arrays/*.bin            the bytes of each allocation a launch's pointers reach, before and after

The program itself (``backends/porter_capture.h``, in the CPU runtime or the capturing nvcc build)
writes the launch records and arrays while it runs; :func:`finish` adds ``manifest.json`` once the run is over (the launches sorted by their place in
the run, the run's command line, exit code and which launches of each kernel were kept) and removes
array files no record names, recording each array file's size and sha256.  :func:`load` reads a capture
folder back and holds it to that: a record the run itself left damaged (the manifest's ``problems``) is
reported as a problem of the capture; anything else that does not match -- a manifest entry naming a
file outside the folder (``/etc/shadow``, ``../..``), a record the manifest does not list or that does not
parse, an array whose size, dtype or hash is not what its record and the manifest say, a symbolic link
-- is a :class:`UsageError` (exit 2) naming the file and the record: a changed capture, never a verdict
on the variant judged against it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from porter.errors import UsageError

SCHEMA = "porter-capture/1"
MANIFEST = "manifest.json"
ENV_DIR = "PORTER_CAPTURE_DIR"
ENV_LAUNCHES = "PORTER_CAPTURE_LAUNCHES"
ENV_MIB = "PORTER_CAPTURE_MIB"
ENV_FIRST_MIB = "PORTER_CAPTURE_FIRST_MIB"
DEFAULT_LAUNCHES = 3
DEFAULT_MIB = 64
# a kernel's launch while none of its launches is kept whole: every kernel at its real size judged once
DEFAULT_FIRST_MIB = 1024


@dataclass(frozen=True)
class Arg:
    index: int
    ctype: str  # the parameter's type as the compiler spells it ("const float*", "int")
    kind: str  # "pointer" | "scalar" | "value" (a struct or vector type by value)
    dtype: str = ""  # NumPy name of a scalar, or of a pointer's element; "" when not arithmetic
    element: str = ""  # a pointer's element type
    element_bytes: int = 0
    const: bool = False
    allocation: int | None = None  # a pointer's allocation (index into Launch.allocations)
    offset: int = 0  # bytes from the allocation's base
    why: str = ""  # why a pointer is not resolved
    hex: str = ""  # a scalar's or value's bytes
    bytes: int = 0
    holds_device_pointer: bool = False
    align: int = 0  # a value's alignment in bytes (alignof); 0: not recorded

    def value(self) -> np.generic:
        """A scalar argument's value, from its bytes."""
        return np.frombuffer(bytes.fromhex(self.hex), dtype=np.dtype(self.dtype))[0]


@dataclass(frozen=True)
class Allocation:
    index: int
    bytes: int
    before: str | None  # file under the capture folder; None: not captured (over the limit)
    after: str | None


@dataclass(frozen=True)
class SymbolValue:
    """A ``__constant__`` / ``__device__`` variable of the program, as it was around a launch."""

    name: str
    element: str  # its element type (an array's), as the compiler spells it
    dtype: str  # NumPy name of the element; "" when not arithmetic
    element_bytes: int
    bytes: int
    constant: bool  # __constant__ (else __device__)
    before: str
    after: str
    # a texture reference: its bytes are the memory bound to it at the launch (empty: unbound), which a
    # replay binds again (KernelSpec.textures); read-only, like a __constant__
    texture: bool = False
    # a struct variable with a word pointing into a device allocation (a pointer porter does not follow)
    holds_device_pointer: bool = False


@dataclass(frozen=True)
class Launch:
    kernel: str  # as the launch names it (a template kernel with the arguments written there)
    launch: int  # the kernel's n-th launch in the run
    sequence: int  # the launch's place among every launch of the run
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    stream: str | None
    args: tuple[Arg, ...]
    allocations: tuple[Allocation, ...]
    status: int  # the launch's error code (0: it ran)
    symbols: tuple[SymbolValue, ...] = ()
    skipped: str = ""  # why its arrays were not captured
    written: str = ""  # the launch's own text for the kernel, when the kernel's symbol named it otherwise
    run: int = 1  # which --run of the capture (1-based)
    folder: str = ""  # the capture folder holding its arrays
    device: str = ""  # the device the program ran on when it was captured (the manifest's)
    # macros a replay defines to compile kernels as the capturing build did (the manifest's: the CPU
    # runtime's one host-and-device pass leaves the device-pass macros undefined)
    defines: tuple[str, ...] = ()

    def array(self, alloc: int, when: str) -> bytes:
        """The bytes of allocation `alloc` before or after the launch."""
        a = self.allocations[alloc]
        name = a.before if when == "before" else a.after
        if name is None:
            raise ValueError(f"allocation {alloc} of {self.kernel} launch {self.launch} was not captured")
        return (Path(self.folder) / name).read_bytes()

    def symbol(self, index: int, when: str) -> bytes:
        """The bytes of symbol `index` before or after the launch."""
        y = self.symbols[index]
        return (Path(self.folder) / (y.before if when == "before" else y.after)).read_bytes()

    def signature(self) -> tuple[str, ...]:
        return tuple(a.ctype for a in self.args)


@dataclass
class Capture:
    folder: str
    command: str = ""
    run: int = 1
    exit_code: int | None = None
    launches: list[Launch] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # damaged records, each with its file


def capture_env(
    folder: Path, launches: int = DEFAULT_LAUNCHES, mib: int = DEFAULT_MIB, first_mib: int = DEFAULT_FIRST_MIB
) -> dict[str, str]:
    """The environment that makes the CPU runtime capture into `folder`: `launches` kept per kernel, at
    most `mib` MiB of arrays per launch, or `first_mib` for a kernel none of whose launches is kept yet."""
    return {
        ENV_DIR: str(folder),
        ENV_LAUNCHES: str(launches),
        ENV_MIB: str(mib),
        ENV_FIRST_MIB: str(max(first_mib, mib)),
    }


_ARRAY_NAME = re.compile(r"arrays/[A-Za-z0-9_.-]+\.bin")
_RECORD_NAME = re.compile(r"launches/[A-Za-z0-9_.-]+\.json")
# what backends/porter_capture.h writes as a dtype (dtype_name): an arithmetic type's NumPy name, or ""
DTYPES = frozenset(
    ("bool", "float16", "float32", "float64", "int8", "uint8", "int16", "uint16")
    + ("int32", "uint32", "int64", "uint64")
)
KINDS = ("pointer", "scalar", "value")


def _array_name(value: Any) -> str | None:
    """An array file named by a record: only ``arrays/<name>.bin`` inside the capture folder (a record
    is data the program's run wrote; it never names a file elsewhere)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _ARRAY_NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"array file {value!r} is not arrays/<name>.bin")
    return value


def _count(value: Any, what: str) -> int:
    """A whole number >= 0 from a record (a bool, a float or a negative number is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} is {value!r}, not a whole number >= 0")
    return value


def _dtype(value: Any, what: str) -> str:
    if value in (None, ""):
        return ""
    if value not in DTYPES:
        raise ValueError(f"{what} dtype {value!r} is not one a capture records")
    return str(value)


def _hex(value: Any, nbytes: int, what: str) -> str:
    text = str(value or "")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{what} bytes {text[:40]!r} are not hexadecimal") from None
    if len(raw) != nbytes:
        raise ValueError(f"{what} has {len(raw)} bytes, its record says {nbytes}")
    return text


def _check_launch(la: Launch) -> None:
    """What a record must say of itself to be read as the runtime wrote it (ValueError otherwise)."""
    if not la.kernel:
        raise ValueError("the record names no kernel")
    for n in (*la.grid, *la.block, la.shared_bytes, la.launch, la.sequence):
        _count(n, "a launch's geometry or number")
    for i, al in enumerate(la.allocations):
        if al.index != i:
            raise ValueError(f"allocation {i} is numbered {al.index}")
        _count(al.bytes, f"allocation {i}'s size")
    for a in la.args:
        what = f"argument {a.index}"
        if a.kind not in KINDS:
            raise ValueError(f"{what} is of kind {a.kind!r} (pointer, scalar or value)")
        _dtype(a.dtype, what)
        if a.kind == "pointer":
            _count(a.element_bytes, f"{what}'s element size")
            if a.dtype and np.dtype(a.dtype).itemsize != a.element_bytes:
                raise ValueError(f"{what} is {a.dtype} but its elements are {a.element_bytes} bytes")
            if a.allocation is not None:
                if not 0 <= a.allocation < len(la.allocations):
                    raise ValueError(f"{what} points into allocation {a.allocation}, which the record lacks")
                if not 0 <= a.offset <= la.allocations[a.allocation].bytes:
                    raise ValueError(f"{what} points {a.offset} bytes into an allocation of fewer")
        else:
            _hex(a.hex, _count(a.bytes, f"{what}'s size"), what)
            if a.kind == "scalar" and a.dtype and np.dtype(a.dtype).itemsize != a.bytes:
                raise ValueError(f"{what} is {a.dtype} in {a.bytes} bytes")
    for y in la.symbols:
        _dtype(y.dtype, f"variable {y.name}")
        _count(y.bytes, f"variable {y.name}'s size")
        if y.dtype and np.dtype(y.dtype).itemsize != _count(y.element_bytes, f"variable {y.name}"):
            raise ValueError(f"variable {y.name} is {y.dtype} but its elements are {y.element_bytes} bytes")


def _launch(doc: Mapping[str, Any], run: int, folder: str) -> Launch:
    la = _parse_launch(doc, run, folder)
    _check_launch(la)
    return la


def _parse_launch(doc: Mapping[str, Any], run: int, folder: str) -> Launch:
    def tri(v: Any) -> tuple[int, int, int]:
        x, y, z = (int(n) for n in v)
        return (x, y, z)

    args = tuple(
        Arg(
            index=int(a["index"]),
            ctype=str(a["ctype"]),
            kind=str(a["kind"]),
            dtype=str(a.get("dtype") or ""),
            element=str(a.get("element") or ""),
            element_bytes=int(a.get("element_bytes") or 0),
            const=bool(a.get("const")),
            allocation=None if a.get("allocation") is None else int(a["allocation"]),
            offset=int(a.get("offset") or 0),
            why=str(a.get("why") or ""),
            hex=str(a.get("hex") or ""),
            bytes=int(a.get("bytes") or 0),
            holds_device_pointer=bool(a.get("holds_device_pointer")),
            align=int(a.get("align") or 0),
        )
        for a in doc["args"]
    )
    allocations = tuple(
        Allocation(
            int(a["index"]), int(a["bytes"]), _array_name(a.get("before")), _array_name(a.get("after"))
        )
        for a in doc["allocations"]
    )
    return Launch(
        kernel=str(doc["kernel"]),
        launch=int(doc["launch"]),
        sequence=int(doc["sequence"]),
        grid=tri(doc["grid"]),
        block=tri(doc["block"]),
        shared_bytes=int(doc["shared_bytes"]),
        stream=doc.get("stream"),
        args=args,
        allocations=allocations,
        status=int(doc.get("status", 0)),
        symbols=tuple(
            SymbolValue(
                str(y["name"]),
                str(y.get("element") or ""),
                str(y.get("dtype") or ""),
                int(y.get("element_bytes") or 0),
                int(y["bytes"]),
                bool(y.get("constant")),
                str(_array_name(y["before"])),
                str(_array_name(y["after"])),
                bool(y.get("texture")),
                bool(y.get("holds_device_pointer")),
            )  # fmt: skip
            for y in doc.get("symbols") or ()
        ),
        skipped=str(doc.get("skipped") or ""),
        written=str(doc.get("written") or ""),
        run=run,
        folder=folder,
    )


def _records(folder: Path, run: int, device: str = "") -> tuple[list[Launch], list[str]]:
    """The records of the run just captured into `folder` (for its manifest): one that does not parse,
    or names an array file that is missing, not a plain file or not its size, is a problem of the run."""
    launches, problems = [], []
    for path in sorted((folder / "launches").glob("*.json")):
        try:
            launch = _launch(json.loads(path.read_text(encoding="utf-8")), run, str(folder))
            for name, nbytes in [
                *((n, a.bytes) for a in launch.allocations for n in (a.before, a.after) if n is not None),
                *((n, y.bytes) for y in launch.symbols for n in (y.before, y.after)),
            ]:
                st = os.lstat(folder / name)
                if not stat.S_ISREG(st.st_mode) or st.st_size != nbytes:
                    raise ValueError(f"{name} is not a file of {nbytes} bytes")
            launches.append(replace(launch, device=device) if device else launch)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as err:
            problems.append(f"{path}: damaged launch record ({type(err).__name__}: {err})")
    launches.sort(key=lambda la: la.sequence)
    return launches, problems


def finish(
    folder: Path,
    command: str,
    run: int,
    exit_code: int | None,
    program: str = "",
    device: str = "",
    defines: Sequence[str] = (),
) -> Capture:
    """Write ``manifest.json`` for the run just captured into `folder` (on `device`) and drop
    unreferenced arrays; `defines`: the macros a replay compiles kernels with to match the capturing
    build (:attr:`Launch.defines`)."""
    launches, problems = _records(folder, run, device)
    launches = [replace(la, defines=tuple(defines)) for la in launches]
    named = {n for la in launches for a in la.allocations for n in (a.before, a.after) if n}
    named |= {n for la in launches for y in la.symbols for n in (y.before, y.after)}
    for path in sorted((folder / "arrays").glob("*.bin")) if (folder / "arrays").is_dir() else ():
        if f"arrays/{path.name}" not in named:
            path.unlink()  # a launch whose record a later one took over
    kernels: dict[str, list[int]] = {}
    for la in launches:
        kernels.setdefault(la.kernel, []).append(la.launch)
    arrays = {}
    for name in sorted(named):
        with contextlib.suppress(OSError):
            arrays[name] = {"bytes": (folder / name).stat().st_size, "sha256": _sha256(folder / name)}
    manifest = {
        "schema": SCHEMA,
        "program": program,
        "command": command,
        "run": run,
        "device": device,
        "replay_defines": list(defines),
        "exit_code": exit_code,
        "kernels": kernels,
        "launches": [f"launches/{p.name}" for p in sorted((folder / "launches").glob("*.json"))],
        "problems": problems,
        "arrays": arrays,
    }
    (folder / "launches").mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tmp.replace(folder / MANIFEST)
    return Capture(str(folder), command, run, exit_code, launches, problems)


def load(folder: str | Path) -> Capture:
    """A capture folder written by porter (one run), or a folder of them (``run-1/``, ``run-2/``...):
    every launch, in run order.  Not a capture, or a capture changed since porter wrote it: UsageError
    naming the file (and the record)."""
    root = Path(folder)
    runs = (
        [root]
        if (root / MANIFEST).is_file()
        else sorted(
            (p for p in root.glob("run-*") if (p / MANIFEST).is_file()), key=lambda p: _run_number(p.name)
        )
    )
    if not runs:
        raise UsageError(f"not a porter capture (no {MANIFEST})", path=str(root))
    out = Capture(str(root))
    for n, folder_ in enumerate(runs, 1):
        manifest_path = folder_ / MANIFEST
        if not _inside(folder_, root) or not _inside(manifest_path, folder_):
            raise UsageError("a symbolic link or a folder outside the capture", path=str(manifest_path))
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UsageError(f"unreadable capture manifest: {err}", path=str(manifest_path)) from None
        if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
            raise UsageError(f"not a {SCHEMA} manifest", path=str(manifest_path))
        try:
            run = int(manifest.get("run") or n)
        except (TypeError, ValueError):
            raise UsageError(
                f"run is {manifest.get('run')!r}, not a number", path=str(manifest_path)
            ) from None
        launches, problems = _listed(folder_, manifest, run, str(manifest.get("device") or ""))
        defines = manifest.get("replay_defines") or []
        if not isinstance(defines, list) or not all(
            isinstance(d, str) and re.fullmatch(r"[A-Za-z_]\w*(=\w*)?", d) for d in defines
        ):
            raise UsageError(
                "'replay_defines' is not a list of macro definitions: the capture was changed after porter wrote it",
                path=str(manifest_path),
            )
        out.launches += [replace(la, defines=tuple(defines)) for la in launches]
        out.problems += [*manifest.get("problems", ()), *problems]
        out.command = out.command or str(manifest.get("command", ""))
    return out


def _listed(
    folder: Path, manifest: Mapping[str, Any], run: int, device: str
) -> tuple[list[Launch], list[str]]:
    """The launch records `manifest` lists, each read and checked against the files it names; the
    damaged ones the run itself left (named in its ``problems``) as problems."""
    where = str(folder / MANIFEST)

    def refuse(message: str, path: str = where) -> UsageError:
        return UsageError(f"{message}: the capture was changed after porter wrote it", path=path)

    listed, known, kernels, arrays = (manifest.get(k) for k in ("launches", "problems", "kernels", "arrays"))
    if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
        raise refuse("'launches' is not a list of record files")
    if not isinstance(known, list) or not all(isinstance(x, str) for x in known):
        raise refuse("'problems' is not a list of lines")
    if not isinstance(kernels, dict) or not all(
        isinstance(v, list) and all(isinstance(x, int) for x in v) for v in kernels.values()
    ):
        raise refuse("'kernels' is not each kernel's launch numbers")
    if arrays is not None and not isinstance(arrays, dict):
        raise refuse("'arrays' is not a table of array files")
    for i, name in enumerate(listed):
        if not _RECORD_NAME.fullmatch(name) or ".." in name or not _inside(folder / name, folder):
            raise refuse(
                f"launches[{i}] names {name!r}, not a record inside the capture (launches/<name>.json)"
            )
    on_disk = {f"launches/{p.name}" for p in (folder / "launches").glob("*.json")}
    if on_disk - set(listed):
        raise refuse(f"{sorted(on_disk - set(listed))[0]} is a record the manifest does not list")
    launches: list[Launch] = []
    problems: list[str] = []
    for i, name in enumerate(listed):
        path = folder / name
        if any(f"{name}:" in line for line in known):  # the run itself left it damaged: never used
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            la = _launch(doc, run, str(folder))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as err:
            why = f"damaged launch record ({type(err).__name__}: {err})"
            raise refuse(f"record {i} ({name}): {why}", str(path)) from None
        label = f"launch {la.launch} of {la.kernel} (record {i}, {name})"
        for a in la.allocations:
            for when, file in (("before", a.before), ("after", a.after)):
                if file is not None:
                    _check_array(
                        folder, file, a.bytes, arrays, f"{label}: allocation {a.index} {when}", refuse
                    )
        for y in la.symbols:
            for when, file in (("before", y.before), ("after", y.after)):
                _check_array(folder, file, y.bytes, arrays, f"{label}: variable {y.name} {when}", refuse)
        launches.append(replace(la, device=device) if device else la)
    kept = {(la.kernel, la.launch) for la in launches}
    said = {(k, int(n)) for k, ns in kernels.items() for n in ns}
    if kept != said:
        odd = sorted(kept ^ said)[0]
        raise refuse(f"'kernels' and the records disagree on launch {odd[1]} of {odd[0]}")
    launches.sort(key=lambda la: la.sequence)
    return launches, problems


def _check_array(
    folder: Path, name: str, nbytes: int, arrays: Mapping[str, Any] | None, what: str, refuse: Any
) -> None:
    """The array file `name` is a regular file inside `folder` of `nbytes` bytes, with the hash the
    manifest records for it (when it records hashes: captures before them have sizes only)."""
    path = folder / name
    try:
        st = os.lstat(path)
    except OSError as err:
        raise refuse(f"{what}: {name} is missing ({err.strerror})", str(path)) from None
    if not stat.S_ISREG(st.st_mode) or not _inside(path, folder):
        raise refuse(f"{what}: {name} is not a file of the capture (a link or a device)", str(path))
    if st.st_size != nbytes:
        raise refuse(f"{what}: {name} holds {st.st_size} bytes, its record says {nbytes}", str(path))
    if arrays is None:
        return
    entry = arrays.get(name)
    if (
        not isinstance(entry, dict)
        or entry.get("bytes") != nbytes
        or not isinstance(entry.get("sha256"), str)
    ):
        raise refuse(f"{what}: {name} is not in the manifest's arrays, or with another size", str(path))
    if _sha256(path) != entry["sha256"]:
        raise refuse(f"{what}: {name} does not match the sha256 the manifest records", str(path))


def _inside(path: Path, folder: Path) -> bool:
    """`path` is no symbolic link and lies inside `folder`."""
    try:
        return not path.is_symlink() and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _run_number(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def by_kernel(launches: Sequence[Launch]) -> dict[str, list[Launch]]:
    out: dict[str, list[Launch]] = {}
    for la in launches:
        out.setdefault(la.kernel, []).append(la)
    return out


__all__ = [
    "Allocation",
    "Arg",
    "Capture",
    "Launch",
    "SymbolValue",
    "by_kernel",
    "capture_env",
    "finish",
    "load",
]
