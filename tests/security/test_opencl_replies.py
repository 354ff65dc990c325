"""Hostile OpenCL C replies through `porter port --to opencl --model`: the real OpenAI SDK against the
scripted loopback server, validated on every OpenCL CPU device here (PoCL, Oclgrind) with the CPU
emulator as the reference.  A CPU OpenCL runtime links a kernel into the porter process's own address
space, where a name it does not define can resolve to the C library, so each reply tries that route.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
MODEL = "openai:gpt-4o-mini"

BODY = """
__kernel void reduce_sum(__global const float* in, __global float* out, int n, __local float* warp_sums)
{
    HOSTILE
    if (get_global_id(0) == 0) {
        float total = 0.0f;
        for (int i = 0; i < n; ++i) total += in[i];
        out[0] += total;
    }
}
"""

ATTACKS: dict[str, tuple[str, str]] = {
    "system": ("int system(__constant char* command);", 'system("touch MARK");'),
    "libc-alias-prototype": ("int __libc_system(__constant char* command);", '__libc_system("touch MARK");'),
    "implicit-declaration": ("", '__libc_system("touch MARK");'),
    "fopen-alias": ("void* _IO_fopen(__constant char* p, __constant char* m);", '_IO_fopen("MARK", "w");'),
}


@pytest.fixture(scope="module")
def runtimes() -> None:
    pytest.importorskip("openai")
    from porter.backends import get_backend

    try:
        ocl = [d for d in get_backend("opencl").devices() if d.kind != "checker"]
        cpu = list(get_backend("cpu").devices())
    except Exception:  # noqa: BLE001
        ocl, cpu = [], []
    if not ocl or not cpu:
        pytest.skip("needs an OpenCL CPU device and the CPU emulator")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hostile_opencl_reply_has_no_effect(tmp_path: Path, runtimes: None, name: str) -> None:
    from fakes.llm_server import FakeLLMServer

    folder = tmp_path / "src"
    folder.mkdir()
    shutil.copy(SAMPLES / "reduce_shfl.cu", folder)
    shutil.copy(SAMPLES / "common.cuh", folder)
    mark = tmp_path / "outside" / f"pwned-{name}"
    mark.parent.mkdir()
    before, inside = ATTACKS[name]
    code = before + "\n" + BODY.replace("HOSTILE", inside)
    reply = "Sub-group free version.\n\n```opencl\n" + code.replace("MARK", str(mark)) + "```\n"
    exe = shutil.which("porter")
    cmd = [exe] if exe else [sys.executable, "-m", "porter"]
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(PORTER_CACHE_DIR=str(tmp_path / "cache"), PORTER_NO_INTEL_OCL="1", OPENAI_API_KEY="sk-test")
    with FakeLLMServer() as server:
        server.script(reply)
        args = ["port", str(folder / "reduce_shfl.cu"), "--to", "opencl", "--model", MODEL]
        args += ["--base-url", server.url + "/v1", "--candidates", "1", "--rounds", "1", "--trials", "1"]
        args += ["--out", str(tmp_path / "out"), "--json"]
        out = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=600, env=env)
    assert not mark.exists(), f"{name}: the reply acted on the host"
    assert list(mark.parent.iterdir()) == []
    assert "Traceback" not in out.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    attempts = [a for conv in report["llm"] for a in conv["attempts"]]
    assert attempts, report["llm"]
    for a in attempts:
        assert a["status"] in ("failed", "rejected") and a["reason"], a
    doc = json.loads(out.stdout)
    model_rows = [r for k in doc["kernels"] for r in k["variants"] if r.get("provenance") == f"llm:{MODEL}"]
    assert all(r["status"] != "validated" for r in model_rows), model_rows
