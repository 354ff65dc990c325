"""The plan of a whole program: made once from its inputs, asked by every stage of ``porter port DIR``.

A :class:`ProgramPlan` holds, for the program :func:`porter.program.discover` found:

* each file's text, read once through :func:`porter.files.read_input` (None: binary or unreadable,
  copied as it is), and its scan (with the macro table of the headers it reaches), made once;
* each unit's build flags: the include folders and its own ``-D`` (:meth:`Program.defines_for`: the
  command line's over a compilation database's);
* each target's translation of each file, made once and kept in memory (recalled from and remembered in
  the translation cache; translated in worker processes when there are many);
* the kernels the translations hold and where (:meth:`entries`), and for every captured kernel instance
  the variant each stage builds: :meth:`original` and :meth:`variant`, with the compile options the
  program's own build gives its unit.

The writers (the mirrored HIP tree, the OpenCL units and their launch mappings), the unit builds, the
program builds and the kernel replays all ask the plan; none reads back an output to learn what an
earlier stage knew.  Nothing here writes a file or runs a kernel.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from porter.backends import SOURCE_DIALECT, CompileOptions, get_dialect
from porter.errors import PorterError, UsageError
from porter.files import decode_text, encode_text, read_input
from porter.includes import SOURCE_SUFFIXES
from porter.model import FileScan, Kernel, TranslatedKernel, Translation, Variant
from porter.plan import PlannedVariant, Refusal
from porter.program import Program, ProgramFile
from porter.scan import has_cuda
from porter.scan.instances import spelled
from porter.source import Scanned
from porter.workflows.translations import Facts, recall, remember, translation_key

Progress = Callable[[str], None]
PARALLEL_MIN_FILES = 6  # files to translate before worker processes pay for their start
# instance_entry's answer for a unit whose kernels are templates no launch gives arguments to: the unit is
# compiled as it is, with no kernel to look up (an empty entry)
TEMPLATE_ONLY = ""


class ProgramPlan:
    """Everything known about a program before anything runs; see the module docstring."""

    def __init__(
        self,
        program: Program,
        options: Mapping[str, Mapping[str, str]] | None = None,
        jobs: int = 1,
        dialect: str = SOURCE_DIALECT,
    ) -> None:
        self.program = program
        self.dialect = dialect  # what its files are scanned as (a port of the user's for verify: "hip")
        self.options = {k: dict(v) for k, v in (options or {}).items()}  # target -> translator options
        self.jobs = max(1, jobs)
        self.lock = threading.RLock()
        self._texts: dict[Path, str | None] = {}
        self._cuda: dict[Path, bool] = {}
        self._scans: dict[Path, Scanned | None] = {}
        self._facts: dict[Path, Facts] = {}
        self._keys: dict[tuple[str, Path], str] = {}
        self._made: dict[tuple[str, Path], Translation | str] = {}
        self._recalled: set[tuple[str, Path]] = set()
        self._homes: dict[str, str] = {}
        self._entries: dict[str, dict[str, tuple[str, str]]] = {}
        self._reached: dict[Path, tuple[ProgramFile, ...]] = {}

    # ------------------------------------------------------------------ the files

    def text(self, f: ProgramFile) -> str | None:
        """The file's text (None: binary or unreadable, copied as it is), read once."""
        with self.lock:
            if f.path not in self._texts:
                try:
                    data = read_input(f.path)
                except UsageError:
                    self._texts[f.path] = None
                else:
                    self._texts[f.path] = None if b"\0" in data else decode_text(data)
            return self._texts[f.path]

    def uses_cuda(self, f: ProgramFile) -> bool:
        """Whether the file has anything to translate (a kernel, a launch, a CUDA call or header); asked
        by every stage, looked at once."""
        with self.lock:
            if f.path not in self._cuda:
                text = self.text(f) if f.kind != "other" else None
                self._cuda[f.path] = text is not None and has_cuda(encode_text(text))
            return self._cuda[f.path]

    def defines_for(self, f: ProgramFile | str | Path) -> tuple[str, ...]:
        """The ``-D`` the program's build gives the unit (a path relative to the root, or the file)."""
        return self.program.defines_for(f.rel if isinstance(f, ProgramFile) else f)

    def scanned(self, f: ProgramFile) -> Scanned | None:
        """The file's scan and the macro table of what it reaches (made once; None: not a text file, or
        the scan failed)."""
        from porter.scan import scan_source
        from porter.scan.macros import collect

        with self.lock:
            if f.path not in self._scans:
                text = self.text(f)
                found: Scanned | None = None
                if text is not None:
                    data, path = encode_text(text), str(f.path)
                    try:
                        macros = collect([(path, data)], self.program.include_dirs)
                        found = Scanned(
                            macros, scan_source(data, path, self.dialect, macros), self.defines_for(f)
                        )
                    except (PorterError, RecursionError, ValueError):
                        found = None
                self._scans[f.path] = found
            return self._scans[f.path]

    def scanned_unit(self, target: str, f: ProgramFile) -> Scanned | None:
        """:meth:`scanned`; for a device-only `target` (which translates a unit with the files it inlines)
        with the scans of the files `f` reaches that launch kernels (``Scanned.included``): the translation
        sees their launches without scanning them again."""
        import dataclasses

        found = self.scanned(f)
        if found is None or get_dialect(target).single_source:
            return found
        scans = ((str(g.path), self.scan(g)) for g in self.reached(f) if self.text(g) is not None)
        return dataclasses.replace(
            found, included=tuple((p, s) for p, s in scans if s is not None and s.launches)
        )

    def scan(self, f: ProgramFile) -> FileScan | None:
        found = self.scanned(f)
        return found.scan if found is not None else None

    def facts(self, f: ProgramFile) -> Facts:
        """The file's kernels and the instances its launches name (remembered with its translation)."""
        from porter.scan.instances import kernel_instances

        with self.lock:
            if f.path not in self._facts:
                scan, text = self.scan(f), self.text(f)
                self._facts[f.path] = (
                    Facts()
                    if scan is None or text is None
                    else Facts(
                        tuple((k.name, k.line) for k in scan.kernels),
                        tuple((i.name, i.base, i.template_args) for i in kernel_instances(scan, text)),
                    )
                )
            return self._facts[f.path]

    def file(self, rel: str | Path) -> ProgramFile | None:
        return self.program.by_path(self.program.root / rel)

    def reached(self, f: ProgramFile) -> tuple[ProgramFile, ...]:
        """The program's files `f` reaches through ``#include "..."`` (itself excluded), found once."""
        from porter.includes import reachable

        with self.lock:
            if f.path not in self._reached:
                found = reachable(
                    [(str(f.path), None)],
                    self.program.include_dirs,
                    quoted_only=True,
                    allow=self.program.may_read,
                )
                files = (self.program.by_path(Path(os.path.abspath(p))) for p, _ in found)
                self._reached[f.path] = tuple(g for g in files if g is not None and g.path != f.path)
            return self._reached[f.path]

    def tree_digest(self, target: str | None, f: ProgramFile) -> str:
        """A digest of what `f` includes as `target`'s tree holds it (None: the original tree): each
        reached file's translation where the port translates it, else its own text -- from the plan,
        so no output is read back to key a build or a replay."""
        h = hashlib.sha256()
        for g in self.reached(f):
            text = self.text(g) or ""
            if target is not None and get_dialect(target).single_source and self.uses_cuda(g):
                tr = self.translation(target, g)
                text = tr.text if isinstance(tr, Translation) else text  # a failed one was copied
            data = encode_text(text)
            h.update(str(g.rel).encode() + b"\0" + len(data).to_bytes(8, "big") + data)
        return h.hexdigest()

    # ------------------------------------------------------------------ translations

    def wanted(self, target: str) -> tuple[ProgramFile, ...]:
        """The files a `target` port translates: every file for a single-source dialect (a mirrored
        tree), each unit for a device-only one."""
        dialect = get_dialect(target)
        return self.program.files if dialect.single_source else self.program.units

    def _key(self, target: str, f: ProgramFile, text: str) -> str:
        if (target, f.path) not in self._keys:
            options = dict(self.options.get(target) or {})
            if self.defines_for(f):  # they decide conditionals a translation must decide
                options["-D"] = "\n".join(self.defines_for(f))
            self._keys[(target, f.path)] = translation_key(
                target, encode_text(text), str(f.path), self.program.include_dirs, options
            )
        return self._keys[(target, f.path)]

    def _recall(self, target: str, f: ProgramFile, text: str) -> bool:
        """Whether an earlier port's translation of this very file (same bytes, headers, options,
        porter) is at hand; asked of the cache once per file."""
        at = (target, f.path)
        if at not in self._made and at not in self._recalled:
            self._recalled.add(at)
            found = recall(self._key(target, f, text))
            if found is not None:
                self._made[at] = found[0]
                self._facts.setdefault(f.path, found[1])
        return at in self._made

    def translation(self, target: str, f: ProgramFile) -> Translation | str:
        """The file translated into `target` (made once, kept); a failure is its message."""
        text = self.text(f)
        if text is None:
            return "not a text file"
        with self.lock:
            if self._recall(target, f, text):
                return self._made[(target, f.path)]
        made = _translate_job(
            target,
            text,
            str(f.path),
            self.program.include_dirs,
            self.options.get(target),
            self.scanned_unit(target, f),
        )
        with self.lock:
            if (target, f.path) not in self._made:
                self._made[(target, f.path)] = made
                if isinstance(made, Translation):  # a failure is not remembered: it may be this machine's
                    remember(self._key(target, f, text), made, self.facts(f))
            return self._made[(target, f.path)]

    def pretranslate(self, target: str, say: Progress) -> None:
        """Translate the files of a `target` port in ``jobs`` worker processes (the translators are pure
        Python: threads would take turns).  Fewer than PARALLEL_MIN_FILES such files, or one job: they
        are translated where they are first asked for."""
        todo: dict[ProgramFile, str] = {}
        for f in self.wanted(target):
            if f.kind == "other" or not self.uses_cuda(f):
                continue
            text = self.text(f)
            if text is not None and not self._recall(target, f, text):
                todo[f] = text
        if len(todo) < PARALLEL_MIN_FILES or self.jobs < 2:
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # fork shares the loaded grammars; only safe while no other thread runs here
        method = (
            "fork"
            if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            else "spawn"
        )
        say(f"translating {len(todo)} file(s) to {target} in {min(self.jobs, len(todo))} processes")
        options = dict(self.options.get(target) or {})
        with ProcessPoolExecutor(
            max_workers=min(self.jobs, len(todo)), mp_context=multiprocessing.get_context(method)
        ) as pool:
            futures = {
                f: pool.submit(
                    _translate_job,
                    target,
                    text,
                    str(f.path),
                    self.program.include_dirs,
                    options,
                    self.scanned_unit(target, f),
                )
                for f, text in todo.items()
            }
            for f, fut in futures.items():
                try:
                    made = fut.result()
                except Exception as err:  # noqa: BLE001 - a worker that died: translated here instead
                    say(
                        f"a translation worker failed ({type(err).__name__}); {f.path.name} is translated here"
                    )
                    continue
                with self.lock:
                    self._made[(target, f.path)] = made
                    if isinstance(made, Translation):
                        remember(self._key(target, f, todo[f]), made, self.facts(f))

    def entries(self, target: str) -> dict[str, tuple[str, str]]:
        """Each kernel `target`'s port translated, by name: its entry and the file whose translation
        holds it (the first in the program's order: a header's kernel where a mirrored port translated
        the header)."""
        with self.lock:
            if target not in self._entries:
                self._entries[target] = self._entries_of(target)
            return self._entries[target]

    def _entries_of(self, target: str) -> dict[str, tuple[str, str]]:
        found: dict[str, tuple[str, str]] = {}
        single = get_dialect(target).single_source
        for f in self.wanted(target):
            # a device-only port translates a unit with what it includes: a unit with no CUDA of its own
            # holds the kernels of the .cu files it includes (myocyte: main.cu -> work_2.cu -> solver_2.cu)
            if f.kind == "other" or not (
                self.uses_cuda(f) or (not single and any(self.uses_cuda(g) for g in self.reached(f)))
            ):
                continue
            tr = self.translation(target, f)
            if isinstance(tr, str):
                continue
            for tk in tr.kernels:
                if not tk.untranslatable:
                    found.setdefault(tk.name, (tk.entry or tk.name, str(f.rel)))
        return found

    def instance_entry(self, target: str, f: ProgramFile) -> str | None:
        """The entry of the first kernel instance the unit itself defines and launches (a template
        kernel is built as the instantiation its launch names: ``MatrixMulCUDA<16>``)."""
        if self.text(f) is None:
            return None
        translated = self.entries(target)
        dialect = get_dialect(target)
        scan = self.scan(f)
        for name, base, args in self.facts(f).instances:
            if base in translated or name in translated:
                entry = dialect.instance_entry(base, args)
                k = next((k for k in scan.kernels if k.name == base), None) if scan is not None else None
                if k is not None and k.template_params and not args and dialect.single_source:
                    return TEMPLATE_ONLY  # no launch names its arguments: the unit compiles, nothing picked
                # a kernel in a namespace is reached from file scope by its qualified name (where the
                # dialect keeps namespaces: OpenCL C flattens them)
                return (
                    f"{k.namespace}::{entry}"
                    if k is not None and k.namespace and dialect.single_source
                    else entry
                )
        return None

    # ------------------------------------------------------------------ kernels and their variants

    def kernel_scan(self, name: str, rel: str) -> Kernel | None:
        """The scan of the kernel `name` in the file `rel` (template parameters, parameter types,
        atomics), or None."""
        f = self.file(rel)
        scan = self.scan(f) if f is not None else None
        return next((k for k in scan.kernels if k.name == name), None) if scan is not None else None

    def home(self, rel: str) -> str:
        """The file whose device code is built to run a kernel defined in `rel`: that file, unless it
        is a source file another unit includes (a unity build: myocyte's kernel.cu needs main.cu's
        types), then the first unit that reaches it."""
        with self.lock:
            if rel not in self._homes:
                self._homes[rel] = self._home(rel)
            return self._homes[rel]

    def _home(self, rel: str) -> str:
        f = self.file(rel)
        if f is None or f.kind == "source" or f.path.suffix not in SOURCE_SUFFIXES:
            return rel
        return next((str(unit.rel) for unit in self.program.units if f in self.reached(unit)), rel)

    def original(self, name: str, rel: str) -> PlannedVariant | Refusal:
        """The original kernel instance `name` (defined in `rel`) as its program builds it: the device
        code of its home unit, with the unit's folders and ``-D``."""
        from porter.scan.extract import device_code

        home = self.home(rel)
        f = self.file(home)
        text = self.text(f) if f is not None else None
        if f is None or text is None:
            return Refusal("kernel", f"cannot read {rel}")
        dirs = self.program.mirrored_dirs(self.program.root, f.path)  # the tree as it is: its own folders
        variant = Variant(name, "cuda", device_code(text), name, "original", str(f.path))
        options = CompileOptions(include_dirs=dirs, defines=self.defines_for(home))
        return PlannedVariant(variant, options, headers=self.tree_digest(None, f))

    def variant(
        self, target: str, name: str, kernel: str, rel: str, out: Path, said: str = ""
    ) -> PlannedVariant | Refusal:
        """`target`'s port of the kernel instance `name` (of the kernel `kernel`, defined in `rel`), from
        the translation held here, built with the flags of the unit the program builds it in; why there
        is none otherwise (``said``: what the translator said of it).  Its ``requires`` say what it needs
        of a device: the replays run it on the devices that have it."""
        known = self.entries(target)
        wanted = spelled(name)  # a capture's <int, 256u> is the translation's <int, 256>
        entry_file = (
            known.get(name)
            or next((v for k, v in known.items() if spelled(k) == wanted), None)
            or known.get(kernel)
        )
        if entry_file is None:
            if said.startswith("untranslatable"):
                return Refusal("construct", f"the {target} port: {said}")
            return Refusal("kernel", f"the {target} port has no translation of {kernel}")
        entry, where = entry_file
        dialect = get_dialect(target)
        if dialect.single_source:
            from porter.scan.extract import device_code

            home = self.home(rel)
            f = self.file(home)
            tr = self.translation(target, f) if f is not None else "not in the program"
            if f is None or isinstance(tr, str):
                return Refusal("translator", f"the {target} port has no {home} ({tr})")
            dest = out / target / home
            if "<" in name and "<" not in entry:
                entry = name
            options = CompileOptions(
                include_dirs=self.program.mirrored_dirs(out / target, dest), defines=self.defines_for(home)
            )
            return PlannedVariant(
                Variant(name, target, device_code(tr.text), entry, "translate", str(dest)),
                options,
                headers=self.tree_digest(target, f),
            )
        # a kernel of that name in several units (a folder of several programs, Rodinia's cfd): the one
        # the kernel's own unit translated
        home_file = self.file(self.home(rel))
        if home_file is not None and str(home_file.rel) != where and home_file in self.program.units:
            mine = self.translation(target, home_file)
            if not isinstance(mine, str) and any(
                (k.name in (name, kernel) or spelled(k.name) == wanted) and not k.untranslatable
                for k in mine.kernels
            ):
                where = str(home_file.rel)
        f = self.file(where)
        tr = self.translation(target, f) if f is not None else "not in the program"
        tk: TranslatedKernel | None = (
            None
            if isinstance(tr, str)
            else next((k for k in tr.kernels if k.name in (name, kernel) or spelled(k.name) == wanted), None)
        )
        if isinstance(tr, str) or tk is None:
            return Refusal("kernel", f"the {target} output of {where} does not hold {kernel}")
        cl = out / target / Path(where).with_name(Path(where).stem + dialect.suffix)
        variant = Variant(
            name, target, tr.text, tk.entry or kernel, "translate", str(cl),
            arg_map=tuple(tk.arg_map or ()),  # type: ignore[arg-type]  # None slots: added arguments
            extra_args=tuple(tk.extra_args),
        )  # fmt: skip
        # the program's -D macros: a size the kernel takes from one is the same in the OpenCL build
        options = CompileOptions(defines=self.defines_for(self.home(rel)))
        return PlannedVariant(variant, options, requires=tuple(tk.requires))


def _translate_job(
    target: str,
    text: str,
    path: str,
    include_dirs: Sequence[str],
    options: Mapping[str, str] | None,
    scanned: Scanned | None = None,
) -> Translation | str:
    """One file's translation (in a worker process or here); a failure is its message, never raised."""
    try:
        return get_dialect(target).translate(text, path, include_dirs, options, scanned=scanned)
    except UsageError as err:
        return str(err)
    except (PorterError, ImportError, RecursionError, ValueError, KeyError, IndexError) as err:
        return f"{target} translation failed: {type(err).__name__}: {err}"


__all__ = ["ProgramPlan"]
