"""Comparing two runs of a program: exit codes, printed lines, the program's own verdict, written files.

The rule (data: ``outputs.toml``; documented in docs/REPORT_FORMAT.md):

* the exit codes must be equal;
* stdout is compared line by line: a line reporting time or throughput (a number followed by a time or
  rate unit, or a word such as "time" / "throughput") is masked; in every other line the text between
  numbers must be equal (runs of spaces count as one) and each number must agree within
  ``atol + rtol * |original|``;
* the verdict words each run prints (PASS/FAIL, passed/failed...) must be the same, in order;
* every file a run wrote or changed in its scratch folder must be written by the other too, with the
  same content: text compared as stdout is, other files byte for byte.

Each difference is one line naming where it is (``stdout line 12``, ``file out.txt line 3``) with both
values, so a report shows the line.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

_NUMBER = re.compile(
    r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|inf|Inf|INF)(?![A-Za-z])"
)


@dataclass(frozen=True)
class Rule:
    rtol: float
    atol: float
    time_units: tuple[str, ...]
    time_words: tuple[str, ...]
    pass_words: tuple[str, ...]
    fail_words: tuple[str, ...]
    max_file_bytes: int
    max_differences: int

    @functools.cached_property
    def masked(self) -> re.Pattern[str]:
        units = "|".join(re.escape(u) for u in sorted(self.time_units, key=len, reverse=True))
        words = "|".join(re.escape(w) for w in sorted(self.time_words, key=len, reverse=True))
        return re.compile(rf"\d\s*(?:{units})(?![A-Za-z/])|(?i:(?<![A-Za-z])(?:{words})(?![A-Za-z]))")

    @functools.cached_property
    def verdicts(self) -> re.Pattern[str]:
        words = sorted((*self.pass_words, *self.fail_words), key=len, reverse=True)
        return re.compile(r"(?<![A-Za-z])(" + "|".join(re.escape(w) for w in words) + r")(?![A-Za-z])")


@functools.cache
def default_rule() -> Rule:
    data = tomllib.loads(
        resources.files("porter.harness").joinpath("outputs.toml").read_text(encoding="utf-8")
    )
    return rule_from(data)


def rule_from(values: Mapping[str, Any]) -> Rule:
    """The rule an outputs.toml-shaped table holds."""
    return Rule(
        rtol=float(values["rtol"]),
        atol=float(values["atol"]),
        time_units=tuple(values["time_units"]),
        time_words=tuple(values["time_words"]),
        pass_words=tuple(values["pass_words"]),
        fail_words=tuple(values["fail_words"]),
        max_file_bytes=int(values["max_file_bytes"]),
        max_differences=int(values["max_differences"]),
    )


def with_tolerance(rtol: float | None = None, atol: float | None = None) -> Rule:
    """The default rule with the tolerances given (None: the default's)."""
    base = default_rule()
    return replace(base, rtol=base.rtol if rtol is None else rtol, atol=base.atol if atol is None else atol)


@dataclass
class RunOutput:
    """What one run left: its exit code, stdout, and the files it wrote (relative path -> bytes, or the
    size and digest of a file larger than the rule's cap)."""

    exit: int | None  # None: it did not finish (timed out, killed)
    stdout: str
    files: dict[str, bytes | tuple[int, str]] = field(default_factory=dict)


def is_masked(line: str, rule: Rule) -> bool:
    return bool(rule.masked.search(line))


def verdict_words(text: str, rule: Rule) -> list[str]:
    return [
        m.group(1)
        for line in text.splitlines()
        if not is_masked(line, rule)
        for m in rule.verdicts.finditer(line)
    ]


def _split(line: str) -> tuple[list[str], list[str]]:
    """(the text between numbers with runs of blanks collapsed, the numbers)."""
    texts: list[str] = []
    numbers: list[str] = []
    pos = 0
    for m in _NUMBER.finditer(line):
        # a number glued to a word (x86, sm_90, v2) is text
        if m.start() > 0 and (line[m.start() - 1].isalpha() or line[m.start() - 1] == "_"):
            continue
        texts.append(" ".join(line[pos : m.start()].split()))
        numbers.append(m.group())
        pos = m.end()
    texts.append(" ".join(line[pos:].split()))
    return texts, numbers


def _close(a: str, b: str, rule: Rule) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= rule.atol + rule.rtol * abs(x)


def _lines_differ(a: str, b: str, rule: Rule) -> bool:
    ta, na = _split(a)
    tb, nb = _split(b)
    return ta != tb or len(na) != len(nb) or not all(_close(x, y, rule) for x, y in zip(na, nb, strict=True))


def _kept(text: str, rule: Rule) -> list[tuple[int, str]]:
    """(line number, line) of the lines compared: the masked ones left out."""
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if not is_masked(line, rule)]


def compare_text(
    original: str, other: str, where: str, rule: Rule, skip: frozenset[int] = frozenset()
) -> list[str]:
    """Differences between two texts, line by line, with masked lines skipped on both sides and the
    compared lines whose index is in `skip` (lines that vary between runs of the original) ignored."""
    a, b = _kept(original, rule), _kept(other, rule)
    out: list[str] = []
    for k in range(max(len(a), len(b))):
        if k in skip:
            continue
        if k >= len(a):
            out.append(f"{where}: extra line in the port: {b[k][1].strip()[:200]!r}")
        elif k >= len(b):
            out.append(f"{where} line {a[k][0]}: missing in the port: {a[k][1].strip()[:200]!r}")
        elif _lines_differ(a[k][1], b[k][1], rule):
            out.append(
                f"{where} line {a[k][0]}: original {a[k][1].strip()[:200]!r}, port {b[k][1].strip()[:200]!r}"
            )
    return out


@dataclass(frozen=True)
class Unstable:
    """What varies between two runs of the original (a clock-seeded random number, a count of polling
    iterations): never compared, and said in the report."""

    lines: frozenset[int] = frozenset()  # indexes among the compared (unmasked) stdout lines
    numbers: tuple[int, ...] = ()  # their line numbers in the original's stdout
    files: frozenset[str] = frozenset()
    exit: bool = False

    def describe(self) -> list[str]:
        out = [f"stdout line {n} varies between two runs of the original: not compared" for n in self.numbers]
        out += [f"file {f} varies between two runs of the original: not compared" for f in sorted(self.files)]
        if self.exit:
            out.append("the exit code varies between two runs of the original: not compared")
        return out


def unstable(first: RunOutput, second: RunOutput, rule: Rule | None = None) -> Unstable:
    """What differs between two runs of the same original build."""
    rule = rule or default_rule()
    a, b = _kept(first.stdout, rule), _kept(second.stdout, rule)
    lines = {
        k
        for k in range(max(len(a), len(b)))
        if k >= len(a) or k >= len(b) or _lines_differ(a[k][1], b[k][1], rule)
    }
    files = {
        name
        for name in set(first.files) | set(second.files)
        if first.files.get(name) != second.files.get(name)
    }
    return Unstable(
        frozenset(lines),
        tuple(a[k][0] for k in sorted(lines) if k < len(a)),
        frozenset(files),
        first.exit != second.exit,
    )


def _as_text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def compare(
    original: RunOutput, other: RunOutput, rule: Rule | None = None, varies: Unstable | None = None
) -> list[str]:
    """Every difference between two runs (empty: they agree), at most ``rule.max_differences`` of them
    and a last line with how many more there were.  What ``varies`` between runs of the original is not
    compared."""
    rule = rule or default_rule()
    varies = varies or Unstable()
    out: list[str] = []
    if original.exit != other.exit and not varies.exit:
        out.append(f"exit code: original {original.exit}, port {other.exit}")
    stable_a = "\n".join(
        line for k, (_n, line) in enumerate(_kept(original.stdout, rule)) if k not in varies.lines
    )
    stable_b = "\n".join(
        line for k, (_n, line) in enumerate(_kept(other.stdout, rule)) if k not in varies.lines
    )
    va, vb = verdict_words(stable_a, rule), verdict_words(stable_b, rule)
    if va != vb:
        out.append(
            f"verdict: the original prints {' '.join(va) or 'none'}, the port {' '.join(vb) or 'none'}"
        )
    out += compare_text(original.stdout, other.stdout, "stdout", rule, varies.lines)
    for name in sorted(set(original.files) | set(other.files)):
        if name in varies.files:
            continue
        fa, fb = original.files.get(name), other.files.get(name)
        if fb is None:
            out.append(f"file {name}: written by the original only")
        elif fa is None:
            out.append(f"file {name}: written by the port only")
        elif isinstance(fa, tuple) or isinstance(fb, tuple):
            da = fa if isinstance(fa, tuple) else (len(fa), hashlib.sha256(fa).hexdigest())
            db = fb if isinstance(fb, tuple) else (len(fb), hashlib.sha256(fb).hexdigest())
            if da != db:
                out.append(f"file {name}: differs ({da[0]} bytes in the original, {db[0]} in the port)")
        else:
            ta, tb = _as_text(fa), _as_text(fb)
            if ta is not None and tb is not None:
                out += compare_text(ta, tb, f"file {name}", rule)
            elif fa != fb:
                at = next(
                    (i for i, (x, y) in enumerate(zip(fa, fb, strict=False)) if x != y), min(len(fa), len(fb))
                )
                out.append(
                    f"file {name}: bytes differ from offset {at} ({len(fa)} bytes in the original, {len(fb)} in the port)"
                )
    if len(out) > rule.max_differences:
        extra = len(out) - rule.max_differences
        out = [*out[: rule.max_differences], f"... and {extra} more difference(s)"]
    return out


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file under `folder`, by relative path."""
    found: dict[str, tuple[int, int]] = {}
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            found[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return found


def written_files(
    folder: Path, before: Mapping[str, tuple[int, int]], rule: Rule, skip: Sequence[str] = ()
) -> dict[str, bytes | tuple[int, str]]:
    """The files under `folder` that are new or changed since `before` (their bytes, or size and digest
    beyond the cap); paths under `skip` are left out."""
    out: dict[str, bytes | tuple[int, str]] = {}
    for rel, stat in snapshot(folder).items():
        if before.get(rel) == stat or any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in skip):
            continue
        path = folder / rel
        if stat[0] > rule.max_file_bytes:
            digest = hashlib.sha256()
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            out[rel] = (stat[0], digest.hexdigest())
        else:
            out[rel] = path.read_bytes()
    return out


__all__ = [
    "Rule",
    "RunOutput",
    "Unstable",
    "compare",
    "compare_text",
    "default_rule",
    "is_masked",
    "snapshot",
    "unstable",
    "verdict_words",
    "with_tolerance",
    "written_files",
]
