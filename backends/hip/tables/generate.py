"""Generate ``backends/hip/cuda2hip_api.toml``: porter's CUDA -> HIP API tables, from documented facts.

Run (from the repository root, after changing an input; the table is checked in, never made at run time)::

    python -m porter.backends.hip.tables.generate            # HIP headers under /usr/include/hip
    python -m porter.backends.hip.tables.generate --headers DIR --out FILE

Inputs, each recorded in the output's ``[inputs]`` with its version:

1. **HIP's own headers for the NVIDIA platform** (``<hip>/nvidia_detail/*.h``; Debian's HIP 5.2 installs them).
   They spell each HIP name's CUDA counterpart: ``#define hipX cudaX``, ``typedef [enum|struct] cudaX hipX;``,
   an inline ``hipX(...)`` whose body calls exactly one CUDA runtime/driver/NVRTC/cuComplex function, and the
   ``case cudaX: return hipY;`` arms of the enum conversions (``hipCUDAErrorTohipError`` ...; the reverse
   ``case hipX: return cudaY;`` arms only where one HIP label maps to one CUDA name).  ``__HIP_DEPRECATED``
   before a function marks the HIP name deprecated; an enclosing ``#if CUDA_VERSION >= CUDA_11030`` gives the
   CUDA version the name needs.
2. **The HIPIFY project's CUDA -> HIP API tables** (ROCm/HIPIFY ``docs/tables/*.md``), as facts extracted into
   ``backends/hip/tables/hipify_*.txt``: one line per CUDA name,
   ``cuda|cuda_added|cuda_deprecated|cuda_removed|hip|hip_added|hip_deprecated|hip_removed|hip_experimental``
   (empty fields trimmed at the end), under ``## <section>`` lines ("data" sections hold types, enums and
   defines).  Each file's first lines say where and at which commit its facts were read.
3. **HIP's AMD-platform headers** (the rest of ``<hip>``, HIP 5.2): whether a HIP name exists in the HIP porter
   targets, and what it is there (function, type, enum, union, macro), which picks each entry's family.
4. **porter's hand table** ``backends/hip/cuda2hip.toml``: only read, to report where it and the generated table
   disagree (the translator lets the hand table win; nothing it maps is lost).

Output: one table per family (``runtime``, ``driver``, ``rtc``, ``complex``, ``types``, ``enums``, ``unions``,
``defines``, ``math``), each ``cudaName = { hip = "...", status = "...", ... }`` with ``status`` one of
``supported`` / ``deprecated`` / ``unsupported``, ``cuda`` (the CUDA version that added it, when known),
``hip_since`` (the ROCm release that added the HIP name, when known), ``in_hip`` (false: the installed HIP
lacks the name; a later ROCm has it), ``from`` (which inputs said so); then ``[conflicts]``.

Choosing among candidates for one CUDA name: a HIP name the installed HIP has beats one it lacks; a name
HIP does not deprecate beats a deprecated one; the headers beat the documentation.  A chosen name the installed
HIP itself deprecates with a replacement (``DEPRECATED("use hipHostMalloc instead") ... hipHostAlloc(``) is
replaced by that name (``from = "amd-headers"``), listed under ``[conflicts]``.  Every case where the
headers and the documentation (or the hand table) name different HIP names is listed under ``[conflicts]``.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_HEADERS = Path("/usr/include/hip")
DEFAULT_OUT = HERE.parent / "cuda2hip_api.toml"
HAND_TABLE = HERE.parent / "cuda2hip.toml"
FAMILIES = ("runtime", "driver", "rtc", "complex", "types", "enums", "unions", "defines", "math")

_CUDA_NAME = re.compile(
    r"^(?:make_)?(?:cuda[A-Z_]\w*|cu[A-Z]\w*|CU[a-zA-Z_]\w*|CUDA_\w+|CUDART_\w+|nvrtc\w+|NVRTC_\w+|__nv_\w+)$"
)
_HIP_NAME = re.compile(r"^(?:make_)?(?:hip\w+|HIP\w+|hiprtc\w+|HIPRTC_\w+|__hip\w*)$")
_CALL = re.compile(r"\b((?:make_)?(?:cuda[A-Z]\w*|cu[A-Z]\w*|nvrtc[A-Z]\w*))\s*\(")
_FUNC_HEAD = re.compile(
    r"\b(inline|static|__host__|__device__|__HOST_DEVICE__)\b[^;{}()]*?\b((?:make_)?hip\w+)\s*\("
)
_TYPEDEF = re.compile(r"\btypedef\s+(?:(enum|struct|union)\s+)?([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*;")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([A-Za-z_]\w*)[ \t]*$", re.MULTILINE)
_CASES = re.compile(
    r"((?:\bcase\s+[A-Za-z_]\w*\s*:\s*|\bdefault\s*:\s*)+)return\s+(?:\([^()]*\)\s*)?([A-Za-z_]\w*)\s*;"
)
# cuComplex.h's functions (cuCaddf, cuConj, cuComplexFloatToDouble, make_cuDoubleComplex...), not the driver's cuCtx*/cuCoredump*
_COMPLEX_FUNCTION = re.compile(
    r"^(?:cuC(?:add|sub|mul|div|abs|real|imag|fma)f?|cuConjf?|cuComplex\w*|make_cu(?:Float|Double)?Complex)$"
)
# HIP's own deprecation of a function: DEPRECATED("use hipHostMalloc instead") hipError_t hipHostAlloc(...)
_AMD_DEPRECATED = re.compile(
    r"\b(?:DEPRECATED|__HIP_DEPRECATED_MSG)\s*\(\s*(?:\"([^\"]*)\"|\w+)\s*\)\s*[^;{}()]*?\b(hip\w+)\s*\("
)
_VERSION_IF = re.compile(r"CUDA(?:RT)?_VERSION\s*>=\s*(?:CUDA_)?(\d{4,5})")


@dataclass
class Candidate:
    hip: str
    source: str  # "headers" | "hipify-docs"
    kind: str  # "function" | "data"
    hip_deprecated: bool = False
    cuda: str = ""  # CUDA version that added the name
    cuda_deprecated: str = ""
    cuda_removed: str = ""
    hip_since: str = ""
    hip_removed: str = ""
    experimental: bool = False


@dataclass
class Entry:
    cuda: str
    candidates: list[Candidate] = field(default_factory=list)
    unsupported_in: list[str] = field(default_factory=list)  # sources that list it without a HIP name
    cuda_version: str = ""
    cuda_deprecated: str = ""
    cuda_removed: str = ""
    kind: str = "data"


# --------------------------------------------------------------------------- source 1: nvidia_detail headers


def _strip_comments(text: str) -> str:
    """Comments blanked (newlines kept, so offsets and lines stay), backslash continuations joined."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.DOTALL)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"\\\n", "  ", text)


def _cuda_version(number: str) -> str:
    n = int(number)
    return f"{n // 1000}.{(n % 1000) // 10}"


def _line_versions(text: str) -> list[str]:
    """Per line (0-based), the CUDA version an enclosing ``#if CUDA_VERSION >= ...`` requires ('' if none)."""
    stack: list[str] = []
    out: list[str] = []
    for line in text.split("\n"):
        s = line.strip()
        m = re.match(r"#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", s)
        if m:
            word, rest = m.group(1), m.group(2)
            if word in ("if", "ifdef", "ifndef"):
                v = _VERSION_IF.search(rest) if word == "if" else None
                stack.append(_cuda_version(v.group(1)) if v else "")
            elif word in ("elif", "else") and stack:
                stack[-1] = ""  # the other branch: no longer the version-guarded part
            elif word == "endif" and stack:
                stack.pop()
        out.append(next((v for v in reversed(stack) if v), ""))
    return out


def _body(text: str, open_brace: int) -> str:
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_brace : i + 1]
    return text[open_brace:]


def header_pairs(nvidia_dir: Path) -> dict[str, list[tuple[Candidate, str]]]:
    """CUDA name -> [(candidate, cuda version)] from the NVIDIA-platform headers of HIP."""
    out: dict[str, list[tuple[Candidate, str]]] = {}

    def add(cuda: str, cand: Candidate, version: str) -> None:
        if _CUDA_NAME.match(cuda) and _HIP_NAME.match(cand.hip):
            out.setdefault(cuda, []).append((cand, version))

    for path in sorted(nvidia_dir.glob("*.h")):
        text = _strip_comments(path.read_text(encoding="utf-8", errors="replace"))
        versions = _line_versions(text)
        starts = [0, *(m.end() for m in re.finditer(r"\n", text))]

        def version_at(offset: int, starts: list[int] = starts, versions: list[str] = versions) -> str:
            lo, hi = 0, len(starts)
            while lo + 1 < hi:
                mid = (lo + hi) // 2
                if starts[mid] <= offset:
                    lo = mid
                else:
                    hi = mid
            return versions[lo]

        for m in _DEFINE.finditer(text):
            add(m.group(2), Candidate(m.group(1), "headers", "data"), version_at(m.start()))
        for m in _TYPEDEF.finditer(text):
            add(m.group(2), Candidate(m.group(3), "headers", "data"), version_at(m.start()))
        for m in _FUNC_HEAD.finditer(text):
            name = m.group(2)
            paren = m.end() - 1
            depth, i = 0, paren
            while i < len(text):  # past the parameter list
                depth += text[i] == "("
                depth -= text[i] == ")"
                i += 1
                if depth == 0:
                    break
            rest = text[i : i + 200]
            brace = re.match(r"\s*(?:const\s*)?\{", rest)
            if brace is None:
                continue  # a declaration, or a call
            body = _body(text, i + brace.end() - 1)
            calls = _CALL.findall(
                body
            )  # a wrapper calls its CUDA counterpart once (not hipCsqabsf: cuCabsf twice)
            head = text[max(0, m.start() - 200) : m.start()]
            head = head[max(head.rfind(";"), head.rfind("}")) + 1 :]
            deprecated = "__HIP_DEPRECATED" in head
            if len(calls) == 1:
                add(calls[0], Candidate(name, "headers", "function", deprecated), version_at(m.start()))
            # enum conversions: case cudaX: return hipY;  (and the reverse, one label to one name)
            for c in _CASES.finditer(body):
                labels = re.findall(r"\bcase\s+([A-Za-z_]\w*)", c.group(1))
                target = c.group(2)
                at = version_at(i + c.start())
                if _HIP_NAME.match(target):
                    for label in labels:
                        add(label, Candidate(target, "headers", "data"), at)
                elif _CUDA_NAME.match(target) and len(labels) == 1 and "default" not in c.group(1):
                    add(target, Candidate(labels[0], "headers-reverse", "data"), at)
    return out


def header_version(root: Path) -> str:
    text = (root / "hip_version.h").read_text(encoding="utf-8", errors="replace")
    parts = [re.search(rf"#define\s+HIP_VERSION_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(p.group(1) for p in parts if p is not None)


# --------------------------------------------------------------------------- source 3: the AMD-platform headers


@dataclass
class HipIndex:
    """What each name is in the installed HIP (AMD platform): function, type, enum, union, macro."""

    kinds: dict[str, str] = field(default_factory=dict)
    # names the installed HIP marks DEPRECATED("use hipY instead") -> hipY ('' when the message names none)
    deprecated: dict[str, str] = field(default_factory=dict)
    words: set[str] = field(default_factory=set)

    def has(self, name: str) -> bool:
        return name in self.words


def hip_index(root: Path) -> HipIndex:
    index = HipIndex()
    files = [
        p
        for p in sorted(root.rglob("*.h*"))
        if "nvidia_detail" not in p.parts and "nvcc_detail" not in p.parts
    ]
    for path in files:
        text = _strip_comments(path.read_text(encoding="utf-8", errors="replace"))
        index.words |= set(re.findall(r"\b[A-Za-z_]\w*\b", text))
        for m in _AMD_DEPRECATED.finditer(text):
            use = re.search(r"\buse\s+(hip\w+)\s+instead", m.group(1) or "")
            index.deprecated.setdefault(m.group(2), use.group(1) if use else "")

        def mark(name: str, kind: str) -> None:
            index.kinds.setdefault(name, kind)

        for m in re.finditer(r"\bunion\s+([A-Za-z_]\w*)\s*\{", text):
            mark(m.group(1), "union")
        for m in re.finditer(r"\btypedef\s+union\b[^;]*?\}\s*([A-Za-z_]\w*)\s*;", text, re.DOTALL):
            mark(m.group(1), "union")
        for m in re.finditer(
            r"\benum\s+(?:class\s+)?([A-Za-z_]\w*)?\s*(?::\s*\w+\s*)?\{([^{}]*)\}\s*([A-Za-z_]\w*)?", text
        ):
            for name in (m.group(1), m.group(3)):
                if name:
                    mark(name, "enum")
            for item in m.group(2).split(","):
                e = re.match(r"\s*([A-Za-z_]\w*)", item)
                if e:
                    mark(e.group(1), "enum")
        for m in re.finditer(r"\btypedef\b[^;{]*?\b([A-Za-z_]\w*)\s*;", text):
            mark(m.group(1), "type")
        for m in re.finditer(r"\btypedef\s+struct\b[^;]*?\}\s*([A-Za-z_]\w*)\s*;", text, re.DOTALL):
            mark(m.group(1), "type")
        for m in re.finditer(r"\b(?:struct|class)\s+([A-Za-z_]\w*)\s*(?::[^{;]*)?\{", text):
            mark(m.group(1), "type")
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", text, re.MULTILINE):
            mark(m.group(1), "define")
        for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\([^;{)]*\)?\s*[;{]?", text):
            if m.group(1).startswith(("hip", "make_hip", "__")):
                index.kinds.setdefault(m.group(1), "function")
    return index


# --------------------------------------------------------------------------- source 2: HIPIFY's tables


@dataclass
class DocsFile:
    path: Path
    header: list[str]  # the file's '#' lines: where and at which commit the facts were read
    rows: list[tuple[str, list[str]]]  # (section kind, fields)


def read_docs(path: Path) -> DocsFile:
    header: list[str] = []
    rows: list[tuple[str, list[str]]] = []
    section = "function"
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("## "):
            title = line[3:].lower()
            section = (
                "data" if ("data type" in title or "types used" in title or title == "data") else "function"
            )
            continue
        if line.startswith("#"):
            header.append(line.lstrip("# ").rstrip())
            continue
        fields = line.split("|")
        fields += [""] * (9 - len(fields))
        rows.append((section, [f.strip() for f in fields[:9]]))
    return DocsFile(path, header, rows)


# --------------------------------------------------------------------------- merging


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)) or (0,)


def family_of(cuda: str, hip: str | None, kind: str, index: HipIndex) -> str:
    if kind == "function" or (hip is not None and index.kinds.get(hip) == "function" and not hip.isupper()):
        if cuda.startswith(("nvrtc", "NVRTC")):
            return "rtc"
        if _COMPLEX_FUNCTION.match(cuda):
            return "complex"
        if re.match(r"cu[A-Z]", cuda):
            return "driver"
        return "runtime"
    hip_kind = index.kinds.get(hip or "")
    if hip_kind == "union":
        return "unions"
    if hip_kind == "enum":
        return "enums"
    if hip_kind == "type":
        return "types"
    if hip_kind == "define":
        return "defines"
    if re.fullmatch(r"[A-Z0-9_]+", cuda):
        return "defines"
    if cuda.endswith(("_t", "_st")) or re.match(r"CU[a-z]", cuda) or cuda[0].isupper():
        return "types"
    if cuda.startswith(("cuFloatComplex", "cuDoubleComplex", "cuComplex")):
        return "types"
    return "enums"


def build(
    headers_root: Path, docs: Sequence[Path], hand_table: Path | None
) -> tuple[dict[str, dict[str, dict[str, object]]], dict[str, object], list[str]]:
    """(families, inputs, conflicts)."""
    index = hip_index(headers_root)
    entries: dict[str, Entry] = {}

    def entry(cuda: str) -> Entry:
        return entries.setdefault(cuda, Entry(cuda))

    for cuda, found in header_pairs(headers_root / "nvidia_detail").items():
        e = entry(cuda)
        for cand, version in found:
            e.candidates.append(cand)
            if cand.kind == "function":
                e.kind = "function"
            if version and (not e.cuda_version or _version_key(version) > _version_key(e.cuda_version)):
                e.cuda_version = version
    docs_inputs: list[dict[str, object]] = []
    for path in docs:
        doc = read_docs(path)
        docs_inputs.append({"file": path.name, "read_from": doc.header, "rows": len(doc.rows)})
        for section, f in doc.rows:
            cuda, c_add, c_dep, c_rem, hip, h_add, h_dep, h_rem, h_exp = f
            if not cuda:
                continue
            e = entry(cuda)
            if section == "function":
                e.kind = "function"
            e.cuda_version = e.cuda_version or c_add
            e.cuda_deprecated = e.cuda_deprecated or c_dep
            e.cuda_removed = e.cuda_removed or c_rem
            if hip:
                e.candidates.append(
                    Candidate(
                        hip,
                        "hipify-docs",
                        section,
                        bool(h_dep),
                        c_add,
                        c_dep,
                        c_rem,
                        h_add,
                        h_rem,
                        bool(h_exp),
                    )
                )
            else:
                e.unsupported_in.append("hipify-docs")

    conflicts: list[str] = []
    families: dict[str, dict[str, dict[str, object]]] = {f: {} for f in FAMILIES}
    for cuda in sorted(entries):
        e = entries[cuda]
        cands = [c for c in e.candidates if c.source != "headers-reverse"] or e.candidates
        if not cands:
            fam = family_of(cuda, None, e.kind, index)
            row: dict[str, object] = {"status": "unsupported"}
            if e.cuda_version:
                row["cuda"] = e.cuda_version
            if e.cuda_deprecated:
                row["cuda_deprecated"] = e.cuda_deprecated
            if e.cuda_removed:
                row["cuda_removed"] = e.cuda_removed
            row["from"] = "+".join(sorted(set(e.unsupported_in)))
            families[fam][cuda] = row
            continue
        hip_deprecated = {c.hip for c in e.candidates if c.hip_deprecated or c.hip in index.deprecated}

        def rank(c: Candidate, hip_deprecated: set[str] = hip_deprecated) -> tuple[int, int, int]:
            return (
                0 if index.has(c.hip) else 1,
                1 if c.hip in hip_deprecated or c.hip_removed else 0,
                0 if c.source == "headers" else 1,
            )

        best = min(cands, key=rank)
        instead = index.deprecated.get(best.hip, "")
        if instead and index.has(instead) and instead not in hip_deprecated:
            # the installed HIP deprecates the documented name and names its replacement: map to that
            conflicts.append(
                f"{cuda}: {best.source} says {best.hip}, which HIP {header_version(headers_root)} deprecates"
                f" (use {instead} instead); chosen {instead}"
            )
            best = Candidate(instead, "amd-headers", best.kind, cuda=best.cuda, hip_since=best.hip_since)
            cands = [*cands, best]
        by_source = {c.source: c.hip for c in sorted(cands, key=rank)}
        if len(set(by_source.values())) > 1:
            conflicts.append(
                f"{cuda}: "
                + ", ".join(f"{src} says {hip}" for src, hip in sorted(by_source.items()))
                + f"; chosen {best.hip}"
            )
        docs_cand = next((c for c in cands if c.source == "hipify-docs" and c.hip == best.hip), None)
        hip_since = docs_cand.hip_since if docs_cand is not None else ""
        deprecated = bool(
            best.hip in hip_deprecated or e.cuda_deprecated or e.cuda_removed or best.hip_removed
        )
        fam = family_of(cuda, best.hip, e.kind, index)
        row = {"hip": best.hip, "status": "deprecated" if deprecated else "supported"}
        if e.cuda_version:
            row["cuda"] = e.cuda_version
        if hip_since:
            row["hip_since"] = hip_since
        if not index.has(best.hip):
            row["in_hip"] = False
        if e.cuda_deprecated:
            row["cuda_deprecated"] = e.cuda_deprecated
        if e.cuda_removed:
            row["cuda_removed"] = e.cuda_removed
        if best.hip in hip_deprecated:
            row["hip_deprecated"] = True
        if best.hip_removed:
            row["hip_removed"] = best.hip_removed
        if docs_cand is not None and docs_cand.experimental:
            row["experimental"] = True
        row["from"] = "+".join(sorted({c.source.replace("-reverse", "") for c in cands if c.hip == best.hip}))
        families[fam][cuda] = row

    # device math: the names HIP 5.2 declares for device code that CUDA spells the same (identity entries)
    for name in sorted(_math_names(headers_root)):
        if name not in entries:
            families["math"][name] = {"hip": name, "status": "supported", "from": "headers"}

    if hand_table is not None and hand_table.exists():
        hand = tomllib.loads(hand_table.read_text(encoding="utf-8"))
        for group, table in hand.get("rename", {}).items():
            for cuda, hip in table.items():
                for fam in FAMILIES:
                    gen = families[fam].get(cuda)
                    if gen is not None and gen.get("hip") not in (None, hip):
                        conflicts.append(
                            f"{cuda}: hand table ({group}) says {hip}, generated says {gen['hip']}; hand wins"
                        )
                    elif gen is not None and gen.get("hip") is None:
                        conflicts.append(
                            f"{cuda}: hand table ({group}) says {hip}, generated says unsupported; hand wins"
                        )
    inputs: dict[str, object] = {
        "headers": {
            "root": str(headers_root),
            "hip_version": header_version(headers_root),
            "nvidia_detail": {
                p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16]
                for p in sorted((headers_root / "nvidia_detail").glob("*.h"))
            },
        },
        "hipify_docs": docs_inputs,
    }
    return families, inputs, conflicts


_MATH_DECL = re.compile(r"\b(?:__DEVICE__|__device__)[^;{()]*?\b([a-z_][a-z0-9_]*)\s*\(")


def _math_names(root: Path) -> set[str]:
    names: set[str] = set()
    for rel in (
        "amd_detail/amd_math_functions.h",
        "amd_detail/math_fwd.h",
        "amd_detail/amd_device_functions.h",
    ):
        p = root / rel
        if p.exists():
            text = _strip_comments(p.read_text(encoding="utf-8", errors="replace"))
            names |= {
                n
                for n in _MATH_DECL.findall(text)
                if not n.startswith(("__ocml", "__ockl", "__llvm", "__hip", "hip"))
            }
    return {n for n in names if not n.startswith("__builtin")}


# --------------------------------------------------------------------------- output


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(
    families: dict[str, dict[str, dict[str, object]]], inputs: dict[str, object], conflicts: Iterable[str]
) -> str:
    lines = [
        "# porter's CUDA -> HIP API tables, GENERATED by backends/hip/tables/generate.py: do not edit by hand.",
        "# Regenerate: python -m porter.backends.hip.tables.generate (see that file for the inputs and rules).",
        "# status: supported | deprecated (mapped, with a warning) | unsupported (no HIP equivalent: kept, reported)",
        "# cuda: the CUDA version that added the name; hip_since: the ROCm release that added the HIP name;",
        "# in_hip = false: the installed HIP (see [inputs]) lacks the HIP name, a later ROCm has it.",
        "",
        "[inputs.headers]",
    ]
    headers = inputs["headers"]
    assert isinstance(headers, dict)
    lines.append(f"root = {_toml_value(headers['root'])}")
    lines.append(f"hip_version = {_toml_value(headers['hip_version'])}")
    lines.append("[inputs.headers.nvidia_detail]")
    lines += [f'"{k}" = {_toml_value(v)}' for k, v in headers["nvidia_detail"].items()]
    docs = inputs["hipify_docs"]
    assert isinstance(docs, list)
    for d in docs:
        lines.append("[[inputs.hipify_docs]]")
        lines.append(f"file = {_toml_value(d['file'])}")
        lines.append("read_from = [" + ", ".join(_toml_value(h) for h in d["read_from"]) + "]")
        lines.append(f"rows = {d['rows']}")
    lines.append("")
    lines.append("[counts]")
    for fam in FAMILIES:
        by: dict[str, int] = {}
        for row in families[fam].values():
            s = str(row["status"])
            by[s] = by.get(s, 0) + 1
        lines.append(f"{fam} = {{ " + ", ".join(f"{k} = {v}" for k, v in sorted(by.items())) + " }")
    for fam in FAMILIES:
        lines.append("")
        lines.append(f"[{fam}]")
        for cuda, row in families[fam].items():
            body = ", ".join(f"{k} = {_toml_value(v)}" for k, v in row.items())
            lines.append(f"{cuda} = {{ {body} }}")
    lines.append("")
    lines.append("[conflicts]")
    lines.append("list = [")
    lines += [f"  {_toml_value(c)}," for c in conflicts]
    lines.append("]")
    return "\n".join(lines) + "\n"


def default_docs() -> list[Path]:
    return sorted(HERE.glob("hipify_*.txt"))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--headers", type=Path, default=DEFAULT_HEADERS, help="HIP's include/hip folder")
    ap.add_argument(
        "--docs", type=Path, nargs="*", default=None, help="extracted HIPIFY tables (hipify_*.txt)"
    )
    ap.add_argument(
        "--hand", type=Path, default=HAND_TABLE, help="porter's hand table, for the conflict report"
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if not (args.headers / "nvidia_detail").is_dir():
        print(
            f"generate: {args.headers}/nvidia_detail not found (install HIP's headers, e.g. Debian's libamdhip64-dev)",
            file=sys.stderr,
        )
        return 2
    docs = default_docs() if args.docs is None else list(args.docs)
    families, inputs, conflicts = build(args.headers, docs, args.hand)
    args.out.write_text(render(families, inputs, conflicts), encoding="utf-8")
    total = sum(len(f) for f in families.values())
    print(f"generate: {total} entries -> {args.out} ({len(conflicts)} conflicts)")
    for fam in FAMILIES:
        print(f"  {fam}: {len(families[fam])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
