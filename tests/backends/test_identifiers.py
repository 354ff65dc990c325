"""C++ identifiers beyond ASCII: universal character names are the characters they name."""

from __future__ import annotations

import pytest
from porter.backends.identifiers import is_ascii, symbol


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("saxpy", "saxpy"),
        ("kérnel", "kérnel"),
        ("k\\u00e9rnel", "kérnel"),
        ("sc\\U000000e4le<float>", "scäle<float>"),
        ("k\\ud800x", "k\\ud800x"),  # a surrogate is no character: left as written
        ("k\\u00e", "k\\u00e"),  # too short to be one
    ],
)
def test_symbol_decodes_universal_character_names(name: str, expected: str) -> None:
    assert symbol(name) == expected


@pytest.mark.parametrize(
    ("name", "ascii"), [("saxpy", True), ("axpby<float>", True), ("kérnel", False), ("k\\u00e9rnel", False)]
)
def test_is_ascii(name: str, ascii: bool) -> None:
    assert is_ascii(name) is ascii
