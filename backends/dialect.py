"""The Dialect contract: a language porter reads or writes (CUDA, HIP, OpenCL C).

A target folder (``backends/<name>/``) holds one :class:`Dialect` subclass in ``dialect.py``: what
its files are called, how the source dialect is translated into it, and what the model is told and
held to when it writes code in it.  The generic code (``porter.workflows``, ``porter.llm``,
``porter.harness``) asks these questions instead of comparing target names.

A dialect is found through the registry (:func:`porter.backends.get_dialect`); a new one is added
with :func:`porter.backends.register_dialect`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from porter.model import Kernel, TranslatedKernel, Translation
    from porter.records import Rejection, Screened
    from porter.source import Scanned, SourceUnit


class Dialect:
    """Defaults: a single-source C++ dialect (host and device code in one file) without a translator."""

    name: ClassVar[str]
    package: ClassVar[str] = ""  # the package holding its dialect.toml ("" for none)
    suffixes: ClassVar[tuple[str, ...]] = ()  # file name endings, the first is what a translation gets
    # Host and device code in one C++ file (CUDA, HIP): a variant keeps only device code and may include
    # the original's headers.  False: a device-only language compiled alone (OpenCL C).
    single_source: ClassVar[bool] = True
    # A device-only dialect whose ports are programs too: the program's files are written beside the
    # device code with their host side translated (``host_text``), built by the program toolchains of
    # this language.  A single-source dialect's ports are always programs (their own language).
    host_program: ClassVar[bool] = False
    # Kernels are C++ templates launched as ``name<args>``; False: each instantiation is its own kernel.
    templates: ClassVar[bool] = True
    # A rule-based translator from the source dialect exists (``translate``).
    translates: ClassVar[bool] = False
    # The translator also translates the local headers the file includes (written beside it).
    translates_headers: ClassVar[bool] = False
    # How a one-line comment opens and closes in this dialect's files.
    comment_marks: ClassVar[tuple[str, str]] = ("//", "")
    # Options its translator takes (name -> accepted values, the first the default): `--hip-launch`.
    translate_options: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType({})

    @property
    def suffix(self) -> str:
        return self.suffixes[0]

    @property
    def program_language(self) -> str | None:
        """The language its program ports are built as (by the program toolchains of that language), or
        None when its ports are device code only."""
        return self.name if self.single_source or self.host_program else None

    def host_text(self, text: str, device_files: Sequence[tuple[str, Sequence[TranslatedKernel]]]) -> str:
        """A program file's host side in a ``host_program`` port: `device_files` are the port's device
        files (relative to the port) with the kernels each holds, in the program's unit order."""
        return text

    @property
    def facts(self) -> DialectFacts | None:
        """Its ``dialect.toml`` (None for a dialect without one)."""
        return load_facts(self.package) if self.package else None

    # ------------------------------------------------------------------ translation

    def translate(
        self,
        source: str,
        path: str,
        include_dirs: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        *,
        scanned: Scanned | None = None,
    ) -> Translation:
        """The rule-based translation of CUDA `source` (read from `path`) into this dialect, one file
        alone (a header or a host-only file too); ``options`` as for :meth:`translate_files`;
        ``scanned``: the file's scan and macro table when the caller holds them (not made again)."""
        raise NotImplementedError(f"no translator into {self.name}")

    def translate_files(
        self, unit: SourceUnit, options: Mapping[str, str] | None = None
    ) -> tuple[Translation, dict[Path, Translation]]:
        """The unit's translation and, where ``translates_headers``, the translations of the local
        headers it reaches (by input path), from the bytes the unit holds (never a second read).
        ``options``: values of :attr:`translate_options` (checked by :meth:`check_options`)."""
        return self.translate(unit.text, unit.path, unit.include_dirs, options, scanned=unit.scanned), {}

    def check_options(self, options: Mapping[str, str]) -> dict[str, str]:
        """`options` with every one of :attr:`translate_options` filled in (its default where not
        given); ValueError naming an unknown option or value."""
        out: dict[str, str] = {}
        for key, value in options.items():
            allowed = self.translate_options.get(key)
            if allowed is None:
                known = ", ".join(sorted(self.translate_options)) or "none"
                raise ValueError(f"the {self.name} translator has no option {key!r} (options: {known})")
            if value not in allowed:
                raise ValueError(f"{self.name} {key} must be one of {', '.join(allowed)}, not {value!r}")
            out[key] = value
        return {k: out.get(k, v[0]) for k, v in self.translate_options.items()}

    def comment(self, text: str) -> str:
        """`text` as one comment line of this dialect, newline included."""
        opens, closes = self.comment_marks
        return f"{opens} {text}{' ' + closes if closes else ''}\n"

    def instance_entry(self, kernel: str, template_args: Sequence[str]) -> str:
        """The symbol one instantiation of a template kernel is launched by."""
        return f"{kernel}<{', '.join(template_args)}>" if template_args else kernel

    # ------------------------------------------------------------------ model output in this dialect

    def model_signature(self, kernel: Kernel, tk: TranslatedKernel, translated: str) -> tuple[str, ...]:
        """The parameters a model's kernel must take, in this dialect's spelling (empty: the original's)."""
        return ()

    def model_constraints(
        self, entry: str, signature: Sequence[str], tk: TranslatedKernel, lacking: bool
    ) -> str:
        """The constraints sentence of a translate prompt (`lacking`: for devices lacking its needs)."""
        return (
            f"keep the kernel name `{entry}` and the original's parameters (names, types, order); "
            f"{self.prompt_name()} device code only."
        )

    def prompt_name(self) -> str:
        """How prompts name the dialect ("HIP C++"): ``[prompt] name`` of its dialect.toml."""
        facts = self.facts
        return str(facts.prompt.get("name", self.name)) if facts is not None else self.name

    def prompt_rules(self) -> str:
        """What a model writing code in this dialect is told of it: ``prompt.md`` of its folder, a
        template whose ``$headers`` stands for the headers a reply may include ("" when it has none)."""
        if not self.package:
            return ""
        found = resources.files(self.package).joinpath("prompt.md")
        return found.read_text(encoding="utf-8") if found.is_file() else ""

    def fence_labels(self) -> tuple[str, ...]:
        """The labels a model's code block written in this dialect may carry: ``[prompt] fence_labels``
        of its dialect.toml, else the one ``fence_label`` it is asked for (none without either)."""
        row = self.facts.prompt if self.facts is not None else {}
        labels = row.get("fence_labels") or ([row["fence_label"]] if "fence_label" in row else [])
        return tuple(str(label).lower() for label in labels)

    def runtime_prefixes(self) -> tuple[str, ...]:
        """How the calls of its runtime's host API begin (``cuda`` of ``cudaMalloc``): a model's code
        block calling one from host code is rejected.  ``[prompt] runtime_prefixes`` of its dialect.toml."""
        row = self.facts.prompt if self.facts is not None else {}
        return tuple(str(prefix) for prefix in row.get("runtime_prefixes", ()))

    def screen(
        self, code: str, original: Kernel, entry: str, signature: Sequence[str]
    ) -> Screened | Rejection | None:
        """This dialect's own screening of a model's code block after the generic checks; None: the
        generic C++ screening (device code taken, kernel signature compared) applies."""
        return None


# --------------------------------------------------------------------------- the dialect.toml schema


class DialectSchemaError(ValueError):
    """A ``dialect.toml`` with an unknown or missing key, or a value of the wrong type."""


@dataclass(frozen=True)
class DialectFacts:
    """One ``backends/<name>/dialect.toml``: every key any of them may hold, typed.  Top-level lists
    become tuples and tables read-only mappings (their insides are the file's values, unchanged)."""

    path: str  # the file, for messages
    name: str
    language: str
    # spellings of a C++ dialect (CUDA, HIP)
    file_extension: str | None = None
    header: str | None = None
    default_std: str | None = None
    kernel_qualifier: str | None = None
    device_qualifier: str | None = None
    host_device_qualifier: str | None = None
    forceinline: str | None = None
    shared_qualifier: str | None = None
    constant_qualifier: str | None = None
    restrict: str | None = None
    launch_bounds: str | None = None
    extern_c: str | None = None
    barrier: str | None = None
    warp_barrier: str | None = None
    memory_fence: str | None = None
    block_fence: str | None = None
    dynamic_shared: str | None = None
    dynamic_shared_macro: str | None = None
    # warps: a size, or (the CPU emulator) a table of arch prefix -> size
    warp_size: int | Mapping[str, int] | None = None
    default_warp_size: int | None = None
    warp_size_hip_on_cuda: int | None = None
    lane_mask_bits: int | None = None
    # archs: model-written code must build for one of these as device code (tried in order); every
    # `porter port` variant is also compiled for these where a compiler reaches them
    device_check_archs: tuple[str, ...] = ()
    compile_archs: tuple[str, ...] = ()
    build_options: tuple[str, ...] = ()  # of every kernel build but a debug one (-cl-mad-enable)
    # the calls that make a block's or a warp's threads wait for each other, by the name called: how a
    # checker's data race in a port is traced back to the original (porter.harness.races).  A dialect that
    # spells them as CUDA does (CUDA, HIP) leaves it out: the scanner's CUDA API facts name them
    barrier_calls: tuple[str, ...] = ()
    # prompts: name ("HIP C++"), fence_label (asked for on the reply's code block), fence_labels (every
    # label a reply's block may carry), headers (a reply may include), runtime_prefixes (of its host API)
    prompt: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # `porter doctor`: compile / run -> what to install
    install_hints: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # tables of one dialect or backend
    index: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    intrinsics: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    limits: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    qualifiers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    sync: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    atomics: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    launch: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    install: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    requirements: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    compiler: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    facts: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    includes: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    refuse: tuple[Mapping[str, str], ...] = ()
    untrusted: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


# The kinds of value each key takes: "str", "int", "strs" (a list of strings), "table" (a TOML
# table), "tables" (an array of tables), "int|table".
_KINDS: dict[str, str] = {
    "warp_size": "int|table",
    "device_check_archs": "strs",
    "compile_archs": "strs",
    "build_options": "strs",
    "barrier_calls": "strs",
    "refuse": "tables",
    **{
        f.name: "int"
        for f in fields(DialectFacts)
        if f.name in ("default_warp_size", "warp_size_hip_on_cuda", "lane_mask_bits")
    },
}
_REQUIRED = ("name", "language")


def _kind(name: str) -> str:
    if name in _KINDS:
        return _KINDS[name]
    default = next(f for f in fields(DialectFacts) if f.name == name).default
    return "str" if default is None or name in _REQUIRED else "table"


def _fits(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "strs":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "table":
        return isinstance(value, dict)
    if kind == "tables":
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    return _fits(value, "int") or _fits(value, "table")  # "int|table"


def parse_facts(data: Mapping[str, Any], path: str) -> DialectFacts:
    """`data` (a parsed dialect.toml) as :class:`DialectFacts`; DialectSchemaError names `path` and
    the key for an unknown key, a missing one or a value of the wrong kind."""
    known = [f.name for f in fields(DialectFacts) if f.name != "path"]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise DialectSchemaError(
            f"{path}: unknown key(s) {', '.join(map(repr, unknown))} (add them to DialectFacts in "
            "backends/dialect.py, or fix the spelling)"
        )
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise DialectSchemaError(f"{path}: missing key(s) {', '.join(map(repr, missing))}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        kind = _kind(key)
        if not _fits(value, kind):
            want = {
                "strs": "a list of strings",
                "tables": "an array of tables",
                "int|table": "an integer or a table",
            }
            raise DialectSchemaError(
                f"{path}: {key!r} must be {want.get(kind, f'a {kind}')}, not {type(value).__name__}"
            )
        if isinstance(value, dict):
            value = MappingProxyType(value)
        elif kind == "strs":
            value = tuple(value)
        elif kind == "tables":
            value = tuple(MappingProxyType(v) for v in value)
        values[key] = value
    return DialectFacts(path=path, **values)


@cache
def load_facts(package: str) -> DialectFacts:
    """The ``dialect.toml`` of `package` (``"porter.backends.cuda"``), validated."""
    text = resources.files(package).joinpath("dialect.toml").read_text(encoding="utf-8")
    path = f"{package.replace('porter.backends', 'backends').replace('.', '/')}/dialect.toml"
    return parse_facts(tomllib.loads(text), path)
