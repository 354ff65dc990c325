"""The capture folder: every kernel launch of a program's run, as the CPU runtime recorded it.

Format (``docs/CAPTURE_FORMAT.md``, schema ``porter-capture/1``)::

    <capture>/manifest.json           the run (command line, program, toolchain) and every launch kept
    <capture>/launches/k<K>-s<S>.json one record per launch, as the runtime wrote it
    <capture>/arrays/*.bin            the bytes of each allocation a launch's pointers reach, before and after

The program itself (``backends/porter_capture.h``, in the CPU runtime or the capturing nvcc build)
writes the launch records and arrays while it runs; :func:`finish` adds ``manifest.json`` once the run is over (the launches sorted by their place in
the run, the run's command line, exit code and which launches of each kernel were kept) and removes
array files no record names.  :func:`load` reads a capture folder back; a damaged record is reported
as a problem of the capture, never raised.
"""

from __future__ import annotations

import json
import re
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
DEFAULT_LAUNCHES = 3
DEFAULT_MIB = 64


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


def capture_env(folder: Path, launches: int = DEFAULT_LAUNCHES, mib: int = DEFAULT_MIB) -> dict[str, str]:
    """The environment that makes the CPU runtime capture into `folder`."""
    return {ENV_DIR: str(folder), ENV_LAUNCHES: str(launches), ENV_MIB: str(mib)}


_ARRAY_NAME = re.compile(r"arrays/[A-Za-z0-9_.-]+\.bin")


def _array_name(value: Any) -> str | None:
    """An array file named by a record: only ``arrays/<name>.bin`` inside the capture folder (a record
    is data the program's run wrote; it never names a file elsewhere)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _ARRAY_NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"array file {value!r} is not arrays/<name>.bin")
    return value


def _launch(doc: Mapping[str, Any], run: int, folder: str) -> Launch:
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
            )  # fmt: skip
            for y in doc.get("symbols") or ()
        ),
        skipped=str(doc.get("skipped") or ""),
        written=str(doc.get("written") or ""),
        run=run,
        folder=folder,
    )


def _records(folder: Path, run: int, device: str = "") -> tuple[list[Launch], list[str]]:
    launches, problems = [], []
    for path in sorted((folder / "launches").glob("*.json")):
        try:
            launch = _launch(json.loads(path.read_text(encoding="utf-8")), run, str(folder))
            launches.append(replace(launch, device=device) if device else launch)
        except (OSError, ValueError, KeyError, TypeError) as err:
            problems.append(f"{path}: damaged launch record ({type(err).__name__}: {err})")
    launches.sort(key=lambda la: la.sequence)
    return launches, problems


def finish(
    folder: Path, command: str, run: int, exit_code: int | None, program: str = "", device: str = ""
) -> Capture:
    """Write ``manifest.json`` for the run just captured into `folder` (on `device`) and drop
    unreferenced arrays."""
    launches, problems = _records(folder, run, device)
    named = {n for la in launches for a in la.allocations for n in (a.before, a.after) if n}
    named |= {n for la in launches for y in la.symbols for n in (y.before, y.after)}
    for path in sorted((folder / "arrays").glob("*.bin")) if (folder / "arrays").is_dir() else ():
        if f"arrays/{path.name}" not in named:
            path.unlink()  # a launch whose record a later one took over
    kernels: dict[str, list[int]] = {}
    for la in launches:
        kernels.setdefault(la.kernel, []).append(la.launch)
    manifest = {
        "schema": SCHEMA,
        "program": program,
        "command": command,
        "run": run,
        "device": device,
        "exit_code": exit_code,
        "kernels": kernels,
        "launches": [f"launches/{p.name}" for p in sorted((folder / "launches").glob("*.json"))],
        "problems": problems,
    }
    (folder / "launches").mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tmp.replace(folder / MANIFEST)
    return Capture(str(folder), command, run, exit_code, launches, problems)


def load(folder: str | Path) -> Capture:
    """A capture folder written by porter (one run), or a folder of them (``run-1/``, ``run-2/``...):
    every launch, in run order.  Not a capture: UsageError naming the folder."""
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
        try:
            manifest = json.loads((folder_ / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UsageError(f"unreadable capture manifest: {err}", path=str(folder_ / MANIFEST)) from None
        if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
            raise UsageError(f"not a {SCHEMA} manifest", path=str(folder_ / MANIFEST))
        run = int(manifest.get("run") or n)
        launches, problems = _records(folder_, run, str(manifest.get("device") or ""))
        out.launches += launches
        out.problems += [*manifest.get("problems", ()), *problems]
        out.command = out.command or str(manifest.get("command", ""))
    return out


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
