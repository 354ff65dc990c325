"""The provider contract: prompt and reply types, normalised usage, and the errors every provider raises.

A provider turns ``system`` + ``messages`` into one :class:`Completion`.  ``system`` is either a string
or a list of :class:`PromptPart`; a part marked ``stable`` is the same from call to call (instructions,
the dialect description, the reference kernel) and may be cached by the vendor.  Put stable parts
first: vendors cache prefixes.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from porter.errors import PorterError
from porter.pricing import Usage
from porter.redact import redact


@dataclass(frozen=True)
class PromptPart:
    text: str
    stable: bool = True  # identical across calls: the Anthropic provider marks it cacheable


@dataclass(frozen=True)
class Message:
    role: str  # "user" | "assistant"
    content: str


# More tokens than any model reads or writes in one call: a count above it (or below 0) is a broken server.
MAX_REPORTED_TOKENS = 10**9


def checked_usage(usage: Usage) -> tuple[Usage, str | None]:
    """`usage` with every negative or absurd count (above MAX_REPORTED_TOKENS) set to 0, and a note
    naming them (None when every count is plausible).  Cost is never negative this way."""
    bad = {
        f.name: getattr(usage, f.name)
        for f in fields(usage)
        if not 0 <= getattr(usage, f.name) <= MAX_REPORTED_TOKENS
    }
    if not bad:
        return usage, None
    shown = ", ".join(f"{name}={value}" for name, value in bad.items())
    return replace(usage, **dict.fromkeys(bad, 0)), (
        f"the server reported invalid usage ({shown}); counted as 0 tokens"
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

# Per request: seconds to wait for an answer, and retries after a timeout, a 429 or a 5xx.  A server
# that never answers is given up on after (1 + DEFAULT_RETRIES) * DEFAULT_TIMEOUT seconds plus backoff.
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 2

System = list[PromptPart] | str
TextCallback = Callable[[str], None]
T = TypeVar("T")


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
        deadline: float | None = None,  # time.monotonic() after which no try starts and none goes on
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
    """A call to the model failed (after the retries).  The message is redacted and one line.

    ``transient``: the same request may well succeed when sent again (a timeout, a rate limit, a 5xx,
    a garbled reply), so the loop asks again next round; otherwise (a rejected key, an unknown model,
    a bad request) it would keep failing and the conversation ends."""

    transient = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        exit_code: int | None = None,
        transient: bool | None = None,
    ):
        self.status = status
        if transient is not None:
            self.transient = transient
        super().__init__(_one_line(redact(message)), exit_code=exit_code)


class ContextOverflow(ProviderError):
    """The prompt does not fit the model's context window (never retried)."""


class ProviderTimeout(ProviderError):
    """The model did not answer within the timeout (after the retries)."""

    transient = True


class BudgetSpent(ProviderTimeout):
    """The time budget (``--max-seconds``) ran out before the model answered; nothing more is sent."""

    transient = False


class MalformedReply(ProviderError):
    """The server answered, but not with a reply porter can read (bad JSON, missing fields)."""

    transient = True


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


def map_sdk_error(sdk: Any, err: Exception, where: str, timeout: float, tries: int) -> ProviderError | None:
    """The ProviderError for an exception raised by the `anthropic` or `openai` SDK, or None if foreign.

    Both SDKs share one exception shape (APIStatusError with status_code/body/message,
    APITimeoutError, APIConnectionError, APIResponseValidationError).
    """
    times = f"{tries} time{'s' if tries != 1 else ''}"
    if isinstance(err, ProviderError):
        return err
    if isinstance(err, sdk.APITimeoutError):
        return ProviderTimeout(f"{where}: no answer within {timeout:g}s (tried {times})")
    if isinstance(err, sdk.APIConnectionError):
        return ProviderError(f"{where}: connection failed (tried {times}): {err}", transient=True)
    if isinstance(err, sdk.APIResponseValidationError):
        return MalformedReply(f"{where}: malformed reply from the server: {err}", status=err.status_code)
    if isinstance(err, sdk.APIStatusError):
        detail = _error_detail(err)
        status = err.status_code
        if status in (400, 413) and _OVERFLOW.search(detail):
            return ContextOverflow(
                f"{where}: the prompt does not fit the context window: {detail}", status=status
            )
        transient = _retryable_status(status)
        if status == 401:
            return ProviderError(f"{where}: the API key was rejected (401): {detail}", status=status)
        if status == 403:
            return ProviderError(f"{where}: access denied (403): {detail}", status=status)
        if status == 404:
            return ProviderError(
                f"{where}: not found (404; is the model name right?): {detail}", status=status
            )
        return ProviderError(f"{where}: HTTP {status}: {detail}", status=status, transient=transient)
    if isinstance(err, sdk.APIError):
        return ProviderError(f"{where}: {err}")
    if isinstance(err, ValueError):  # JSON decoding and pydantic validation of a malformed body
        what = "not valid JSON" if isinstance(err, json.JSONDecodeError) else "not the expected shape"
        return MalformedReply(f"{where}: malformed reply from the server: the body is {what}")
    return None


def parse_reply(where: str, parse: Callable[[], T]) -> T:
    """`parse()` (reading a reply object the SDK built without validating it), or MalformedReply when
    the server left out fields or sent ones of the wrong type (``{}``, ``"content": null``...)."""
    try:
        return parse()
    except (AttributeError, TypeError, KeyError, IndexError, ValueError):
        pass
    # Raised outside the except block: nothing internal is chained to what the user sees.
    raise MalformedReply(f"{where}: malformed reply from the server: fields missing or of the wrong type")


def check_deadline(deadline: float | None, where: str) -> None:
    """BudgetSpent once `deadline` (a time.monotonic() value) has passed."""
    if deadline is not None and time.monotonic() >= deadline:
        raise BudgetSpent(f"{where}: time budget spent: the request was cut off")


# Backoff between tries (as the SDKs do): 0.5 s doubling up to 8 s, less up to 25% jitter; a server's
# retry-after is honoured up to a minute (a longer one is not waited for).
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 60.0


def send_with_retries(
    sdk: Any,
    send: Callable[[float], T],
    *,
    where: str,
    timeout: float,
    retries: int,
    deadline: float | None = None,
) -> T:
    """``send(seconds)`` -- one request with that timeout --, retried up to `retries` times after a
    timeout, a connection failure or a 408/409/429/5xx.  Each try's timeout is cut to the time left
    before `deadline` and no try (nor a wait before one) goes past it: BudgetSpent instead.  SDK
    errors become one redacted ProviderError; anything foreign propagates."""
    tries = 0
    while True:
        wait = timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BudgetSpent(f"{where}: time budget spent before the request could be sent")
            wait = min(timeout, left)
        tries += 1
        try:
            return send(wait)
        except Exception as err:  # SDK errors become one redacted line; anything foreign propagates
            failure = map_sdk_error(sdk, err, where, wait, tries)
            if failure is None:
                raise
            delay = _retry_delay(sdk, err, tries) if tries <= retries else None
        # Raised outside the except block: the SDK exception (which holds the request) is not chained.
        if isinstance(failure, BudgetSpent):
            raise failure
        if isinstance(failure, ProviderTimeout) and wait < timeout:
            raise BudgetSpent(f"{where}: time budget spent: no answer in the {wait:.3g}s that were left")
        if delay is None:
            raise failure
        if deadline is not None and time.monotonic() + delay >= deadline:
            raise BudgetSpent(f"{failure}; time budget spent, so not retried")
        time.sleep(delay)


def _retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def _retry_delay(sdk: Any, err: Exception, tries: int) -> float | None:
    """Seconds to wait before trying again after `err` (the `tries`-th failure), or None: not retried."""
    after: float | None = None
    if isinstance(err, sdk.APIStatusError):
        headers = err.response.headers
        hint = headers.get("x-should-retry")
        if hint == "false" or (hint != "true" and not _retryable_status(err.status_code)):
            return None
        after = _retry_after(headers)
    elif not isinstance(err, sdk.APIConnectionError):  # timeouts are connection errors too
        return None
    if after is not None:
        return after if after <= MAX_RETRY_AFTER else None
    return min(INITIAL_RETRY_DELAY * 2.0 ** (tries - 1), MAX_RETRY_DELAY) * (1 - 0.25 * random.random())


def _retry_after(headers: Any) -> float | None:
    """The server's retry-after-ms / retry-after (seconds), when it gives a number."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, ""))
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            return value / scale
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
