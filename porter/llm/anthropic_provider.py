"""The Anthropic provider: official SDK, Messages API, streaming, prompt caching on the stable system part."""

from __future__ import annotations

from typing import Any

from porter.llm.base import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    PLACEHOLDER_KEY,
    Completion,
    Message,
    System,
    TextCallback,
    check_deadline,
    parse_reply,
    send_with_retries,
    system_parts,
)
from porter.pricing import Usage
from porter.redact import add_secret


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
    ):
        import anthropic  # the SDK is an optional dependency: imported only when this provider is used

        if api_key != PLACEHOLDER_KEY:
            add_secret(api_key)
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self._sdk = anthropic
        # base_url None: the SDK reads ANTHROPIC_BASE_URL itself, else the public endpoint.  Retries are
        # porter's own (send_with_retries), so that none of them outlasts the time budget.
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

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
        deadline: float | None = None,
    ) -> Completion:
        kwargs = self.request(system, messages, max_tokens=max_tokens, temperature=temperature)
        where = f"anthropic:{self.model}"

        def send(timeout: float) -> Completion:
            if on_text is None:
                message = self._client.messages.create(**kwargs, timeout=timeout)
            else:
                with self._client.messages.stream(**kwargs, timeout=timeout) as stream:
                    for event in stream:
                        check_deadline(deadline, where)
                        if event.type == "content_block_delta" and event.delta.type == "text_delta":
                            on_text(event.delta.text)
                    message = stream.get_final_message()
            return parse_reply(where, lambda: _completion(message, self.model))

        return send_with_retries(
            self._sdk, send, where=where, timeout=self.timeout, retries=self.max_retries, deadline=deadline
        )


def _completion(message: Any, asked: str) -> Completion:
    text = "".join(str(block.text) for block in message.content if block.type == "text")
    u = message.usage
    usage = Usage(
        input_tokens=int(u.input_tokens or 0),
        output_tokens=int(u.output_tokens or 0),
        cache_read_tokens=int(getattr(u, "cache_read_input_tokens", None) or 0),
        cache_write_tokens=int(getattr(u, "cache_creation_input_tokens", None) or 0),
    )
    return Completion(
        text=text,
        usage=usage,
        model=str(message.model or asked),
        stop_reason=message.stop_reason,
        raw_id=message.id,
    )
