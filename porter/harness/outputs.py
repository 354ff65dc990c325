"""Comparing two runs of a program: exit codes, printed lines, the program's own verdict, written files.

The rule (data: ``outputs.toml``; documented in docs/REPORT_FORMAT.md):

* the exit codes must be equal;
* stdout is compared line by line: a line reporting time or throughput (a number followed by a time or
  rate unit, or a word such as "time" / "throughput") is masked; in every other line the text between
  numbers must be equal (runs of spaces count as one) and each number must agree within
  ``atol + rtol * |original|``;
* a stdout line the program prints from a timer, found in its source (:mod:`porter.scan.timers`: the rule's
  ``timers``, a pattern per print statement), is masked too, and :func:`timer_notes` says which and why;
* the verdict words each run prints (PASS/FAIL, passed/failed...) must be the same, in order;
* every file a run wrote or changed in its scratch folder must be written by the other too, with the
  same content: text compared as stdout is, other files byte for byte.

Each difference is one line naming where it is (``stdout line 12``, ``file out.txt line 3``) with both
values, so a report shows the line.

A run's stdout and written files are read from where they lie on disk (:class:`RunOutput` holds their
paths), a line or a chunk at a time: comparing two runs never holds a whole output in memory (a run's
stdout is capped where it is written, ``--max-output``; a written file larger than ``max_file_bytes``
is compared by size and digest only).
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from itertools import zip_longest
from pathlib import Path
from typing import IO, Any

from porter.model import UNCOMPARED
from porter.scan.timers import PrintedTimer

_NUMBER = re.compile(
    r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|inf|Inf|INF)(?![A-Za-z])"
)
_CHUNK = 1 << 20
_SHOWN_WORDS = 30  # verdict words shown per run in a difference (the count says how many there were)
_DESCRIBED = 20  # lines that vary between two runs of the original, listed one by one
_TIMED_CHARS = 4096  # a longer line is never taken for one printed from a timer (their patterns stay cheap)


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
    max_varying_lines: int = 10_000
    device_property_words: tuple[str, ...] = ()
    error_statistic_words: tuple[str, ...] = ()
    # the stdout lines the program prints from a timer (found in its source, not data): masked as time lines
    timers: tuple[PrintedTimer, ...] = ()
    # the stdout lines it prints from a property of its device (found in its source): not compared across devices
    properties: tuple[PrintedTimer, ...] = ()

    @functools.cached_property
    def timed(self) -> re.Pattern[str] | None:
        """Any stdout line a print statement of the rule's ``timers`` writes (None: none)."""
        return _stdout_lines(self.timers)

    @functools.cached_property
    def device_printed(self) -> re.Pattern[str] | None:
        """Any stdout line a print statement of the rule's ``properties`` writes (None: none)."""
        return _stdout_lines(self.properties)

    @functools.cached_property
    def masked(self) -> re.Pattern[str]:
        units = "|".join(re.escape(u) for u in sorted(self.time_units, key=len, reverse=True))
        words = "|".join(re.escape(w) for w in sorted(self.time_words, key=len, reverse=True))
        return re.compile(rf"\d\s*(?:{units})(?![A-Za-z/])|(?i:(?<![A-Za-z])(?:{words})(?![A-Za-z]))")

    @functools.cached_property
    def verdicts(self) -> re.Pattern[str]:
        words = sorted((*self.pass_words, *self.fail_words), key=len, reverse=True)
        return re.compile(r"(?<![A-Za-z])(" + "|".join(re.escape(w) for w in words) + r")(?![A-Za-z])")


def _stdout_lines(printed: Sequence[PrintedTimer]) -> re.Pattern[str] | None:
    """Any stdout line one of `printed` writes (None: none)."""
    mine = [t.pattern for t in printed if t.stream == "stdout"]
    return re.compile("|".join(f"(?:{p})" for p in mine), re.S) if mine else None


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
        max_varying_lines=int(values.get("max_varying_lines", 10_000)),
        device_property_words=tuple(values.get("device_property_words", ())),
        error_statistic_words=tuple(values.get("error_statistic_words", ())),
    )


def with_tolerance(rtol: float | None = None, atol: float | None = None) -> Rule:
    """The default rule with the tolerances given (None: the default's)."""
    base = default_rule()
    return replace(base, rtol=base.rtol if rtol is None else rtol, atol=base.atol if atol is None else atol)


# A written file: its bytes, the file holding them, or (size, sha256) of one larger than the rule's cap.
Written = bytes | Path | tuple[int, str]


@dataclass
class RunOutput:
    """What one run left: its exit code, stdout (the text, or the file it was streamed to), and the files
    it wrote (relative path -> bytes or the file holding them, or the size and digest of a file larger
    than the rule's cap)."""

    exit: int | None  # None: it did not finish (timed out, killed)
    stdout: str | Path
    files: dict[str, Written] = field(default_factory=dict)


def with_timers(rule: Rule, timers: Iterable[PrintedTimer], properties: Iterable[PrintedTimer] = ()) -> Rule:
    """`rule` with the lines a program prints from a timer masked as well, and those it prints from a property of
    its device known (:mod:`porter.scan.timers`)."""
    return replace(rule, timers=tuple(timers), properties=tuple(properties))


def _timed(line: str, rule: Rule) -> bool:
    return rule.timed is not None and len(line) <= _TIMED_CHARS and rule.timed.fullmatch(line) is not None


def is_masked(line: str, rule: Rule, timed: bool = True) -> bool:
    """Whether `line` is left out of a comparison: it reports time or throughput, or (`timed`: a line of stdout)
    the program printed it from a timer."""
    return bool(rule.masked.search(line)) or (timed and _timed(line, rule))


def timer_notes(stdout: str | Path, rule: Rule) -> list[str]:
    """Why each line of `stdout` (the original's) that only the program's source shows to be a time is not
    compared: the print statement and the timer value it prints.  (A line the rule masks by its words or units
    anyway is not listed.)"""
    if rule.timed is None:
        return []
    mine = [(t, re.compile(t.pattern, re.S)) for t in rule.timers if t.stream == "stdout"]
    said: list[str] = []
    count = 0
    for n, line in enumerate(_lines(stdout), 1):
        if rule.masked.search(line) or not _timed(line, rule):
            continue
        count += 1
        if len(said) < _DESCRIBED:
            where = next((t.where() for t, p in mine if p.fullmatch(line)), "")
            said.append(f"stdout line {n} printed from a timer ({where}): not compared")
    if count > len(said):
        said.append(f"... and {count - len(said)} more stdout line(s) printed from a timer")
    return said


def _lines(source: str | bytes | Path) -> Iterator[str]:
    """The lines of a text, of bytes or of a file (UTF-8, undecodable bytes kept as surrogates), one at a
    time; ``\\n``, ``\\r\\n`` and ``\\r`` end a line."""
    stream: IO[str]
    if isinstance(source, str):
        stream = io.StringIO(source, newline=None)
    else:
        raw: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes) else source.open("rb")
        stream = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline=None)
    with stream:
        for line in stream:
            yield line[:-1] if line.endswith("\n") else line


def _verdicts(lines: Iterable[str], rule: Rule) -> Iterator[str]:
    for line in lines:
        if not is_masked(line, rule):
            for m in rule.verdicts.finditer(line):
                yield m.group(1)


def verdict_words(text: str, rule: Rule) -> list[str]:
    return list(_verdicts(_lines(text), rule))


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
    if a == b:
        return False
    ta, na = _split(a)
    tb, nb = _split(b)
    return ta != tb or len(na) != len(nb) or not all(_close(x, y, rule) for x, y in zip(na, nb, strict=True))


def _kept(source: str | bytes | Path, rule: Rule, timed: bool = True) -> Iterator[tuple[int, str]]:
    """(line number, line) of the lines compared: the masked ones left out (`timed`: stdout, where the lines
    printed from a timer are masked too)."""
    return ((n, line) for n, line in enumerate(_lines(source), 1) if not is_masked(line, rule, timed))


def _text_differences(
    original: str | bytes | Path,
    other: str | bytes | Path,
    where: str,
    rule: Rule,
    skip: frozenset[int] = frozenset(),
    timed: bool = True,
) -> Iterator[str]:
    for k, (a, b) in enumerate(zip_longest(_kept(original, rule, timed), _kept(other, rule, timed))):
        if k in skip:
            continue
        if a is None:
            yield f"{where}: extra line in the port: {b[1].strip()[:200]!r}"
        elif b is None:
            yield f"{where} line {a[0]}: missing in the port: {a[1].strip()[:200]!r}"
        elif _lines_differ(a[1], b[1], rule):
            yield f"{where} line {a[0]}: original {a[1].strip()[:200]!r}, port {b[1].strip()[:200]!r}"


def compare_text(
    original: str | Path, other: str | Path, where: str, rule: Rule, skip: frozenset[int] = frozenset()
) -> list[str]:
    """Differences between two texts (or text files), line by line, with masked lines skipped on both
    sides and the compared lines whose index is in `skip` (lines that vary between runs of the original)
    ignored; at most ``rule.max_differences`` and a last line with how many more there were."""
    found = _Differences(rule.max_differences)
    found.extend(_text_differences(original, other, where, rule, skip))
    return found.lines()


class _Differences:
    """The first `limit` differences, and how many more there were."""

    def __init__(self, limit: int) -> None:
        self.limit, self.kept, self.more = limit, list[str](), 0

    def extend(self, found: Iterable[str]) -> None:
        for line in found:
            if len(self.kept) < self.limit:
                self.kept.append(line)
            else:
                self.more += 1

    def lines(self) -> list[str]:
        return [*self.kept, f"... and {self.more} more difference(s)"] if self.more else list(self.kept)

    def absorb(self, other: _Differences) -> None:
        """`other`'s differences after these."""
        self.extend(other.kept)
        self.more += other.more


class _Printed:
    """The verdict words one run printed, in order: a digest of them all, the first few and the count."""

    def __init__(self) -> None:
        self.digest, self.shown, self.count = hashlib.sha256(), list[str](), 0

    def add(self, words: list[str]) -> None:
        for word in words:
            self.digest.update(word.encode("utf-8", "surrogateescape") + b"\0")
            self.count += 1
            if len(self.shown) < _SHOWN_WORDS:
                self.shown.append(word)

    def __str__(self) -> str:
        more = f" ... ({self.count} in all)" if self.count > len(self.shown) else ""
        return (" ".join(self.shown) or "none") + more


@dataclass(frozen=True)
class Unstable:
    """What varies between two runs of the original (a clock-seeded random number, a count of polling
    iterations): never compared, and said in the report."""

    lines: frozenset[int] = frozenset()  # indexes among the compared (unmasked) stdout lines
    numbers: tuple[int, ...] = ()  # their line numbers in the original's stdout (the first ones)
    files: frozenset[str] = frozenset()
    exit: bool = False
    stdout: bool = False  # more lines vary than the rule's max_varying_lines: stdout is not compared
    count: int = 0  # how many compared lines vary

    def describe(self) -> list[str]:
        if self.stdout:
            out = [
                f"stdout: {self.count} or more lines vary between two runs of the original: stdout not compared"
            ]
        else:
            out = [
                f"stdout line {n} varies between two runs of the original: not compared" for n in self.numbers
            ]
            if self.count > len(self.numbers):
                out.append(f"... and {self.count - len(self.numbers)} more stdout line(s) that vary")
        out += [f"file {f} varies between two runs of the original: not compared" for f in sorted(self.files)]
        if self.exit:
            out.append("the exit code varies between two runs of the original: not compared")
        return out

    def skips(self, k: int) -> bool:
        return self.stdout or k in self.lines

    def uncompared(self) -> str:
        """What a comparison with the original leaves out because it varies, in one clause for the verdict
        ("" when nothing): its files and stdout lines, counted."""
        parts = ["stdout" if self.stdout else f"{self.count} stdout line(s)" if self.count else ""]
        parts += [f"file {f}" for f in sorted(self.files)]
        if self.exit:
            parts.append("the exit code")
        said = ", ".join(part for part in parts if part)
        return f"{UNCOMPARED} {said}" if said else ""


# how a program names its device's warp width when it prints it (not a count that merely involves warps)
_WIDTH_WORDS = re.compile(
    r"warp\s*_?size|wave(front)?\s*_?size|warp\s*width|wavefront\s*width|lanes?\s+(per|in\s+a)\s+(warp|wave)|"
    r"threads?\s+(per|in\s+a)\s+(warp|wave)",
    re.IGNORECASE,
)


def width_lines(
    original: RunOutput, other: RunOutput, widths: tuple[int, int], rule: Rule | None = None
) -> Unstable:
    """The stdout lines where a run on a device of another warp width (`widths`: the original's, the
    other's) only reports that width: a line naming the warp size (or lanes per wavefront) that differs from the
    original's, and agrees once the original's width is read as the other's (``Warp size - 32`` and
    ``- 64``); a line that counts something per warp is compared as any other.  They are the device's property, not a result: not compared, and said (``numbers``)."""
    rule = rule or default_rule()
    mine, theirs = (str(w) for w in widths)
    width = re.compile(rf"(?<![\w.]){re.escape(mine)}(?![\w.])")
    lines: set[int] = set()
    numbers: list[int] = []
    for k, (a, b) in enumerate(zip_longest(_kept(original.stdout, rule), _kept(other.stdout, rule))):
        if a is None or b is None or not _WIDTH_WORDS.search(a[1]) or not _lines_differ(a[1], b[1], rule):
            continue
        if not _lines_differ(width.sub(theirs, a[1]), b[1], rule):
            lines.add(k)
            numbers.append(a[0])
    return Unstable(lines=frozenset(lines), numbers=tuple(numbers), count=len(lines))


def as_device(other: RunOutput, names: tuple[str, str]) -> tuple[RunOutput, tuple[int, ...]]:
    """`other` (a run on another device) with the name its device calls itself (`names[1]`,
    ``cudaDeviceProp.name``) read as the original's device's (`names[0]`) wherever its stdout prints it,
    and the numbers of those lines: a line saying which device the program ran on (``GPU Device 0:
    "NVIDIA H200"``) is then compared as the original's, masked or not alike, while every other number
    on it (its compute capability) is still compared."""
    mine, theirs = (n.strip() for n in names)
    if not mine or not theirs or mine == theirs:
        return other, ()
    lines = list(_lines(other.stdout))
    numbers = tuple(n for n, line in enumerate(lines, 1) if theirs in line)
    if not numbers:
        return other, ()
    text = "\n".join(line.replace(theirs, mine) for line in lines) + "\n"
    return replace(other, stdout=text), numbers


def _phrases(words: Sequence[str]) -> re.Pattern[str]:
    """Any of `words` as a whole word or phrase (runs of spaces as any whitespace), any case."""
    alternatives = "|".join(re.escape(w).replace("\\ ", r"\s+") for w in words)
    return re.compile(r"(?<!\w)(" + alternatives + r")(?!\w)", re.IGNORECASE)


def _differing_lines_naming(
    words: re.Pattern[str] | Callable[[str], bool], original: RunOutput, other: RunOutput, rule: Rule
) -> tuple[set[int], list[int], list[tuple[str, str]]]:
    """The kept lines where both runs' lines name one of `words` (or both are lines `words`, a test of a line,
    accepts) and differ: their indexes among kept lines, the original's line numbers, and both lines' texts."""
    named = words if callable(words) else lambda line: words.search(line) is not None
    lines: set[int] = set()
    numbers: list[int] = []
    texts: list[tuple[str, str]] = []
    for k, (a, b) in enumerate(zip_longest(_kept(original.stdout, rule), _kept(other.stdout, rule))):
        if a is None or b is None or not named(a[1]) or not named(b[1]):
            continue
        if _lines_differ(a[1], b[1], rule):
            lines.add(k)
            numbers.append(a[0])
            texts.append((a[1].strip(), b[1].strip()))
    return lines, numbers, texts


def property_lines(original: RunOutput, other: RunOutput, rule: Rule | None = None) -> Unstable:
    """The stdout lines where a run on another device only reports a property of its device (``Total Global
    Memory - 16777216 KB`` against the other device's): both lines name one of the rule's
    ``device_property_words``, or both are lines a print statement of the rule's ``properties`` writes (the
    program's source prints them from ``cudaGetDeviceProperties``' fields and the like), and they differ.  Not
    compared across devices, and said (``numbers``)."""
    rule = rule or default_rule()
    words = _phrases(rule.device_property_words) if rule.device_property_words else None
    printed = rule.device_printed

    def named(line: str) -> bool:
        if words is not None and words.search(line):
            return True
        return printed is not None and len(line) <= _TIMED_CHARS and printed.fullmatch(line) is not None

    if words is None and printed is None:
        return Unstable()
    lines, numbers, _texts = _differing_lines_naming(named, original, other, rule)
    return Unstable(lines=frozenset(lines), numbers=tuple(numbers), count=len(lines))


def _own_check_passed(stdout: str | Path, statistic: re.Pattern[str], rule: Rule) -> bool:
    """Whether a run's stdout, outside the lines naming an error statistic, prints a pass word and no fail
    word: the program's own check of its result passed."""
    kept = (line for _n, line in _kept(stdout, rule) if not statistic.search(line))
    words = list(_verdicts(kept, rule))
    fails = set(rule.fail_words)
    return bool(words) and not any(w in fails for w in words)


def statistic_lines(
    original: RunOutput, other: RunOutput, rule: Rule | None = None
) -> tuple[Unstable, list[str]]:
    """The stdout lines where a run on another device only reports the program's own error statistic
    (``Max absolute error: 1.049042E-05`` against the original's ``1.192093E-05``): both lines name one of the
    rule's ``error_statistic_words`` and differ, and the program's own check passed in both runs
    (:func:`_own_check_passed`).  That is the device's rounding, not a result: not compared across devices, and
    said -- the lines, and one description of each with both texts.  Where either run's check did not pass,
    nothing is left out."""
    rule = rule or default_rule()
    if not rule.error_statistic_words:
        return Unstable(), []
    words = _phrases(rule.error_statistic_words)
    if not (_own_check_passed(original.stdout, words, rule) and _own_check_passed(other.stdout, words, rule)):
        return Unstable(), []
    lines, numbers, texts = _differing_lines_naming(words, original, other, rule)
    said = [f"stdout line {n}: original {a!r}, port {b!r}" for n, (a, b) in zip(numbers, texts, strict=True)]
    return Unstable(lines=frozenset(lines), numbers=tuple(numbers), count=len(lines)), said


def unstable(first: RunOutput, second: RunOutput, rule: Rule | None = None) -> Unstable:
    """What differs between two runs of the same original build."""
    rule = rule or default_rule()
    lines: set[int] = set()
    numbers: list[int] = []
    count = 0
    for k, (a, b) in enumerate(zip_longest(_kept(first.stdout, rule), _kept(second.stdout, rule))):
        if a is None or b is None or _lines_differ(a[1], b[1], rule):
            count += 1
            if count > rule.max_varying_lines:
                break
            lines.add(k)
            if a is not None and len(numbers) < _DESCRIBED:
                numbers.append(a[0])
    files = {
        name
        for name in set(first.files) | set(second.files)
        if name not in first.files
        or name not in second.files
        or _size_digest(first.files[name]) != _size_digest(second.files[name])
    }
    if count > rule.max_varying_lines:
        return Unstable(frozenset(), (), frozenset(files), first.exit != second.exit, True, count - 1)
    return Unstable(
        frozenset(lines), tuple(numbers), frozenset(files), first.exit != second.exit, False, count
    )


# ------------------------------------------------------------------------------------- written files


def _size(data: Written) -> int:
    if isinstance(data, tuple):
        return data[0]
    return len(data) if isinstance(data, bytes) else data.stat().st_size


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _size_digest(data: Written) -> tuple[int, str]:
    if isinstance(data, tuple):
        return data
    if isinstance(data, bytes):
        return len(data), hashlib.sha256(data).hexdigest()
    st = data.stat()
    return st.st_size, _file_digest(str(data), st.st_size, st.st_mtime_ns)


def _chunks(data: bytes | Path) -> Iterator[bytes]:
    if isinstance(data, bytes):
        for at in range(0, len(data), _CHUNK):
            yield data[at : at + _CHUNK]
        return
    with data.open("rb") as f:
        yield from iter(lambda: f.read(_CHUNK), b"")


def _is_text(data: bytes | Path) -> bool:
    """No NUL byte and valid UTF-8, read a chunk at a time."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for chunk in _chunks(data):
            if b"\0" in chunk:
                return False
            decoder.decode(chunk)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _first_difference(a: bytes | Path, b: bytes | Path) -> int | None:
    """The offset of the first byte where `a` and `b` differ (the shorter one's length when one is a
    prefix of the other), None when they are equal; read a chunk at a time."""
    at = 0
    ia, ib = _chunks(a), _chunks(b)
    pending_a, pending_b = b"", b""
    while True:
        if not pending_a:
            pending_a = next(ia, b"")
        if not pending_b:
            pending_b = next(ib, b"")
        if not pending_a or not pending_b:
            return None if pending_a == pending_b else at
        n = min(len(pending_a), len(pending_b))
        if pending_a[:n] != pending_b[:n]:
            return at + next(i for i in range(n) if pending_a[i] != pending_b[i])
        at += n
        pending_a, pending_b = pending_a[n:], pending_b[n:]


def _file_differences(name: str, fa: Written, fb: Written, rule: Rule) -> Iterator[str]:
    if (
        isinstance(fa, tuple)
        or isinstance(fb, tuple)
        or _size(fa) > rule.max_file_bytes
        or _size(fb) > rule.max_file_bytes
    ):
        da, db = _size_digest(fa), _size_digest(fb)
        if da != db:
            yield f"file {name}: differs ({da[0]} bytes in the original, {db[0]} in the port)"
        return
    if _is_text(fa) and _is_text(fb):
        yield from _text_differences(fa, fb, f"file {name}", rule, timed=False)
        return
    at = _first_difference(fa, fb)
    if at is not None:
        yield (
            f"file {name}: bytes differ from offset {at} ({_size(fa)} bytes in the original, "
            f"{_size(fb)} in the port)"
        )


def compare(
    original: RunOutput, other: RunOutput, rule: Rule | None = None, varies: Unstable | None = None
) -> list[str]:
    """Every difference between two runs (empty: they agree), at most ``rule.max_differences`` of them
    and a last line with how many more there were.  What ``varies`` between runs of the original is not
    compared."""
    rule = rule or default_rule()
    varies = varies or Unstable()
    found = _Differences(rule.max_differences)
    if original.exit != other.exit and not varies.exit:
        found.extend([f"exit code: original {original.exit}, port {other.exit}"])
    # one pass over both outputs: the verdict words of the lines compared (their sequences hashed, the
    # first ones kept to be shown) and the lines that differ
    printed = (_Printed(), _Printed())
    lines = _Differences(rule.max_differences)
    for k, (a, b) in enumerate(zip_longest(_kept(original.stdout, rule), _kept(other.stdout, rule))):
        if varies.skips(k):
            continue
        for side, line in zip(printed, (a, b), strict=True):
            if line is not None:
                side.add(rule.verdicts.findall(line[1]))
        if a is None:
            lines.extend([f"stdout: extra line in the port: {b[1].strip()[:200]!r}"])
        elif b is None:
            lines.extend([f"stdout line {a[0]}: missing in the port: {a[1].strip()[:200]!r}"])
        elif _lines_differ(a[1], b[1], rule):
            lines.extend(
                [f"stdout line {a[0]}: original {a[1].strip()[:200]!r}, port {b[1].strip()[:200]!r}"]
            )
    if printed[0].digest.digest() != printed[1].digest.digest():
        found.extend([f"verdict: the original prints {printed[0]}, the port {printed[1]}"])
    found.absorb(lines)
    for name in sorted(set(original.files) | set(other.files)):
        if name in varies.files:
            continue
        fa, fb = original.files.get(name), other.files.get(name)
        if fb is None:
            found.extend([f"file {name}: written by the original only"])
        elif fa is None:
            found.extend([f"file {name}: written by the port only"])
        else:
            found.extend(_file_differences(name, fa, fb, rule))
    return found.lines()


def also_varies(
    varies: Unstable | None,
    original: RunOutput,
    others: Sequence[tuple[Unstable, RunOutput]],
    rule: Rule | None = None,
) -> Unstable | None:
    """`varies` (what varies between two runs of `original`) and what varies between two runs of the same
    original on another device (`others`: each one's Unstable and output): its files and exit code, and its stdout
    lines where that output has as many compared lines as `original` (line k is then the same line)."""
    rule = rule or default_rule()
    if not any(u.files or u.exit or u.lines or u.stdout for u, _ in others):
        return varies
    mine = varies or Unstable()
    count = sum(1 for _ in _kept(original.stdout, rule))
    lines, files, exit, stdout = set(mine.lines), set(mine.files), mine.exit, mine.stdout
    for u, out in others:
        files |= u.files
        exit = exit or u.exit
        if sum(1 for _ in _kept(out.stdout, rule)) == count:
            lines |= u.lines
            stdout = stdout or u.stdout
    return replace(
        mine, lines=frozenset(lines), files=frozenset(files), exit=exit, stdout=stdout,
        count=max(mine.count, len(lines)),
    )  # fmt: skip


def nothing_compared(original: RunOutput, rule: Rule | None = None, varies: Unstable | None = None) -> str:
    """Why a comparison with `original` rests on nothing the original determines ("" when it does not): it
    printed lines or wrote files, and every one of them varies between two of its own runs (``varies``), so
    that only its exit code would be compared -- no evidence that a port does what it does."""
    rule = rule or default_rule()
    varies = varies or Unstable()
    printed = sum(1 for _ in _kept(original.stdout, rule))
    if not (printed or original.files):
        return ""  # a program whose whole output is its exit code: that is compared
    if any(not varies.skips(k) for k in range(printed)) or any(f not in varies.files for f in original.files):
        return ""
    what = [f"the {printed} stdout line(s) it prints"] if printed else []
    what += [f"file {f}" for f in sorted(original.files)]
    return (
        f"nothing compared: {', '.join(what)} are all left out (they vary between two runs of the original, or "
        "report the device a run was on), so nothing it determines is left to compare a port with"
    )


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every regular file under `folder` (symbolic links neither listed nor
    followed), by relative path."""
    found: dict[str, tuple[int, int]] = {}
    for here, _dirs, names in os.walk(folder):  # symbolic links to folders are not entered
        for name in names:
            p = Path(here, name)
            try:
                st = p.lstat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return found


def written_files(
    folder: Path, before: Mapping[str, tuple[int, int]], rule: Rule, skip: Sequence[str] = ()
) -> dict[str, Written]:
    """The files under `folder` that are new or changed since `before`: each file's path (its bytes
    stay on disk until compared), or its size and digest beyond the rule's cap; paths under `skip` are
    left out."""
    out: dict[str, Written] = {}
    for rel, seen in snapshot(folder).items():
        if before.get(rel) == seen or any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in skip):
            continue
        path = folder / rel
        out[rel] = _size_digest(path) if seen[0] > rule.max_file_bytes else path
    return out


__all__ = [
    "Rule",
    "RunOutput",
    "Unstable",
    "Written",
    "also_varies",
    "compare",
    "compare_text",
    "default_rule",
    "is_masked",
    "nothing_compared",
    "snapshot",
    "timer_notes",
    "unstable",
    "verdict_words",
    "with_timers",
    "with_tolerance",
    "written_files",
]
