"""Shared setup of the security suite: the scripted LLM server, a copy of the vector_add sample with
its spec, and the porter command line run as a user would (a subprocess with its own cache)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer
from fakes.programs import run_porter, vector_add_program

KEY = "sk-ant-api03-SECURITYfake0000SECRET1111value"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    pytest.importorskip("anthropic")
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def program(tmp_path: Path) -> Path:
    return vector_add_program(tmp_path / "src")


def optimize_once(tmp_path: Path, server: FakeLLMServer, program: Path) -> subprocess.CompletedProcess[str]:
    """`porter optimize` of `program` for one candidate and one round against `server`, into
    ``tmp_path/out``."""
    args = ["optimize", str(program), "--model", "anthropic:claude-sonnet-4-5", "--base-url", server.url]
    args += ["--candidates", "1", "--rounds", "1", "--out", str(tmp_path / "out"), "--json"]
    return run_porter(tmp_path, *args, env={"ANTHROPIC_API_KEY": KEY})
