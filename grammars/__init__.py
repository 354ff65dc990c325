"""Tree-sitter languages and the query files porter runs on them.

One ``<language>-<purpose>.scm`` file per purpose (``cuda-kernels.scm``,
``python-loops.scm`` ...).  Queries are compiled once per process.
Parse results leave this package as plain data, never as live tree nodes.
"""

from __future__ import annotations

import hashlib
import importlib
from collections import Counter, OrderedDict
from functools import cache
from importlib import resources

from tree_sitter import Language, Parser, Query, QueryCursor, Tree

LANGUAGES = ("cuda", "python", "c", "cpp")


@cache
def language(name: str) -> Language:
    if name not in LANGUAGES:
        raise KeyError(f"unknown language {name!r}")
    mod = importlib.import_module(f"tree_sitter_{name}")  # the PyPI grammar packages
    return Language(mod.language())


def parser(name: str) -> Parser:
    return Parser(language(name))


# Every parse this process made, by (language, digest of the bytes): how tests hold "each file is
# parsed once per command".  Trees of recent inputs are kept (they are never edited), so a second
# parse of the same bytes returns the first tree.
PARSES: Counter[tuple[str, str]] = Counter()
_TREES: OrderedDict[tuple[str, str], Tree] = OrderedDict()
_KEEP = 64


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def forget() -> None:
    """Drop the kept trees and the parse counts (tests start each command from zero)."""
    PARSES.clear()
    _TREES.clear()


def parse(name: str, data: bytes | str) -> Tree:
    """The syntax tree of `data` in language `name`; the same bytes are parsed once per process."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
    key = (name, digest(raw))
    tree = _TREES.get(key)
    if tree is not None:
        _TREES.move_to_end(key)
        return tree
    PARSES[key] += 1
    tree = parser(name).parse(raw)
    _TREES[key] = tree
    while len(_TREES) > _KEEP:
        _TREES.popitem(last=False)
    return tree


def query_text(name: str) -> str:
    """The text of ``grammars/<name>.scm``."""
    return resources.files(__package__).joinpath(f"{name}.scm").read_text(encoding="utf-8")


@cache
def query(name: str) -> Query:
    """The compiled query ``grammars/<name>.scm``; its language is the part before the first dash."""
    lang = name.split("-", 1)[0]
    return Query(language(lang), query_text(name))


def captures(query_name: str, node) -> dict[str, list]:
    """Run a query on a node: capture name -> nodes, in document order."""
    found = QueryCursor(query(query_name)).captures(node)
    return {k: sorted(v, key=lambda n: n.start_byte) for k, v in found.items()}


def matches(query_name: str, node) -> list[tuple[int, dict[str, list]]]:
    """Run a query on a node: one (pattern index, {capture: nodes}) per match."""
    return QueryCursor(query(query_name)).matches(node)
