"""`porter generate`: kernels from a description, proven against a Python reference.  Driven through the
real OpenAI and Anthropic SDKs against the loopback fake server: a wrong kernel and one that only holds
at the sizes the model saw are rejected with their mismatches fed back; a correct one is validated,
timed beside porter's own kernel and the floor; a half-precision one is refused unless the requirements
allow it, and then kept with its error shown.  Bad input exits 2."""

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
PATTERNS = ROOT / "samples" / "python" / "lift_patterns.py"

RIGHT = """
extern "C" __global__ void sum_of_squares_model(double* x, long long d_x_0, double* result)
{
    __shared__ double part[256];
    double acc = 0.0;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < d_x_0; i += stride)
        acc += x[i] * x[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(result, part[0]);
}
"""
WRONG = RIGHT.replace("acc += x[i] * x[i];", "acc += x[i];")  # forgets the square
VISIBLE_ONLY = RIGHT.replace("i < d_x_0;", "i < 600;")  # right at the size in the prompt only
HALF = "#include <cuda_fp16.h>\n" + RIGHT.replace(
    "acc += x[i] * x[i];",
    "{ __half h = __float2half((float)x[i]); acc += (double)__half2float(__hmul(h, h)); }",
)


def reply(code: str) -> str:
    return f"One thread per element, a shared-memory tree, one atomic per block.\n\n```cuda\n{code}```\n"


def generate(tmp: Path, server_url: str, model: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY, PORTER_CACHE_DIR=str(tmp / "cache"))
    return subprocess.run(
        [sys.executable, "-m", "porter", "generate", "the sum of the squares of a vector", "--reference",
         f"{tmp / 'p.py'}::sum_of_squares", "--to", "cuda", "--model", model, "--base-url", server_url,
         "--candidates", "1", "--out", str(tmp / "out"), "--json", *extra],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip


KEY = "sk-GEN1234SECRET5678value-abcdef"


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("the CPU emulator needs g++")
    shutil.copy(PATTERNS, tmp_path / "p.py")
    return tmp_path


def _no_key_anywhere(tmp: Path, r: subprocess.CompletedProcess[str]) -> None:
    for path in tmp.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in r.stdout + r.stderr


def test_wrong_and_visible_size_only_kernels_are_rejected_and_half_is_refused_unasked(tmp: Path) -> None:
    pytest.importorskip("openai")
    from fakes.llm_server import FakeLLMServer

    with FakeLLMServer() as server:
        server.script(reply(WRONG), reply(VISIBLE_ONLY), reply(RIGHT), reply(HALF))
        r = generate(tmp, server.url + "/v1", "openai:gpt-4o-mini", "--rounds", "4")
        bodies = [json.dumps(q.body) for q in server.requests]
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    by = {c["label"]: c for c in doc["candidates"]}
    rules, model = by["rules"], by["openai:gpt-4o-mini #1"]
    assert rules["validated"] and model["validated"] and model["precision"] == ""
    assert model["max_rel_err"] < 1e-10  # judged with float64's tolerance
    for c in (rules, model):
        assert c["time_ms"] > 0 and c["device"] == "cpu:cpu-emulator" and c["memory_bytes"] > 0
        assert Path(c["file"]).is_file()
        assert c["times"]["cpu:cpu-emulator"] == c["time_ms"]  # and every other device that runs cuda
    assert "sum_of_squares_model" in Path(model["file"]).read_text()
    rejected = [c for c in doc["candidates"] if not c["validated"]]
    assert len(rejected) == 3
    assert "matches-reference" in rejected[0]["reason"] and "size x.shape[0]=600" in rejected[0]["reason"]
    assert "hidden size" in rejected[1]["reason"]  # right only at the size the model saw
    assert "float16" in rejected[2]["reason"] and "requirements do not allow" in rejected[2]["reason"]
    # each verdict went back: the mismatch, the held-back size's failure, then the measured time
    assert len(bodies) == 4
    assert "matches-reference" in bodies[1] and "hidden size" in bodies[2]
    assert "Measured on cpu:cpu-emulator" in bodies[3] and "unknown ms" not in bodies[3]
    assert "def sum_of_squares" in bodies[0] and "the sum of the squares of a vector" in bodies[0]
    assert set(doc["tradeoffs"]) == {"fastest", "least_memory", "most_precise"}
    assert len(doc["estimates"]) >= 3 and all(e["floor_ms"] > 0 for e in doc["estimates"])
    out = tmp / "out"
    assert (out / "report.md").is_file() and (out / "tradeoffs.png").stat().st_size > 1000
    assert json.loads((out / "report.json").read_text())["candidates"] == doc["candidates"]
    _no_key_anywhere(tmp, r)


def test_half_precision_is_kept_with_its_error_when_the_requirements_allow_it(tmp: Path) -> None:
    pytest.importorskip("anthropic")
    from fakes.llm_server import FakeLLMServer

    with FakeLLMServer() as server:
        server.script(reply(HALF))
        r = generate(tmp, server.url, "anthropic:claude-sonnet-4-5", "--rounds", "1", "--requirements",
                     "fp16 arithmetic is fine; least memory")  # fmt: skip
        bodies = [json.dumps(q.body) for q in server.requests]
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    (half,) = [c for c in doc["candidates"] if c["provenance"].startswith("llm:")]
    assert half["validated"] and half["precision"] == "float16"
    # its error is binary16's rounding: far past float64's tolerance, inside half precision's
    assert 1e-8 < half["max_rel_err"] < 1e-2
    assert "cuda_fp16.h" in bodies[0] and "fp16 arithmetic is fine" in bodies[0]
    md = (tmp / "out" / "report.md").read_text()
    assert "[float16]" in md and "most precise" in md
    assert doc["tradeoffs"]["most_precise"] == "rules"
    _no_key_anywhere(tmp, r)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "generate needs --reference FILE.py::FUNCTION"),
        (("--reference", "{tmp}/p.txt::k"), "--reference takes a Python function"),
        (("--reference", "{tmp}/p.cu"), "--reference takes a kernel: FILE.cu::KERNEL"),
        (("--reference", "{tmp}/p.py::no_such"), "no_such"),
        (("--reference", "{tmp}/missing.py::f"), "missing.py"),
        (("--reference", "{tmp}/bad.py::boom"), "the Python function failed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp: Path, args: tuple[str, ...], message: str) -> None:
    (tmp / "p.cu").write_text("__global__ void k() {}\n")
    (tmp / "p.txt").write_text("k\n")
    (tmp / "bad.py").write_text("def boom(x):\n    for i in range(x.shape[0]):\n        x[i] = 1 / 0\n")
    r = subprocess.run(
        [sys.executable, "-m", "porter", "generate", "anything", *(a.format(tmp=tmp) for a in args)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not any(tmp.glob("*.generated"))  # nothing written for a refused request


ADD_CU = """
__global__ void add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main()
{
    const int n = 1 << 16;
    float *a, *b, *c;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    add<<<(n + 255) / 256, 256>>>(a, b, c, n);
    cudaDeviceSynchronize();
    return 0;
}
"""
ADD_STRIDED = """
__global__ void add(const float* a, const float* b, float* c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) c[i] = b[i] + a[i];
}
"""
ADD_HALF = """#include <cuda_fp16.h>
__global__ void add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __half2float(__hadd(__float2half(a[i]), __float2half(b[i])));
}
"""


@pytest.mark.parametrize("allowed", [False, True])
def test_a_cuda_kernel_as_the_reference(tmp: Path, allowed: bool) -> None:
    pytest.importorskip("openai")
    from fakes.llm_server import FakeLLMServer

    (tmp / "add.cu").write_text(ADD_CU)
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(OPENAI_API_KEY=KEY, PORTER_CACHE_DIR=str(tmp / "cache"))
    with FakeLLMServer() as server:
        server.script(reply(ADD_STRIDED), reply(ADD_HALF))
        r = subprocess.run(
            [sys.executable, "-m", "porter", "generate", "add two float vectors", "--reference",
             f"{tmp / 'add.cu'}::add", "--model", "openai:gpt-4o-mini", "--base-url", server.url + "/v1",
             "--candidates", "1", "--rounds", "2", "--out", str(tmp / "out"), "--json",
             *(["--requirements", "fp16 is acceptable"] if allowed else [])],
            capture_output=True, text=True, timeout=900, env=env,
        )  # fmt: skip
        first = json.dumps(server.requests[0].body)
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    assert "The user asked for: add two float vectors" in first and "__global__ void add" in first
    report = json.loads((tmp / "out" / "report.json").read_text())
    attempts = report["attempts"]
    assert [a["status"] for a in attempts][0] == "validated" and attempts[0]["max_rel_err"] == 0.0
    half = attempts[1]
    if allowed:  # judged at half precision's tolerance, the rounding it made on the record
        assert half["status"] == "validated" and "[float16, allowed by the requirements]" in half["reason"]
        assert half["max_rel_err"] > 1e-5
    else:
        assert half["status"] != "validated" and "requirements do not allow" in half["reason"]
    doc = json.loads(r.stdout)
    assert {v["role"] for v in doc["kernels"][0]["variants"]} >= {"fastest", "least_memory", "most_precise"}
    _no_key_anywhere(tmp, r)


def test_a_cuda_reference_without_a_model_is_autotuned(tmp: Path) -> None:
    (tmp / "add.cu").write_text(ADD_CU)
    r = subprocess.run(
        [sys.executable, "-m", "porter", "generate", "add two float vectors", "--reference", f"{tmp / 'add.cu'}::add",
         "--out", str(tmp / "out"), "--json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    assert doc["schema"] == "porter-tune-report/1" and doc["kernel"] == "add" and len(doc["configs"]) > 1
    assert doc["configs"][0]["original"] and all(c["validated"] for c in doc["configs"])
    assert (tmp / "out" / "report.json").is_file()


@pytest.mark.gpu
def test_on_a_gpu_candidates_are_timed_at_the_timing_size_beside_the_floor(tmp: Path) -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU (nvidia-smi not found)")
    r = subprocess.run(
        [sys.executable, "-m", "porter", "generate", "the sum of the squares of a vector", "--reference",
         f"{tmp / 'p.py'}::sum_of_squares", "--to", "cuda", "--out", str(tmp / "out"), "--json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    assert doc["timing_size"]["x.shape[0]"] >= 1 << 23
    (rules,) = [c for c in doc["candidates"] if c["validated"]]
    assert rules["device"].startswith("cuda:") and rules["floor_ms"] and rules["time_ms"] > 0
    assert 0 < rules["pct_of_peak"][rules["device"]] <= 100 / 0.9 and not rules["suspect"]
    assert "cpu:cpu-emulator" in rules["times"]  # the CPU devices time it too, at the reference's size


def test_without_a_model_the_rules_kernel_is_timed_on_every_device_that_runs_it(tmp: Path) -> None:
    pytest.importorskip("pyopencl")
    import pyopencl as cl

    if not any(p.get_devices() for p in cl.get_platforms()):
        pytest.skip("no OpenCL device")
    r = subprocess.run(
        [sys.executable, "-m", "porter", "generate", "y = a * x + y", "--reference", f"{tmp / 'p.py'}::saxpy",
         "--to", "cuda,opencl", "--out", str(tmp / "out"), "--json"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    doc = json.loads(r.stdout)
    (rules,) = doc["candidates"]
    assert rules["validated"] and rules["times"]["cpu:cpu-emulator"] > 0
    assert any(d.startswith("opencl:") for d in rules["times"]), rules["times"]
    assert "oclgrind" not in " ".join(rules["times"])  # a checker validates; it does not time
    md = (tmp / "out" / "report.md").read_text()
    assert "## Times on each device" in md and "opencl:" in md.split("## Times on each device")[1]


def test_a_candidate_whose_written_file_is_not_the_validated_text_is_not_kept(tmp: Path, monkeypatch) -> None:
    from porter.workflows import generate as workflow
    from porter.workflows.options import OutputOptions

    real = workflow.write_atomic

    def garbling(path: Path, text: str) -> None:  # a writer that does not write what was validated
        real(path, text.replace("*", "+") if path.suffix == ".cu" else text)

    monkeypatch.setattr(workflow, "write_atomic", garbling)
    report = workflow.generate("y = a * x + y", reference=f"{tmp / 'p.py'}::saxpy", to=["cuda"],
                               output=OutputOptions(str(tmp / "out")))  # fmt: skip
    (rules,) = report.candidates
    assert not rules.validated and rules.reason.startswith(
        "not kept: candidate-1-rules.cu as written differs"
    )
    assert not rules.file and not (tmp / "out" / "candidate-1-rules.cu").exists() and not report.tradeoffs


def test_a_reference_that_hangs_at_import_is_stopped_once_with_its_line(tmp: Path) -> None:
    shutil.copy(ROOT / "tests" / "fixtures" / "python" / "hang_at_import.py", tmp / "h.py")
    r = subprocess.run(
        [sys.executable, "-m", "porter", "generate", "twice x", "--reference", f"{tmp / 'h.py'}::scale",
         "--to", "cuda", "--timeout", "3", "--out", str(tmp / "out")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr + r.stdout
    (line,) = r.stderr.strip().splitlines()
    assert "--reference: h.py hangs at import (at line" in line and "stopped after 3 s" in line, line
