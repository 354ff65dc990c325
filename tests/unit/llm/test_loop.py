"""The generate -> validate -> repair loop through the REAL anthropic and openai SDKs against the fake
server, with every candidate validated on the CPU emulator by the real harness (child processes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer, Hang, Malformed, Status, Text, rate_limited, server_error
from fakes.programs import vector_add_program
from porter.backends import get_backend

from porter.cache import Cache
from porter.harness.bench import BenchPlan
from porter.harness.validate import ValidateOptions
from porter.llm.cache import ReplyCache
from porter.llm.loop import screen
from porter.pricing import Usage
from porter.records import ERROR, FAILED, NO_CODE, REJECTED, VALIDATED, Rejection, Screened
from porter.report import optimize_view
from porter.results import OptimizeReport
from porter.scan import scan_file
from porter.workflows.optimize import optimize_file
from porter.workflows.options import ModelOptions, OutputOptions, RunOptions

from .conftest import ANTHROPIC_KEY, OPENAI_KEY

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "samples" / "cuda"
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}
OPTS = ValidateOptions(trials=1)
PLAN = BenchPlan(warmup=1, min_runs=3, max_runs=3, max_seconds=1.0, rotate=1)

SIGNATURE = "__global__ void vector_add(const float* a, const float* b, float* c, int n)"
NOT_COMPILING = f"""Here is a faster version.

```cuda
{SIGNATURE}
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[undefined_index];
}}
```
"""
WRONG = f"""Fixed.

```cuda
{SIGNATURE}
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] - b[i];
}}
```
"""
CORRECT = f"""Fixed the sign.

```cuda
{SIGNATURE}
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        c[i] = b[i] + a[i];
    }}
}}
```
"""
CORRECT_2 = f"""A grid-stride loop.

```cu
{SIGNATURE}
{{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        c[i] = a[i] + b[i];
}}
```
"""


@pytest.fixture(scope="module")
def emulator():
    try:
        devices = [d for d in get_backend("cpu").devices() if d.kind != "checker"]
    except Exception:  # noqa: BLE001
        devices = []
    if not devices:
        pytest.skip("the CPU emulator is unavailable (g++ missing)")
    return devices


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("binaries")


@pytest.fixture
def program(tmp_path: Path, binaries: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """samples/cuda/vector_add.cu with a spec file of tiny sizes beside it.  Compiled kernels are
    cached across this module's tests; model replies are cached per test (see `run`)."""
    monkeypatch.setenv("PORTER_CACHE_DIR", str(binaries))
    return vector_add_program(tmp_path / "src")


# optimize_file's options, given flat: the model's (renamed where the CLI spells them otherwise)
MODEL_ARGS = {
    "candidates",
    "rounds",
    "replay",
    "record",
    "max_tokens_total",
    "max_dollars",
    "max_seconds",
    "stream",
}
RENAMED = {"timeout": "request_timeout", "max_retries": "retries"}


def run(
    provider: str,
    server: FakeLLMServer,
    program: Path,
    devices: list,
    tmp_path: Path,
    **kw: object,
) -> OptimizeReport:
    url = server.url if provider == "anthropic" else server.url + "/v1"
    model: dict[str, object] = dict(
        candidates=1,
        rounds=3,
        base_url=url,
        request_timeout=10,
        retries=2,
        reply_cache=ReplyCache(Cache(root=tmp_path / "cache")),
    )
    for key in list(kw):
        if key in MODEL_ARGS or key in RENAMED:
            model[RENAMED.get(key, key)] = kw.pop(key)
    plan = kw.pop("plan", PLAN)
    return optimize_file(
        str(program),
        model=ModelOptions(f"{provider}:{MODELS[provider]}", **model),  # type: ignore[arg-type]
        run=RunOptions(devices=tuple(devices) if devices is not None else None, validate=OPTS, bench=plan),  # type: ignore[arg-type]
        output=OutputOptions(str(tmp_path / "out"), markdown=optimize_view.markdown),
        **kw,  # type: ignore[arg-type]
    )


def last_user(request_body: dict) -> str:
    messages = request_body["messages"]
    assert messages[-1]["role"] == "user"
    content = messages[-1]["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


# ------------------------------------------------------------------------ the scripted sequence


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.integration
def test_compile_error_then_mismatch_then_correct(provider, stream, llm_server, program, emulator, tmp_path):
    llm_server.script(NOT_COMPILING, WRONG, CORRECT)
    report = run(provider, llm_server, program, emulator, tmp_path, stream=stream)

    assert len(llm_server.requests) == 3 and llm_server.pending == 0
    first, second, third = report.loop.attempts
    assert [a.status for a in report.loop.attempts] == [FAILED, FAILED, VALIDATED]
    assert first.evaluation is not None and first.evaluation.stage == "compile"
    # Request 2 carries the exact compiler log of candidate 1.
    log = first.evaluation.log.strip()
    assert "undefined_index" in log
    assert log in last_user(llm_server.requests[1].body)
    assert "did not compile" in last_user(llm_server.requests[1].body)
    # Request 3 carries the mismatch evidence: which array element, which size, expected value.
    assert second.evaluation is not None and second.evaluation.stage == "validate"
    evidence = last_user(llm_server.requests[2].body)
    assert "matches-reference" in evidence and "c[" in evidence and "expected" in evidence
    assert "size n=300" in evidence
    # Each request is the same conversation, one turn longer.
    assert [len(r.body["messages"]) for r in llm_server.requests] == (
        [1, 3, 5] if provider == "anthropic" else [2, 4, 6]
    )
    # The result is the correct candidate, validated, written out.
    best = report.best
    assert best is third and best.code is not None and "b[i] + a[i]" in best.code
    assert report.exit_code == 0
    doc = report.document()
    rows = doc["kernels"][0]["variants"]
    # the rewrite's rows validated; the original (the reference) takes a role only by being strictly better
    assert rows and all(r["status"] == ("original" if r["kind"] == "original" else "validated") for r in rows)
    assert any(r["kind"] == "rewrite" and r["role"] == "best" for r in rows)
    assert rows[0]["time_ms"] is not None and rows[0]["time_ms"] > 0
    assert Path(rows[0]["path"]).read_text().endswith(best.code)
    usage = doc["usage"]
    assert usage["requests"] == 3 and usage["input_tokens"] == 300 and usage["output_tokens"] == 150
    assert usage["cost_usd"] == pytest.approx(
        {"anthropic": 3 * (100 * 3.0 + 50 * 15.0), "openai": 3 * (100 * 0.15 + 50 * 0.6)}[provider] / 1e6
    )
    assert (tmp_path / "out" / "report.json").is_file() and (tmp_path / "out" / "report.md").is_file()


@pytest.mark.integration
def test_system_prompt_is_stable_and_cached_first(llm_server, program, emulator, tmp_path):
    llm_server.script(WRONG, CORRECT)
    run("anthropic", llm_server, program, emulator, tmp_path, rounds=2)
    sys1, sys2 = (r.body["system"] for r in llm_server.requests)
    assert sys1 == sys2  # the system prompt never changes between rounds
    assert "cache_control" in sys1[-1] and "Guard regions" in "".join(b["text"] for b in sys1)
    first_user = llm_server.requests[0].body["messages"][0]["content"]
    assert "quoted data" in first_user and "c[i] = a[i] + b[i];" in first_user


@pytest.mark.integration
def test_two_concurrent_candidates_and_the_tradeoff_set(llm_server, program, emulator, tmp_path):
    llm_server.script(CORRECT, CORRECT_2)
    report = run("openai", llm_server, program, emulator, tmp_path, candidates=2, rounds=1)
    assert len(llm_server.requests) == 2
    notes = sorted(last_user(r.body).split("You are candidate ")[1][:6] for r in llm_server.requests)
    assert notes == ["1 of 2", "2 of 2"]  # distinct conversations (and distinct cache keys)
    assert sorted(a.candidate for a in report.loop.attempts) == [1, 2]
    assert all(a.status == VALIDATED for a in report.loop.attempts)
    trade = report.loop.tradeoffs()
    assert set(trade) == {"fastest", "least_memory", "most_precise"}
    assert report.best is trade["fastest"]
    roles = {s.role for s in report.selected}
    assert roles == {"best", "fastest", "least_memory", "most_precise"}
    for sel in report.selected:
        assert Path(sel.path).is_file()


# ------------------------------------------------------------------------ budgets

NO_CODE_REPLY = "I would unroll the loop, but I will not write the code."


@pytest.mark.parametrize(
    ("budget", "stop"),
    [({"max_tokens_total": 100}, "token budget"), ({"max_dollars": 0.001}, "dollar budget"), ({}, "round")],
)
def test_budget_stops_the_loop(budget, stop, llm_server, program, emulator, tmp_path):
    llm_server.script(NO_CODE_REPLY, NO_CODE_REPLY, NO_CODE_REPLY)
    rounds = 2 if not budget else 3
    report = run("anthropic", llm_server, program, emulator, tmp_path, rounds=rounds, **budget)
    assert stop in report.loop.stop_reason
    expected = 2 if not budget else 1
    assert len(llm_server.requests) == expected and report.loop.rounds == expected
    assert report.exit_code == 1 and report.best is None


@pytest.mark.integration
def test_reply_without_code_is_answered_with_the_no_code_message(llm_server, program, emulator, tmp_path):
    llm_server.script(NO_CODE_REPLY, CORRECT)
    report = run("openai", llm_server, program, emulator, tmp_path, rounds=2)
    assert [a.status for a in report.loop.attempts] == [NO_CODE, VALIDATED]
    follow = last_user(llm_server.requests[1].body)
    assert "no fenced code block" in follow and "vector_add" in follow


# ------------------------------------------------------------------------ failures of the service


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.integration
def test_429_and_500_are_retried_then_succeed(provider, llm_server, program, emulator, tmp_path):
    llm_server.script(rate_limited(), server_error(), CORRECT)
    report = run(provider, llm_server, program, emulator, tmp_path, rounds=1, max_retries=2)
    assert len(llm_server.requests) == 3
    assert [a.status for a in report.loop.attempts] == [VALIDATED]
    assert report.loop.totals.requests == 1


@pytest.mark.integration
def test_hanging_request_fails_its_candidate_and_the_loop_continues(llm_server, program, emulator, tmp_path):
    llm_server.script(Hang(8), CORRECT)
    report = run(
        "anthropic",
        llm_server,
        program,
        emulator,
        tmp_path,
        candidates=2,
        rounds=1,
        timeout=1.5,
        max_retries=0,
    )
    statuses = sorted(a.status for a in report.loop.attempts)
    assert statuses == sorted([ERROR, VALIDATED])
    failed = next(a for a in report.loop.attempts if a.status == ERROR)
    assert "no answer within" in failed.reason
    assert report.exit_code == 0


@pytest.mark.parametrize("body", [Malformed(), Malformed("{}")], ids=["bad-json", "empty-object"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.integration
def test_a_malformed_reply_costs_one_round_not_the_candidate(
    provider, body, llm_server, program, emulator, tmp_path
):
    llm_server.script(body, CORRECT)
    report = run(provider, llm_server, program, emulator, tmp_path, rounds=2, max_retries=0)
    garbled, ok = report.loop.attempts
    assert garbled.status == ERROR and garbled.transient and garbled.round == 1
    assert "malformed reply" in garbled.reason and "NoneType" not in garbled.reason
    assert ok.status == VALIDATED and ok.round == 2 and report.exit_code == 0
    # Round 2 sends the same conversation again: the garbled reply added nothing to it.
    first, second = (r.body["messages"] for r in llm_server.requests)
    assert first == second


def test_malformed_replies_are_still_bounded_by_the_rounds(llm_server, program, emulator, tmp_path):
    llm_server.script(Malformed(), Malformed(), "never asked")
    report = run("openai", llm_server, program, emulator, tmp_path, rounds=2, max_retries=0)
    assert [a.status for a in report.loop.attempts] == [ERROR, ERROR]
    assert report.loop.stop_reason == "all 2 round(s) done" and llm_server.pending == 1
    assert report.exit_code == 1 and report.document()["kernels"][0]["variants"][0]["status"] == "failed"


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_failure_that_would_keep_failing_ends_the_candidate(
    status, llm_server, program, emulator, tmp_path
):
    llm_server.script(Status(status, "no such thing", "error"), CORRECT)
    report = run("anthropic", llm_server, program, emulator, tmp_path, rounds=3, max_retries=2)
    (attempt,) = report.loop.attempts
    assert attempt.status == ERROR and not attempt.transient and str(status) in attempt.reason
    assert report.loop.stop_reason == "no candidate left to continue"
    assert len(llm_server.requests) == 1 and llm_server.pending == 1


# ------------------------------------------------------------------------ usage a server cannot fake


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_negative_usage_cannot_undo_the_dollar_budget(provider, llm_server, program, emulator, tmp_path):
    """A reply claiming -10^8 input tokens would make the spend negative and the budget never stop."""
    llm_server.script(
        Text(NO_CODE_REPLY, input_tokens=-(10**8), output_tokens=50),
        Text(NO_CODE_REPLY, input_tokens=10**6, output_tokens=50),
        NO_CODE_REPLY,
    )
    report = run(provider, llm_server, program, emulator, tmp_path, rounds=3, max_dollars=0.1)
    assert "dollar budget" in report.loop.stop_reason and len(llm_server.requests) == 2
    first = report.loop.attempts[0]
    assert first.usage.input_tokens == 0 and first.usage.output_tokens == 50 and first.cost_usd >= 0
    totals = report.loop.totals
    assert totals.cost_usd > 0 and totals.usage.input_tokens == 10**6
    assert any("server reported invalid usage" in n and "input_tokens=-" in n for n in report.loop.notes)
    assert any("invalid usage" in n for n in report.full_document()["notes"])


@pytest.mark.integration
def test_absurd_usage_is_counted_as_zero(llm_server, program, emulator, tmp_path):
    llm_server.script(Text(CORRECT, input_tokens=100, output_tokens=10**12))
    report = run("anthropic", llm_server, program, emulator, tmp_path, rounds=1)
    (attempt,) = report.loop.attempts
    assert attempt.status == VALIDATED and attempt.usage == Usage(100, 0, 0, 0)
    assert report.document()["usage"]["output_tokens"] == 0
    assert any("output_tokens=1000000000000" in n for n in report.loop.notes)


# ------------------------------------------------------------------------ the time budget


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.integration
def test_max_seconds_cuts_off_the_request_in_flight(stream, llm_server, program, emulator, tmp_path):
    llm_server.script(*(Hang(30) for _ in range(4)))
    started = time.monotonic()
    report = run(
        "openai",
        llm_server,
        program,
        emulator,
        tmp_path,
        rounds=3,
        timeout=20,
        max_retries=3,
        max_seconds=1.5,
        stream=stream,
    )
    assert time.monotonic() - started < 6
    (attempt,) = report.loop.attempts
    assert attempt.status == ERROR and "time budget spent" in attempt.reason
    assert report.loop.stop_reason.startswith("time budget spent") and len(llm_server.requests) == 1


@pytest.mark.integration
def test_max_seconds_bounds_rounds_of_timeouts(llm_server, program, emulator, tmp_path):
    """Short request timeouts (transient: asked again each round) still stop at the time budget."""
    llm_server.script(*(Hang(30) for _ in range(10)))
    started = time.monotonic()
    report = run(
        "anthropic",
        llm_server,
        program,
        emulator,
        tmp_path,
        rounds=10,
        timeout=0.5,
        max_retries=0,
        max_seconds=1.8,
    )
    assert time.monotonic() - started < 5
    assert report.loop.stop_reason.startswith("time budget spent")
    assert 2 <= len(report.loop.attempts) <= 4 and all(a.status == ERROR for a in report.loop.attempts)
    assert "time budget spent" in report.loop.attempts[-1].reason


# ------------------------------------------------------------------------ replay


@pytest.mark.integration
def test_replay_serves_the_recording_without_network_and_gives_the_same_result(
    llm_server, program, emulator, tmp_path
):
    record = tmp_path / "recorded"
    llm_server.script(NOT_COMPILING, CORRECT)
    first = run("anthropic", llm_server, program, emulator, tmp_path / "a", rounds=2, record=str(record))
    assert len(llm_server.requests) == 2 and len(list(record.glob("*.json"))) == 2
    with FakeLLMServer() as silent:
        again = run("anthropic", silent, program, emulator, tmp_path / "b", rounds=2, replay=str(record))
        assert silent.requests == []
    assert (
        [a.status for a in again.loop.attempts]
        == [a.status for a in first.loop.attempts]
        == [FAILED, VALIDATED]
    )
    assert again.best is not None and first.best is not None and again.best.code == first.best.code
    assert again.loop.totals.cost_usd == 0.0 and again.document()["usage"]["cost_usd"] == 0.0
    assert again.loop.totals.usage == first.loop.totals.usage


# ------------------------------------------------------------------------ safety


@pytest.mark.integration
def test_host_code_in_a_reply_is_never_run(llm_server, program, emulator, tmp_path):
    evil = 'Run this:\n```cuda\n#include <cstdlib>\nint main(){ system("rm -rf /"); }\n```\n'
    llm_server.script(evil, CORRECT)
    evaluated: list[str] = []

    def wrap(inner):
        def evaluate(cand: Screened):
            evaluated.append(cand.code)
            return inner(cand)

        return evaluate

    report = run("openai", llm_server, program, emulator, tmp_path, rounds=2, wrap_evaluator=wrap)
    rejected, ok = report.loop.attempts
    assert rejected.status == REJECTED and rejected.code is None
    assert "#include" in rejected.reason or "main()" in rejected.reason
    assert len(evaluated) == 1 and "system" not in evaluated[0]  # only the correct kernel reached the harness
    assert ok.status == VALIDATED
    assert "rejected your code block" in last_user(llm_server.requests[1].body)


def _original():
    return next(k for k in scan_file(str(SAMPLE / "vector_add.cu")).kernels if k.name == "vector_add")


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ('int main(){ system("rm -rf /"); }\n', "main()"),
        (f'{SIGNATURE} {{ system("ls"); }}\n', "system()"),
        (f"{SIGNATURE} {{ }}\nvoid launch() {{ float* p; cudaMalloc(&p, 4); }}\n", "cudaMalloc"),
        (f"#include <unistd.h>\n{SIGNATURE} {{ }}\n", "#include"),
        (f'{SIGNATURE} {{ asm volatile("trap;"); }}\n', "asm"),
        ("__global__ void vector_add(float* c, const float* a, const float* b, int n) { }\n", "parameter 1"),
        ("__global__ void vector_add(const float* a, const float* b, float* c) { }\n", "4 parameters"),
        ("__global__ void other(const float* a) { }\n", "no __global__ kernel named"),
        # the host process's data, however it is declared
        (f'extern "C" __device__ char** environ;\n{SIGNATURE} {{ }}\n', "`environ`"),
        (f'extern "C" {{ __device__ char** __environ; }}\n{SIGNATURE} {{ }}\n', "`__environ`"),
        (f"{SIGNATURE} {{ if (stdout) c[0] = 1; }}\n", "`stdout`"),
        (f"extern __device__ int counter;\n{SIGNATURE} {{ c[0] = counter; }}\n", "declares a variable"),
        (
            f'extern "C" __device__ char** e __attribute__((weak));\n{SIGNATURE} {{ }}\n',
            "declares a variable",
        ),
        (f"extern const __constant__ float table[4];\n{SIGNATURE} {{ }}\n", "declares a variable"),
        (f"extern int (*hook)(int);\n{SIGNATURE} {{ }}\n", "declares a variable"),
    ],
)
def test_screen_rejects_host_code_foreign_includes_asm_and_signature_changes(code, why):
    result = screen(code, _original(), original_includes=("common.cuh",))
    assert isinstance(result, Rejection), result
    assert why in result.reason


def test_screen_accepts_extern_shared_and_extern_c_functions():
    code = (
        'extern "C" __device__ float twice(float x) { return 2.0f * x; }\n'
        f'extern "C" {SIGNATURE}\n'
        "{ extern __shared__ float tile[]; int i = threadIdx.x; tile[i] = a[i];"
        " if (i < n) c[i] = twice(tile[i]) + b[i]; }\n"
    )
    result = screen(code, _original(), original_includes=("common.cuh",))
    assert not isinstance(result, Rejection), result


def test_screen_keeps_device_code_and_drops_harmless_host_code():
    code = (
        '#include "common.cuh"\n#include <cuda_runtime.h>\n'
        f"{SIGNATURE.replace('const float* a', 'const float* __restrict__ a')}\n"
        "{ int i = threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n"
        "static int helper(int x) { return x * 2; }\n"
    )
    result = screen(code, _original(), original_includes=("common.cuh",))
    assert not isinstance(result, Rejection), result
    assert "c[i] = a[i] + b[i]" in result.code and "helper" not in result.code


@pytest.mark.integration
def test_keys_never_reach_files_or_reports(llm_server, program, emulator, tmp_path):
    secret_reply = CORRECT.replace(
        "Fixed the sign.", f"Fixed the sign. (debug: {ANTHROPIC_KEY} {OPENAI_KEY})"
    )
    llm_server.script(secret_reply)
    record = tmp_path / "rec"
    report = run("anthropic", llm_server, program, emulator, tmp_path, rounds=1, record=str(record))
    assert report.exit_code == 0
    headers = llm_server.requests[0].headers
    sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    assert sent == ANTHROPIC_KEY  # the key did reach the (fake) server, so it was in play
    for folder in (tmp_path / "out", record, tmp_path / "cache"):
        for f in folder.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                assert ANTHROPIC_KEY.encode() not in data and OPENAI_KEY.encode() not in data, f


@pytest.mark.gpu
def test_on_an_nvidia_gpu_the_candidate_is_validated_and_timed_there(llm_server, program, tmp_path):
    llm_server.script(CORRECT)
    report = run("anthropic", llm_server, program, None, tmp_path, rounds=1, plan=None)  # type: ignore[arg-type]
    gpu_rows = [r for r in report.document()["kernels"][0]["variants"] if r["device"].startswith("cuda:")]
    assert gpu_rows and all(r["status"] == ("original" if r["kind"] == "original" else "validated")
                            for r in gpu_rows), report.document()  # fmt: skip
    assert all(r["time_ms"] is not None and r["time_ms"] > 0 for r in gpu_rows)
    gpu = next(d for d in report.devices if d.startswith("cuda:"))
    system = "".join(b["text"] for b in llm_server.requests[0].body["system"])
    assert gpu.split(":", 1)[1].split("#")[0] in system  # the hardware part describes the GPU
    assert report.baselines[gpu] is not None and report.baselines[gpu] > 0
