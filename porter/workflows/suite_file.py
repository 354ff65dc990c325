"""A suite file (``porter port --suite SUITE.toml``): many programs, each ported as ``porter port DIR`` ports
one.  The format (docs/SUITES.md)::

    root = "../corpus"            # optional: entry paths are relative to it (itself to the suite file)
    ignore = ["gpu_runs"]         # optional: entry keys other tools read; porter skips them

    [defaults]                    # optional: any entry key but `path`; an entry's own key replaces it
    targets = ["hip", "opencl"]
    timeout = 900                 # seconds the whole program may take: killed past it, reported timed-out

    [programs.vectorAdd]          # the table's name is the program's name: its folder under OUT/
    path = "cuda-samples/Samples/0_Introduction/vectorAdd"
    include = ["cuda-samples/Common"]
    runs = [""]

Every mistake is bad input (:class:`porter.errors.UsageError`, exit 2) naming the suite file and the line of
the key or table at fault: a key no entry takes, a value of the wrong type, a path that does not exist, a
program named twice, a name that cannot be a folder.  Nothing here runs anything.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from porter.errors import UsageError

SUITE_NAME = "suite.toml"  # what a folder given to --suite holds
DEFAULT_TIMEOUT_S = 3600.0  # a program's whole port, when neither the entry nor [defaults] says
# names a program may not take: the suite's own files in OUT/
RESERVED = frozenset({"summary.md", "summary.json", "summary.png"})
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}")
TOP_KEYS = ("root", "ignore", "defaults", "programs")


@dataclass(frozen=True)
class SuiteProgram:
    """One entry, its defaults applied and its paths resolved (absolute)."""

    name: str
    line: int  # of its [programs.NAME] table
    paths: tuple[str, ...]  # a folder, files, or a compile_commands.json: porter port's PATHS
    runs: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    define: tuple[str, ...] = ()
    undefine: tuple[str, ...] = ()
    build: str = ""
    targets: tuple[str, ...] = ("hip", "opencl")
    toolchains: tuple[str, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT_S  # seconds for the whole port (the suite kills it past them)
    run_timeout: float | None = None  # seconds each run may take (porter port --timeout)
    data: tuple[str, ...] = ()
    rtol: float | None = None
    atol: float | None = None
    expect_exit: int = 0

    def port_args(self) -> list[str]:
        """The arguments of ``porter port`` that port this program (its output folder and the suite's own
        options left to the caller)."""
        args = [*self.paths, "--to", ",".join(self.targets)]
        for flag, values in (("-I", self.include), ("-D", self.define), ("-U", self.undefine)):
            for value in values:
                args += [flag, value]
        for run in self.runs:
            args += [f"--run={run}"]  # "=": a run's arguments may begin with "-"
        for folder in self.data:
            args += ["--data", folder]
        if self.build:
            args += ["--build", self.build]
        if self.toolchains is not None:
            args += ["--toolchains", ",".join(self.toolchains)]
        for flag, number in (("--timeout", self.run_timeout), ("--rtol", self.rtol), ("--atol", self.atol)):
            if number is not None:
                args += [flag, repr(number)]
        if self.expect_exit:
            args += ["--expect-exit", str(self.expect_exit)]
        return args


@dataclass(frozen=True)
class Suite:
    path: str  # the suite file
    root: str  # what entry paths are relative to
    programs: tuple[SuiteProgram, ...]


def suite_path(given: Path) -> Path:
    """The suite file `given` names: itself, or the ``suite.toml`` of a folder."""
    if given.is_dir():
        inside = given / SUITE_NAME
        if not inside.exists():
            raise UsageError(f"the folder holds no {SUITE_NAME}", path=str(given))
        return inside
    return given


def load_suite(given: Path) -> Suite:
    """The suite `given` (a file, or a folder holding ``suite.toml``), every entry checked."""
    from porter.files import read_text

    path = suite_path(given)
    text = read_text(path, "suite file", strict=True)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise _decode_error(str(err), str(path)) from None
    except RecursionError:
        raise UsageError("suite file: too deeply nested", path=str(path)) from None
    return _Reader(path, text).suite(doc)


def _decode_error(message: str, path: str) -> UsageError:
    """TOML's own error as one line at its line: a table declared twice is a program named twice."""
    at = re.search(r"\(at line (\d+), column \d+\)", message)
    line = int(at.group(1)) if at else None
    text = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
    twice = re.match(r"Cannot declare \('programs', '(.*)'\) twice", text)
    if twice:
        text = f"program {twice.group(1)!r} is named twice (each [programs.NAME] once)"
    else:
        text = f"not a valid suite file: {text}"
    return UsageError(text, path=path, line=line)


# --------------------------------------------------------------------------- lines of keys and tables

_HEADER = re.compile(r"^\s*\[(?!\[)\s*(.+?)\s*\]\s*(?:#.*)?$")
_STRING = re.compile(r"""("(?:[^"\\]|\\.)*"|'[^']*')""")
_KEY = re.compile(r"""^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""")


def _parts(dotted: str) -> tuple[str, ...]:
    """``programs."a b"`` -> ("programs", "a b")."""
    out = []
    for m in re.finditer(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^.\s]+)\s*(?:\.|$)""", dotted):
        part = m.group(1)
        out.append(part[1:-1] if part[:1] in "\"'" else part)
    return tuple(out)


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line (1-based) of each table header and of each ``key =`` line under it, by its dotted path:
    ("programs", "a") for ``[programs.a]``, ("programs", "a", "runs") for its ``runs = ...``.  A line
    inside a multi-line string or array is never taken for a key or a table.  (tomllib gives no
    positions; this reads the lines the way TOML lays them out, enough to point at what it refused.)"""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    depth = 0  # open brackets of a multi-line array
    in_string = ""
    for number, line in enumerate(text.splitlines(), 1):
        if in_string:
            if in_string in line:
                in_string = ""
            continue
        if depth == 0:
            header = _HEADER.match(line)
            if header:
                table = _parts(header.group(1))
                lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                name = key.group(1)
                lines.setdefault((*table, name[1:-1] if name[:1] in "\"'" else name), number)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                in_string = quote
        if in_string:
            continue
        code = _STRING.sub('""', line).split("#", 1)[0]
        depth = max(0, depth + code.count("[") - code.count("]"))
    return lines


# --------------------------------------------------------------------------- reading entries


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _comma_list(value: Any) -> tuple[str, ...] | None:
    """``["hip", "opencl"]`` or ``"hip,opencl"``."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return _strings(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


# key -> (what it must be, for the message)
ENTRY_KEYS: dict[str, str] = {
    "path": "a path (or a list of files)",
    "runs": "a list of argument strings",
    "include": "a list of folders",
    "define": "a list of NAME or NAME=VALUE",
    "undefine": "a list of names",
    "build": "a build command (a string)",
    "targets": 'a list of targets (or "hip,opencl")',
    "toolchains": 'a list of program toolchains (or "cpu-runtime,nvcc")',
    "timeout": "seconds (a positive number)",
    "run_timeout": "seconds (a positive number)",
    "data": "a list of folders",
    "rtol": "a number at least 0",
    "atol": "a number at least 0",
    "expect_exit": "an exit status (an integer)",
}


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = key_lines(text)

    def fail(self, message: str, *where: str) -> UsageError:
        """The error at the line of `where` (a key path), else of its nearest enclosing table."""
        parts = tuple(where)
        while parts and parts not in self.lines:
            parts = parts[:-1]
        return UsageError(message, path=str(self.path), line=self.lines.get(parts) if parts else None)

    def suite(self, doc: Mapping[str, Any]) -> Suite:
        for key in doc:
            if key not in TOP_KEYS:
                raise self.fail(
                    f"unknown key {key!r} (a suite file has {', '.join(TOP_KEYS)}; each program is a "
                    "[programs.NAME] table)",
                    key,
                )
        root = self.path.parent
        if "root" in doc:
            if not isinstance(doc["root"], str):
                raise self.fail("`root` must be a folder (a string)", "root")
            root = root / Path(doc["root"]).expanduser()
            if not root.is_dir():
                raise self.fail(f"`root` {doc['root']!r} is not a folder ({root})", "root")
        ignore = _strings(doc.get("ignore", []))
        if ignore is None:
            raise self.fail("`ignore` must be a list of key names", "ignore")
        defaults = doc.get("defaults", {})
        if not isinstance(defaults, dict):
            raise self.fail("`defaults` must be a table ([defaults])", "defaults")
        if "path" in defaults:
            raise self.fail("`path` belongs to each program, not to [defaults]", "defaults", "path")
        self.check_keys(defaults, ("defaults",), set(ignore))
        programs = doc.get("programs")
        if not isinstance(programs, dict) or not programs:
            raise self.fail("a suite needs at least one [programs.NAME] table", "programs")
        out = []
        for name, entry in programs.items():
            where = ("programs", name)
            if not isinstance(entry, dict):
                raise self.fail(f"program {name!r} must be a table ([programs.{name}])", *where)
            if not _NAME.fullmatch(name) or name in RESERVED or name.endswith(".log"):
                raise self.fail(
                    f"program name {name!r} cannot be a folder name (letters, digits, . _ + -; not "
                    "summary.*)",
                    *where,
                )
            self.check_keys(entry, where, set(ignore))
            out.append(self.program(name, {**defaults, **entry}, Path(os.path.normpath(root.absolute()))))
        seen: dict[str, str] = {}
        for p in out:  # names that only differ in case share a folder on a case-insensitive disk
            other = seen.setdefault(p.name.lower(), p.name)
            if other != p.name:
                raise self.fail(f"program {p.name!r} and {other!r} differ only in case", "programs", p.name)
        return Suite(str(self.path), os.path.normpath(root.absolute()), tuple(out))

    def check_keys(self, table: Mapping[str, Any], where: tuple[str, ...], ignore: set[str]) -> None:
        for key in table:
            if key not in ENTRY_KEYS and key not in ignore:
                raise self.fail(
                    f"unknown key {key!r} in [{'.'.join(where)}] (keys: {', '.join(ENTRY_KEYS)}; `ignore` "
                    "lists keys of other tools)",
                    *where,
                    key,
                )

    def program(self, name: str, entry: Mapping[str, Any], root: Path) -> SuiteProgram:
        at = ("programs", name)

        def bad(key: str, why: str = "") -> UsageError:
            return self.fail(why or f"`{key}` must be {ENTRY_KEYS[key]}", *self.origin(name, entry, key))

        if "path" not in entry:
            raise self.fail(f"program {name!r} has no `path`", *at)
        paths = _strings(entry["path"])
        if not paths:
            raise bad("path")
        resolved = []
        for p in paths:
            full = root / Path(p).expanduser()
            if not full.exists():
                raise bad("path", f"program {name!r}: {p!r} does not exist ({full})")
            resolved.append(str(full))
        lists: dict[str, tuple[str, ...]] = {}
        for key in ("runs", "include", "define", "undefine", "data"):
            got = _strings(entry.get(key, []))
            if got is None:
                raise bad(key)
            lists[key] = got
        for key in ("include", "data"):
            folders = []
            for folder in lists[key]:
                full = root / Path(folder).expanduser()
                if not full.is_dir():
                    raise bad(key, f"program {name!r}: {key} {folder!r} is not a folder ({full})")
                folders.append(str(full))
            lists[key] = tuple(folders)
        build = entry.get("build", "")
        if not isinstance(build, str):
            raise bad("build")
        targets = _comma_list(entry.get("targets", ["hip", "opencl"]))
        if not targets:
            raise bad("targets")
        self.check_targets(targets, name, entry)
        chains = _comma_list(entry["toolchains"]) if "toolchains" in entry else None
        if "toolchains" in entry and not chains:
            raise bad("toolchains")
        numbers: dict[str, float | None] = {}
        for key in ("timeout", "run_timeout", "rtol", "atol"):
            numbers[key] = _number(entry[key]) if key in entry else None
            if key in entry and (
                numbers[key] is None
                or (numbers[key] or 0.0) < 0
                or (key.endswith("timeout") and not numbers[key])
            ):
                raise bad(key)
        expect = entry.get("expect_exit", 0)
        if isinstance(expect, bool) or not isinstance(expect, int) or not 0 <= expect <= 255:
            raise bad("expect_exit")
        return SuiteProgram(
            name=name,
            line=self.lines.get(at, 0),
            paths=tuple(resolved),
            runs=lists["runs"],
            include=lists["include"],
            define=lists["define"],
            undefine=lists["undefine"],
            build=build,
            targets=targets,
            toolchains=chains,
            timeout=numbers["timeout"] or DEFAULT_TIMEOUT_S,
            run_timeout=numbers["run_timeout"],
            data=lists["data"],
            rtol=numbers["rtol"],
            atol=numbers["atol"],
            expect_exit=expect,
        )

    def origin(self, name: str, entry: Mapping[str, Any], key: str) -> tuple[str, ...]:
        """Where the value of `key` for program `name` was written: its own table, else [defaults]."""
        own = ("programs", name, key)
        return own if own in self.lines or ("defaults", key) not in self.lines else ("defaults", key)

    def check_targets(self, targets: Sequence[str], name: str, entry: Mapping[str, Any]) -> None:
        from porter.backends import translation_targets

        known = translation_targets()
        unknown = [t for t in targets if t not in known]
        if unknown:
            raise self.fail(
                f"program {name!r}: unknown target(s) {', '.join(unknown)}; choose from {', '.join(known)}",
                *self.origin(name, entry, "targets"),
            )


def default_jobs() -> int:
    """Programs ported at once by default: one per core, at most one per 4 GB of memory, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        memory_gb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (AttributeError, OSError, ValueError):
        memory_gb = 4.0 * cores
    return max(1, min(cores, int(memory_gb // 4)))
