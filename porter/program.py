"""A program: the files `porter port PATH...` works on when PATH is a folder, several files, or a
``compile_commands.json``.

:func:`discover` finds the program's root (the deepest folder holding every input), its
translation units (``.cu``/``.cpp``/``.cc``/``.cxx``/``.c``), its headers (``.cuh``/``.h``/``.hpp``…)
and every other file under the root (Makefiles, data files, READMEs), which a mirrored port copies
unchanged.  A ``compile_commands.json`` names the units and brings their ``-I`` folders and ``-D``
macros.  Folders porter never enters: version control, virtual environments, build folders, and
earlier porter outputs (a folder holding a porter ``report.json``).

A CMake build's database holds the units of every target; ``cmake_target`` (``porter port
--cmake-target NAME``) keeps those of one: CMake writes each unit's object as
``.../CMakeFiles/<target>.dir/...``, in the entry's ``output`` (or the ``-o`` of its command).  The other
targets' units are then no part of the program (unless one of its units includes them).

What lies outside the root is read only where the user named it on the command line (an ``-I``
folder): a compile_commands.json is data, so an entry whose source lies outside the root (the
json's folder and the other paths given) is a usage error naming the entry, its ``-I`` folders outside
the root are not used, and a header reached through ``#include "../x.h"`` outside the root and the
named folders is not read (each left out with a note in ``Program.skipped``).  Every file's output
path is its path relative to the root, never one with ``..``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from porter.defines import check_defines, merge_defines
from porter.errors import UsageError
from porter.files import decode_text, read_header, read_text
from porter.includes import HEADER_SUFFIXES, SOURCE_SUFFIXES
from porter.scan import SKIP_DIRS

# headers of the system and toolkits are never part of a program (nor grow its root to `/`)
_SYSTEM_PREFIXES = ("/usr/", "/opt/", "/lib/", "/etc/")
MAX_FILES = 20_000  # files under one program root at most (a guard against pointing at `/`)


@dataclass(frozen=True)
class ProgramFile:
    path: Path  # absolute
    rel: Path  # relative to the program root: the name it keeps in a mirrored port
    kind: str  # "source" (a translation unit), "header", or "other" (copied as it is)


@dataclass(frozen=True)
class Program:
    root: Path
    files: tuple[ProgramFile, ...]
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # -D of every unit: a compilation database's, then the command line's
    define_origins: tuple[tuple[str, str], ...] = ()  # (NAME, "command line" | "compile_commands.json")
    # a compilation database's units, each with its own -D (merged with the command line's): a unit
    # not listed, or a program without a database, gets `defines`
    unit_defines: tuple[tuple[str, tuple[str, ...]], ...] = ()
    flags_from: str = ""  # where -I/-D came from: "compile_commands.json", "command line", ""
    skipped: tuple[str, ...] = field(default_factory=tuple)  # "path: why" of what was left out
    named_dirs: tuple[str, ...] = ()  # the -I folders the user named: read even outside the root

    def defines_for(self, rel: str | Path) -> tuple[str, ...]:
        """The -D of the unit at `rel` (relative to the root), as its own build line gives them."""
        return dict(self.unit_defines).get(str(rel), self.defines)

    def may_read(self, path: str | Path) -> bool:
        """Whether a header at `path` may be read: under the root or a folder the user named."""
        return _inside(str(path), [str(self.root), *self.named_dirs])

    @property
    def units(self) -> tuple[ProgramFile, ...]:
        return tuple(f for f in self.files if f.kind == "source")

    def mirrored_dirs(self, out: Path, here: Path) -> tuple[str, ...]:
        """The include folders of a file at `here` in a mirrored copy of the tree at `out`: its own
        folder, each include folder of the program (mirrored where it lies under the root), then the
        mirrored root (``#include "../common.h"`` reaches it, and a sandboxed compiler may read it)."""
        dirs = [str(here.parent)]
        for d in self.include_dirs:
            p = Path(d)
            dirs.append(str(out / p.relative_to(self.root)) if p.is_relative_to(self.root) else d)
        dirs.append(str(out))
        return tuple(dict.fromkeys(dirs))

    def by_path(self, path: str | Path) -> ProgramFile | None:
        want = Path(os.path.abspath(path))
        return next((f for f in self.files if f.path == want), None)


def _kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in SOURCE_SUFFIXES:
        return "source"
    if suffix in HEADER_SUFFIXES:
        return "header"
    return "other"


def _walk(root: Path, skip: set[Path], is_output: Callable[[Path], bool]) -> tuple[list[Path], list[str]]:
    found: list[Path] = []
    skipped: list[str] = []
    for here, dirs, names in os.walk(root, followlinks=False):
        base = Path(here)
        keep = []
        for d in sorted(dirs):
            sub = base / d
            if d in SKIP_DIRS or d.startswith(".") or sub.resolve() in skip:
                continue
            if is_output(sub):
                skipped.append(f"{sub}: an earlier porter output")
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(names):
            p = base / name
            if p.is_symlink() or not p.is_file():
                skipped.append(f"{p}: not a regular file")
                continue
            found.append(p)
            if len(found) > MAX_FILES:
                raise UsageError(f"more than {MAX_FILES} files under the program's root", path=str(root))
    return found, skipped


@dataclass(frozen=True)
class _Entry:
    index: int  # in the json's list (0-based)
    file: Path  # absolute, normalised (no "..")
    written: str  # the entry's "file" as written
    includes: tuple[str, ...]
    defines: tuple[str, ...]
    target: str = ""  # the CMake target it is built for ("" when its object is not CMake's)


# CMake's object of a unit: <binary dir>/CMakeFiles/<target>.dir/<path of the source>.o
_CMAKE_OBJECT = re.compile(r"(?:^|/)CMakeFiles/([^/]+)\.dir/")


def _output_of(args: Sequence[str]) -> str:
    """The object a compile command writes: its ``-o FILE`` (``-oFILE``, ``--output-file[=]FILE``,
    MSVC's ``/FoFILE``); "" when it names none."""
    it = iter(args)
    for a in it:
        if a in ("-o", "--output-file"):
            return next(it, "")
        if a.startswith("--output-file="):
            return a.split("=", 1)[1]
        # glued forms, taken only when they name CMake's object (nvcc's -odir, -optf... are options)
        if a.startswith(("/Fo", "-Fo")) and cmake_target_of(a[3:]):
            return a[3:]
        if a.startswith("-o") and cmake_target_of(a[2:]):
            return a[2:]
    return ""


def cmake_target_of(output: str) -> str:
    """The CMake target whose object `output` is (``src/CMakeFiles/vecadd.dir/vecadd.cu.o`` -> vecadd);
    "" when it is not an object CMake laid out."""
    m = _CMAKE_OBJECT.search(output.replace("\\", "/"))
    return m.group(1) if m else ""


def _from_compile_commands(path: Path) -> list[_Entry]:
    """The entries of a compile_commands.json: each unit with its -I folders and -D macros."""
    # a regular file of a sane size, UTF-8 as JSON must be (UsageError otherwise)
    text = read_text(path, "compile_commands.json", strict=True)
    try:
        entries = json.loads(text)
    except ValueError as err:
        raise UsageError(f"not a readable compile_commands.json ({err})", path=str(path)) from None
    if not isinstance(entries, list):
        raise UsageError("compile_commands.json must hold a list of entries", path=str(path))
    found: list[_Entry] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or "file" not in e:
            raise UsageError(f"entry {i + 1} has no 'file'", path=str(path))
        folder = Path(str(e.get("directory") or path.parent))
        if not folder.is_absolute():
            folder = path.parent / folder
        try:
            args = [str(a) for a in e.get("arguments") or shlex.split(str(e.get("command") or ""))]
        except ValueError as err:  # an unclosed quote in its command
            raise UsageError(f"entry {i + 1}: its command cannot be split ({err})", path=str(path)) from None
        includes: list[str] = []
        defines: list[str] = []
        it = iter(args)
        for a in it:
            a = str(a)
            if a in ("-I", "-isystem", "-D"):
                value = str(next(it, ""))
                (defines if a == "-D" else includes).append(
                    value if a == "-D" else os.path.abspath(folder / value)
                )
            elif a.startswith("-I"):
                includes.append(os.path.abspath(folder / a[2:]))
            elif a.startswith("-D"):
                defines.append(a[2:])
        unit = Path(os.path.abspath(folder / str(e["file"])))
        output = e.get("output")
        target = cmake_target_of(output if isinstance(output, str) and output else _output_of(args))
        found.append(_Entry(i, unit, str(e["file"]), tuple(includes), tuple(defines), target))
    return found


def cmake_targets(path: Path) -> dict[str, tuple[Path, ...]]:
    """The CMake targets of a compile_commands.json, each with its units (absolute), in the database's
    order; UsageError (naming the file) when it cannot be read."""
    targets: dict[str, list[Path]] = {}
    for e in _from_compile_commands(path):
        if e.target:
            targets.setdefault(e.target, []).append(e.file)
    return {name: tuple(dict.fromkeys(units)) for name, units in targets.items()}


def _one_target(
    databases: Sequence[tuple[Path, list[_Entry]]], target: str
) -> tuple[list[tuple[Path, list[_Entry]]], set[Path], list[str]]:
    """The databases' entries of CMake target `target`, the units of their other targets (left out of
    the program), and a note per database that lost some."""
    kept: list[tuple[Path, list[_Entry]]] = []
    mine: set[Path] = set()
    others: set[Path] = set()
    notes: list[str] = []
    for db, entries in databases:
        own = [e for e in entries if e.target == target]
        kept.append((db, own))
        mine.update(e.file for e in own)
        rest = {e.file for e in entries if e.target != target}
        others |= rest
        if rest - mine:
            notes.append(
                f"{db}: {len(rest - mine)} unit(s) of other targets left out (CMake target {target})"
            )
    if not mine:
        names = sorted({e.target for _db, entries in databases for e in entries if e.target})
        has = f"its CMake targets: {', '.join(names)}" if names else "no entry's object is CMake's"
        raise UsageError(
            f"--cmake-target {target}: no unit of the compilation database is built for it ({has}; "
            "an object of target T is written as CMakeFiles/T.dir/...)",
            path=str(databases[0][0]),
        )
    return kept, others - mine, notes


def _inside(path: str, folders: Sequence[str]) -> bool:
    """Whether `path` lies in one of `folders`, as written and once every link is resolved."""
    here, real = Path(os.path.abspath(path)), Path(os.path.realpath(path))
    return any(
        here.is_relative_to(os.path.abspath(f)) and real.is_relative_to(os.path.realpath(f)) for f in folders
    )


_MAKE_INCLUDE = re.compile(r"(?<![\w$])-I\s*([^\s$()]+)")


def _from_makefiles(root: Path, files: Sequence[Path]) -> list[str]:
    """-I folders written literally in the program's Makefiles (best effort: no variables expanded,
    only folders that exist), each relative to its Makefile's folder."""
    found: list[str] = []
    for mk in files:
        if mk.name not in ("Makefile", "makefile", "GNUmakefile") and mk.suffix != ".mk":
            continue
        data = read_header(mk, quiet=True)  # None: not a regular file, unreadable or too large
        if data is None:
            continue
        text = decode_text(data)
        for line in text.splitlines():
            if line.lstrip().startswith("#"):
                continue
            for m in _MAKE_INCLUDE.finditer(line):
                d = (mk.parent / m.group(1)).resolve()
                if d.is_dir() and d.is_relative_to(root.resolve()):
                    found.append(str(d))
    return list(dict.fromkeys(found))


def discover(
    paths: Sequence[str | Path],
    include_dirs: Sequence[str] = (),
    skip: Sequence[str | Path] = (),
    defines: Sequence[str] = (),
    undefines: Sequence[str] = (),
    is_output: Callable[[Path], bool] = lambda _folder: False,
    cmake_target: str | None = None,
) -> Program:
    """The program the paths make (see the module docstring); UsageError for a path that is missing
        or names nothing porter can port.  ``skip``: folders left out (the output folder).  ``defines``
        (``NAME[=VALUE]``) and ``undefines`` (``NAME``): the command line's ``-D``/``-U``, merged over a
        compilation database's (:func:`merge_defines`).  ``is_output``: whether a folder is an earlier porter
    output (left out of the walk; the workflows pass :func:`porter.workflows.resume.is_porter_output`).
    ``cmake_target``: keep only that CMake target's units of the compile_commands.json given (None: every
    unit); UsageError when no database is given or none of its units is built for the target."""
    check_defines(defines, undefines)
    target = cmake_target
    command_line = list(defines)
    if not paths:
        raise UsageError("no input given")
    given: list[Path] = []
    anchors: list[Path] = []
    units: list[Path] | None = None
    named = [os.path.abspath(d) for d in include_dirs]  # the user's: read wherever they are
    includes = list(named)
    db_defines: list[str] = []  # the compilation database's, merged with the command line's at the end
    databases: list[tuple[Path, list[_Entry]]] = []
    flags_from = "command line" if include_dirs else ""
    for given_path in paths:
        path = Path(os.path.abspath(given_path))
        if not path.exists():
            raise UsageError("no such file or folder", path=str(given_path))
        if path.name == "compile_commands.json":
            databases.append((path, _from_compile_commands(path)))
            flags_from = "compile_commands.json"
            anchors.append(path.parent)  # the project's folder: its headers are part of the program
            continue
        given.append(path)
    skipped: list[str] = []
    other_units: set[Path] = set()  # with a CMake target: the units of the database's other targets
    if target is not None:
        if not databases:
            raise UsageError(
                f"--cmake-target {target} picks a target's units from a compile_commands.json; none is "
                "among the inputs",
                path=str(paths[0]),
            )
        databases, other_units, notes = _one_target(databases, target)
        skipped += notes
        flags_from = f"compile_commands.json (CMake target {target})"
    anchors += [g if g.is_dir() else g.parent for g in given]
    root = Path(os.path.commonpath([str(a) for a in anchors]))
    for db, entries in databases:  # a compile_commands.json is data: it names nothing outside the root
        for e in entries:
            if not _inside(str(e.file), [str(root)]):
                raise UsageError(
                    f"entry {e.index + 1} (index {e.index}): its file {e.written!r} lies outside the "
                    f"program's folder {root}; porter reads nothing outside it that you did not name "
                    "(give the project's folder too: porter port compile_commands.json PROJECT_DIR)",
                    path=str(db),
                )
        units = [*(units or []), *(e.file for e in entries)]
        given.extend(e.file for e in entries)
        db_defines += [d for e in entries for d in e.defines]
        for e in entries:
            for d in e.includes:
                if _inside(d, [str(root), *named]):
                    includes.append(d)
                else:
                    skipped.append(
                        f"{db}: entry {e.index + 1}: -I {d}: outside the program's folder, not read "
                        "(name it with -I to use it)"
                    )
    skip_set = {Path(os.path.abspath(s)).resolve() for s in skip}
    files: dict[Path, ProgramFile] = {}
    for g in given:
        if g.is_dir():
            found, why = _walk(g, skip_set, is_output)
            skipped += why
            for f in found:
                if f in other_units:  # another CMake target's unit (back as a header if a unit includes it)
                    continue
                files.setdefault(f, ProgramFile(f, f.relative_to(root), _kind(f)))
        elif g.is_file():
            files.setdefault(g, ProgramFile(g, g.relative_to(root), _kind(g)))
    if not includes:  # no -I given and no compile_commands.json: the Makefiles', else the header folders
        made = _from_makefiles(root, list(files))
        if made:
            includes, flags_from = made, "Makefile (-I written in it)"
        else:
            folders = sorted({str(f.path.parent) for f in files.values() if f.kind == "header"})
            if folders:
                includes, flags_from = (
                    folders,
                    "the program's header folders (no -I given, none in a Makefile)",
                )
    if units is not None:  # compile_commands.json: its entries are the units; other sources are included
        wanted = set(units)
        for at, pf in list(files.items()):
            if pf.kind != "other":
                files[at] = replace(pf, kind="source" if at in wanted else "header")
    # the local headers the units reach, wherever they live under the root
    from porter.includes import reachable

    # (``<helper.h>`` too when an -I folder holds it: a project's own headers, found where its build finds them)
    readable = [str(root), *named]
    outside: list[str] = []

    def allow(header: str) -> bool:  # a header outside the root and the named folders is not read
        if _inside(header, readable):
            return True
        outside.append(os.path.abspath(header))
        return False

    reached = [
        Path(os.path.abspath(name))
        for name, _data in reachable(
            [(str(pf.path), None) for pf in files.values() if pf.kind == "source"],
            includes,
            quoted_only=False,
            allow=allow,
        )
    ]
    skipped += [
        f"{h}: included by the program but outside its folder; not read (name its folder with -I to use it)"
        for h in dict.fromkeys(outside)
    ]
    extra = [at for at in reached if at not in files and not str(at).startswith(_SYSTEM_PREFIXES)]
    # the headers of a folder the user named, beside the program's (cuda-samples' Common/): the root
    # grows to them -- never to the file system's root
    grown = Path(os.path.commonpath([str(root), *(str(at.parent) for at in extra)])) if extra else root
    if extra and grown != Path(grown.anchor):
        root = grown
        files = {at: replace(pf, rel=at.relative_to(root)) for at, pf in files.items()}
        for at in extra:
            files[at] = ProgramFile(at, at.relative_to(root), "header")
    elif extra:
        skipped += [
            f"{at}: read from -I, not part of the port (too far from the program's folder)" for at in extra
        ]
    # a source another unit includes (Rodinia's `#include "kernel.cu"`) is part of that unit, not a unit
    included = {
        Path(os.path.abspath(name))
        for pf in files.values()
        if pf.kind == "source"
        for name, _ in list(reachable([(str(pf.path), None)], includes, quoted_only=True, allow=allow))[1:]
    }
    for at in included:
        if at in files and files[at].kind == "source":
            files[at] = replace(files[at], kind="header")
    if not any(f.kind == "source" for f in files.values()):
        raise UsageError(
            "no translation unit (.cu, .cpp, .cc, .cxx, .c) among the inputs", path=str(paths[0])
        )
    ordered = tuple(sorted(files.values(), key=lambda f: str(f.rel)))
    merged, origins = merge_defines(
        list(dict.fromkeys(db_defines)), command_line, undefines, "compile_commands.json"
    )
    per_unit = {
        str(e.file.relative_to(root)): merge_defines(e.defines, command_line, undefines, "")[0]
        for _db, entries in databases
        for e in entries
        if e.file.is_relative_to(root)
    }
    return Program(
        root=root,
        files=ordered,
        include_dirs=tuple(dict.fromkeys(includes)),
        defines=merged,
        define_origins=origins,
        unit_defines=tuple(per_unit.items()),
        flags_from=flags_from,
        skipped=tuple(dict.fromkeys(skipped)),
        named_dirs=tuple(dict.fromkeys(named)),
    )
