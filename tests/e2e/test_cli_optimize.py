"""`porter optimize FILE --model M`: the command line end to end, against the fake LLM server (real SDKs,
real harness on the CPU emulator), exit codes, the JSON schema, and keys kept out of every output."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer, Hang, Malformed, Text
from fakes.programs import run_porter, vector_add_program

pytestmark = pytest.mark.integration

pytest.importorskip("anthropic")
pytest.importorskip("openai")

KEY = "sk-ant-api03-E2Efake0000SECRET1111value2222xyz"
OPENAI_KEY = "sk-proj-E2Efake3333SECRET4444value5555abc"

CORRECT = """Swapped the operands; same result.

```cuda
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = b[i] + a[i];
}
```
"""


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def program(tmp_path: Path) -> Path:
    return vector_add_program(tmp_path / "src")


def porter(tmp_path: Path, *args: str, keys: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": OPENAI_KEY} if keys else {}
    return run_porter(tmp_path, *args, env=env)


def _no_secret_anywhere(tmp_path: Path, out: subprocess.CompletedProcess[str]) -> None:
    for text in (out.stdout, out.stderr):
        assert KEY not in text and OPENAI_KEY not in text
    for f in tmp_path.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert KEY.encode() not in data and OPENAI_KEY.encode() not in data, f


def test_optimize_writes_the_validated_rewrite_and_the_report(tmp_path, server, program, emulator):
    server.script(CORRECT)
    out_dir = tmp_path / "out"
    out = porter(
        tmp_path,
        "optimize",
        str(program),
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--base-url",
        server.url,
        "--candidates",
        "1",
        "--rounds",
        "1",
        "--out",
        str(out_dir),
        "--json",
    )
    assert out.returncode == 0, out.stderr + out.stdout
    doc = json.loads(out.stdout)
    assert doc["source"] == str(program)
    from porter.workflows.optimize import run_devices

    shown_on = {d.label for d in run_devices()}
    (kernel,) = doc["kernels"]
    assert kernel["name"] == "vector_add" and kernel["variants"]
    for row in kernel["variants"]:
        assert {
            "target",
            "path",
            "status",
            "device",
            "max_rel_err",
            "trials",
            "reason",
            "time_ms",
            "speedup",
        } <= set(row)
        # one row per device that runs CUDA here (the GPU too, when there is one)
        # the rewrite validated; the original (the reference, its own file) when it holds a role
        assert row["status"] == ("original" if row["kind"] == "original" else "validated")
        assert row["device"] in shown_on
        assert row["time_ms"] > 0 and Path(row["path"]).is_file()
    assert set(doc["usage"]) >= {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
    }
    assert doc["usage"]["input_tokens"] == 100 and doc["usage"]["cost_usd"] > 0
    assert "round 1" in out.stderr and "validated" in out.stderr  # rich progress on stderr
    assert (out_dir / "vector_add.best.cu").read_text().endswith("c[i] = b[i] + a[i];\n}\n")
    report = json.loads((out_dir / "report.json").read_text())
    assert report["exit_code"] == 0 and report["attempts"][0]["status"] == "validated"
    assert "# porter optimize" in (out_dir / "report.md").read_text()
    # the original and the validated rewrite side by side: time against error, area = memory
    assert (
        report["chart"] == str(out_dir / "tradeoffs.png")
        and (out_dir / "tradeoffs.png").stat().st_size > 1000
    )
    assert "![time against error](tradeoffs.png)" in (out_dir / "report.md").read_text()
    headers = server.requests[0].headers
    assert len(server.requests) == 1
    assert (headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")) == KEY
    _no_secret_anywhere(tmp_path, out)


def test_no_validated_candidate_exits_1(tmp_path, server, program, emulator):
    server.script("I would rather describe it in words.")
    out = porter(
        tmp_path,
        "optimize",
        str(program),
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        server.url + "/v1",
        "--candidates",
        "1",
        "--rounds",
        "1",
        "--out",
        str(tmp_path / "out"),
        "--json",
    )
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    (row,) = doc["kernels"][0]["variants"]
    assert row["status"] == "failed" and "no fenced code block" in row["reason"]
    _no_secret_anywhere(tmp_path, out)


KEY_SHAPED = """Same, with the index under another name.

```cuda
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int api_key = blockIdx.x * blockDim.x + threadIdx.x;
    if (api_key < n) c[api_key] = b[api_key] + a[api_key];
}
```
"""


def test_a_rewrite_that_would_not_be_written_as_validated_is_not_validated(
    tmp_path, server, program, emulator
):
    # every file optimize writes is redacted: `api_key = blockIdx.x` became `api_key = [REDACTED]` in the
    # best file, which no longer compiles, while the report called it the validated best rewrite
    server.script(KEY_SHAPED)
    out_dir = tmp_path / "out"
    out = porter(tmp_path, "optimize", str(program), "--model", "openai:gpt-4o-mini", "--base-url",
                 server.url + "/v1", "--candidates", "1", "--rounds", "1", "--out", str(out_dir), "--json")  # fmt: skip
    assert out.returncode == 1, out.stderr + out.stdout
    (row,) = json.loads(out.stdout)["kernels"][0]["variants"]
    assert row["status"] == "failed" and "shaped like an API key" in row["reason"], row
    assert not (out_dir / "vector_add.best.cu").exists()


def test_missing_key_is_a_one_line_usage_error(tmp_path, program):
    out = porter(tmp_path, "optimize", str(program), "--model", "anthropic:claude-sonnet-4-5", keys=False)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "ANTHROPIC_API_KEY" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "mystery:model"], "anthropic:<model> or openai:<model>"),
        (["--model", "openai:gpt-4o", "--candidates", "0"], "--candidates"),
        (["--model", "openai:gpt-4o", "--kernel", "nope"], "no kernel named 'nope'"),
    ],
)
def test_bad_usage_exits_2(tmp_path, program, args, message):
    out = porter(tmp_path, "optimize", str(program), *args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr


# ------------------------------------------------------------------------ bounded requests


def test_help_documents_the_request_bounds(tmp_path):
    out = porter(tmp_path, "optimize", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "--request-timeout" in text and "default: 60.0" in text
    assert "--retries" in text and "default: 2" in text
    assert "--max-seconds" in text and "cut off" in text


@pytest.mark.parametrize(
    "bounds",
    [
        ["--request-timeout", "1", "--retries", "0", "--max-seconds", "3", "--rounds", "10"],
        ["--request-timeout", "60", "--retries", "5", "--max-seconds", "2"],
    ],
    ids=["short-timeouts", "cut-in-flight"],
)
def test_a_hanging_server_is_given_up_on_within_the_time_budget(tmp_path, server, program, emulator, bounds):
    server.script(*(Hang(60) for _ in range(12)))
    started = time.monotonic()
    out = porter(
        tmp_path,
        "optimize",
        str(program),
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--base-url",
        server.url,
        "--candidates",
        "1",
        "--out",
        str(tmp_path / "out"),
        "--json",
        *bounds,
    )
    ended = time.monotonic()
    # porter did not wait on a hanging request (60 s each); from its first request on, the run kept to the
    # budget (--max-seconds) and one request's timeout -- its start (the original built and validated first)
    # is outside the budget, and slow on a loaded machine
    assert ended - started < 45, ended - started
    assert server.requests, out.stderr + out.stdout
    budget, timeout = (
        float(bounds[bounds.index("--max-seconds") + 1]),
        float(bounds[bounds.index("--request-timeout") + 1]),
    )
    assert ended - server.requests[0].at < budget + min(timeout, budget) + 4, ended - server.requests[0].at
    assert out.returncode == 1, out.stderr + out.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["stop_reason"].startswith("time budget spent")
    assert all(a["status"] == "error" for a in report["attempts"])
    assert "time budget spent" in report["attempts"][-1]["reason"]
    assert "Traceback" not in out.stderr


def _refused_before_any_request(tmp_path, server, program, *args):
    out = porter(
        tmp_path,
        "optimize",
        str(program),
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        server.url + "/v1",
        "--rounds",
        "1",
        *args,
    )
    assert out.returncode == 2, out.stderr + out.stdout
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr
    assert server.requests == []
    return out.stderr


def test_record_into_an_existing_file_is_refused_before_any_request(tmp_path, server, program):
    server.script(CORRECT)
    target = tmp_path / "rec.json"
    target.write_text("{}")
    err = _refused_before_any_request(tmp_path, server, program, "--record", str(target))
    assert "--record" in err and "not a folder" in err and target.read_text() == "{}"


def test_record_under_a_file_is_refused_before_any_request(tmp_path, server, program):
    server.script(CORRECT)
    (tmp_path / "plain").write_text("x")
    err = _refused_before_any_request(tmp_path, server, program, "--record", str(tmp_path / "plain" / "rec"))
    assert "--record" in err and "cannot write" in err


@pytest.mark.parametrize("where", ["file", "under-file"])
def test_out_that_cannot_be_a_folder_is_refused_before_any_request(tmp_path, server, program, where):
    server.script(CORRECT)
    (tmp_path / "plain").write_text("x")
    out_dir = tmp_path / "plain" if where == "file" else tmp_path / "plain" / "out"
    err = _refused_before_any_request(tmp_path, server, program, "--out", str(out_dir))
    assert "--out" in err and "not a folder" in err and (tmp_path / "plain").read_text() == "x"


@pytest.mark.parametrize("model", ["openai:llama", "openai:x:"])
def test_model_names_are_printed_as_given(tmp_path, server, program, emulator, model):
    """`openai:llama` must not become a llama emoji, nor `:x:` a cross, nor [tags] vanish."""
    server.script(Text("No code, just [bold]words[/bold] :llama: here.", model=model.partition(":")[2]))
    out = porter(
        tmp_path,
        "optimize",
        str(program),
        "--model",
        model,
        "--base-url",
        server.url + "/v1",
        "--candidates",
        "1",
        "--rounds",
        "1",
        "--out",
        str(tmp_path / "out"),
    )
    assert out.returncode == 1, out.stderr + out.stdout
    both = out.stdout + out.stderr
    assert "\N{LLAMA}" not in both and "\N{CROSS MARK}" not in both
    assert f"with {model}" in " ".join(out.stdout.split())  # the table title
    assert "no fenced code block" in out.stdout


def test_a_garbled_reply_is_explained_in_plain_words(tmp_path, server, program, emulator):
    server.script(Malformed("{}"), Malformed("{}"))
    out = porter(
        tmp_path,
        "optimize",
        str(program),
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        server.url + "/v1",
        "--candidates",
        "1",
        "--rounds",
        "2",
        "--retries",
        "0",
        "--out",
        str(tmp_path / "out"),
        "--json",
    )
    assert out.returncode == 1, out.stderr + out.stdout
    (row,) = json.loads(out.stdout)["kernels"][0]["variants"]
    assert "malformed reply from the server" in row["reason"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [a["status"] for a in report["attempts"]] == ["error", "error"]  # asked again in round 2
    for text in (out.stdout, out.stderr, (tmp_path / "out" / "report.json").read_text()):
        assert "NoneType" not in text and "openai:None" not in text and "TypeError" not in text


SLOW_BLOCK = """Each thread also recomputes its index from a 256-thread block; the same values.

```cuda
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float s = a[i]; c[i] = s + b[i]; }
}
```
"""


def test_with_tune_the_models_fastest_rewrite_joins_the_launch_search(tmp_path, server, program, emulator):
    server.script(SLOW_BLOCK)
    out_dir = tmp_path / "out"
    out = porter(tmp_path, "optimize", str(program), "--model", "openai:gpt-4o-mini", "--base-url",
                 server.url + "/v1", "--candidates", "1", "--rounds", "1", "--out", str(out_dir), "--json",
                 "--tune")  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    tuned = json.loads(out.stdout)["tuned"]
    labels = [c["label"] for c in tuned["configs"]]
    rewrite = [
        c for c in tuned["configs"] if c["label"].startswith("the model's fastest (candidate 1, round 1)")
    ]
    # every geometry of the original, and the same geometries of the model's kernel, each validated then timed
    assert labels[0] == "the original's" and len(rewrite) >= 5
    assert all(c["validated"] and c["time_ms"] for c in rewrite), rewrite
    assert tuned["best"] in labels and tuned["device"] in {"cpu:cpu-emulator"} | {
        r["device"] for r in json.loads(out.stdout)["kernels"][0]["variants"]
    }
    assert (out_dir / "tuned" / "report.json").is_file()
    md = (out_dir / "report.md").read_text()
    assert "## Launch search (--tune)" in md and "the model's fastest (candidate 1, round 1), block 128" in md
    # one trade-off set: the original, the rewrite, and each kernel's fastest configuration of the search
    # when it is not that kernel as launched already -- all timed by optimize's evaluator, on its devices
    report = json.loads((out_dir / "report.json").read_text())
    pool = report["contenders"]
    assert {c["kind"] for c in pool} >= {"original", "rewrite"}
    searched = {c["label"] for c in tuned["configs"] if c["validated"]}
    for c in pool:
        assert c["time_ms"] and c["device"] in report["devices"], c
        if c["kind"] == "tuned":
            assert c["label"].removeprefix("tuned: ") in searched and c["launch"]["block"], c
            assert c["label"] not in ("tuned: the original's", f"tuned: {rewrite[0]['label']}")
    assert set(report["tradeoffs"]) == {"best", "fastest", "least_memory", "most_precise"}
    assert report["tradeoffs"]["best"] != "the original"  # best: what the run proposes, never the input
    for role, label in report["tradeoffs"].items():
        (c,) = [c for c in pool if c["label"] == label]
        path = Path(report["outputs"][role])
        if c["kind"] == "original":
            assert path == program  # the input itself: never copied, never written
        else:
            head = path.read_text().splitlines()[0]
            assert ("a configuration of porter optimize's launch search" in head) == (c["kind"] == "tuned"), (
                head
            )
    assert "## Trade-off set" in md
    _no_secret_anywhere(tmp_path, out)


@pytest.mark.gpu
def test_on_a_gpu_the_tuned_configurations_join_the_tradeoffs_timed_there(tmp_path, server, program):
    """optimize --model --tune on an NVIDIA GPU: the original, the rewrite and the search's fastest
    configurations in one trade-off set, each timed on the GPU by optimize's evaluator."""
    server.script(SLOW_BLOCK)
    out_dir = tmp_path / "out"
    out = porter(tmp_path, "optimize", str(program), "--model", "openai:gpt-4o-mini", "--base-url",
                 server.url + "/v1", "--candidates", "1", "--rounds", "1", "--out", str(out_dir), "--tune")  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    report = json.loads((out_dir / "report.json").read_text())
    gpu = next((d for d in report["devices"] if d.startswith("cuda:")), None)
    if gpu is None:
        pytest.skip("no NVIDIA GPU porter can run kernels on")
    pool = report["contenders"]
    assert {c["kind"] for c in pool} >= {"original", "rewrite"}
    assert all(c["device"] == gpu for c in pool), pool  # the first timing: the GPU's, for every contender
    on_gpu = {c["label"]: next(t for t in c["timings"] if t["device"] == gpu) for c in pool}
    assert all(t["time_ms"] and t["time_ms"] > 0 for t in on_gpu.values()), on_gpu
    assert on_gpu["the original"]["time_ms"] == report["baselines_ms"][gpu]
    for c in pool:
        if c["kind"] == "tuned":  # at optimize's size, beside the original there: a speedup on the record
            assert c["memory_bytes"] and on_gpu[c["label"]]["speedup"], c
    fastest = report["tradeoffs"]["fastest"]
    assert fastest in on_gpu and on_gpu[fastest]["time_ms"] == min(t["time_ms"] for t in on_gpu.values())
