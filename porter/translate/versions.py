"""CUDA version tests that every CUDA a program can come from decides the same way.

A target that defines no CUDA version macro (HIP, OpenCL C) reads ``CUDART_VERSION`` as 0 in an ``#if``, so a
version test takes whichever branch a CUDA older than 1.0 would.  That is the HIP translation's documented
policy for a test that gates a newer CUDA feature (``#if CUDART_VERSION >= 11000``: the fallback path), but the
reverse of what a fallback for an *old* CUDA means: rodinia cfd's ``#if CUDART_VERSION < 3000`` defines its
own ``double3`` for CUDA 2, which had none, and the port then defines it beside the target's built-in one.

The rule, with the data from each target's table (``[version_tests]``): the oldest CUDA porter ports from
(``oldest_source``) and, per version macro, its value at a CUDA ``major.minor``.  A comparison of such a
macro with an integer constant, written in an ``#if`` / ``#elif`` condition, whose value is the same for
every CUDA from ``oldest_source`` on (``CUDART_VERSION < 3000``: false; ``>= 3000``: true) is *decided*:
:func:`decided_tests` finds it and :meth:`VersionTest.replacement` is the constant the translation writes in
its place, the comparison kept beside it in a comment and the line count unchanged.  A comparison whose value
depends on the CUDA (``>= 11000``) is left to the target's own policy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from porter.model import Severity

# the comparison with the macro on the left: `3000 > V` is `V < 3000`
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}
# what may stand between the comparison and the directive's condition (`!(V < 3000) && defined(X)`)
_EXPRESSIONS = frozenset(
    {"parenthesized_expression", "unary_expression", "binary_expression", "conditional_expression"}
)
_CONDITIONS = frozenset({"preproc_if", "preproc_elif"})
_NAME_TESTS = frozenset({"preproc_ifdef", "preproc_elifdef"})
_INTEGER = re.compile(r"(0[xX][0-9A-Fa-f]+|0[0-7]*|[1-9][0-9]*)[uUlL]*")


@dataclass(frozen=True)
class VersionRule:
    """A target's ``[version_tests]``: the oldest CUDA porter ports from and each macro's value there."""

    oldest: str  # "8.0"
    floors: Mapping[str, int]  # macro -> its value at that CUDA (CUDART_VERSION: 8000)
    severity: Severity
    reason: str  # {construct} {value} {constant} {oldest}
    pattern: re.Pattern[bytes]  # where in the bytes a macro's name may be
    # what to say of a test the rule leaves undecided (its fallback path), where the target's other tables
    # say nothing: "" for none
    fallback_reason: str = ""

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> VersionRule | None:
        """The rule of a ``[version_tests]`` table; None for a missing or empty one."""
        macros = table.get("macros", {})
        if not macros:
            return None
        oldest = str(table["oldest_source"])
        major, _, minor = oldest.partition(".")
        floors = {
            name: int(major) * int(spec.get("major", 0)) + int(minor or 0) * int(spec.get("minor", 0))
            for name, spec in macros.items()
        }
        names = b"|".join(re.escape(n.encode()) for n in sorted(floors, key=len, reverse=True))
        return cls(
            oldest=oldest,
            floors=floors,
            severity=Severity(table.get("severity", "info")),
            reason=str(table["reason"]),
            pattern=re.compile(rb"(?<![A-Za-z0-9_$])(?:" + names + rb")(?![A-Za-z0-9_$])"),
            fallback_reason=str(table.get("fallback_reason", "")),
        )

    def explain(self, test: VersionTest) -> str:
        return self.reason.format(
            construct=test.text,
            value="true" if test.value else "false",
            constant=int(test.value),
            oldest=self.oldest,
        )


@dataclass(frozen=True)
class VersionTest:
    """A decided comparison: its bytes in the source, as written (spaces squashed), and its value."""

    start: int
    end: int
    row: int  # 0-based row of its first byte
    macro: str
    text: str
    value: bool
    newlines: int  # line continuations inside it, kept by the replacement

    def replacement(self, oldest: str) -> str:
        """``0 /* porter: CUDART_VERSION < 3000 is false from CUDA 8.0 on */``, on as many lines."""
        said = "true" if self.value else "false"
        return (
            f"{int(self.value)} /* porter: {self.text} is {said} from CUDA {oldest} on */"
            + " \\\n" * self.newlines
        )


def _integer(text: str) -> int | None:
    m = _INTEGER.fullmatch(text)
    if m is None:
        return None
    digits = m.group(1)
    if digits.startswith(("0x", "0X")):
        return int(digits, 16)
    return int(digits, 8) if digits.startswith("0") else int(digits)


def _always(op: str, bound: int, floor: int) -> bool | None:
    """The value of ``V op bound`` for every V >= floor, or None when it depends on V."""
    if op in ("<", ">="):
        return op == ">=" if bound <= floor else None
    if op in ("<=", ">", "==", "!="):
        return op in (">", "!=") if bound < floor else None
    return None


def _in_condition(node: Any, through: frozenset[str] = _EXPRESSIONS) -> bool:
    """Is the expression `node` (a part of) an ``#if`` / ``#elif`` condition, or the name an ``#ifdef`` tests?"""
    while node.parent is not None and node.parent.type in through:
        node = node.parent
    parent = node.parent
    if parent is None:
        return False
    if parent.type in _CONDITIONS:
        tested = parent.child_by_field_name("condition")
    elif parent.type in _NAME_TESTS:
        tested = parent.child_by_field_name("name")
    else:
        return False
    return tested is not None and tested.start_byte == node.start_byte and tested.end_byte == node.end_byte


def decide(identifier: Any, rule: VersionRule) -> VersionTest | None:
    """The decided comparison whose operand is `identifier` (a tree node naming a version macro), or None."""
    name = identifier.text.decode("ascii", "replace")
    floor = rule.floors.get(name)
    cmp = identifier.parent
    if floor is None or cmp is None or cmp.type != "binary_expression":
        return None
    left, right = cmp.child_by_field_name("left"), cmp.child_by_field_name("right")
    op_node = cmp.child_by_field_name("operator")
    if left is None or right is None or op_node is None:
        return None
    op = op_node.type
    if op not in _FLIP:
        return None
    if left.id == identifier.id and right.type == "number_literal":
        other = right
    elif right.id == identifier.id and left.type == "number_literal":
        other, op = left, _FLIP[op]
    else:
        return None
    bound = _integer(other.text.decode("ascii", "replace"))
    if bound is None:
        return None
    value = _always(op, bound, floor)
    if value is None or not _in_condition(cmp):
        return None
    raw = cmp.text.decode("utf-8", "surrogateescape")
    return VersionTest(
        start=cmp.start_byte,
        end=cmp.end_byte,
        row=cmp.start_point[0],
        macro=name,
        text=" ".join(raw.replace("\\\n", " ").replace("\\\r\n", " ").split()),
        value=value,
        newlines=raw.count("\n"),
    )


def decided_tests(src: bytes, root: Any, rule: VersionRule | None) -> list[VersionTest]:
    """Every decided version test in the ``#if`` / ``#elif`` conditions of `src` (parsed as `root`), in order."""
    if rule is None:
        return []
    out: list[VersionTest] = []
    for node in _macro_nodes(src, root, rule):
        test = decide(node, rule)
        if test is not None and (not out or out[-1].end <= test.start):
            out.append(test)
    return out


def _macro_nodes(src: bytes, root: Any, rule: VersionRule) -> list[Any]:
    out = []
    for m in rule.pattern.finditer(src):
        node = root.descendant_for_byte_range(m.start(), m.end())
        if node is not None and node.type == "identifier" and (node.start_byte, node.end_byte) == m.span():
            out.append(node)  # (not a comment, a string, a macro body ...)
    return out


def fallback_uses(src: bytes, root: Any, rule: VersionRule | None) -> list[tuple[int, str]]:
    """(byte offset, macro) of each version macro a conditional directive tests (``#if``, ``#elif``,
    ``#ifdef``, ``defined(...)``) outside the decided tests: where the target takes the fallback path."""
    if rule is None:
        return []
    decided = [(t.start, t.end) for t in decided_tests(src, root, rule)]
    out: list[tuple[int, str]] = []
    for node in _macro_nodes(src, root, rule):
        if any(a <= node.start_byte < b for a, b in decided):
            continue
        if _in_condition(node, _EXPRESSIONS | {"preproc_defined"}):
            out.append((node.start_byte, node.text.decode("ascii", "replace")))
    return out
