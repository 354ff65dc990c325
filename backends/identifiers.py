"""C++ identifiers beyond ASCII, as compilers name their symbols.

C++ (since C++11) and C99 allow Unicode letters in identifiers, written as they are (``kérnel``) or
as universal character names (``k\\u00e9rnel``); both spell one identifier, whose symbol is its UTF-8
bytes (Itanium mangling counts bytes: ``_Z7kérnelPfi``). A backend looking a kernel up by symbol
asks :func:`symbol` for the name as the compiler wrote it.
"""

from __future__ import annotations

import re

UCN = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")


def _char(match: re.Match[str]) -> str:
    code = int(match.group(1) or match.group(2), 16)
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:  # not a character: left as written
        return match.group(0)
    return chr(code)


def symbol(name: str) -> str:
    """`name` with each universal character name replaced by its character ('k\\u00e9rnel' -> 'kérnel')."""
    return UCN.sub(_char, name)


def is_ascii(name: str) -> bool:
    """Whether `name` is spelled in ASCII letters only (no Unicode character, no universal character name)."""
    return name.isascii() and not UCN.search(name)


__all__ = ["UCN", "is_ascii", "symbol"]
