"""Nothing runs that the device-build gate refused, in every command that runs code porter did not write:
`check` (a user's variant), `port --model`, `generate --model` (a Python and a CUDA reference),
`lift --model` (and `optimize --model`, in test_model_replies.py).

Each candidate here reads a ``__device__`` variable with a dynamic initialiser: the screen lets it through
(every function is defined, none is a process or file call, all of it is device code), the CPU emulator
would build and run it as plain C++ -- the initialiser running at load time -- and, the kernel being
right otherwise, validate it; a GPU compiler refuses it.  So the only way it can be
reported without a device verdict, with the gate's reason, is that nothing ran it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer
from fakes.programs import ROOT, run_porter, vector_add_program

pytestmark = pytest.mark.integration

KEY = "sk-GATE1234SECRET5678value-abcdef"
HOST_ONLY = "__device__ int compute_seed() { return 7; }\n__device__ int seed = compute_seed();\n"
GATE_WORDS = "does not build as device code"


@pytest.fixture(autouse=True)
def _compilers() -> None:
    from porter.backends import get_backend

    from porter.harness.gate import device_build_check
    from porter.model import Variant

    if not get_backend("cpu").devices():
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    probe = device_build_check(
        Variant("k", "cuda", HOST_ONLY + "__global__ void k(int* a) { a[0] = seed; }\n", "k", "t")
    )
    if "no GPU device compiler" in probe.reason:
        pytest.skip(probe.reason)
    assert not probe.ok and GATE_WORDS in probe.reason, probe


def _reply(code: str) -> str:
    return f"Here it is.\n\n```cuda\n{code}```\n"


def _no_device_ran(verdicts: list[dict]) -> None:
    assert verdicts, "no verdict recorded"
    for v in verdicts:
        assert not v.get("executed") and GATE_WORDS in v["reason"], v


def test_check_never_runs_a_variant_a_gpu_compiler_refuses(tmp_path: Path) -> None:
    """The probe's case: a device-code fopen() the GPU compiler refuses ran on the emulator anyway and
    what it read showed in the verdict.  Here the variant is also right otherwise, so running it would
    have validated it."""
    original = vector_add_program(tmp_path / "src")
    for name, before, inside in (
        ("host-call", HOST_ONLY, "if (seed == 12345) c[0] = 0;"),
        ("fopen", "#include <cstdio>\n", 'if (i == 0 && fopen("/etc/passwd", "r") == 0) c[0] = 1;'),
    ):
        variant = tmp_path / f"{name}.cu"
        variant.write_text(
            f"{before}__global__ void vector_add(const float* a, const float* b, float* c, int n)\n{{\n"
            f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    {inside}\n"
            "    if (i < n) c[i] = a[i] + b[i];\n}\n"
        )
        done = run_porter(tmp_path, "check", str(variant), "--against", str(original), "--json")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        _no_device_ran(json.loads(done.stdout)["verdicts"])


WARP_SUM = """
__global__ void warp_sum(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int s = __reduce_add_sync(0xffffffff, i < n ? in[i] : 0);
    if ((threadIdx.x & 31) == 0 && i < n) out[i / 32] = s;
}

int main()
{
    const int n = 4096;
    int *in, *out;
    cudaMalloc(&in, n * sizeof(int));
    cudaMalloc(&out, n / 32 * sizeof(int));
    warp_sum<<<n / 256, 256>>>(in, out, n);
    cudaDeviceSynchronize();
    return 0;
}
"""
WARP_SUM_HIP = (
    HOST_ONLY
    + """
__global__ void warp_sum(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (seed == 12345) return;
    int v = i < n ? in[i] : 0;
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor(v, d, 32);
    if ((threadIdx.x & 31) == 0 && i < n) out[i / 32] = v;
}
"""
)


def test_port_with_a_model_never_runs_a_translation_a_gpu_compiler_refuses(tmp_path: Path) -> None:
    """A warp reduction (sm_80's __reduce_add_sync) has no HIP spelling, so the model is asked; its HIP
    refers to a host function, which hipcc refuses and the emulator would run."""
    pytest.importorskip("openai")
    (tmp_path / "warp.cu").write_text(WARP_SUM)
    with FakeLLMServer() as server:
        server.script(_reply(WARP_SUM_HIP))
        done = run_porter(
            tmp_path, "port", str(tmp_path / "warp.cu"), "--to", "hip", "--model", "openai:gpt-4o-mini",
            "--base-url", server.url + "/v1", "--candidates", "1", "--rounds", "1", "--json",
            "--out", str(tmp_path / "out"), env={"OPENAI_API_KEY": KEY},
        )  # fmt: skip
        asked = len(server.requests)
    assert asked == 1, done.stdout + done.stderr  # the model was asked: the rules cannot translate it
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    rows = [v for k in report["kernels"] for v in k["variants"] if v["target"] == "hip"]
    assert rows and all(v["status"] == "failed" and GATE_WORDS in v["reason"] for v in rows), rows
    assert all(v["trials"] == 0 and v["max_rel_err"] is None for v in rows), rows


SUM_OF_SQUARES = (
    HOST_ONLY
    + """
extern "C" __global__ void sum_of_squares_model(double* x, long long d_x_0, double* result)
{
    if (blockIdx.x != 0 || threadIdx.x != 0 || seed == 12345) return;
    double acc = 0.0;
    for (long long i = 0; i < d_x_0; ++i) acc += x[i] * x[i];
    *result = acc;
}
"""
)


def test_generate_with_a_python_reference_never_runs_a_candidate_a_gpu_compiler_refuses(tmp_path):
    pytest.importorskip("openai")
    shutil.copy(ROOT / "samples" / "python" / "lift_patterns.py", tmp_path / "p.py")
    with FakeLLMServer() as server:
        server.script(_reply(SUM_OF_SQUARES))
        done = run_porter(
            tmp_path, "generate", "the sum of the squares of a vector", "--reference",
            f"{tmp_path / 'p.py'}::sum_of_squares", "--to", "cuda", "--model", "openai:gpt-4o-mini",
            "--base-url", server.url + "/v1", "--candidates", "1", "--rounds", "1", "--json",
            "--out", str(tmp_path / "out"), env={"OPENAI_API_KEY": KEY},
        )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    doc = json.loads(done.stdout)
    (model,) = [c for c in doc["candidates"] if c["label"].startswith("openai:")]
    assert not model["validated"] and GATE_WORDS in model["reason"], model
    assert not model.get("verdicts") and not model.get("times"), model  # no device ran it


ADD_CU = """
__global__ void add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main()
{
    const int n = 1 << 12;
    float *a, *b, *c;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    add<<<(n + 255) / 256, 256>>>(a, b, c, n);
    cudaDeviceSynchronize();
    return 0;
}
"""
ADD_GATED = (
    HOST_ONLY
    + """
__global__ void add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (seed == 12345) return;
    if (i < n) c[i] = b[i] + a[i];
}
"""
)


def test_generate_with_a_cuda_reference_never_runs_a_candidate_a_gpu_compiler_refuses(tmp_path):
    pytest.importorskip("openai")
    (tmp_path / "add.cu").write_text(ADD_CU)
    with FakeLLMServer() as server:
        server.script(_reply(ADD_GATED))
        done = run_porter(
            tmp_path, "generate", "add two float vectors", "--reference", f"{tmp_path / 'add.cu'}::add",
            "--model", "openai:gpt-4o-mini", "--base-url", server.url + "/v1", "--candidates", "1",
            "--rounds", "1", "--out", str(tmp_path / "out"), "--json", env={"OPENAI_API_KEY": KEY},
        )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    (attempt,) = json.loads((tmp_path / "out" / "report.json").read_text())["attempts"]
    assert attempt["status"] == "failed" and GATE_WORDS in attempt["reason"], attempt
    assert not attempt.get("verdicts"), attempt


DECAY = """
import numpy as np


def decay(a: float, x: np.ndarray, y: np.ndarray) -> None:
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = a * y[i - 1] + x[i]
"""
DECAY_GATED = (
    HOST_ONLY
    + """
extern "C" __global__ void decay_model(double a, double* x, long long d_x_0, double* y, long long d_y_0)
{
    if (blockIdx.x != 0 || threadIdx.x != 0 || seed == 12345) return;
    y[0] = x[0];
    for (long long i = 1; i < d_x_0; ++i) y[i] = a * y[i - 1] + x[i];
}
"""
)


def test_lift_with_a_model_never_runs_a_kernel_a_gpu_compiler_refuses(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    (tmp_path / "p.py").write_text(DECAY)
    with FakeLLMServer() as server:
        server.script(_reply(DECAY_GATED))
        done = run_porter(
            tmp_path, "lift", f"{tmp_path / 'p.py'}::decay", "--to", "cuda", "--model", "openai:gpt-4o-mini",
            "--base-url", server.url + "/v1", "--rounds", "1", "--json", "--out", str(tmp_path / "out"),
            env={"OPENAI_API_KEY": KEY},
        )  # fmt: skip
        asked = len(server.requests)
    assert asked == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    (decay,) = json.loads(done.stdout)["functions"]
    assert not decay["validated"] and not decay["files"], decay
    _no_device_ran(decay["verdicts"])
