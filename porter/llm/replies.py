"""Finding the kernel in a model's reply.

The reply must hold the complete kernel in one fenced code block (```` ``` ```` or ``~~~`` fences, as in
CommonMark: up to three spaces of indent, a closing fence of the same character at least as long as the
opening one).  Accepted labels (the first word of the info string, any case): those of every dialect
(``[prompt] fence_labels`` of its dialect.toml: cuda, cu, cpp, c++, c, hip, opencl, cl), or none.

When several accepted blocks are present the LARGEST complete one wins (ties: the later one).  Models
often follow the kernel with a short launch or build snippet, or precede it with the line they are
fixing; the full kernel is the biggest block either way.  A block whose closing fence never comes (the
reply was cut off) is not complete and is never returned.  :func:`missing_code_reason` says, for a reply
without a usable block, what to tell the model in the next round.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def accepted_labels() -> frozenset[str]:
    """The labels a kernel's code block may carry: every dialect's, and none ("")."""
    from porter.backends import fence_labels

    return fence_labels() | {""}


_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")


@dataclass(frozen=True)
class CodeBlock:
    language: str  # the label, lower-cased ("" when unlabelled)
    code: str  # the block's text, without the fences, ending in a newline
    line: int  # 1-based line of the opening fence in the reply
    complete: bool = True  # the closing fence was found


def code_blocks(reply: str) -> list[CodeBlock]:
    """Every fenced block in `reply`, in order, whatever its label; an unclosed last block has complete=False."""
    lines = reply.splitlines()
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if m is None or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        fence, info = m["fence"], m["info"].strip()
        language = info.split()[0].lower() if info else ""
        language = language.strip("{}.")  # "{.cuda}" style attributes
        indent = len(lines[i]) - len(lines[i].lstrip(" "))
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            body.append(_dedent(lines[j], indent))
            j += 1
        text = "\n".join(body) + ("\n" if body else "")
        blocks.append(CodeBlock(language=language, code=text, line=i + 1, complete=j < len(lines)))
        i = j + 1
    return blocks


def extract_code(reply: str) -> CodeBlock | None:
    """The kernel: the largest complete block with an accepted label (ties: the later); None if there is none."""
    best: CodeBlock | None = None
    accepted = accepted_labels()
    for block in code_blocks(reply):
        usable = block.complete and block.language in accepted and block.code.strip()
        if usable and (best is None or len(block.code) >= len(best.code)):
            best = block
    return best


def missing_code_reason(reply: str) -> str | None:
    """None when :func:`extract_code` finds a kernel, else one sentence for the model's next round."""
    if extract_code(reply) is not None:
        return None
    blocks = code_blocks(reply)
    known = accepted_labels()
    accepted = ", ".join(sorted(lang for lang in known if lang))
    if any(not b.complete for b in blocks):
        return (
            "Your reply's code block was never closed (the reply was cut off?). "
            "Reply with the complete kernel in one fenced code block."
        )
    labels = sorted({b.language for b in blocks if b.language not in known})
    if labels:
        return (
            f"Your reply's code block was labelled {', '.join(labels)}; put the complete kernel in one fenced "
            f"code block labelled one of: {accepted} (or unlabelled)."
        )
    if blocks:
        return "Your reply's code block was empty. Reply with the complete kernel in one fenced code block."
    return "Your reply had no fenced code block. Reply with the complete kernel in one fenced code block."


def _dedent(line: str, indent: int) -> str:
    """Remove up to `indent` leading spaces (the opening fence's indent), as CommonMark does."""
    n = 0
    while n < indent and n < len(line) and line[n] == " ":
        n += 1
    return line[n:]
