"""The OpenAI provider: official SDK, Chat Completions; also any OpenAI-compatible server (vLLM, llama.cpp,
Ollama) through a base URL."""

from __future__ import annotations

import functools
from typing import Any

from porter.llm.base import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    PLACEHOLDER_KEY,
    Completion,
    MalformedReply,
    Message,
    System,
    TextCallback,
    check_deadline,
    parse_reply,
    send_with_retries,
    system_text,
)
from porter.pricing import Usage
from porter.redact import add_secret


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        compatible: bool = False,
    ):
        import openai  # the SDK is an optional dependency: imported only when this provider is used

        if api_key != PLACEHOLDER_KEY:
            add_secret(api_key)
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        # OpenAI's own API wants max_completion_tokens (its reasoning models refuse max_tokens);
        # compatible servers (vLLM, llama.cpp, Ollama) all understand max_tokens.
        self.compatible = compatible
        self._sdk = openai
        # Retries are porter's own (send_with_retries), so that none of them outlasts the time budget.
        kwargs: dict[str, Any] = {"api_key": api_key, "timeout": timeout, "max_retries": 0}
        if base_url is not None:  # else the SDK reads OPENAI_BASE_URL itself
            kwargs["base_url"] = base_url
        self._client = openai.OpenAI(**kwargs)

    def request(
        self, system: System, messages: list[Message], *, max_tokens: int, temperature: float | None
    ) -> dict[str, Any]:
        """The keyword arguments of chat.completions.create (no credentials in them)."""
        chat: list[dict[str, str]] = []
        if text := system_text(system):
            chat.append({"role": "system", "content": text})
        chat.extend({"role": m.role, "content": m.content} for m in messages)
        kwargs: dict[str, Any] = {"model": self.model, "messages": chat}
        kwargs["max_tokens" if self.compatible else "max_completion_tokens"] = max_tokens
        if temperature is not None:
            kwargs["temperature"] = temperature
        return kwargs

    def complete(
        self,
        system: System,
        messages: list[Message],
        *,
        max_tokens: int,
        temperature: float | None = None,
        on_text: TextCallback | None = None,
        deadline: float | None = None,
    ) -> Completion:
        kwargs = self.request(system, messages, max_tokens=max_tokens, temperature=temperature)
        where = f"openai:{self.model}"

        def send(timeout: float) -> Completion:
            if on_text is None:
                response = self._client.chat.completions.create(**kwargs, timeout=timeout)
                return parse_reply(where, lambda: _completion(response, self.model))
            return self._stream(kwargs, on_text, timeout, deadline)

        return send_with_retries(
            self._sdk, send, where=where, timeout=self.timeout, retries=self.max_retries, deadline=deadline
        )

    def _stream(
        self, kwargs: dict[str, Any], on_text: TextCallback, timeout: float, deadline: float | None
    ) -> Completion:
        where = f"openai:{self.model}"
        pieces: list[str] = []
        usage = Usage()
        model, raw_id, stop = self.model, None, None
        stream = self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}, timeout=timeout
        )
        with stream:
            for chunk in stream:
                check_deadline(deadline, where)
                raw_id = chunk.id or raw_id
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = parse_reply(where, functools.partial(_usage, chunk.usage))
                for choice in chunk.choices or ():
                    if choice.index != 0:
                        continue
                    if choice.delta is not None and choice.delta.content:
                        pieces.append(choice.delta.content)
                        on_text(choice.delta.content)
                    if choice.finish_reason:
                        stop = choice.finish_reason
        if stop is None and not pieces:
            raise MalformedReply(f"{where}: the stream ended without any reply")
        return Completion(text="".join(pieces), usage=usage, model=model, stop_reason=stop, raw_id=raw_id)


def _usage(u: Any) -> Usage:
    """prompt_tokens includes the cached ones; OpenAI reports no cache writes (they cost plain input).
    Counts are passed on as reported, impossible ones included (the loop's accounting rejects them)."""
    if u is None:
        return Usage()
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    prompt = int(u.prompt_tokens or 0)
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=int(u.completion_tokens or 0),
        cache_read_tokens=cached,
        cache_write_tokens=0,
    )


def _completion(response: Any, asked: str) -> Completion:
    if not response.choices:
        raise MalformedReply(f"openai:{asked}: malformed reply from the server: it had no choices")
    choice = response.choices[0]
    return Completion(
        text=str(choice.message.content or ""),
        usage=_usage(response.usage),
        model=str(response.model or asked),
        stop_reason=choice.finish_reason,
        raw_id=response.id,
    )
