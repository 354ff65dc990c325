"""The provider contract: prompt and reply types, normalised usage, and the errors every provider raises.

A provider turns ``system`` + ``messages`` into one :class:`Completion`.  ``system`` is either a string
or a list of :class:`PromptPart`; a part marked ``stable`` is the same from call to call (instructions,
the dialect description, the reference kernel) and may be cached by the vendor.  Put stable parts
first: vendors cache prefixes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from porter.errors import PorterError
from porter.llm.redact import redact


@dataclass(frozen=True)
class PromptPart:
    text: str
    stable: bool = True  # identical across calls: the Anthropic provider marks it cacheable


@dataclass(frozen=True)
class Message:
    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Usage:
    """Tokens of one call, normalised: ``input_tokens`` excludes the cached ones."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage
    model: str  # the model the vendor says answered
    stop_reason: str | None  # "end_turn" / "stop" / "max_tokens" / "length" ...
    raw_id: str | None
    source: str = "api"  # "api" | "cache" | "replay": cached and replayed replies cost nothing

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(doc: dict[str, Any], *, source: str | None = None) -> Completion:
        usage = Usage(**{k: int(v) for k, v in dict(doc["usage"]).items()})
        return Completion(
            text=str(doc["text"]),
            usage=usage,
            model=str(doc["model"]),
            stop_reason=doc.get("stop_reason"),
            raw_id=doc.get("raw_id"),
            source=source if source is not None else str(doc.get("source", "api")),
        )

    @property
    def truncated(self) -> bool:
        """The reply stopped at the token limit."""
        return self.stop_reason in {"max_tokens", "length"}


# Sent as the key to a local OpenAI-compatible server that checks none (never a secret).
PLACEHOLDER_KEY = "not-needed"

System = list[PromptPart] | str
TextCallback = Callable[[str], None]


@runtime_checkable
class Provider(Protocol):
    name: str  # "anthropic" | "openai"
    model: str

    def complete(
        self,
        system: System,
        messages: list[Message],
        *,
        max_tokens: int,
        temperature: float | None = None,
        on_text: TextCallback | None = None,
    ) -> Completion: ...


def system_parts(system: System) -> list[PromptPart]:
    """`system` as parts (a plain string is one part that is not marked stable)."""
    if isinstance(system, str):
        return [PromptPart(system, stable=False)] if system else []
    return list(system)


def system_text(system: System) -> str:
    return "\n\n".join(part.text for part in system_parts(system))


# --------------------------------------------------------------------------- errors


class ProviderError(PorterError):
    """A call to the model failed (after the SDK's retries).  The message is redacted and one line."""

    def __init__(self, message: str, *, status: int | None = None, exit_code: int | None = None):
        self.status = status
        super().__init__(_one_line(redact(message)), exit_code=exit_code)


class ContextOverflow(ProviderError):
    """The prompt does not fit the model's context window (never retried)."""


class ProviderTimeout(ProviderError):
    """The model did not answer within the timeout (after the SDK's retries)."""


class MissingKey(PorterError):
    """No API key in the environment for the chosen provider."""

    exit_code = 2


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many (input )?tokens"
    r"|input is too long|exceeds? the (model'?s? )?(maximum|context)",
    re.IGNORECASE,
)


def map_sdk_error(sdk: Any, err: Exception, where: str, timeout: float, retries: int) -> ProviderError | None:
    """The ProviderError for an exception raised by the `anthropic` or `openai` SDK, or None if foreign.

    Both SDKs share one exception shape (APIStatusError with status_code/body/message,
    APITimeoutError, APIConnectionError, APIResponseValidationError).
    """
    if isinstance(err, sdk.APITimeoutError):
        return ProviderTimeout(f"{where}: no answer within {timeout:g}s (tried {retries + 1} times)")
    if isinstance(err, sdk.APIConnectionError):
        return ProviderError(f"{where}: connection failed after {retries + 1} tries: {err}")
    if isinstance(err, sdk.APIResponseValidationError):
        return ProviderError(f"{where}: malformed reply from the server: {err}", status=err.status_code)
    if isinstance(err, sdk.APIStatusError):
        detail = _error_detail(err)
        status = err.status_code
        if status in (400, 413) and _OVERFLOW.search(detail):
            return ContextOverflow(
                f"{where}: the prompt does not fit the context window: {detail}", status=status
            )
        if status == 401:
            return ProviderError(f"{where}: the API key was rejected (401): {detail}", status=status)
        return ProviderError(f"{where}: HTTP {status}: {detail}", status=status)
    if isinstance(err, sdk.APIError):
        return ProviderError(f"{where}: {err}")
    if isinstance(err, ValueError):  # JSON decoding and pydantic validation of a malformed body
        return ProviderError(f"{where}: malformed reply from the server: {type(err).__name__}: {err}")
    return None


def _error_detail(err: Any) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            parts = [str(inner[k]) for k in ("type", "code", "message") if inner.get(k)]
            if parts:
                return ": ".join(dict.fromkeys(parts))
    return str(getattr(err, "message", err))
