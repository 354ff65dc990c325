"""LLM calls are bounded: per-request timeouts and retries, a deadline no try or retry outlasts, garbled
replies told apart from failures that would keep failing, and usage counts a server cannot fake.

Real anthropic and openai SDKs against the fake server on 127.0.0.1, with short timeouts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer, Hang, Malformed, Status, Text, rate_limited, server_error

from porter import cli
from porter.errors import UsageError
from porter.llm import (
    Completion,
    Message,
    PromptPart,
    Provider,
    ProviderError,
    ProviderTimeout,
    make_provider,
)
from porter.llm.base import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    MAX_REPORTED_TOKENS,
    BudgetSpent,
    MalformedReply,
    checked_usage,
)
from porter.llm.cache import check_record_dir, open_provider
from porter.pricing import Usage, cost
from porter.redact import REDACTED, discard_secret

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PROVIDERS = ["anthropic", "openai"]
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}


def provider_for(name: str, server: FakeLLMServer, *, timeout: float = 5, max_retries: int = 0) -> Provider:
    url = server.url if name == "anthropic" else server.url + "/v1"
    return make_provider(f"{name}:{MODELS[name]}", base_url=url, timeout=timeout, max_retries=max_retries)


def ask(provider: Provider, *, deadline: float | None = None, stream: bool = False) -> Completion:
    return provider.complete(
        [PromptPart("You port CUDA kernels.")],
        [Message("user", "port this kernel")],
        max_tokens=64,
        on_text=(lambda _: None) if stream else None,
        deadline=deadline,
    )


# ------------------------------------------------------------------------------ defaults and settings


def test_defaults_are_bounded_and_the_cli_spells_them_alike() -> None:
    assert (DEFAULT_TIMEOUT, DEFAULT_RETRIES) == (60.0, 2)
    assert (cli.DEFAULT_REQUEST_TIMEOUT, cli.DEFAULT_RETRIES) == (DEFAULT_TIMEOUT, DEFAULT_RETRIES)
    provider = make_provider("anthropic:claude-sonnet-4-5")
    assert (provider.timeout, provider.max_retries) == (60.0, 2)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, "--request-timeout"),
        ({"timeout": -1}, "--request-timeout"),
        ({"max_retries": -1}, "--retries"),
    ],
)
def test_bad_timeout_or_retries_is_a_usage_error(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        make_provider("openai:gpt-4o", **kwargs)


@pytest.mark.parametrize("name", PROVIDERS)
def test_retries_are_counted_by_porter(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(server_error(), server_error(), "never reached")
    with pytest.raises(ProviderError) as info:
        ask(provider_for(name, llm_server, max_retries=1))
    assert len(llm_server.requests) == 2 and llm_server.pending == 1
    assert info.value.status == 500 and info.value.transient


# ------------------------------------------------------------------------------ the deadline


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "sse"])
@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.integration
def test_a_hanging_server_is_cut_off_at_the_deadline(
    name: str, stream: bool, llm_server: FakeLLMServer
) -> None:
    llm_server.script(*(Hang(30) for _ in range(5)))
    started = time.monotonic()
    with pytest.raises(BudgetSpent) as info:
        ask(provider_for(name, llm_server, timeout=20, max_retries=4), deadline=started + 1.0, stream=stream)
    took = time.monotonic() - started
    assert took < 3, took  # not 20 s x 5 tries
    assert "time budget spent" in str(info.value) and not info.value.transient
    assert len(llm_server.requests) == 1  # the one in flight was cut; none started after


@pytest.mark.parametrize("name", PROVIDERS)
def test_no_retry_starts_past_the_deadline(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(rate_limited(retry_after_ms=5000), "never reached")
    started = time.monotonic()
    with pytest.raises(BudgetSpent) as info:
        ask(provider_for(name, llm_server, max_retries=3), deadline=started + 1.0)
    assert time.monotonic() - started < 1.0  # the 5 s retry-after is not waited for
    assert "429" in str(info.value) and "not retried" in str(info.value)
    assert len(llm_server.requests) == 1 and llm_server.pending == 1


@pytest.mark.parametrize("name", PROVIDERS)
def test_nothing_is_sent_after_the_deadline(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script("never reached")
    with pytest.raises(BudgetSpent, match="time budget spent"):
        ask(provider_for(name, llm_server), deadline=time.monotonic() - 0.1)
    assert llm_server.requests == []


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.integration
def test_a_trickling_stream_is_cut_off_at_the_deadline(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Text("x" * 200, chunk=1, interval=0.05))  # 10 s in all, every read well within timeout
    started = time.monotonic()
    with pytest.raises(BudgetSpent, match="cut off"):
        ask(provider_for(name, llm_server, timeout=2), deadline=started + 1.0, stream=True)
    assert time.monotonic() - started < 2.5


@pytest.mark.parametrize("name", PROVIDERS)
def test_within_the_deadline_a_retry_still_happens(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(rate_limited(), "second try")
    reply = ask(provider_for(name, llm_server, max_retries=1), deadline=time.monotonic() + 10)
    assert reply.text == "second try" and len(llm_server.requests) == 2


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_plain_timeout_is_transient_and_not_a_budget_error(name: str, llm_server: FakeLLMServer) -> None:
    llm_server.script(Hang(30))
    with pytest.raises(ProviderTimeout) as info:
        ask(provider_for(name, llm_server, timeout=0.5), deadline=time.monotonic() + 30)
    assert not isinstance(info.value, BudgetSpent) and info.value.transient
    assert "no answer within 0.5s (tried 1 time)" in str(info.value)


# ------------------------------------------------------------------------------ malformed or fatal


@pytest.mark.parametrize("body", ["{}", '{"content": null, "choices": null}', "[]", "null", ""])
@pytest.mark.parametrize("name", PROVIDERS)
def test_garbled_bodies_are_malformed_replies_in_plain_words(
    name: str, body: str, llm_server: FakeLLMServer
) -> None:
    llm_server.script(Malformed(body))
    with pytest.raises(MalformedReply) as info:
        ask(provider_for(name, llm_server))
    message = str(info.value)
    assert message.startswith(f"{name}:{MODELS[name]}: malformed reply from the server"), message
    for internal in ("NoneType", "TypeError", "AttributeError", "JSONDecodeError", ":None"):
        assert internal not in message, message
    assert info.value.transient and info.value.__context__ is None


@pytest.mark.parametrize(
    ("status", "words"), [(401, "API key was rejected"), (403, "access denied"), (404, "model name")]
)
@pytest.mark.parametrize("name", PROVIDERS)
def test_failures_that_would_keep_failing_are_not_transient(
    name: str, status: int, words: str, llm_server: FakeLLMServer
) -> None:
    llm_server.script(Status(status, "nope", "error"), "never reached")
    with pytest.raises(ProviderError) as info:
        ask(provider_for(name, llm_server, max_retries=3))
    assert not info.value.transient and info.value.status == status and words in str(info.value)
    assert len(llm_server.requests) == 1  # never retried


# ------------------------------------------------------------------------------ usage


@pytest.mark.parametrize(
    "usage",
    [Usage(-5, 10, 0, 0), Usage(10, MAX_REPORTED_TOKENS + 1, 0, 0), Usage(0, 0, -1, -(10**12))],
)
def test_impossible_usage_is_counted_as_zero_with_a_note(usage: Usage) -> None:
    fixed, note = checked_usage(usage)
    assert note is not None and "server reported invalid usage" in note
    for value in (fixed.input_tokens, fixed.output_tokens, fixed.cache_read_tokens, fixed.cache_write_tokens):
        assert 0 <= value <= MAX_REPORTED_TOKENS
    assert (cost(fixed, "anthropic", "claude-sonnet-4-5") or 0.0) >= 0
    if usage.output_tokens == 10:
        assert fixed.output_tokens == 10  # the plausible counts are kept


def test_plausible_usage_is_kept() -> None:
    usage = Usage(1200, 345, 800, 0)
    assert checked_usage(usage) == (usage, None)


@pytest.mark.parametrize("name", PROVIDERS)
def test_negative_counts_reach_the_accounting_unclamped(name: str, llm_server: FakeLLMServer) -> None:
    """The provider passes what the server said; the loop's accounting rejects it (never hidden)."""
    llm_server.script(Text("hi", input_tokens=-5, output_tokens=7))
    reply = ask(provider_for(name, llm_server))
    assert reply.usage.input_tokens == -5 and reply.usage.output_tokens == 7
    assert checked_usage(reply.usage)[0] == Usage(0, 7, 0, 0)


# ------------------------------------------------------------------------------ --record, checked first


def test_record_into_an_existing_file_is_refused_before_any_request(
    llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    target = tmp_path / "rec"
    target.write_text("not a folder")
    with pytest.raises(UsageError, match="--record .*exists and is not a folder") as info:
        open_provider("openai:gpt-4o-mini", base_url=llm_server.url + "/v1", record=target)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    assert llm_server.requests == [] and target.read_text() == "not a folder"


def test_record_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="--record .*cannot write there"):
        check_record_dir(tmp_path / "file" / "rec")


def test_record_folder_is_created_up_front(tmp_path: Path) -> None:
    folder = check_record_dir(tmp_path / "a" / "b")
    assert folder.is_dir() and list(folder.iterdir()) == []  # the write probe leaves nothing behind


# ------------------------------------------------------------------------------ short keys


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_short_key_echoed_by_the_server_is_redacted(
    name: str, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "k9x"
    monkeypatch.setenv(f"{name.upper()}_API_KEY", key)
    llm_server.script(Status(401, f"invalid key: {key} (k9xy is not it either)", "authentication_error"))
    try:
        with pytest.raises(ProviderError) as info:
            ask(provider_for(name, llm_server))
    finally:
        discard_secret(key)  # the provider registered it for the whole process
    message = str(info.value)
    assert f"invalid key: {REDACTED} (k9xy" in message and " k9x " not in message
