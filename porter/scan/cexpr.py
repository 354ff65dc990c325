"""A tiny, safe evaluator for the C arithmetic found in host code and spec files.

Spec inference reads expressions such as ``(n + BLOCK - 1) / BLOCK`` or ``M * K * sizeof(float)``
out of source text.  They are parsed here into a small tree and evaluated with C semantics
(integer division truncates toward zero, ``%`` takes the sign of the dividend, casts truncate) --
never with Python's ``eval``.

Supported: integer and floating literals (with C suffixes), names, ``+ - * / % << >> & | ^ ~ !``,
comparisons, ``&& ||``, ``?:``, parentheses, casts to arithmetic types, ``sizeof(T)`` /
``sizeof(expr)``, ``min``/``max`` (also ``std::``, ``fminf``...), and calls to function-like macros.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

Value = int | float
_T = TypeVar("_T")


class ExprError(ValueError):
    """The text is not an expression this evaluator understands, or a name has no value."""


# Integers stay within what C's widest types hold (with headroom for unsigned long long): a larger
# value is an overflow in C, and unbounded Python integers (`1 << 99999999`, `n << n << n`) would
# only cost memory and time.
INT_LIMIT = 1 << 64
MAX_SHIFT = 64
TOO_DEEP = "expression too deeply nested"


def _bounded(fn: Callable[..., _T]) -> Callable[..., _T]:
    """``fn`` with Python's recursion limit turned into an ExprError (the trees are walked
    recursively; an expression nested thousands deep is not one porter evaluates)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> _T:
        try:
            return fn(*args, **kwargs)
        except RecursionError:
            raise ExprError(TOO_DEEP) from None

    return wrapper


def _checked(value: Value) -> Value:
    if isinstance(value, int) and not -INT_LIMIT <= value <= INT_LIMIT:
        raise ExprError("integer overflow (the value does not fit in 64 bits)")
    return value


# ----------------------------------------------------------------------------- tree


@dataclass(frozen=True)
class Num:
    value: Value
    text: str


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Expr


@dataclass(frozen=True)
class Binary:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Cond:
    test: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class SizeOf:
    text: str  # a type name ("float") or an expression as written ("*d_a")


@dataclass(frozen=True)
class Cast:
    type: str
    operand: Expr


Expr = Num | Name | Unary | Binary | Cond | Call | SizeOf | Cast

# ----------------------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fFlL]?|\d+[eE][+-]?\d+[fFlL]?|\d+[fF](?![\w]))
  | (?P<int>0[xX][0-9a-fA-F]+[uUlL]*|0[bB][01]+[uUlL]*|\d+[uUlL]*)
  | (?P<name>(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)
  | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>?:(),\[\]])
    """,
    re.VERBOSE,
)

# Words that may make up an arithmetic type in a cast or sizeof.
TYPE_WORDS = frozenset(
    [
        "void",
        "char",
        "short",
        "int",
        "long",
        "float",
        "double",
        "signed",
        "unsigned",
        "bool",
        "const",
        "volatile",
        "size_t",
        "ssize_t",
        "ptrdiff_t",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "uint8_t",
        "uint16_t",
        "uint32_t",
        "uint64_t",
        "half",
        "__half",
        "__nv_bfloat16",
        "std::size_t",
        "std::int32_t",
        "std::int64_t",
        "std::uint32_t",
        "std::uint64_t",
    ]
)

_INT_TYPES = frozenset(
    [
        "char",
        "short",
        "int",
        "long",
        "signed",
        "unsigned",
        "bool",
        "size_t",
        "ssize_t",
        "ptrdiff_t",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "uint8_t",
        "uint16_t",
        "uint32_t",
        "uint64_t",
        "std::size_t",
        "std::int32_t",
        "std::int64_t",
        "std::uint32_t",
        "std::uint64_t",
    ]
)

_MIN_MAX = {
    "min": min,
    "max": max,
    "std::min": min,
    "std::max": max,
    "fminf": min,
    "fmaxf": max,
    "fmin": min,
    "fmax": max,
    "umin": min,
    "umax": max,
}


def tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExprError(f"unexpected character {text[pos]!r} in {text!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append((kind, m.group()))
    return tokens


def _int_literal(text: str) -> int:
    digits = text.rstrip("uUlL")
    if digits[:2] in ("0x", "0X"):
        return int(digits, 16)
    if digits[:2] in ("0b", "0B"):
        return int(digits[2:], 2)
    if len(digits) > 1 and digits.startswith("0"):
        return int(digits, 8)
    return int(digits)


# ----------------------------------------------------------------------------- parser

_BINARY_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "<": 7,
    ">": 7,
    "<=": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
}


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self, ahead: int = 0) -> tuple[str, str] | None:
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            want = f"{value!r}" if value else "more input"
            raise ExprError(f"expected {want} in {self.text!r}")
        self.pos += 1
        return tok

    def parse(self) -> Expr:
        expr = self.expression()
        if self.peek() is not None:
            raise ExprError(f"unexpected {self.peek()[1]!r} in {self.text!r}")  # type: ignore[index]
        return expr

    def expression(self) -> Expr:
        test = self.binary(1)
        tok = self.peek()
        if tok and tok[1] == "?":
            self.take("?")
            then = self.expression()
            self.take(":")
            other = self.expression()
            return Cond(test, then, other)
        return test

    def binary(self, min_prec: int) -> Expr:
        left = self.unary()
        while True:
            tok = self.peek()
            if tok is None or tok[0] != "op" or tok[1] not in _BINARY_PRECEDENCE:
                return left
            prec = _BINARY_PRECEDENCE[tok[1]]
            if prec < min_prec:
                return left
            self.take()
            right = self.binary(prec + 1)
            left = Binary(tok[1], left, right)

    def _type_in_parens(self) -> str | None:
        """If the tokens at pos are `( type-words [*...] )`, the type text; else None."""
        i = 1
        words: list[str] = []
        while (tok := self.peek(i)) is not None and (tok[1] in TYPE_WORDS or tok[1] == "*"):
            words.append(tok[1])
            i += 1
        tok = self.peek(i)
        if words and tok is not None and tok[1] == ")" and any(w != "*" for w in words):
            return " ".join(words)
        return None

    def unary(self) -> Expr:
        tok = self.peek()
        if tok is None:
            raise ExprError(f"incomplete expression {self.text!r}")
        if tok[1] in ("-", "+", "~", "!"):
            self.take()
            return Unary(tok[1], self.unary())
        if tok[1] == "(":
            cast = self._type_in_parens()
            if cast is not None:
                while self.take()[1] != ")":
                    pass
                return Cast(cast, self.unary())
        return self.primary()

    def primary(self) -> Expr:
        kind, text = self.take()
        if kind == "int":
            return Num(_int_literal(text), text)
        if kind == "float":
            return Num(float(text.rstrip("fFlL")), text)
        if text == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if kind == "name":
            if text == "sizeof":
                return self._sizeof()
            nxt = self.peek()
            if nxt and nxt[1] == "(":
                self.take("(")
                args: list[Expr] = []
                if self.peek() and self.peek()[1] != ")":  # type: ignore[index]
                    args.append(self.expression())
                    while self.peek() and self.peek()[1] == ",":  # type: ignore[index]
                        self.take(",")
                        args.append(self.expression())
                self.take(")")
                return Call(text, tuple(args))
            return Name(text)
        raise ExprError(f"unexpected {text!r} in {self.text!r}")

    def _sizeof(self) -> SizeOf:
        self.take("(")
        depth = 1
        parts: list[str] = []
        while depth:
            _, text = self.take()
            if text == "(":
                depth += 1
            elif text == ")":
                depth -= 1
                if depth == 0:
                    break
            parts.append(text)
        return SizeOf(" ".join(parts))


@_bounded
def parse(text: str) -> Expr:
    """Parse C expression text into a tree (raises ExprError)."""
    text = text.strip()
    if not text:
        raise ExprError("empty expression")
    return _Parser(text).parse()


# ----------------------------------------------------------------------------- operations on trees


@_bounded
def names(expr: Expr) -> set[str]:
    """Free names in the expression (not function names, not sizeof operands)."""
    match expr:
        case Name(name):
            return {name}
        case Unary(_, x) | Cast(_, x):
            return names(x)
        case Binary(_, a, b):
            return names(a) | names(b)
        case Cond(t, a, b):
            return names(t) | names(a) | names(b)
        case Call(_, args):
            out: set[str] = set()
            for a in args:
                out |= names(a)
            return out
    return set()


@_bounded
def calls(expr: Expr) -> set[str]:
    match expr:
        case Call(func, args):
            out = {func}
            for a in args:
                out |= calls(a)
            return out
        case Unary(_, x) | Cast(_, x):
            return calls(x)
        case Binary(_, a, b):
            return calls(a) | calls(b)
        case Cond(t, a, b):
            return calls(t) | calls(a) | calls(b)
    return set()


@_bounded
def substitute(
    expr: Expr, values: Mapping[str, Expr], macros: Mapping[str, tuple[tuple[str, ...], Expr]] = {}
) -> Expr:
    """Replace names by trees and expand calls to function-like macros (params, body)."""

    def sub(e: Expr) -> Expr:
        match e:
            case Name(name) if name in values:
                return values[name]
            case Unary(op, x):
                return Unary(op, sub(x))
            case Cast(t, x):
                return Cast(t, sub(x))
            case Binary(op, a, b):
                return Binary(op, sub(a), sub(b))
            case Cond(t, a, b):
                return Cond(sub(t), sub(a), sub(b))
            case Call(func, args):
                new_args = tuple(sub(a) for a in args)
                if func in macros:
                    params, body = macros[func]
                    if len(params) != len(new_args):
                        raise ExprError(f"macro {func} takes {len(params)} arguments, got {len(new_args)}")
                    return substitute(body, dict(zip(params, new_args, strict=True)))
                return Call(func, new_args)
        return e

    return sub(expr)


@_bounded
def multiplicands(expr: Expr) -> list[Expr]:
    """The factors of a product chain `a * b * c` (one element when not a product)."""
    if isinstance(expr, Binary) and expr.op == "*":
        return multiplicands(expr.left) + multiplicands(expr.right)
    return [expr]


def product(factors: list[Expr]) -> Expr:
    if not factors:
        return Num(1, "1")
    out = factors[0]
    for f in factors[1:]:
        out = Binary("*", out, f)
    return out


def _c_div(a: Value, b: Value) -> Value:
    if b == 0:
        raise ExprError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _c_mod(a: Value, b: Value) -> Value:
    if b == 0:
        raise ExprError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _c_div(a, b)
    return math.fmod(a, b)


def _int_only(op: str, a: Value, b: Value) -> tuple[int, int]:
    if not (isinstance(a, int) and isinstance(b, int)):
        raise ExprError(f"operator {op} needs integers")
    return a, b


@_bounded
def evaluate(
    expr: Expr,
    env: Mapping[str, Value] = {},
    sizeof: Callable[[str], int] | None = None,
) -> Value:
    """The value of the expression with C semantics. Unknown names raise ExprError."""

    def ev(e: Expr) -> Value:
        match e:
            case Num(value, _):
                return _checked(value)
            case Name(name):
                if name not in env:
                    raise ExprError(f"no value for {name!r}")
                return env[name]
            case SizeOf(text):
                if sizeof is None:
                    raise ExprError(f"sizeof({text}) is unknown here")
                return sizeof(text)
            case Cast(t, x):
                v = ev(x)
                words = set(t.replace("*", " ").split())
                if "*" in t:
                    raise ExprError(f"pointer cast ({t}) in arithmetic")
                if words & _INT_TYPES and not words & {"float", "double"}:
                    if isinstance(v, float) and not math.isfinite(v):
                        raise ExprError(f"({t}) of {v}: not an integer")
                    return _checked(int(v))  # C truncates toward zero
                if words & {"float", "double", "half", "__half"}:
                    return float(v)
                return v
            case Unary(op, x):
                v = ev(x)
                if op == "-":
                    return -v
                if op == "+":
                    return v
                if op == "!":
                    return int(not v)
                if not isinstance(v, int):
                    raise ExprError("operator ~ needs an integer")
                return ~v
            case Cond(t, a, b):
                return ev(a) if ev(t) else ev(b)
            case Call(func, args):
                if func in _MIN_MAX and len(args) == 2:
                    return _MIN_MAX[func](ev(args[0]), ev(args[1]))
                raise ExprError(f"cannot evaluate call to {func}()")
            case Binary(op, a, b):
                if op == "&&":
                    return int(bool(ev(a)) and bool(ev(b)))
                if op == "||":
                    return int(bool(ev(a)) or bool(ev(b)))
                left, right = ev(a), ev(b)
                return _checked(_binary(op, left, right))
        raise ExprError(f"cannot evaluate {e!r}")

    return ev(expr)


def _binary(op: str, x: Value, y: Value) -> Value:
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return _c_div(x, y)
    if op == "%":
        return _c_mod(x, y)
    if op in ("<<", ">>"):
        i, j = _int_only(op, x, y)
        if not 0 <= j <= MAX_SHIFT:
            raise ExprError(f"shift count {j} out of range (0 to {MAX_SHIFT})")
        return i << j if op == "<<" else i >> j
    if op == "&":
        i, j = _int_only(op, x, y)
        return i & j
    if op == "|":
        i, j = _int_only(op, x, y)
        return i | j
    if op == "^":
        i, j = _int_only(op, x, y)
        return i ^ j
    comparisons = {
        "<": x < y,
        ">": x > y,
        "<=": x <= y,
        ">=": x >= y,
        "==": x == y,
        "!=": x != y,
    }
    return int(comparisons[op])


@_bounded
def render(expr: Expr) -> str:
    """Expression text, parenthesised only where C precedence needs it."""

    def r(e: Expr, parent: int = 0, right: bool = False) -> str:
        match e:
            case Num(_, text):
                return text
            case Name(name):
                return name
            case SizeOf(text):
                return f"sizeof({text})"
            case Cast(t, x):
                return f"({t}){r(x, 11)}"
            case Unary(op, x):
                return f"{op}{r(x, 11)}"
            case Call(func, args):
                return f"{func}({', '.join(r(a) for a in args)})"
            case Cond(t, a, b):
                s = f"{r(t, 1)} ? {r(a)} : {r(b)}"
                return f"({s})" if parent else s
            case Binary(op, a, b):
                prec = _BINARY_PRECEDENCE[op]
                s = f"{r(a, prec)} {op} {r(b, prec, True)}"
                needs = prec < parent or (right and prec == parent)
                return f"({s})" if needs else s
        raise ExprError(f"cannot render {e!r}")

    return r(expr)


def eval_text(text: str, env: Mapping[str, Value] = {}, sizeof: Callable[[str], int] | None = None) -> Value:
    """Parse and evaluate in one step."""
    return evaluate(parse(text), env, sizeof)
