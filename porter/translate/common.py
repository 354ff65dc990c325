"""Helpers shared by the deterministic translators (CUDA -> HIP, CUDA -> OpenCL).

* :func:`c_tokens`: a small C/C++ tokenizer for text tree-sitter leaves unparsed, above all
  macro bodies (``preproc_arg``): identifiers, numbers and punctuation with their offsets, string
  and character literals and comments recognised so that nothing inside them is ever renamed.
* :func:`split_call_args`: the top-level arguments of a call written in such tokens.

Add only: other translators use these.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

IDENT = "ident"
NUMBER = "number"
STRING = "string"
CHAR = "char"
COMMENT = "comment"
PUNCT = "punct"


@dataclass(frozen=True)
class Token:
    kind: str  # ident | number | string | char | comment | punct
    start: int  # character offset in the tokenized text
    end: int
    text: str


_TOKEN = re.compile(
    r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>(?:u8|[uUL])?"(?:[^"\\\n]|\\.|\\\n)*(?:"|$))
  | (?P<char>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*(?:'|$))
  | (?P<number>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.']|)*)
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<space>(?:\s|\\\n)+)
  | (?P<punct><<<|>>>|::|->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\#\#|[-+*/%&|^!~=<>?:;,.(){}\[\]\#\\@`])
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)


def c_tokens(text: str) -> Iterator[Token]:
    """Tokens of C/C++ source text (whitespace and line continuations dropped)."""
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:  # a character no rule knows (stray non-ASCII): one punctuation token
            yield Token(PUNCT, pos, pos + 1, text[pos])
            pos += 1
            continue
        kind = m.lastgroup or PUNCT
        if kind != "space":
            yield Token(kind, m.start(), m.end(), m.group())
        pos = m.end()


def code_tokens(text: str) -> list[Token]:
    """:func:`c_tokens` without comments."""
    return [t for t in c_tokens(text) if t.kind != COMMENT]


def split_call_args(tokens: Sequence[Token], open_index: int) -> tuple[list[list[Token]], int] | None:
    """Arguments of the call whose ``(`` is ``tokens[open_index]``: one token list per top-level
    argument (``[]`` for an empty call), and the index of the closing ``)``.  None when unbalanced."""
    if open_index >= len(tokens) or tokens[open_index].text != "(":
        return None
    depth = 0
    args: list[list[Token]] = [[]]
    for i in range(open_index, len(tokens)):
        tok = tokens[i]
        if tok.kind == PUNCT and tok.text in "([{":
            depth += 1
            if depth == 1:
                continue
        elif tok.kind == PUNCT and tok.text in ")]}":
            depth -= 1
            if depth == 0:
                return ([] if args == [[]] else args), i
        elif tok.kind == PUNCT and tok.text == "," and depth == 1:
            args.append([])
            continue
        args[-1].append(tok)
    return None
