"""Reply cache, recording and replay: re-runs are free and reproducible.

A reply is keyed by sha256 over (provider, model, the full system prompt and message history as JSON,
max_tokens, temperature) -- never by anything secret, and not by the base URL, so a reply recorded
against one server replays anywhere.  :class:`ReplyCache` keeps replies in porter's generic disk cache
(:class:`porter.cache.Cache`, namespace ``llm``, signed with porter's state key so an edited reply is
never served; ``--no-cache`` / ``PORTER_NO_CACHE=1`` disable it).  ``--replay DIR`` serves what the user
chose to record, as the user's own input (not signed).
:class:`RecordingProvider` also writes each reply as ``<DIR>/<key>.json`` (``--record DIR``) and
:class:`ReplayProvider` serves only such files (``--replay DIR``), failing with :class:`ReplayMiss` on a
miss.  Everything written passes through :func:`porter.redact.redact`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from porter.cache import Cache
from porter.errors import PorterError, UsageError
from porter.llm.base import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    Completion,
    Message,
    Provider,
    System,
    TextCallback,
    system_parts,
)
from porter.llm.providers import make_provider, parse_spec
from porter.redact import redact

NAMESPACE = "llm"
RECORD_FORMAT = 1
# A reply cache entry: a record (above) plus the sha256 of its completion.  2: entries bound to their key.
ENTRY_FORMAT = 2


class ReplayMiss(PorterError):
    """--replay was asked for a reply that was never recorded."""


def request_doc(
    provider: str,
    model: str,
    system: System,
    messages: list[Message],
    max_tokens: int,
    temperature: float | None,
) -> dict[str, Any]:
    """Everything that decides a reply, as plain JSON (what the key is computed over)."""
    return {
        "provider": provider,
        "model": model,
        "system": [{"text": p.text, "stable": p.stable} for p in system_parts(system)],
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "params": {"max_tokens": max_tokens, "temperature": temperature},
    }


def reply_key(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return Cache.key("llm-reply", request["provider"], request["model"], canonical)


class ReplyCache:
    """Completions in the generic disk cache, stored as redacted JSON."""

    def __init__(self, cache: Cache | None = None):
        self.cache = cache if cache is not None else Cache()

    @property
    def enabled(self) -> bool:
        return self.cache.enabled

    def get(self, key: str) -> Completion | None:
        """The cached reply for `key`, or None: an entry that is unreadable, records another key, or
        whose completion does not match its recorded hash is a miss (removed, then asked again)."""
        raw = self.cache.get(NAMESPACE, key)
        if raw is None:
            return None
        try:
            doc = json.loads(raw.decode("utf-8", "surrogateescape"))
            if (
                doc["format"] != ENTRY_FORMAT
                or doc["key"] != key
                or doc["completion_sha256"] != _completion_digest(doc["completion"])
            ):
                raise ValueError("entry not written for this key")
            return Completion.from_json(doc["completion"], source="cache")
        except (ValueError, KeyError, TypeError, AttributeError):
            self.cache.remove(NAMESPACE, key)  # unreadable or foreign entry: a miss
            return None

    def put(self, key: str, request: dict[str, Any], completion: Completion) -> bool:
        return self.cache.put(NAMESPACE, key, _entry_bytes(key, request, completion))


class _Wrapper:
    """Shared plumbing of the wrappers below: same name/model as the wrapped provider."""

    name: str
    model: str

    def _request(
        self, system: System, messages: list[Message], max_tokens: int, temperature: float | None
    ) -> tuple[str, dict[str, Any]]:
        request = request_doc(self.name, self.model, system, messages, max_tokens, temperature)
        return reply_key(request), request


class CachingProvider(_Wrapper):
    """`provider` behind the reply cache: a hit makes no request (and reports ``source="cache"``)."""

    def __init__(self, provider: Provider, cache: ReplyCache | None = None):
        self.inner = provider
        self.name = provider.name
        self.model = provider.model
        self.cache = cache if cache is not None else ReplyCache()

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
        key, request = self._request(system, messages, max_tokens, temperature)
        hit = self.cache.get(key)
        if hit is not None:
            if on_text is not None:
                on_text(hit.text)
            return hit
        completion = self.inner.complete(
            system,
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            on_text=on_text,
            deadline=deadline,
        )
        self.cache.put(key, request, completion)
        return completion


class RecordingProvider(_Wrapper):
    """`provider`, writing every reply (with its request) to ``<directory>/<key>.json`` for --replay."""

    def __init__(self, provider: Provider, directory: Path | str):
        self.inner = provider
        self.name = provider.name
        self.model = provider.model
        self.directory = Path(directory)

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
        key, request = self._request(system, messages, max_tokens, temperature)
        completion = self.inner.complete(
            system,
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            on_text=on_text,
            deadline=deadline,
        )
        path = self.directory / f"{key}.json"
        try:
            _write_atomic(path, _record_bytes(key, request, completion))
        except OSError as err:
            raise PorterError(
                f"--record {self.directory}: cannot write {path.name}: {err.strerror}"
            ) from None
        return completion


class ReplayProvider(_Wrapper):
    """Serves only replies recorded in `directory` for `spec` (``provider:model``); never the network."""

    def __init__(self, directory: Path | str, spec: str):
        self.directory = Path(directory)
        self.name, self.model = parse_spec(spec)
        if not self.directory.is_dir():
            raise ReplayMiss(f"--replay {self.directory}: no such directory of recorded replies", exit_code=2)

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
        key, _ = self._request(system, messages, max_tokens, temperature)
        path = self.directory / f"{key}.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            completion = Completion.from_json(doc["completion"], source="replay")
        except FileNotFoundError:
            raise ReplayMiss(
                f"--replay {self.directory}: no recorded reply for {self.name}:{self.model} "
                f"with this prompt (key {key}); record one with --record DIR"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as err:
            why = (err.strerror if isinstance(err, OSError) else None) or "not a reply written by --record"
            raise ReplayMiss(f"{path}: unreadable recorded reply ({why})") from None
        if doc.get("key") != key:  # a file copied over another prompt's: never replayed for this one
            raise ReplayMiss(f"{path}: the recorded reply was made for another prompt (its key differs)")
        if on_text is not None:
            on_text(completion.text)
        return completion


def _record_bytes(key: str, request: dict[str, Any], completion: Completion) -> bytes:
    doc = {"format": RECORD_FORMAT, "key": key, "request": request, "completion": completion.to_json()}
    return redact(json.dumps(doc, indent=1, ensure_ascii=False)).encode("utf-8", "surrogateescape")


def _completion_digest(completion: Any) -> str:
    canonical = json.dumps(completion, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()


def _entry_bytes(key: str, request: dict[str, Any], completion: Completion) -> bytes:
    """A reply cache entry: the (redacted) record, its key, and the hash of the completion as stored."""
    doc = json.loads(_record_bytes(key, request, completion))
    doc["format"] = ENTRY_FORMAT
    doc["completion_sha256"] = _completion_digest(doc["completion"])
    return json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8", "surrogateescape")


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_record_dir(directory: Path | str) -> Path:
    """The ``--record`` folder, created and known to be writable; UsageError (exit 2) otherwise.

    Called before any request is sent: a reply paid for must never be lost to an unusable folder."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--record {path}: exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".porter-probe.", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise UsageError(f"--record {path}: cannot write there ({err.strerror or 'unusable'})") from None
    return path


def open_provider(
    spec: str,
    *,
    base_url: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_RETRIES,
    cache: ReplyCache | None = None,
    record: Path | str | None = None,
    replay: Path | str | None = None,
) -> Provider:
    """The provider a workflow should use: ``--replay DIR`` (no key, no network), else the real provider
    behind the reply cache (pass ``cache`` to choose its root; ``--no-cache`` disables it through the
    environment) and, with ``--record DIR`` (checked here, before any request), recording every reply.
    ``timeout`` / ``max_retries``: per request (``--request-timeout`` / ``--retries``)."""
    if replay is not None:
        return ReplayProvider(replay, spec)
    provider: Provider = CachingProvider(
        make_provider(spec, base_url=base_url, timeout=timeout, max_retries=max_retries), cache
    )
    if record is not None:
        provider = RecordingProvider(provider, check_record_dir(record))
    return provider
