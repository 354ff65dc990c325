"""Choosing a provider: ``--model anthropic:<name>`` or ``--model openai:<name>``.

Keys come from ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` only.  Base URLs come from ``--base-url`` or
the SDKs' own ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``.  A local OpenAI-compatible server (vLLM,
llama.cpp, Ollama) usually needs no key: when a base URL is set and no key is, the placeholder
``not-needed`` is sent.  Each request waits ``timeout`` seconds (``--request-timeout``, default 60) and is
retried ``max_retries`` times (``--retries``, default 2) after a timeout, a connection failure, a 429 or a
5xx, with the server's retry-after or exponential backoff (:func:`porter.llm.base.send_with_retries`:
porter's, not the SDKs', so that a deadline bounds them); a context overflow is a 400 and is never retried.
"""

from __future__ import annotations

import math
import os

from porter.errors import UsageError
from porter.llm.base import DEFAULT_RETRIES, DEFAULT_TIMEOUT, PLACEHOLDER_KEY, MissingKey, Provider

PROVIDERS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


def parse_spec(spec: str) -> tuple[str, str]:
    """``"anthropic:claude-sonnet-4-5"`` -> ``("anthropic", "claude-sonnet-4-5")``; UsageError otherwise."""
    provider, sep, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep or provider not in PROVIDERS or not model:
        raise UsageError(f"bad --model {spec!r}: expected anthropic:<model> or openai:<model>")
    return provider, model


def api_key(provider: str, base_url: str | None) -> str:
    """The key for `provider` from the environment; MissingKey (exit code 2) names the variable to set."""
    var = PROVIDERS[provider]
    key = os.environ.get(var, "").strip()
    if key:
        return key
    if base_url or os.environ.get(BASE_URL_ENV[provider], "").strip():
        return PLACEHOLDER_KEY  # a local compatible server that checks no key
    raise MissingKey(
        f"set {var} to use the {provider} provider (or replay recorded replies with --replay DIR)"
    )


def make_provider(
    spec: str,
    *,
    base_url: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_RETRIES,
) -> Provider:
    """A provider for ``anthropic:<model>`` / ``openai:<model>``; no network traffic until `complete`."""
    provider, model = parse_spec(spec)
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--request-timeout must be a positive number of seconds, not {timeout:g}")
    if max_retries < 0:
        raise UsageError(f"--retries must be 0 or more, not {max_retries}")
    key = api_key(provider, base_url)
    if provider == "anthropic":
        from porter.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(
            model, api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
    from porter.llm.openai_provider import OpenAIProvider

    url = base_url or os.environ.get(BASE_URL_ENV["openai"], "").strip() or None
    return OpenAIProvider(
        model,
        api_key=key,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        compatible=url is not None and "api.openai.com" not in url,
    )
