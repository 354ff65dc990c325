"""Secrets stay in porter's process: no child that builds or runs code porter did not write holds one,
and nothing porter writes or sends -- reports, caches, logs, terminal output, the prompts it sends to the
model -- carries one, in plain text or in an encoding of it.

The security probe that opened this found a model's kernel declaring ``extern "C" __device__ char**
environ;``: on the CPU emulator it read ``ANTHROPIC_API_KEY`` from the child's environment and wrote its
characters into its output, from where the mismatch message carried them into stderr, report.json,
report.md and the next prompt.
"""

from __future__ import annotations

import base64
import json
import textwrap
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import KEY
from fakes.programs import run_porter

pytestmark = pytest.mark.integration

# Planted in porter's environment: the provider key, a token under porter's own prefix, and a value
# under a name no rule calls secret (only an allow-list keeps that one out of a child).
OTHER_SECRET = "Zq7-hunter2-DB-PASSWORD-value-91f3"
PORTER_TOKEN = "porter-deploy-token-5c0ffee5c0ffee"
PLANTED = {"ANTHROPIC_API_KEY": KEY, "MY_SERVICE_URL": OTHER_SECRET, "PORTER_DEPLOY_TOKEN": PORTER_TOKEN}


def encodings(secret: str) -> list[bytes]:
    """`secret` as bytes in the forms a leak could take: plain, reversed, hex, base64 (every alignment),
    URL-quoted, UTF-16, and its character codes as a list of numbers."""
    raw = secret.encode()
    found = [raw, raw[::-1], raw.hex().encode(), raw.hex().upper().encode(), secret.encode("utf-16-le")]
    found += [urllib.parse.quote(secret, safe="").encode()]
    for start in range(3):  # base64 of the secret however it is aligned in a longer encoded text
        found.append(base64.b64encode(raw[start:])[4:-4])
    codes = [str(b) for b in raw[:8]]
    found += [", ".join(codes).encode(), ",".join(codes).encode(), " ".join(codes).encode()]
    found += [", ".join(f"{c}.0" for c in codes).encode()]
    return [f for f in found if len(f) >= 8]


def leaks(data: bytes) -> list[str]:
    """Which planted secrets `data` holds in any of :func:`encodings` (the names of their variables)."""
    return [name for name, value in PLANTED.items() if any(e in data for e in encodings(value))]


def files_under(*folders: Path) -> Iterator[Path]:
    for folder in folders:
        if folder.exists():
            yield from (p for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)


ENV_DUMP = textwrap.dedent(
    """
    extern "C" char** environ;
    __global__ void k(unsigned char* out, int n)
    {
        if (threadIdx.x != 0 || blockIdx.x != 0) return;
        int p = 0;
        for (char** e = environ; e && *e; ++e) {
            for (const char* c = *e; *c && p < n - 1; ++c) out[p++] = (unsigned char)*c;
            if (p < n - 1) out[p++] = '\\n';
        }
    }
    """
)


def test_a_kernel_jobs_child_holds_no_secret(planted: None, emulator: None) -> None:
    """A kernel that copies its whole environment into its output (the user's own code, built as written,
    so nothing stops it reading ``environ``) finds the toolchain's variables and none of the secrets."""
    from porter.backends import CompileOptions, get_backend
    from porter.backends.isolate import Job, run_job

    device = get_backend("cpu").devices()[0]
    out = np.zeros(1 << 16, np.uint8)
    job = Job("cpu", ENV_DUMP, "k", CompileOptions(), device, (out, np.int32(out.size)), use_cache=False)
    res = run_job(job, 120)
    assert res.ok, res.error + res.log
    seen = res.outputs[0][0].tobytes()
    assert b"PATH=" in seen and b"HOME=" in seen  # the dump works: the environment is there to read
    assert leaks(seen) == []
    assert leaks(res.log.encode()) == []


def test_a_python_child_holds_no_secret(planted: None, tmp_path: Path) -> None:
    """The user's Python module (lift's and generate's reference) runs with the same environment."""
    from porter.backends.pycall import Call, run_calls

    module = tmp_path / "dump.py"
    module.write_text(
        "import os\n"
        "import numpy as np\n\n"
        "def dump(out):\n"
        "    data = '\\n'.join(f'{k}={v}' for k, v in os.environ.items()).encode()[: out.size]\n"
        "    out[: len(data)] = np.frombuffer(data, dtype=np.uint8)\n",
        encoding="utf-8",
    )
    ran = run_calls(str(module), [Call("dump", {"out": np.zeros(1 << 16, np.uint8)})], 60)
    (res,) = ran.results
    assert res.ok, res.error + ran.log
    seen = res.arrays["out"].tobytes()
    assert b"PATH=" in seen
    assert leaks(seen) == []


def test_the_scrubbed_environment_is_an_allow_list() -> None:
    from porter.sandbox.environment import scrubbed

    env = scrubbed(
        "/scratch",
        {"PORTER_SANDBOX_PLAN": "{}", "OPENAI_API_KEY": "x"},
        source={
            "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "CUDA_PATH": "/usr/local/cuda",
            "ANTHROPIC_API_KEY": KEY, "MY_SERVICE_URL": OTHER_SECRET, "PORTER_DEPLOY_TOKEN": PORTER_TOKEN,
            "HOME": "/root", "AWS_SESSION_TOKEN": "t", "GITHUB_TOKEN": "t", "SSH_AUTH_SOCK": "/tmp/agent",
        },
    )  # fmt: skip
    assert env == {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "CUDA_PATH": "/usr/local/cuda",
        "HOME": "/scratch", "TMPDIR": "/scratch", "PORTER_SANDBOX_PLAN": "{}",
    }  # fmt: skip


SIGNATURE = "__global__ void vector_add(const float* a, const float* b, float* c, int n)"
GOOD = "int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];"
# Each tries to get the environment into the kernel's output, so that the mismatch message carries it.
EXFILTRATE = {
    "extern-environ": 'extern "C" __device__ char** environ;',
    "extern-c-block": 'extern "C" { __device__ char** __environ; }',
    "weak-alias": 'static __device__ char** env_ __attribute__((weakref("environ")));',
}
READ = "if (i < n) c[i] = a[i] + b[i] + (float)(ENV ? ENV[i % 4][i % 8] : 0);"


def _reply(decl: str, name: str) -> str:
    body = "int i = blockIdx.x * blockDim.x + threadIdx.x;\n    " + READ.replace("ENV", name)
    return f"Faster:\n\n```cuda\n{decl}\n{SIGNATURE}\n{{\n    {body}\n}}\n```\n"


def test_nothing_porter_writes_or_sends_holds_a_secret(tmp_path, server, program, emulator) -> None:
    """`porter optimize` against replies that try to read the environment (the probe's route and its
    variants), then a good one: every report, cache entry, log line, terminal line and prompt is free of
    every planted secret in every encoding; none of the hostile replies is validated."""
    replies = [
        _reply(EXFILTRATE["extern-environ"], "environ"),
        _reply(EXFILTRATE["extern-c-block"], "__environ"),
        _reply(EXFILTRATE["weak-alias"], "env_"),
        f"Here:\n\n```cuda\n{SIGNATURE}\n{{\n    {GOOD}\n}}\n```\n",
    ]
    server.script(*replies)
    out_dir = tmp_path / "out"
    args = ["optimize", str(program), "--model", "anthropic:claude-sonnet-4-5", "--base-url", server.url]
    args += ["--candidates", "1", "--rounds", str(len(replies)), "--out", str(out_dir), "--json"]
    done = run_porter(tmp_path, *args, env=PLANTED)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(server.requests) == len(replies), done.stdout + done.stderr  # every reply was answered
    report = json.loads((out_dir / "report.json").read_text())
    attempts = report["attempts"]
    assert all(a["status"] in ("rejected", "failed") for a in attempts[:3]), attempts
    assert attempts[-1]["status"] == "validated", attempts[-1]
    # what porter printed, wrote (the output folder, its cache, its logs) and sent to the model
    assert leaks(done.stdout.encode()) == [] and leaks(done.stderr.encode()) == []
    for path in files_under(out_dir, tmp_path / "cache"):
        assert leaks(path.read_bytes()) == [], path
    for request in server.requests:
        assert leaks(json.dumps(request.body).encode()) == [], request.body
