"""Keep API keys out of everything the llm layer writes: error messages, log lines, caches, reports.

:func:`redact` replaces

* the exact value of every environment variable whose name looks like a secret's -- the rule that also
  keeps it from every child (:func:`porter.sandbox.environment.looks_secret`: ``KEY``, ``TOKEN``,
  ``SECRET``, ``PASSWORD``...; read at call time, so keys set later are covered too), and values
  registered with :func:`add_secret` (a provider registers the key it was built with);
* anything shaped like a key: ``sk-ant-...``, ``sk-...``, ``Bearer <token>``, and the values of
  ``x-api-key`` / ``api_key`` / ``authorization`` fields in header dumps and JSON.

The provider keys (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) and registered values are redacted
whatever their length; one shorter than 8 characters only where it stands as a whole token (not inside
a longer word, so a key ``abc`` leaves ``abcd`` alone).  Other variables' values shorter than 8
characters are not treated as secrets (they would blank out ordinary words).
"""

from __future__ import annotations

import logging
import os
import re

from porter.sandbox.environment import looks_secret

REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 8
KEY_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")  # redacted whatever their length
# What may not touch a short secret for it to count as a whole token.
_TOKEN_CHARS = r"A-Za-z0-9_\-"

_PATTERNS = (
    # Anthropic and OpenAI style keys (sk-ant-api03-..., sk-proj-..., sk-...).
    re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{15,}"),
    # Authorization: Bearer <token>
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    # x-api-key: <v>, "api_key": "<v>", authorization=<v> ...
    re.compile(
        r"(?i)(\b(?:x-api-key|api[_-]?key|authorization|auth[_-]?token)\b[\"']?\s*[:=]\s*[\"']?)"
        r"(?!bearer\b)[A-Za-z0-9._~+/=\-]{8,}"
    ),
)

_extra: set[str] = set()


def add_secret(value: str | None) -> None:
    """Redact `value` from now on, whatever its length (ignored when empty or only spaces)."""
    if value and value.strip():
        _extra.add(value.strip())


def discard_secret(value: str) -> None:
    """Stop redacting a value registered with :func:`add_secret` (tests)."""
    _extra.discard(value.strip())


def secrets_in_env() -> list[str]:
    """The values of the environment variables that hold secrets, and the registered ones, longest first."""
    found: set[str] = set()
    for name, raw in os.environ.items():
        value, key = raw.strip(), name.upper()
        if value and (key in KEY_VARIABLES or (looks_secret(key) and len(value) >= MIN_SECRET_LEN)):
            found.add(value)
    return sorted(found | _extra, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every known secret value and every key-shaped string replaced by ``[REDACTED]``."""
    for secret in secrets_in_env():
        if secret not in text:
            continue
        if len(secret) >= MIN_SECRET_LEN:
            text = text.replace(secret, REDACTED)
        else:  # a short key: only where it is a whole token, not a piece of an ordinary word
            whole = rf"(?<![{_TOKEN_CHARS}]){re.escape(secret)}(?![{_TOKEN_CHARS}])"
            text = re.sub(whole, REDACTED, text)
    for pattern in _PATTERNS:
        text = pattern.sub(_replacement, text)
    return text


def _replacement(match: re.Match[str]) -> str:
    prefix = match.group(1) if match.re.groups else ""
    return f"{prefix}{REDACTED}"


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (attach it to a handler to cover every logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
