"""Shared setup of the security suite: the scripted LLM server, a copy of the vector_add sample with
its spec, and the porter command line run as a user would (a subprocess with its own cache)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cuda"
KEY = "sk-ant-api03-SECURITYfake0000SECRET1111value"

SPEC = """
[kernels.vector_add]
grid = ["(n + 255) / 256"]
block = ["256"]
sizes = [{ n = 300 }]
hidden_sizes = [{ n = 77 }]
args = [
  { name = "a", role = "in", dtype = "float32", shape = ["n"] },
  { name = "b", role = "in", dtype = "float32", shape = ["n"] },
  { name = "c", role = "out", dtype = "float32", shape = ["n"] },
  { name = "n", role = "scalar", dtype = "int32", value = "n" },
]
"""


@pytest.fixture(scope="session")
def emulator() -> None:
    from porter.backends import get_backend

    if not get_backend("cpu").devices():
        pytest.skip("the CPU emulator is unavailable (g++ missing)")


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    pytest.importorskip("anthropic")
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def program(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    shutil.copy(SAMPLE / "vector_add.cu", folder)
    shutil.copy(SAMPLE / "common.cuh", folder)
    (folder / "vector_add.cu.porter.toml").write_text(SPEC)
    return folder / "vector_add.cu"


def porter(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("porter")
    cmd = [exe] if exe else [sys.executable, "-m", "porter"]
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(COLUMNS="200", PORTER_CACHE_DIR=str(tmp_path / "cache"), ANTHROPIC_API_KEY=KEY)
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env)
