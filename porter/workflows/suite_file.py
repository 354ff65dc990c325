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

    [ctest]                       # optional: programs and their runs from a CMake build's tests
    tests = "build/ctest.json"    # `ctest --test-dir build --show-only=json-v1 > build/ctest.json`
    compile_commands = "build/compile_commands.json"
    source = "."                  # the project's folder (where the units are), given beside the database
    only = ["^unit_"]             # optional: the tests kept (regular expressions searched in their names)

Each test executable of ``[ctest]`` that a CMake target of the compilation database builds is one program
named after the target (``path``: the database and ``source``; ``cmake_target``: the target; ``runs``: its
tests' arguments, ``./EXE ARGS`` where the first one could be taken for the executable), with [defaults]
and the entry keys [ctest] itself gives; a test that runs anything else (a script, ``cmake -E``), a
disabled test and one ctest found no executable for are left out, listed in :attr:`Suite.left_out` and
warned about (:func:`porter.files.warn`: a ``porter: warning:`` line on stderr).

Every mistake is bad input (:class:`porter.errors.UsageError`, exit 2) naming the suite file and the line of
the key or table at fault: a key no entry takes, a value of the wrong type, a path that does not exist, a
program named twice, a name that cannot be a folder, a ctest list that is not ctest's json-v1.  Nothing here
runs anything.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from porter.errors import UsageError

GPU_TOOLCHAINS = frozenset({"nvcc", "hip-on-cuda", "hipcc"})  # program toolchains that need a GPU
SUITE_NAME = "suite.toml"  # what a folder given to --suite holds
DEFAULT_TIMEOUT_S = 3600.0  # a program's whole port, when neither the entry nor [defaults] says
# names a program may not take: the suite's own files in OUT/
RESERVED = frozenset({"summary.md", "summary.json", "summary.png"})
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}")
TOP_KEYS = ("root", "ignore", "defaults", "programs", "ctest")


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
    cmake_target: str = ""  # with a compile_commands.json path: only that CMake target's units

    @property
    def needs_gpu(self) -> bool:
        """Its toolchains name one that builds for and runs on a GPU (a Ray task asks for one)."""
        return bool(self.toolchains and GPU_TOOLCHAINS.intersection(self.toolchains))

    @property
    def may_use_gpu(self) -> bool:
        """It may run on a GPU here: a GPU toolchain, OpenCL (a GPU's OpenCL is one of its devices), or
        every toolchain this machine has (no `toolchains` given)."""
        return self.toolchains is None or bool((GPU_TOOLCHAINS | {"opencl"}).intersection(self.toolchains))

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
        if self.cmake_target:
            args += ["--cmake-target", self.cmake_target]
        return args


@dataclass(frozen=True)
class Suite:
    path: str  # the suite file
    root: str  # what entry paths are relative to
    programs: tuple[SuiteProgram, ...]
    left_out: tuple[str, ...] = ()  # "'NAME' left out: why" of each [ctest] test that is no program's run


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
    reader = _Reader(path, text)
    suite = reader.suite(doc)
    if suite.left_out:
        from porter.files import warn

        line = reader.lines.get(("ctest",))
        for why in suite.left_out:  # porter: warning: SUITE:LINE: [ctest] test 'x' left out: ...
            warn(f"{path}:{line}: [ctest] test {why}")
    return suite


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
_ARRAY_HEADER = re.compile(r"^\s*\[\[\s*(.+?)\s*\]\]\s*(?:#.*)?$")  # [[name]]: its first line
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
            header = _HEADER.match(line) or _ARRAY_HEADER.match(line)
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
    "cmake_target": "a CMake target of the compile_commands.json `path` names (a string)",
}
# [ctest]: programs from a CMake build's tests (beside these keys, any entry key but those it makes)
CTEST_KEYS: dict[str, str] = {
    "tests": "the saved output of `ctest --show-only=json-v1` (a path)",
    "compile_commands": "the build's compile_commands.json (a path)",
    "source": "the project's folder, where the units are (a path)",
    "only": "a list of regular expressions (the names of the tests kept)",
}
_FROM_TESTS = ("path", "runs", "cmake_target")  # what [ctest] makes of each test executable


@dataclass(frozen=True)
class _Test:
    name: str
    command: tuple[str, ...]  # the executable, then its arguments (empty: ctest found no executable)
    disabled: bool


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = key_lines(text)
        self.databases: dict[Path, dict[str, tuple[Path, ...]]] = {}  # compile_commands.json -> targets

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
        programs = doc.get("programs", {})
        if not isinstance(programs, dict) or not (programs or "ctest" in doc):
            raise self.fail(
                "a suite needs at least one [programs.NAME] table (or a [ctest] table)", "programs"
            )
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
        left_out: list[str] = []
        if "ctest" in doc:
            made, left_out = self.ctest(
                doc["ctest"], defaults, Path(os.path.normpath(root.absolute())), set(ignore)
            )
            for p in made:
                if p.name in programs:
                    raise self.fail(
                        f"program {p.name!r} is named twice: [programs.{p.name}] and a test executable of "
                        "[ctest] (rename the table, or leave the tests out with `only`)",
                        "programs",
                        p.name,
                    )
            out += made
        seen: dict[str, str] = {}
        for p in out:  # names that only differ in case share a folder on a case-insensitive disk
            other = seen.setdefault(p.name.lower(), p.name)
            if other != p.name:
                raise UsageError(
                    f"program {p.name!r} and {other!r} differ only in case",
                    path=str(self.path),
                    line=p.line or None,
                )
        return Suite(str(self.path), os.path.normpath(root.absolute()), tuple(out), tuple(left_out))

    def check_keys(self, table: Mapping[str, Any], where: tuple[str, ...], ignore: set[str]) -> None:
        for key in table:
            if key not in ENTRY_KEYS and key not in ignore:
                raise self.fail(
                    f"unknown key {key!r} in [{'.'.join(where)}] (keys: {', '.join(ENTRY_KEYS)}; `ignore` "
                    "lists keys of other tools)",
                    *where,
                    key,
                )

    def program(
        self, name: str, entry: Mapping[str, Any], root: Path, at: tuple[str, ...] = ()
    ) -> SuiteProgram:
        """The entry `name` (its defaults applied) of the table `at` (default: ``[programs.NAME]``)."""
        at = at or ("programs", name)

        def bad(key: str, why: str = "") -> UsageError:
            return self.fail(why or f"`{key}` must be {ENTRY_KEYS[key]}", *self.origin(at, key))

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
        self.check_targets(targets, name, at)
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
        cmake_target = entry.get("cmake_target", "")
        if not isinstance(cmake_target, str) or ("cmake_target" in entry and not cmake_target):
            raise bad("cmake_target")
        if cmake_target:
            self.check_cmake_target(name, cmake_target, resolved, lambda why: bad("cmake_target", why))
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
            cmake_target=cmake_target,
        )

    def origin(self, at: tuple[str, ...], key: str) -> tuple[str, ...]:
        """Where the value of `key` for the entry of table `at` was written: that table, else [defaults]."""
        own = (*at, key)
        return own if own in self.lines or ("defaults", key) not in self.lines else ("defaults", key)

    def check_targets(self, targets: Sequence[str], name: str, at: tuple[str, ...]) -> None:
        from porter.backends import translation_targets

        known = translation_targets()
        unknown = [t for t in targets if t not in known]
        if unknown:
            raise self.fail(
                f"program {name!r}: unknown target(s) {', '.join(unknown)}; choose from {', '.join(known)}",
                *self.origin(at, "targets"),
            )

    def targets_of(self, database: Path) -> dict[str, tuple[Path, ...]]:
        """The CMake targets of a compile_commands.json and their units (read once); UsageError naming it."""
        from porter.program import cmake_targets

        if database not in self.databases:
            self.databases[database] = cmake_targets(database)
        return self.databases[database]

    def check_cmake_target(
        self, name: str, target: str, paths: Sequence[str], bad: Callable[[str], UsageError]
    ) -> None:
        """UsageError (through `bad`) unless a compile_commands.json of `paths` builds units for `target`."""
        databases = [Path(p) for p in paths if Path(p).name == "compile_commands.json"]
        if not databases:
            raise bad(
                f"program {name!r}: `cmake_target` picks units of a compile_commands.json; its `path` "
                "names none"
            )
        known: list[str] = []
        for db in databases:
            try:
                targets = self.targets_of(db)
            except UsageError as err:
                raise bad(f"program {name!r}: {err}") from None
            if target in targets:
                return
            known += targets
        has = f"its targets: {', '.join(dict.fromkeys(known))}" if known else "no entry's object is CMake's"
        raise bad(f"program {name!r}: no unit of {databases[0]} is built for CMake target {target!r} ({has})")

    # ------------------------------------------------------------------ [ctest]

    def ctest(
        self, table: Any, defaults: Mapping[str, Any], root: Path, ignore: set[str]
    ) -> tuple[list[SuiteProgram], list[str]]:
        """The programs of [ctest] (one per test executable a CMake target of the database builds) and the
        tests left out ("NAME: why")."""
        at = ("ctest",)
        if not isinstance(table, dict):
            raise self.fail("`ctest` must be a table ([ctest])", *at)
        for key in table:
            if key in _FROM_TESTS:
                raise self.fail(
                    f"`{key}` of a [ctest] program comes from its tests; [ctest] takes no `{key}`", *at, key
                )
            if key not in CTEST_KEYS and key not in ENTRY_KEYS and key not in ignore:
                raise self.fail(
                    f"unknown key {key!r} in [ctest] (keys: {', '.join(CTEST_KEYS)}, and an entry's keys but "
                    f"{', '.join(_FROM_TESTS)})",
                    *at,
                    key,
                )
        files: dict[str, Path] = {}
        for key in ("tests", "compile_commands", "source"):
            if key not in table:
                if key != "source":
                    raise self.fail(f"[ctest] has no `{key}`: {CTEST_KEYS[key]}", *at)
                continue
            if not isinstance(table[key], str) or not table[key]:
                raise self.fail(f"`{key}` must be {CTEST_KEYS[key]}", *at, key)
            full = Path(os.path.normpath(root / Path(table[key]).expanduser()))
            if not (full.is_dir() if key == "source" else full.is_file()):
                what = "a folder" if key == "source" else "a file"
                raise self.fail(f"[ctest] {key} {table[key]!r} is not {what} ({full})", *at, key)
            files[key] = full
        database = files["compile_commands"]
        if database.name != "compile_commands.json":
            raise self.fail(
                f"[ctest] compile_commands {table['compile_commands']!r} must be named compile_commands.json "
                "(porter port reads a compilation database by its name)",
                *at,
                "compile_commands",
            )
        patterns = self.patterns(table.get("only", []))
        tests = self.ctest_tests(files["tests"])
        try:
            targets = self.targets_of(database)
        except UsageError as err:
            raise self.fail(f"[ctest] compile_commands: {err}", *at, "compile_commands") from None
        kept = [t for t in tests if not patterns or any(p.search(t.name) for p in patterns)]
        if patterns and not kept:
            raise self.fail(f"`only` keeps none of the {len(tests)} tests of {files['tests']}", *at, "only")
        runs: dict[str, list[str]] = {}
        left_out: list[str] = []
        for test in kept:
            if test.disabled:
                left_out.append(f"{test.name!r} left out: it is disabled (DISABLED)")
                continue
            if not test.command:
                left_out.append(
                    f"{test.name!r} left out: ctest knew no command for it (its executable was not built "
                    "when `ctest --show-only=json-v1` ran)"
                )
                continue
            exe = re.split(r"[\\/]", test.command[0])[-1]
            target = exe if exe in targets else exe.removesuffix(".exe")
            if target not in targets:
                left_out.append(
                    f"{test.name!r} left out: it runs {test.command[0]!r}, which no CMake target of "
                    f"{database} builds"
                )
                continue
            runs.setdefault(target, []).append(_run_line(exe, test.command[1:], targets[target]))
        if not runs:
            raise self.fail(
                f"[ctest] none of the {len(kept)} tests of {files['tests']} runs an executable of a CMake "
                f"target of {database} (its targets: {', '.join(targets) or 'none'})",
                *at,
            )
        own = {k: v for k, v in table.items() if k in ENTRY_KEYS}
        paths = [str(database), *([str(files["source"])] if "source" in files else [])]
        folder = Path(os.path.commonpath([str(database.parent), *paths[1:]]))
        programs = []
        for target, commands in runs.items():
            if not _NAME.fullmatch(target) or target in RESERVED or target.endswith(".log"):
                raise self.fail(f"CMake target {target!r} cannot be a program's folder name", *at)
            outside = [u for u in targets[target] if not u.is_relative_to(folder)]
            if outside:
                hint = "beside `source`" if "source" in files else "(name the project's folder with `source`)"
                raise self.fail(
                    f"[ctest] target {target!r}: its unit {outside[0]} lies outside {folder}, which porter "
                    f"reads {hint}",
                    *at,
                )
            entry = {
                **defaults,
                **own,
                "path": paths,
                "runs": list(dict.fromkeys(commands)),
                "cmake_target": target,
            }
            programs.append(self.program(target, entry, root, at))
        return programs, left_out

    def patterns(self, value: Any) -> list[re.Pattern[str]]:
        """`only`'s regular expressions."""
        texts = _strings(value)
        if texts is None:
            raise self.fail(f"`only` must be {CTEST_KEYS['only']}", "ctest", "only")
        out = []
        for text in texts:
            try:
                out.append(re.compile(text))
            except re.error as err:
                raise self.fail(
                    f"`only`: {text!r} is not a regular expression ({err})", "ctest", "only"
                ) from None
        return out

    def ctest_tests(self, path: Path) -> list[_Test]:
        """The tests of a saved ``ctest --show-only=json-v1``."""
        from porter.files import read_text

        def bad(why: str) -> UsageError:
            return self.fail(f"[ctest] tests: {path}: {why}", "ctest", "tests")

        try:
            doc = json.loads(read_text(path, "ctest list", strict=True))
        except UsageError as err:
            raise self.fail(f"[ctest] tests: {err}", "ctest", "tests") from None
        except ValueError as err:
            raise bad(f"not JSON ({err})") from None
        except RecursionError:
            raise bad("too deeply nested") from None
        version = doc.get("version") if isinstance(doc, dict) else None
        if (
            not isinstance(doc, dict)
            or doc.get("kind") != "ctestInfo"
            or not isinstance(version, dict)
            or version.get("major") != 1
            or not isinstance(doc.get("tests"), list)
        ):
            raise bad(
                "not the output of `ctest --show-only=json-v1` (an object of kind 'ctestInfo', version 1, "
                "with a list of tests)"
            )
        tests = []
        for i, t in enumerate(doc["tests"]):
            if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
                raise bad(f"test {i + 1} has no name")
            command = t.get("command", [])
            if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
                raise bad(f"test {t['name']!r}: its command is not a list of strings")
            properties = t.get("properties", [])
            if not isinstance(properties, list):
                raise bad(f"test {t['name']!r}: its properties are not a list")
            disabled = any(
                isinstance(p, dict) and p.get("name") == "DISABLED" and str(p.get("value")).upper() in _TRUE
                for p in properties
            )
            tests.append(_Test(t["name"], tuple(command), disabled))
        return tests


def _run_line(exe: str, args: Sequence[str], units: Sequence[Path]) -> str:
    """A test's arguments as a ``--run`` (``shlex.join``): ARGS alone, or ``./EXE ARGS`` where porter would
    take the first argument for the executable's name (a path such as ``/data/in.txt``, or a unit's name)."""
    if args and ("/" in args[0] or "\\" in args[0] or args[0] in {u.stem for u in units}):
        return shlex.join([f"./{exe}", *args])
    return shlex.join(args)


_TRUE = frozenset({"TRUE", "ON", "1", "YES", "Y"})  # CMake's true values (json's true reads "TRUE")


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
