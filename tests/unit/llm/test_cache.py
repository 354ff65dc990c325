"""Reply cache, --record and --replay, over the real SDKs and the fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer, Text

from porter.cache import Cache
from porter.errors import PorterError
from porter.llm import (
    CachingProvider,
    Completion,
    Message,
    PromptPart,
    Provider,
    RecordingProvider,
    ReplayMiss,
    ReplayProvider,
    ReplyCache,
    make_provider,
    open_provider,
    reply_key,
    request_doc,
)
from porter.pricing import Usage

from .conftest import ANTHROPIC_KEY, OPENAI_KEY

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SPECS = {"anthropic": "anthropic:claude-haiku-4-5", "openai": "openai:gpt-4.1-mini"}
SYSTEM = [PromptPart("You port CUDA kernels."), PromptPart("kernel: saxpy", stable=False)]
HISTORY = [Message("user", "port it")]


def real(name: str, server: FakeLLMServer) -> Provider:
    url = server.url if name == "anthropic" else server.url + "/v1"
    return make_provider(SPECS[name], base_url=url, timeout=10, max_retries=0)


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def ask(provider: Provider, **kwargs: object) -> Completion:
    return provider.complete(SYSTEM, HISTORY, max_tokens=128, **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ keys


def test_key_covers_provider_model_prompt_and_parameters() -> None:
    base = request_doc("anthropic", "m", SYSTEM, HISTORY, 128, None)
    key = reply_key(base)
    assert key == reply_key(request_doc("anthropic", "m", list(SYSTEM), list(HISTORY), 128, None))
    variants = [
        request_doc("openai", "m", SYSTEM, HISTORY, 128, None),
        request_doc("anthropic", "m2", SYSTEM, HISTORY, 128, None),
        request_doc("anthropic", "m", SYSTEM[:1], HISTORY, 128, None),
        request_doc(
            "anthropic",
            "m",
            [PromptPart("You port CUDA kernels."), PromptPart("kernel: saxpy")],
            HISTORY,
            128,
            None,
        ),
        request_doc("anthropic", "m", SYSTEM, [Message("user", "port it!")], 128, None),
        request_doc("anthropic", "m", SYSTEM, [*HISTORY, Message("assistant", "ok")], 128, None),
        request_doc("anthropic", "m", SYSTEM, HISTORY, 129, None),
        request_doc("anthropic", "m", SYSTEM, HISTORY, 128, 0.0),
    ]
    keys = {reply_key(v) for v in variants}
    assert len(keys) == len(variants) and key not in keys


# ------------------------------------------------------------------------------ cache


@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_cache_hit_makes_no_request(name: str, llm_server: FakeLLMServer, _llm_env: Path) -> None:
    llm_server.script(Text("```cuda\n__global__ void k() {}\n```", input_tokens=10, output_tokens=5))
    provider = CachingProvider(real(name, llm_server))
    first = ask(provider)
    assert first.source == "api" and len(llm_server.requests) == 1
    streamed: list[str] = []
    second = ask(provider, on_text=streamed.append)
    assert len(llm_server.requests) == 1  # served from disk
    assert second.source == "cache"
    assert (second.text, second.usage, second.model) == (first.text, first.usage, first.model)
    assert streamed == [first.text]
    assert files_under(_llm_env / "llm")


def test_a_different_prompt_misses(llm_server: FakeLLMServer) -> None:
    llm_server.script("one", "two")
    provider = CachingProvider(real("openai", llm_server))
    assert ask(provider).text == "one"
    assert provider.complete(SYSTEM, HISTORY, max_tokens=128, temperature=0.5).text == "two"
    assert len(llm_server.requests) == 2


def test_no_cache_environment_switch(llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTER_NO_CACHE", "1")
    llm_server.script("one", "two")
    provider = CachingProvider(real("anthropic", llm_server))
    assert [ask(provider).text, ask(provider).text] == ["one", "two"]


def test_corrupt_entry_is_a_miss(llm_server: FakeLLMServer, _llm_env: Path) -> None:
    llm_server.script("one", "two")
    provider = CachingProvider(real("anthropic", llm_server))
    ask(provider)
    (entry,) = files_under(_llm_env / "llm")
    entry.write_bytes(entry.read_bytes()[:-5])
    assert ask(provider).text == "two" and len(llm_server.requests) == 2


def test_unreadable_payload_is_a_miss(tmp_path: Path) -> None:
    cache = ReplyCache(Cache(tmp_path))
    key = reply_key(request_doc("openai", "m", "s", HISTORY, 1, None))
    cache.cache.put("llm", key, b"not json")
    assert cache.get(key) is None and cache.cache.get("llm", key) is None


@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_no_key_in_cache_or_record_files(
    name: str, llm_server: FakeLLMServer, _llm_env: Path, tmp_path: Path
) -> None:
    key = ANTHROPIC_KEY if name == "anthropic" else OPENAI_KEY
    # Even a reply that repeats the key (a model echoing a leaked prompt) is stored redacted.
    llm_server.script(Text(f"your key is {key}\n```c\nint x;\n```"))
    record = tmp_path / "record"
    provider = RecordingProvider(CachingProvider(real(name, llm_server)), record)
    reply = ask(provider)
    assert key in reply.text  # the live reply is untouched...
    written = files_under(_llm_env) + files_under(record)
    assert len(written) == 2
    for path in written:
        assert key.encode() not in path.read_bytes(), path  # ...but nothing on disk holds it
        assert b"[REDACTED]" in path.read_bytes()


# ------------------------------------------------------------------------------ record and replay


def test_record_then_replay_without_key_or_server(
    llm_server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "replies"
    llm_server.script(Text("first reply", input_tokens=7), Text("second reply", input_tokens=9))
    recorder = open_provider(SPECS["anthropic"], base_url=llm_server.url, record=record, max_retries=0)
    one = ask(recorder)
    history2 = [*HISTORY, Message("assistant", one.text), Message("user", "it did not compile")]
    two = recorder.complete(SYSTEM, history2, max_tokens=128)
    assert len(files_under(record)) == 2
    doc = json.loads(files_under(record)[0].read_text())
    assert set(doc) == {"format", "key", "request", "completion"}

    monkeypatch.delenv("ANTHROPIC_API_KEY")  # replay needs no key and no network
    replay = open_provider(SPECS["anthropic"], replay=record)
    assert isinstance(replay, ReplayProvider)
    got_one = ask(replay)
    got_two = replay.complete(SYSTEM, history2, max_tokens=128)
    assert (got_one.text, got_two.text) == (one.text, two.text) == ("first reply", "second reply")
    assert got_one.usage == one.usage and got_one.source == "replay"
    assert len(llm_server.requests) == 2


def test_replay_miss_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    replay = ReplayProvider(tmp_path / "empty", "openai:gpt-4o")
    with pytest.raises(ReplayMiss) as info:
        ask(replay)
    message = str(info.value)
    key = reply_key(request_doc("openai", "gpt-4o", SYSTEM, HISTORY, 128, None))
    assert "openai:gpt-4o" in message and key in message and "\n" not in message
    assert isinstance(info.value, PorterError)


def test_replay_of_another_model_misses(llm_server: FakeLLMServer, tmp_path: Path) -> None:
    llm_server.script("recorded")
    ask(RecordingProvider(real("openai", llm_server), tmp_path))
    assert ask(ReplayProvider(tmp_path, SPECS["openai"])).text == "recorded"
    with pytest.raises(ReplayMiss, match="openai:gpt-4o"):
        ask(ReplayProvider(tmp_path, "openai:gpt-4o"))


def test_replay_of_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ReplayMiss, match="no such directory") as info:
        ReplayProvider(tmp_path / "nope", "anthropic:claude-haiku-4-5")
    assert info.value.exit_code == 2


def test_corrupt_recorded_reply(tmp_path: Path) -> None:
    key = reply_key(request_doc("openai", "gpt-4o", SYSTEM, HISTORY, 128, None))
    (tmp_path / f"{key}.json").write_text("{broken")
    with pytest.raises(ReplayMiss, match="unreadable recorded reply"):
        ask(ReplayProvider(tmp_path, "openai:gpt-4o"))


# ------------------------------------------------------------------------------ entries bound to their keys


def _key(messages: list[Message], provider: str = "anthropic") -> str:
    name, model = SPECS[provider].split(":")
    return reply_key(request_doc(name, model, SYSTEM, messages, 128, None))


def _completion(text: str) -> Completion:
    return Completion(text, Usage(input_tokens=3, output_tokens=4), "m", "end_turn", "msg_1")


def test_swapped_cache_entry_is_a_miss(llm_server: FakeLLMServer, _llm_env: Path) -> None:
    """Prompt B's entry overwritten by prompt A's (a well-formed file): B is asked again, never served A."""
    other = [Message("user", "port it, differently")]
    llm_server.script("reply to A", "reply to B", "reply to B, again")
    provider = CachingProvider(real("anthropic", llm_server))
    assert ask(provider).text == "reply to A"
    assert provider.complete(SYSTEM, other, max_tokens=128).text == "reply to B"
    cache = Cache()
    path_a, path_b = (cache.path("llm", _key(m)) for m in (HISTORY, other))
    path_b.write_bytes(path_a.read_bytes())

    again = provider.complete(SYSTEM, other, max_tokens=128)
    assert again.text == "reply to B, again" and again.source == "api" and len(llm_server.requests) == 3
    assert provider.complete(SYSTEM, other, max_tokens=128).source == "cache"  # rebuilt for B
    hit = ask(provider)
    assert hit.text == "reply to A" and hit.source == "cache" and len(llm_server.requests) == 3


def test_entry_recording_another_key_is_a_miss(tmp_path: Path) -> None:
    """Even re-wrapped by the disk cache under B's key, A's record names A's key: a miss for B."""
    cache = ReplyCache(Cache(tmp_path))
    key_a, key_b = _key(HISTORY), _key([Message("user", "something else")])
    cache.put(key_a, {"prompt": "A"}, _completion("the kernel for A"))
    raw = cache.cache.get("llm", key_a)
    assert raw is not None and cache.get(key_a) is not None
    cache.cache.put("llm", key_b, raw)
    assert cache.get(key_b) is None
    assert cache.cache.get("llm", key_b) is None  # removed, asked again next time


def test_edited_completion_is_a_miss(tmp_path: Path) -> None:
    cache = ReplyCache(Cache(tmp_path))
    key = _key(HISTORY)
    cache.put(key, {"prompt": "A"}, _completion("__global__ void k() {}"))
    doc = json.loads(cache.cache.get("llm", key) or b"")
    assert doc["key"] == key and len(doc["completion_sha256"]) == 64
    doc["completion"]["text"] = "__global__ void k() { evil(); }"
    cache.cache.put("llm", key, json.dumps(doc).encode())
    assert cache.get(key) is None


def test_swapped_recorded_reply_is_not_replayed(llm_server: FakeLLMServer, tmp_path: Path) -> None:
    other = [Message("user", "port it, differently")]
    llm_server.script("reply to A", "reply to B")
    recorder = RecordingProvider(real("anthropic", llm_server), tmp_path)
    ask(recorder)
    recorder.complete(SYSTEM, other, max_tokens=128)
    (tmp_path / f"{_key(other)}.json").write_bytes((tmp_path / f"{_key(HISTORY)}.json").read_bytes())
    replay = ReplayProvider(tmp_path, SPECS["anthropic"])
    assert ask(replay).text == "reply to A"
    with pytest.raises(ReplayMiss, match="another prompt"):
        replay.complete(SYSTEM, other, max_tokens=128)
