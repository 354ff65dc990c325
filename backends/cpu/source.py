"""Source preparation for the CPU emulator: refusal checks, `__shared__` rewriting, the launcher.

Everything here is text in, text out, and keeps the line count of the user's source, so that
compiler diagnostics (which see the rewritten text behind a ``#line 1`` directive) point at the
user's own lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from porter.backends import CannotEmulate
from porter.backends.launches import blank_comments_and_strings

from porter.files import read_header

if TYPE_CHECKING:
    from porter.backends.dialect import DialectFacts

_IDENT = re.compile(r"[A-Za-z_]\w*")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)
# a kernel name: C++ identifiers (Unicode letters and universal character names too), ::, template args
_UCN_CHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_ENTRY = re.compile(rf"^\s*(::)?(?:[^\W\d]|{_UCN_CHAR})(?:[\w:]|{_UCN_CHAR})*\s*(<[^;{{}}\"'\\]*>)?\s*$")
_HIP_HINT = re.compile(r"\bhip(ThreadIdx|BlockIdx|BlockDim|GridDim)_[xyz]\b|#\s*include\s*[<\"]hip/")
_UNDECLARED = re.compile(
    r"^[^:\n]*:(\d+):\d+: error: ['\u2018](__\w+)['\u2019] was not declared in this scope", re.MULTILINE
)


def line_of(source: str, pos: int) -> int:
    return source.count("\n", 0, pos) + 1


# --------------------------------------------------------------------------- refusal checks


def includes(source: str) -> list[tuple[int, str, str]]:
    """(line, delimiter '<' or '"', header) for every #include outside comments."""
    blanked = blank_comments_and_strings(source)
    found = []
    for m in _INCLUDE.finditer(source):
        if blanked[m.start() : m.start(1)].strip().startswith("#"):
            found.append((line_of(source, m.start()), m.group(1), m.group(2).strip()))
    return found


_DEFINE = re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?:[^\n]*\\\n)*[^\n]*$")


def _unused_macros_blanked(blanked: str) -> str:
    """`blanked` with each ``#define`` no other code of it uses blanked (newlines kept): a kernel's file
    keeps the host's macros too (``#define run(k) k<<<g, b>>>(...)``, an error check calling
    cudaDeviceSynchronize), which are not device code."""
    defines = list(_DEFINE.finditer(blanked))
    out = blanked
    # to a fixed point: a macro only other unused macros use (cutil.h's CUT_DEVICE_SYNCHRONIZE, inside
    # its CUT_CHECK_ERROR) is unused once they are blanked
    while defines:
        gone = []
        for m in defines:
            name = re.compile(rf"\b{re.escape(m.group(1))}\b")
            # its definitions (one per `#if` branch: `#if CUDART_VERSION >= 4000 / #else`) are all it is in
            own = sum(len(name.findall(d.group(0))) for d in defines if d.group(1) == m.group(1))
            if len(name.findall(out)) == own:  # used nowhere else
                gone.append(m)
        if not gone:
            break
        for m in gone:  # blanking keeps every offset
            out = out[: m.start()] + re.sub(r"[^\n]", " ", m.group(0)) + out[m.end() :]
        defines = [m for m in defines if m not in gone]
    return out


def check_emulable(
    source: str, dialect: DialectFacts, include_dirs: Sequence[str] = (), origin: str = "source"
) -> None:
    """Raise CannotEmulate("cannot emulate: <construct> (<origin> line N)") for refused constructs.

    Local headers (``#include "x.h"`` found in include_dirs) are checked too.  A header is compiled as it
    is, host code and all: a rule marked ``headers = "device-code"`` (a runtime call) does not count there
    inside the body of a function defined without ``__device__`` / ``__global__`` (a timer's inline
    method, an error check calling cudaDeviceSynchronize) -- such a function builds against
    porter_host_decls.h, and device code that still calls one fails its launch by name.
    """
    _check(source, dialect, list(include_dirs), origin, set())


_DEVICE_QUALIFIER = re.compile(r"\b(__device__|__global__)\b")


def host_function_bodies(blanked: str, heads: bool = False) -> list[tuple[int, int]]:
    """The bodies (``{`` to ``}``) of the functions `blanked` defines -- at namespace scope or in a class
    -- whose declaration says neither ``__device__`` nor ``__global__``: host code.  ``heads``: from the
    start of each one's declaration (its return and parameter types are host code too)."""
    bodies = []
    for start, end in _function_scopes(blanked):
        head_at = max(blanked.rfind(c, 0, start) for c in ";{}") + 1
        if not _DEVICE_QUALIFIER.search(blanked[head_at:start]):
            bodies.append((head_at if heads else start, end))
    return bodies


def _check(
    source: str,
    dialect: DialectFacts,
    include_dirs: list[str],
    origin: str,
    seen: set[Path],
    in_header: bool = False,
) -> None:
    refused_headers: Mapping[str, str] = dialect.includes["refuse"]
    for line, delim, header in includes(source):
        if header in refused_headers:
            raise CannotEmulate(f"cannot emulate: {refused_headers[header]} ({origin} line {line})")
        if delim == '"':
            for d in include_dirs:
                path = (Path(d) / header).resolve()
                if path not in seen and (data := read_header(path, quiet=True)) is not None:
                    seen.add(path)  # a regular file under the size cap (never a FIFO or a device)
                    text = data.decode("utf-8", "surrogateescape")
                    _check(text, dialect, include_dirs, path.name, seen, in_header=True)
                    break
    blanked = _unused_macros_blanked(blank_comments_and_strings(source))
    host = host_function_bodies(blanked, heads=True) if in_header else []
    hits = []
    for rule in dialect.refuse:
        for m in re.finditer(rule["pattern"], blanked):
            if rule.get("headers") != "device-code" or not _inside(host, m.start()):
                hits.append((m.start(), rule["what"]))
                break
    if hits:
        pos, what = min(hits)
        raise CannotEmulate(f"cannot emulate: {what} ({origin} line {line_of(source, pos)})")


def undeclared_intrinsic(log: str) -> tuple[int, str] | None:
    """(line, name) when g++ failed on an undeclared ``__name``: a device intrinsic we lack."""
    m = _UNDECLARED.search(log)
    return (int(m.group(1)), m.group(2)) if m else None


_GCC_ERROR = re.compile(r"^([^\n:]+):(\d+):(?:\d+:)? (?:fatal )?error: ([^\n]*)$", re.MULTILINE)


def first_error(log: str) -> str:
    """g++'s first error as one line, ``<file>:<line>: <message>`` (the construct it could not build, where
    the user wrote it), or "" when the log holds none."""
    m = _GCC_ERROR.search(log)
    if not m:
        return ""
    message = m.group(3).strip().replace("\u2018", "'").replace("\u2019", "'")
    return f"{m.group(1)}:{m.group(2)}: {message}"[:400]


def is_hip(source: str) -> bool:
    return bool(_HIP_HINT.search(source))


# --------------------------------------------------------------------------- __shared__ rewriting


def spell_noinline(text: str) -> str:
    """``__noinline__`` in code (not comments or strings) as the attribute it means (no macro: the
    standard library's own ``__attribute__((__noinline__))`` must stay as it is)."""
    if "__noinline__" not in text:
        return text
    blanked = blank_comments_and_strings(text)
    out, pos = [], 0
    for m in re.finditer(r"(?<!\(\()\b__noinline__\b", blanked):  # not inside a written __attribute__((...))
        out += [text[pos : m.start()], "__attribute__((noinline))"]
        pos = m.end()
    return "".join(out) + text[pos:]


_VOID_HEAD = re.compile(
    r"^\s*(?:template\s*<[^{;]*>\s*)?(?:(?:static|inline|extern|__host__|__forceinline__|__inline__)\s+)*void\s+"
    r"(?P<name>[A-Za-z_]\w*)\s*\([^{;]*\)\s*(?:const\s*)?(?:noexcept\s*)?$"
)


def inert_host_code(text: str) -> str:
    """A header's host code as a kernel's own build compiles it: the body of each ``void`` host function
    (declared without ``__device__`` / ``__global__``: a Rodinia driver in an included ``.cu``, an
    initialiser calling ``checkCudaErrors`` that only the including unit declared) becomes a call of
    ``porter_emu::host_code_left_out("name")`` with its lines kept: a replay runs the kernel alone and
    never this code, and device code that calls it anyway fails its launch by name, as a host runtime
    call does (porter_host_decls.h).  So a launch there (``k<<<g, b>>>(...)``) is not taken for dynamic
    parallelism, and names the unit declared before including the file are not needed.  Left as written:
    functions returning a value, constructors (a static object's, run when the kernel loads), and any
    head the pattern does not read as a plain ``void f(...)`` -- a macro may define a kernel.  A launch
    in device code stays as it is, and stays refused (dynamic parallelism)."""
    blanked = blank_comments_and_strings(text)
    out, pos = [], 0
    for start, end in host_function_bodies(blanked):
        if start < pos:
            continue
        head_at = max(blanked.rfind(c, 0, start) for c in ";{}") + 1
        head = re.sub(r"^[ \t]*#.*$", "", blanked[head_at:start], flags=re.MULTILINE)
        m = _VOID_HEAD.match(head)
        if m is not None:
            lines = text[start + 1 : end].count("\n")
            out += [text[pos : start + 1], f' porter_emu::host_code_left_out("{m["name"]}"); ', "\n" * lines]
            pos = end
            continue
        # a function returning a value stays; each launch in it loses its chevrons to a comment, so g++
        # builds the call it stands for
        for launch in re.finditer(r"<<<", blanked[start:end]):
            at = start + launch.start()
            close = blanked.find(">>>", at + 3, end)
            if at < pos or close < 0:
                continue
            out += [text[pos:at], "/*", text[at : close + 3], "*/"]
            pos = close + 3
    return "".join(out) + text[pos:]


def rewrite_shared(source: str) -> str:
    """Rewrite every ``__shared__`` declaration for porter_emu.h, keeping the line count.

    * function scope ``__shared__ T a[N], b;`` stays a (static) declaration and gains
      ``PORTER_SHARED_INIT(a); PORTER_SHARED_INIT(b);`` after it, which poisons the storage the
      first time a thread of each block reaches it;
    * namespace scope ``__shared__ T a[N];`` gains ``PORTER_SHARED_GLOBAL(a);`` (poisoned at
      every block start);
    * ``extern __shared__ T a[];`` becomes a reference to the launch's dynamic shared memory.
    """
    blanked = blank_comments_and_strings(source)
    scopes = _function_scopes(blanked)
    pp_ends = _preprocessor_line_ends(blanked)
    edits: list[tuple[int, int, str]] = []
    pos = 0
    for m in re.finditer(r"\b__shared__\b", blanked):
        if m.start() < pos:
            continue
        if _in_preprocessor_line(blanked, m.start()):
            continue
        start = _decl_start(blanked, m.start(), pp_ends)
        end = _decl_end(blanked, m.end())
        if end < 0:
            continue
        pos = end + 1
        decl = blanked[start:end]
        original = source[start:end]
        in_function = _inside(scopes, m.start())
        parts = _split_top_level(decl)
        names = [_declarator_name(p) for p in parts]
        if any(name is None for name in names):
            continue
        if re.search(r"\bextern\b", decl):
            text = _extern_replacement(parts[0], names[0] or "", in_function)
            text += "\n" * original.count("\n")
            edits.append((start, end + 1, text))
        else:
            kept = re.sub(r"\bstatic\b", "      ", original)
            macro = "PORTER_SHARED_INIT" if in_function else "PORTER_SHARED_GLOBAL"
            tail = "".join(f" {macro}({name});" for name in names)
            edits.append((start, end + 1, kept + ";" + tail))
    out = source
    for s, e, text in reversed(edits):
        out = out[:s] + text + out[e:]
    return out


def _preprocessor_line_ends(blanked: str) -> list[int]:
    ends = []
    for m in re.finditer(r"^[ \t]*#.*?(?<!\\)$", blanked, re.MULTILINE | re.DOTALL):
        ends.append(m.end())
    return ends


def _in_preprocessor_line(blanked: str, pos: int) -> bool:
    line_start = blanked.rfind("\n", 0, pos) + 1
    k = line_start
    while True:  # follow backslash continuations upwards
        if blanked[k:pos].lstrip().startswith("#"):
            return True
        if k >= 2 and blanked[k - 2] == "\\":
            k = blanked.rfind("\n", 0, k - 1) + 1
            continue
        return False


def _decl_start(blanked: str, pos: int, pp_ends: list[int]) -> int:
    k = pos - 1
    while k >= 0 and blanked[k] not in ";{}":
        k -= 1
    start = k + 1
    for e in pp_ends:
        if start <= e <= pos:
            start = e + 1
    while start < pos and blanked[start].isspace():
        start += 1
    return start


def _decl_end(blanked: str, pos: int) -> int:
    depth = 0
    for k in range(pos, len(blanked)):
        c = blanked[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return -1
        elif c == ";" and depth == 0:
            return k
    return -1


def _split_top_level(decl: str) -> list[str]:
    parts, depth, angle, last = [], 0, 0, 0
    for k, c in enumerate(decl):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and c == "<":
            angle += 1
        elif depth == 0 and c == ">":
            angle = max(angle - 1, 0)
        elif c == "," and depth == 0 and angle == 0:
            parts.append(decl[last:k])
            last = k + 1
    parts.append(decl[last:])
    return parts


def _strip_groups(text: str) -> str:
    """Remove top-level (...) groups: attribute arguments such as __align__(16)."""
    out, depth = [], 0
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def _declarator_name(part: str) -> str | None:
    head = _strip_groups(part.split("=", 1)[0]).split("[", 1)[0]
    idents = _IDENT.findall(head)
    return idents[-1] if idents else None


_ATTRS = re.compile(r"\b(__align__|alignas|__attribute__|__declspec)\s*\(")


def _extern_replacement(part: str, name: str, in_function: bool) -> str:
    text = part
    while True:
        m = _ATTRS.search(text)
        if not m:
            break
        depth, k = 0, m.end() - 1
        for k in range(m.end() - 1, len(text)):
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
                if depth == 0:
                    break
        text = text[: m.start()] + text[k + 1 :]
    text = re.sub(r"\b(extern|__shared__|static)\b", " ", text)
    text = re.sub(rf"\b{re.escape(name)}\s*\[\s*\]\s*$", "", text.strip())
    elem = " ".join(text.split())
    storage = "" if in_function else "static "
    return f"{storage}{elem} (&{name})[] = PORTER_DYN_SHARED({elem});"


def _function_scopes(blanked: str) -> list[tuple[int, int]]:
    """Byte ranges of outermost function bodies (at namespace / linkage-block level)."""
    ranges: list[tuple[int, int]] = []
    stack: list[str] = []  # "ns" (namespace, extern "C", class bodies), "fn", "init", "block"
    fn_start = -1
    seg_start = 0
    for k, c in enumerate(blanked):
        if c == "{":
            if "fn" in stack:
                kind = "block"
            else:
                head = blanked[seg_start:k]
                head = re.sub(r"^[ \t]*#.*$", "", head, flags=re.MULTILINE)
                stripped = head.rstrip()
                if stripped.endswith("="):
                    kind = "init"
                elif re.search(r"\b(namespace|extern)\s*\w*\s*$", stripped) or (
                    re.search(r"\b(struct|class|union|enum)\b", head) and "(" not in head
                ):
                    kind = "ns"
                elif "(" in head:
                    kind = "fn"
                else:
                    kind = "init"
            stack.append(kind)
            if kind == "fn":
                fn_start = k
            seg_start = k + 1
        elif c == "}":
            kind = stack.pop() if stack else "ns"
            if kind == "fn":
                ranges.append((fn_start, k))
            seg_start = k + 1
        elif c == ";":
            seg_start = k + 1
    return ranges


def _inside(ranges: Iterable[tuple[int, int]], pos: int) -> bool:
    return any(s < pos < e for s, e in ranges)


# --------------------------------------------------------------------------- launcher


def check_entry(entry: str) -> str:
    if not _ENTRY.match(entry):
        raise ValueError(f"not a kernel name: {entry!r}")
    return entry.strip()


def launcher(entry: str) -> str:
    """C++ appended after the user's source: the C ABI the Python side calls through ctypes."""
    entry = check_entry(entry)
    export = 'extern "C" __attribute__((visibility("default")))'
    return f"""
{export} int porter_launch(void** args, int nargs, const unsigned* grid, const unsigned* block,
                           unsigned long long shared_bytes, unsigned long long seed) {{
    auto* porter_k = &{entry};  // (not `kernel`: a program's kernel may have that name)
    return porter_emu::launch(porter_k, args, nargs, grid, block, shared_bytes, seed);
}}
{export} const char* porter_signature() {{
    auto* porter_k = &{entry};
    return porter_emu::signature(porter_k);
}}
{export} const char* porter_error() {{ return porter_emu::g_launch.error; }}
{export} int porter_warp_size() {{ return PORTER_WARP_SIZE; }}
{export} void porter_set_undefined_lanes(int poison) {{ porter_emu::g_undefined.poison = poison; }}
{export} unsigned long long porter_undefined_count() {{ return porter_emu::g_undefined.count; }}
{export} const char* porter_undefined_first() {{ return porter_emu::g_undefined.first; }}
"""


def translation_unit(source: str, entry: str, filename: str = "kernel.cu", untrusted: Any = None) -> str:
    """The complete C++ translation unit: our header, the rewritten source, the launcher.

    `untrusted` (dialect.toml's ``[untrusted]`` table): the standard headers device code may use are
    included first, then every process, file, environment and loader function of the C library is
    poisoned (``#pragma GCC poison``), so device code that names one -- through a macro, token
    pasting or a line splice included -- does not compile.  The sandbox stops such calls at run time
    anyway; this is the build-time line.
    """
    guard = ""
    if untrusted:
        headers = "".join(f"#include <{h}>\n" for h in untrusted["preinclude"])
        guard = f"{headers}#pragma GCC poison {' '.join(untrusted['poison'])}\n"
    return (
        '#include "porter_emu.h"\n'
        f"{guard}"
        f'#line 1 "{filename}"\n'
        f"{spell_noinline(rewrite_shared(source))}\n"
        '#line 1 "porter-launcher"\n'
        f"{launcher(entry) if entry else ''}"  # no entry: the unit compiled only
    )
