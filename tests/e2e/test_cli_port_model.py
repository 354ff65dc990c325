"""`porter port FILE --to opencl --model M`: the command line end to end against the fake LLM server (real
SDK, real harness on PoCL / Oclgrind with the CPU emulator as reference): a warp-shuffle kernel on devices
without sub-groups is translated by the model and validated, recorded and replayed without network, keys
kept out of every output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer, Hang

pytestmark = pytest.mark.integration

pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "cuda"
KEY = "sk-proj-E2Eport7777SECRET8888value9999abc"
MODEL = "openai:gpt-4o-mini"

# A correct OpenCL C 1.2 reduction without sub-groups: each work-item adds its partial into its warp's
# __local slot with a compare-and-swap loop, then work-item 0 adds the block's slots into *out.
HELPERS = """
static void local_add(volatile __local float* p, float v)
{
    volatile __local uint* bits = (volatile __local uint*)p;
    uint seen;
    uint expected = atomic_or(bits, 0u);
    do {
        seen = expected;
        expected = atomic_cmpxchg(bits, seen, as_uint(as_float(seen) + v));
    } while (expected != seen);
}

static void global_add(volatile __global float* p, float v)
{
    volatile __global uint* bits = (volatile __global uint*)p;
    uint seen;
    uint expected = atomic_or(bits, 0u);
    do {
        seen = expected;
        expected = atomic_cmpxchg(bits, seen, as_uint(as_float(seen) + v));
    } while (expected != seen);
}
"""
KERNEL = """
__kernel void reduce_sum(__global const float* in, __global float* out, int n, __local float* warp_sums)
{
    int lid = (int)get_local_id(0);
    int num_warps = (int)get_local_size(0) / 32;
    if (lid < num_warps) {
        warp_sums[lid] = 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float v = 0.0f;
    int stride = (int)(get_local_size(0) * get_num_groups(0));
    for (int i = (int)get_global_id(0); i < n; i += stride) {
        v += in[i];
    }
    local_add(&warp_sums[lid / 32], v);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        float total = 0.0f;
        for (int w = 0; w < LAST; ++w) {
            total += warp_sums[w];
        }
        global_add(out, total);
    }
}
"""
CORRECT_CL = HELPERS + KERNEL.replace("LAST", "num_warps")


REPLY = f"Local memory and barriers instead of sub-group shuffles.\n\n```opencl\n{CORRECT_CL}```\n"


@pytest.fixture(scope="module")
def runtimes() -> None:
    from porter.backends import get_backend

    # No PORTER_NO_INTEL_OCL here: OpenCL discovery is cached for the whole pytest process (the ICD
    # loader reads its vendor list once), so hiding a runtime in-process would hide it from every
    # later test too.  The porter subprocesses below get the variable in their own environment.
    try:
        ocl = list(get_backend("opencl").devices())
        cpu = list(get_backend("cpu").devices())
    except Exception:  # noqa: BLE001
        ocl, cpu = [], []
    if not ocl or not cpu:
        pytest.skip("needs an OpenCL device (PoCL) and the CPU emulator")


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def program(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    shutil.copy(SAMPLES / "reduce_shfl.cu", folder)
    shutil.copy(SAMPLES / "common.cuh", folder)
    return folder / "reduce_shfl.cu"


def porter(tmp_path: Path, *args: str, keys: bool = True) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("porter")
    cmd = [exe] if exe else [sys.executable, "-m", "porter"]
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(COLUMNS="200", PORTER_CACHE_DIR=str(tmp_path / "cache"), PORTER_NO_INTEL_OCL="1")
    env.pop("PORTER_NO_CACHE", None)
    if keys:
        env.update(OPENAI_API_KEY=KEY)
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=600, env=env)


def port_with_model(
    tmp_path: Path, program: Path, server: FakeLLMServer, *args: str, model: str = MODEL
) -> subprocess.CompletedProcess[str]:
    """`porter port PROGRAM --to opencl --model MODEL --base-url SERVER ARGS`."""
    url = server.url + "/v1"
    return porter(
        tmp_path, "port", str(program), "--to", "opencl", "--model", model, "--base-url", url, *args
    )


def _no_secret_anywhere(tmp_path: Path, *outs: subprocess.CompletedProcess[str]) -> None:
    for out in outs:
        assert KEY not in out.stdout and KEY not in out.stderr
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def _check_validated(doc: dict) -> None:
    assert list(doc) == ["source", "kernels", "usage"]
    (kernel,) = doc["kernels"]
    assert kernel["name"] == "reduce_sum"
    rows = kernel["variants"]
    pocl = [r for r in rows if r["device"].startswith("opencl:") and "oclgrind" not in r["device"]]
    assert pocl, rows
    for r in rows:
        assert list(r)[:7] == ["target", "path", "status", "device", "max_rel_err", "trials", "reason"]
        assert {"time_ms", "speedup", "provenance"} <= set(r)
        assert r["target"] == "opencl" and r["status"] == "validated", r
        assert r["provenance"] == f"llm:{MODEL}" and r["max_rel_err"] is not None
        assert "__kernel void reduce_sum" in Path(r["path"]).read_text()
    assert all(r["time_ms"] is not None and r["time_ms"] > 0 for r in pocl)


def test_model_translates_the_shuffle_kernel_for_devices_without_subgroups(
    tmp_path, server, program, runtimes
):
    server.script(REPLY)
    rec = tmp_path / "rec"
    out = port_with_model(
        tmp_path,
        program,
        server,
        "--record",
        str(rec),
        "--trials",
        "1",
        "--out",
        str(tmp_path / "out"),
        "--json",
    )
    assert out.returncode == 0, out.stderr + out.stdout
    doc = json.loads(out.stdout)
    _check_validated(doc)
    usage = doc["usage"]
    assert usage["input_tokens"] == 100 and usage["output_tokens"] == 50 and usage["requests"] == 1
    assert usage["cost_usd"] > 0
    assert len(server.requests) == 1
    headers = server.requests[0].headers
    assert headers.get("authorization", "").removeprefix("Bearer ") == KEY
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["model"] == MODEL and report["exit_code"] == 0
    assert report["llm"][0]["attempts"][0]["status"] == "validated"

    # Replayed: no key, no server, the same verdicts.
    server.stop()
    again = porter(
        tmp_path,
        "port",
        str(program),
        "--to",
        "opencl",
        "--model",
        MODEL,
        "--replay",
        str(rec),
        "--trials",
        "1",
        "--out",
        str(tmp_path / "out2"),
        "--json",
        keys=False,
    )
    assert again.returncode == 0, again.stderr + again.stdout
    redo = json.loads(again.stdout)
    _check_validated(redo)
    assert redo["usage"]["cost_usd"] == 0  # replayed replies cost nothing
    _no_secret_anywhere(tmp_path, out, again)


def test_missing_key_is_a_one_line_usage_error(tmp_path, program):
    out = porter(tmp_path, "port", str(program), "--to", "opencl", "--model", MODEL, keys=False)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "OPENAI_API_KEY" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (program.parent / "reduce_shfl.ported").exists()


def test_model_with_translate_only_is_bad_usage(tmp_path, program):
    out = porter(tmp_path, "port", str(program), "--model", MODEL, "--translate-only")
    assert out.returncode == 2 and "--translate-only" in out.stderr


# ------------------------------------------------------------------------ bounded requests


def test_help_documents_the_request_bounds(tmp_path):
    out = porter(tmp_path, "port", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "--request-timeout" in text and "default: 60.0" in text
    assert "--retries" in text and "default: 2" in text


def test_record_into_an_existing_file_is_refused_before_any_request(tmp_path, server, program):
    server.script(REPLY)
    target = tmp_path / "rec"
    target.write_text("mine")
    out = port_with_model(
        tmp_path,
        program,
        server,
        "--record",
        str(target),
        "--out",
        str(tmp_path / "out"),
    )
    assert out.returncode == 2, out.stderr + out.stdout
    assert out.stderr.strip().count("\n") == 0 and "--record" in out.stderr and "not a folder" in out.stderr
    assert server.requests == [] and target.read_text() == "mine"


def test_out_that_is_a_file_is_refused_before_any_request(tmp_path, server, program):
    server.script(REPLY)
    target = tmp_path / "out"
    target.write_text("mine")
    out = port_with_model(
        tmp_path,
        program,
        server,
        "--out",
        str(target),
    )
    assert out.returncode == 2, out.stderr + out.stdout
    assert "--out" in out.stderr and "Traceback" not in out.stderr
    assert server.requests == [] and target.read_text() == "mine"


def test_a_hanging_server_costs_one_request_timeout_and_names_print_as_given(
    tmp_path, server, program, runtimes
):
    """--request-timeout / --retries reach the provider; `openai:llama` is printed, not a llama emoji."""
    server.script(*(Hang(60) for _ in range(6)))
    started = time.monotonic()
    out = port_with_model(
        tmp_path,
        program,
        server,
        "--request-timeout",
        "1",
        "--retries",
        "0",
        "--rounds",
        "1",
        "--trials",
        "1",
        "--out",
        str(tmp_path / "out"),
        model="openai:llama",
    )
    took = time.monotonic() - started
    assert out.returncode == 1, out.stderr + out.stdout
    assert len(server.requests) == 1  # one try, no retry
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (attempt,) = report["llm"][0]["attempts"]
    assert attempt["status"] == "error" and "no answer within 1s" in attempt["reason"]
    assert "asking openai:llama, round 1" in out.stderr
    assert "\N{LLAMA}" not in out.stdout + out.stderr
    assert took < 30, took  # the defaults would wait 3 x 60 s for the model alone
