"""Providers through the REAL anthropic and openai SDKs, pointed at the fake server on 127.0.0.1."""

from __future__ import annotations

import ctypes
import logging
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fakes.llm_server import (
    FakeLLMServer,
    Hang,
    Malformed,
    Status,
    Text,
    context_overflow,
    rate_limited,
    server_error,
)

from porter.errors import PorterError, UsageError
from porter.llm import (
    Completion,
    ContextOverflow,
    Message,
    MissingKey,
    PromptPart,
    Provider,
    ProviderError,
    ProviderTimeout,
    extract_code,
    make_provider,
    missing_code_reason,
    parse_spec,
)
from porter.pricing import Usage, cost, price, pricing_note
from porter.redact import redact

from .conftest import ANTHROPIC_KEY, OPENAI_KEY

pytest.importorskip("anthropic")
pytest.importorskip("openai")

PROVIDERS = ["anthropic", "openai"]
MODELS = {"anthropic": "claude-sonnet-4-5-20250929", "openai": "gpt-4o-mini-2024-07-18"}
KEYS = {"anthropic": ANTHROPIC_KEY, "openai": OPENAI_KEY}

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def provider_for(
    name: str, server: FakeLLMServer, *, timeout: float = 10, max_retries: int = 2, model: str | None = None
) -> Provider:
    url = server.url if name == "anthropic" else server.url + "/v1"
    return make_provider(
        f"{name}:{model or MODELS[name]}", base_url=url, timeout=timeout, max_retries=max_retries
    )


def ask(provider: Provider, text: str = "port this kernel", **kwargs: object) -> Completion:
    system = [PromptPart("You port CUDA kernels."), PromptPart("Target: HIP.", stable=False)]
    return provider.complete(system, [Message("user", text)], max_tokens=256, **kwargs)  # type: ignore[arg-type]


def key_sent(request_headers: dict[str, str]) -> str:
    if "x-api-key" in request_headers:
        return request_headers["x-api-key"]
    auth = request_headers.get("authorization", "")
    assert auth.startswith("Bearer "), request_headers.keys()
    return auth.removeprefix("Bearer ")


# ------------------------------------------------------------------------------ choosing a provider


def test_parse_spec() -> None:
    assert parse_spec("anthropic:claude-opus-4-5") == ("anthropic", "claude-opus-4-5")
    assert parse_spec("openai:llama3.1:8b") == ("openai", "llama3.1:8b")  # Ollama tags keep their colon
    for bad in ("claude", "google:gemini", "openai:", ":gpt-4o"):
        with pytest.raises(UsageError, match="expected anthropic:<model> or openai:<model>"):
            parse_spec(bad)


@pytest.mark.parametrize("name", PROVIDERS)
def test_missing_key_is_one_line_naming_the_variable(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    var = f"{name.upper()}_API_KEY"
    monkeypatch.delenv(var)
    with pytest.raises(MissingKey) as info:
        make_provider(f"{name}:{MODELS[name]}")
    assert isinstance(info.value, PorterError) and info.value.exit_code == 2
    message = str(info.value)
    assert f"set {var}" in message and "\n" not in message


def test_local_compatible_server_needs_no_key(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    provider = make_provider("openai:qwen2.5-coder:7b", base_url=llm_server.url + "/v1")
    llm_server.script("```cuda\n__global__ void k() {}\n```")
    reply = ask(provider)
    assert extract_code(reply.text) is not None
    (request,) = llm_server.requests
    assert key_sent(request.headers) == "not-needed"
    assert redact("not-needed") == "not-needed"  # the placeholder is not treated as a secret
    # A compatible server gets the widely understood max_tokens.
    assert request.body["max_tokens"] == 256 and "max_completion_tokens" not in request.body


def test_openai_proper_gets_max_completion_tokens() -> None:
    provider = make_provider("openai:gpt-5")
    request = provider.request("sys", [Message("user", "hi")], max_tokens=99, temperature=None)  # type: ignore[attr-defined]
    assert request["max_completion_tokens"] == 99 and "max_tokens" not in request
    assert "temperature" not in request  # reasoning models refuse it: only sent when asked for


@pytest.mark.parametrize("name", PROVIDERS)
def test_base_url_from_the_sdk_environment_variable(
    name: str, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        f"{name.upper()}_BASE_URL", llm_server.url if name == "anthropic" else llm_server.url + "/v1"
    )
    llm_server.script("hello")
    assert ask(make_provider(f"{name}:{MODELS[name]}", max_retries=0)).text == "hello"
    assert len(llm_server.requests) == 1


# ------------------------------------------------------------------------------ completions


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "sse"])
@pytest.mark.parametrize("name", PROVIDERS)
def test_completion_text_usage_and_cost(name: str, stream: bool, llm_server: FakeLLMServer) -> None:
    text = "Here it is:\n```hip\n__global__ void add(float* a) { a[threadIdx.x] += 1.0f; }\n```\n"
    llm_server.script(
        Text(text, input_tokens=1200, output_tokens=345, cache_read_tokens=800, cache_write_tokens=0)
    )
    provider = provider_for(name, llm_server)
    pieces: list[str] = []
    reply = ask(provider, on_text=pieces.append if stream else None)

    assert reply.text == text and reply.source == "api"
    assert reply.usage == Usage(
        input_tokens=1200, output_tokens=345, cache_read_tokens=800, cache_write_tokens=0
    )
    assert reply.stop_reason in {"end_turn", "stop"} and not reply.truncated
    assert reply.model == MODELS[name] and reply.raw_id
    if stream:
        assert len(pieces) > 1 and "".join(pieces) == text
    p = price(name, MODELS[name])
    assert p is not None
    expected = (1200 * p.input + 345 * p.output + 800 * p.cache_read) / 1e6
    assert cost(reply.usage, name, MODELS[name]) == pytest.approx(expected)

    (request,) = llm_server.requests
    assert key_sent(request.headers) == KEYS[name]
    assert request.body["model"] == MODELS[name]
    assert bool(request.body.get("stream")) is stream
    if name == "openai" and stream:
        assert request.body["stream_options"] == {"include_usage": True}


def test_anthropic_cache_write_tokens_are_normalised(llm_server: FakeLLMServer) -> None:
    llm_server.script(
        Text("x", input_tokens=10, output_tokens=2, cache_read_tokens=0, cache_write_tokens=3000)
    )
    reply = ask(provider_for("anthropic", llm_server))
    assert reply.usage == Usage(10, 2, 0, 3000)


def test_anthropic_marks_the_last_stable_system_part_cacheable(llm_server: FakeLLMServer) -> None:
    llm_server.script("ok")
    system = [PromptPart("rules"), PromptPart("dialect table"), PromptPart("this kernel", stable=False)]
    provider_for("anthropic", llm_server).complete(system, [Message("user", "go")], max_tokens=64)
    blocks = llm_server.requests[0].body["system"]
    assert [b["text"] for b in blocks] == ["rules", "dialect table", "this kernel"]
    assert [b.get("cache_control") for b in blocks] == [None, {"type": "ephemeral"}, None]


def test_openai_joins_the_system_parts_into_one_system_message(llm_server: FakeLLMServer) -> None:
    llm_server.script("ok")
    system = [PromptPart("rules"), PromptPart("this kernel", stable=False)]
    provider_for("openai", llm_server).complete(
        system, [Message("user", "go")], max_tokens=64, temperature=0.2
    )
    body = llm_server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "rules\n\nthis kernel"},
        {"role": "user", "content": "go"},
    ]
    assert body["temperature"] == 0.2


@pytest.mark.parametrize("name", PROVIDERS)
def test_truncated_reply_is_reported(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Text("```cuda\n__global__ void k(", stop_reason="max_tokens"))
    reply = ask(provider_for(name, llm_server))
    assert reply.truncated
    assert extract_code(reply.text) is None and "never closed" in (missing_code_reason(reply.text) or "")


# ------------------------------------------------------------------------------ failures


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "sse"])
@pytest.mark.parametrize("failure", [rate_limited, server_error], ids=["429", "500"])
@pytest.mark.parametrize("name", PROVIDERS)
def test_retried_then_success(
    name: str, failure: Callable[[], Status], stream: bool, llm_server: FakeLLMServer
) -> None:
    llm_server.script(failure(), failure(), "third time lucky")
    reply = ask(provider_for(name, llm_server, max_retries=2), on_text=(lambda _: None) if stream else None)
    assert reply.text == "third time lucky"
    assert len(llm_server.requests) == 3


@pytest.mark.parametrize("name", PROVIDERS)
def test_retries_run_out(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(*(rate_limited() for _ in range(3)), "never reached")
    with pytest.raises(ProviderError) as info:
        ask(provider_for(name, llm_server, max_retries=2))
    assert info.value.status == 429 and "429" in str(info.value)
    assert len(llm_server.requests) == 3 and llm_server.pending == 1


@pytest.mark.parametrize("name", PROVIDERS)
def test_context_overflow_is_not_retried(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(context_overflow(name), "must not be asked for")
    with pytest.raises(ContextOverflow) as info:
        ask(provider_for(name, llm_server, max_retries=3))
    assert info.value.status == 400 and "context window" in str(info.value)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("name", PROVIDERS)
def test_other_bad_request_is_a_plain_provider_error(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Status(400, "max_tokens: must be positive", "invalid_request_error"))
    with pytest.raises(ProviderError) as info:
        ask(provider_for(name, llm_server))
    assert not isinstance(info.value, ContextOverflow)
    assert "HTTP 400" in str(info.value) and "max_tokens: must be positive" in str(info.value)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "sse"])
@pytest.mark.parametrize("name", PROVIDERS)
def test_malformed_json_is_a_provider_error(name: str, stream: bool, llm_server: FakeLLMServer) -> None:
    llm_server.script(Malformed())
    with pytest.raises(ProviderError) as info:
        ask(provider_for(name, llm_server, max_retries=0), on_text=(lambda _: None) if stream else None)
    message = str(info.value)
    assert "malformed reply" in message and "\n" not in message
    assert KEYS[name] not in message
    # Raised outside the SDK's except block: the SDK error (holding the request and its headers) is not chained.
    assert info.value.__cause__ is None and info.value.__context__ is None


@pytest.mark.parametrize("name", PROVIDERS)
def test_hanging_request_times_out(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Hang(30))
    with pytest.raises(ProviderTimeout) as info:
        ask(provider_for(name, llm_server, timeout=0.5, max_retries=0))
    assert "no answer within 0.5s" in str(info.value)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.integration
def test_hang_then_success_is_retried(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Hang(30), "after the timeout")
    assert ask(provider_for(name, llm_server, timeout=0.5, max_retries=1)).text == "after the timeout"
    assert len(llm_server.requests) == 2


@pytest.mark.parametrize("name", PROVIDERS)
def test_keys_never_appear_in_errors_or_logs(
    name: str, llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    key = KEYS[name]
    caplog.set_level(logging.DEBUG)  # the SDKs' and httpx's debug logs included
    # A server that echoes the key back in its error (some proxies do).
    llm_server.script(Status(401, f"invalid x-api-key: {key}", "authentication_error"))
    with pytest.raises(ProviderError) as info:
        ask(provider_for(name, llm_server))
    assert "401" in str(info.value) and key not in str(info.value) and "[REDACTED]" in str(info.value)
    llm_server.script(rate_limited(), "fine")
    ask(provider_for(name, llm_server))
    assert caplog.records, "expected SDK debug logging to be captured"
    assert key not in caplog.text


# ------------------------------------------------------------------------------ pricing


def test_pricing_exact_prefix_and_unknown() -> None:
    exact = price("anthropic", "claude-haiku-4-5")
    dated = price("anthropic", "claude-haiku-4-5-20251001")
    assert exact is not None and exact == dated
    mini = price("openai", "gpt-4o-mini-2024-07-18")
    assert mini is not None and mini.entry == "gpt-4o-mini"  # the longest prefix, not gpt-4o
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=0, cache_write_tokens=0)
    assert cost(usage, "openai", "gpt-4o-mini") == pytest.approx(mini.input + mini.output)
    assert cost(usage, "openai", "my-local-llama") is None
    assert cost(usage, "nobody", "x") is None
    note = pricing_note("openai", "my-local-llama")
    assert note is not None and "my-local-llama" in note
    assert pricing_note("openai", "gpt-4o") is None


# ------------------------------------------------------------------------------ a repair conversation

SAXPY_BROKEN = "void saxpy(int n, float a, const float *x, float *y) {\n  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]\n}\n"
SAXPY_WRONG = "void saxpy(int n, float a, const float *x, float *y) {\n  for (int i = 0; i < n; ++i) y[i] = a * x[i];\n}\n"
SAXPY_RIGHT = "void saxpy(int n, float a, const float *x, float *y) {\n  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"


def _compile_and_check(code: str, workdir: Path, round_no: int) -> str | None:
    """Compile with the system C compiler and compare with numpy: None when right, else the evidence."""
    src = workdir / f"cand{round_no}.c"
    lib = workdir / f"cand{round_no}.so"
    src.write_text(code)
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert cc is not None
    done = subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], capture_output=True, text=True
    )
    if done.returncode != 0:
        return f"The kernel did not compile:\n{done.stderr}"
    fn = ctypes.CDLL(str(lib)).saxpy
    fn.argtypes = [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p]
    rng = np.random.default_rng(round_no)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    want = np.float32(2.5) * x + y
    fn(1000, 2.5, x.ctypes.data, y.ctypes.data)
    err = float(np.max(np.abs(y - want)))
    return None if err < 1e-5 else f"The kernel computed wrong values: max abs error {err:.4g} at n=1000."


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "sse"])
@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.integration
def test_repair_conversation_carries_history_and_evidence(
    name: str, stream: bool, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler to check the candidates with")
    llm_server.script(
        "Sure, I'll skip the fence this time.",
        f"```c\n{SAXPY_BROKEN}```",
        f"Fixed the semicolon:\n```c\n{SAXPY_WRONG}```",
        f"Now accumulating into y:\n~~~c\n{SAXPY_RIGHT}~~~\nand usage:\n```c\nsaxpy(n, a, x, y);\n```",
    )
    provider = provider_for(name, llm_server)
    system = [PromptPart("You write C kernels."), PromptPart("saxpy: y = a*x + y", stable=False)]
    history = [Message("user", "Write saxpy(int n, float a, const float *x, float *y).")]
    evidence: list[str] = []
    result: str | None = None
    for round_no in range(4):
        reply = provider.complete(
            system, history, max_tokens=512, on_text=(lambda _: None) if stream else None
        )
        history.append(Message("assistant", reply.text))
        block = extract_code(reply.text)
        if block is None:
            feedback = missing_code_reason(reply.text)
            assert feedback is not None
        else:
            feedback = _compile_and_check(block.code, tmp_path, round_no)
            if feedback is None:
                result = block.code
                break
        evidence.append(feedback)
        history.append(Message("user", feedback))

    assert result == SAXPY_RIGHT
    assert len(llm_server.requests) == 4 and llm_server.pending == 0
    assert "no fenced code block" in evidence[0]
    assert "did not compile" in evidence[1] and "error" in evidence[1]
    assert "wrong values" in evidence[2]
    for i, request in enumerate(llm_server.requests):
        turns = [m for m in request.body["messages"] if m["role"] != "system"]
        assert len(turns) == 1 + 2 * i  # the whole history, every round
        if i:
            assert turns[-1] == {
                "role": "user",
                "content": evidence[i - 1],
            }  # the previous failure's evidence
            assert turns[-2]["role"] == "assistant"
