"""Fixtures of the llm tests: a fake LLM server, a private cache, a clean environment with a fake key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer

# Shaped like real keys so both the exact-value and the pattern redaction are exercised.
ANTHROPIC_KEY = "sk-ant-api03-FAKEfakeFAKEfake0123456789abcdefXYZ"
OPENAI_KEY = "sk-proj-FAKEfakeFAKEfake9876543210zyxwvuABC"


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _llm_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keys that exist only in tests, no real base URLs, and a cache private to the test."""
    for var in (
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_BASE_URL",
        "ANTHROPIC_LOG",
        "OPENAI_LOG",
        "PORTER_NO_CACHE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    root = tmp_path / "cache"
    monkeypatch.setenv("PORTER_CACHE_DIR", str(root))
    return root
