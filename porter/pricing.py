"""The tokens a model call used (:class:`Usage`) and what they cost, from the price table in
pricing.toml (data, not code).

Plain data below the LLM layer: the reports (:mod:`porter.results`) and the loop's records
(:mod:`porter.records`) carry usage and price notes without importing :mod:`porter.llm`."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Tokens of one call, normalised: ``input_tokens`` excludes the cached ones."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


_FIELDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    entry: str  # the table entry that matched
    input: float
    output: float
    cache_read: float
    cache_write: float


@functools.cache
def _table() -> dict[str, Any]:
    return tomllib.loads(resources.files("porter").joinpath("pricing.toml").read_text(encoding="utf-8"))


def prices_as_of() -> str:
    return str(_table().get("as_of", "unknown"))


def price(provider: str, model: str) -> Price | None:
    """The price of `provider:model`: exact entry, else the longest entry that prefixes the name."""
    entries = _table().get(provider)
    if not isinstance(entries, dict):
        return None
    name = model.strip()
    if name not in entries:
        prefixes = [key for key in entries if name.startswith(key)]
        if not prefixes:
            return None
        name = max(prefixes, key=len)
    row = entries[name]
    return Price(name, *(float(row[f]) for f in _FIELDS))


def cost(usage: Usage, provider: str, model: str) -> float | None:
    """Dollars for `usage`, or None when the model is not in the table (see :func:`pricing_note`)."""
    p = price(provider, model)
    if p is None:
        return None
    return (
        usage.input_tokens * p.input
        + usage.output_tokens * p.output
        + usage.cache_read_tokens * p.cache_read
        + usage.cache_write_tokens * p.cache_write
    ) / 1_000_000


def pricing_note(provider: str, model: str) -> str | None:
    """A line for reports when the cost of `provider:model` is unknown, else None."""
    if price(provider, model) is not None:
        return None
    return (
        f"no price for {provider}:{model} in porter/pricing.toml (as of {prices_as_of()}); cost not counted"
    )
