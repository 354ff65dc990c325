"""Tree-sitter languages and the query files porter runs on them.

One ``<language>-<purpose>.scm`` file per purpose (``cuda-kernels.scm``,
``python-loops.scm`` ...).  Queries are compiled once per process.
Parse results leave this package as plain data, never as live tree nodes.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from tree_sitter import Language, Parser, Query, QueryCursor

LANGUAGES = ("cuda", "python", "c", "cpp")


@cache
def language(name: str) -> Language:
    if name == "cuda":
        import tree_sitter_cuda as mod
    elif name == "python":
        import tree_sitter_python as mod
    elif name == "c":
        import tree_sitter_c as mod
    elif name == "cpp":
        import tree_sitter_cpp as mod
    else:
        raise KeyError(f"unknown language {name!r}")
    return Language(mod.language())


def parser(name: str) -> Parser:
    return Parser(language(name))


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
