"""The OpenAI provider: official SDK, Chat Completions; also any OpenAI-compatible server (vLLM, llama.cpp,
Ollama) through a base URL."""

from __future__ import annotations

from typing import Any

from porter.llm.base import (
    PLACEHOLDER_KEY,
    Completion,
    Message,
    ProviderError,
    System,
    TextCallback,
    Usage,
    map_sdk_error,
    system_text,
)
from porter.llm.redact import add_secret


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 120,
        max_retries: int = 3,
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
        kwargs: dict[str, Any] = {"api_key": api_key, "timeout": timeout, "max_retries": max_retries}
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
    ) -> Completion:
        kwargs = self.request(system, messages, max_tokens=max_tokens, temperature=temperature)
        failure: ProviderError | None = None
        try:
            if on_text is None:
                return _completion(self._client.chat.completions.create(**kwargs))
            return self._stream(kwargs, on_text)
        except Exception as err:  # SDK errors become one redacted line; anything foreign propagates
            failure = map_sdk_error(self._sdk, err, f"openai:{self.model}", self.timeout, self.max_retries)
            if failure is None:
                raise
        # Raised outside the except block: the SDK exception (which holds the request) is not chained.
        raise failure

    def _stream(self, kwargs: dict[str, Any], on_text: TextCallback) -> Completion:
        pieces: list[str] = []
        usage = Usage()
        model, raw_id, stop = self.model, None, None
        stream = self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        with stream:
            for chunk in stream:
                raw_id = chunk.id or raw_id
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue
                    if choice.delta is not None and choice.delta.content:
                        pieces.append(choice.delta.content)
                        on_text(choice.delta.content)
                    if choice.finish_reason:
                        stop = choice.finish_reason
        if stop is None and not pieces:
            raise ProviderError(f"openai:{self.model}: the stream ended without any reply")
        return Completion(text="".join(pieces), usage=usage, model=model, stop_reason=stop, raw_id=raw_id)


def _usage(u: Any) -> Usage:
    """prompt_tokens includes the cached ones; OpenAI reports no cache writes (they cost plain input)."""
    if u is None:
        return Usage()
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    prompt = int(u.prompt_tokens or 0)
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(u.completion_tokens or 0),
        cache_read_tokens=cached,
        cache_write_tokens=0,
    )


def _completion(response: Any) -> Completion:
    if not response.choices:
        raise ProviderError(f"openai:{response.model}: the reply had no choices")
    choice = response.choices[0]
    return Completion(
        text=choice.message.content or "",
        usage=_usage(response.usage),
        model=response.model,
        stop_reason=choice.finish_reason,
        raw_id=response.id,
    )
