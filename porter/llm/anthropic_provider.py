"""The Anthropic provider: official SDK, Messages API, streaming, prompt caching on the stable system part."""

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
    system_parts,
)
from porter.llm.redact import add_secret


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 120,
        max_retries: int = 3,
    ):
        import anthropic  # the SDK is an optional dependency: imported only when this provider is used

        if api_key != PLACEHOLDER_KEY:
            add_secret(api_key)
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self._sdk = anthropic
        # base_url None: the SDK reads ANTHROPIC_BASE_URL itself, else the public endpoint.
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def request(
        self, system: System, messages: list[Message], *, max_tokens: int, temperature: float | None
    ) -> dict[str, Any]:
        """The keyword arguments of messages.create / messages.stream (no credentials in them)."""
        parts = system_parts(system)
        last_stable = max((i for i, p in enumerate(parts) if p.stable), default=-1)
        blocks: list[dict[str, Any]] = []
        for i, part in enumerate(parts):
            block: dict[str, Any] = {"type": "text", "text": part.text}
            if i == last_stable:
                block["cache_control"] = {"type": "ephemeral"}
            blocks.append(block)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if blocks:
            kwargs["system"] = blocks
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
                message = self._client.messages.create(**kwargs)
            else:
                with self._client.messages.stream(**kwargs) as stream:
                    for text in stream.text_stream:
                        on_text(text)
                    message = stream.get_final_message()
            return _completion(message)
        except Exception as err:  # SDK errors become one redacted line; anything foreign propagates
            failure = map_sdk_error(self._sdk, err, f"anthropic:{self.model}", self.timeout, self.max_retries)
            if failure is None:
                raise
        # Raised outside the except block: the SDK exception (which holds the request) is not chained.
        raise failure


def _completion(message: Any) -> Completion:
    text = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
    u = message.usage
    usage = Usage(
        input_tokens=int(u.input_tokens or 0),
        output_tokens=int(u.output_tokens or 0),
        cache_read_tokens=int(getattr(u, "cache_read_input_tokens", None) or 0),
        cache_write_tokens=int(getattr(u, "cache_creation_input_tokens", None) or 0),
    )
    return Completion(
        text=text, usage=usage, model=message.model, stop_reason=message.stop_reason, raw_id=message.id
    )
