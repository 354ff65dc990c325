"""Compiled binaries in porter's cache (namespace ``binaries``): how a :class:`Binary` is stored, the
key of one compile, and :func:`compile_cached`.

The cache itself (:mod:`porter.cache`) stores signed byte strings and knows nothing of backends; what a
compile's key depends on (the headers the source reaches, the backend's own files) it computes
(:func:`porter.cache.headers_digest`, :func:`porter.cache.backend_fingerprint`), and this module, on the
backends' side, puts it together with the backend's toolchain.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from porter.backends import Backend, Binary, CompileOptions, Device, ResourceReport

from porter.cache import Cache, backend_fingerprint, headers_digest

NAMESPACE = "binaries"


def get_binary(cache: Cache, key: str) -> Binary | None:
    """The binary stored under `key`, or None; an entry that does not decode is a miss and is removed."""
    raw = cache.get(NAMESPACE, key)
    if raw is None:
        return None
    binary = decode_binary(raw)
    if binary is None:
        cache.remove(NAMESPACE, key)
    return binary


def put_binary(cache: Cache, key: str, binary: Binary) -> bool:
    """Store `binary` under `key`; False when it was not stored (its `meta` is not plain data, no cache)."""
    raw = encode_binary(binary)
    return raw is not None and cache.put(NAMESPACE, key, raw)


# ---------------------------------------------------------------- Binary serialisation
#
# A JSON header (every field but `data`) followed by the raw data bytes.  Stable across runs and
# Python versions, and nothing in it executes on load (unlike pickle).


def _tag(obj: Any) -> Any:
    """Plain JSON with tuples tagged, so `meta` comes back equal; TypeError for anything else."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, tuple):
        return {"$tuple": [_tag(v) for v in obj]}
    if isinstance(obj, list):
        return [_tag(v) for v in obj]
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        if "$tuple" in obj:
            raise TypeError("reserved key $tuple")
        return {k: _tag(v) for k, v in obj.items()}
    raise TypeError(f"not cacheable: {type(obj).__name__}")


def _untag(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_untag(v) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"$tuple"}:
            return tuple(_untag(v) for v in obj["$tuple"])
        return {k: _untag(v) for k, v in obj.items()}
    return obj


def encode_binary(binary: Binary) -> bytes | None:
    """Serialise a Binary, or None when its `meta` is not plain data (then it is simply not cached)."""
    header = {
        "backend": binary.backend,
        "entry": binary.entry,
        "arch": binary.arch,
        "format": binary.format,
        "toolchain": binary.toolchain,
        "log": binary.log,
        "report": asdict(binary.report) if binary.report is not None else None,
        "size": len(binary.data),
    }
    try:
        header["meta"] = _tag(dict(binary.meta))
        head = json.dumps(header, sort_keys=True, allow_nan=False).encode("utf-8", "surrogateescape")
    except (TypeError, ValueError):
        return None
    return len(head).to_bytes(8, "big") + head + bytes(binary.data)


def decode_binary(raw: bytes) -> Binary | None:
    """The Binary back, or None when the bytes are not a well-formed encoding."""
    try:
        n = int.from_bytes(raw[:8], "big")
        header: dict[str, Any] = json.loads(raw[8 : 8 + n].decode("utf-8", "surrogateescape"))
        data = raw[8 + n :]
        if header["size"] != len(data):
            return None
        report = ResourceReport(**header["report"]) if header["report"] is not None else None
        return Binary(
            backend=header["backend"],
            entry=header["entry"],
            arch=header["arch"],
            format=header["format"],
            data=data,
            toolchain=header["toolchain"],
            log=header["log"],
            report=report,
            meta=dict(_untag(header["meta"])),
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


# ---------------------------------------------------------------- compile through the cache


def binary_key(
    backend: Backend, source: str, entry: str, options: CompileOptions, device: Device | None
) -> str:
    """The cache key of one compile: source, the headers it reaches in the include directories
    (their paths and contents), entry, options, toolchain, backend files, format version."""
    return Cache.key(
        "binary",
        backend.name,
        source,
        headers_digest(source, options.include_dirs),
        entry,
        options.key(),
        backend.toolchain_id(device, options.arch),
        backend_fingerprint(backend.name),
    )


def compile_cached(
    backend: Backend,
    source: str,
    entry: str,
    options: CompileOptions,
    device: Device | None,
    cache: Cache | None = None,
) -> tuple[Binary, bool]:
    """`backend.compile` through the cache.  Returns (binary, hit).  CompileError propagates (never cached)."""
    cache = cache if cache is not None else Cache()
    if not cache.enabled:
        return backend.compile(source, entry, options, device), False
    key = binary_key(backend, source, entry, options, device)
    hit = get_binary(cache, key)
    if hit is not None and hit.backend == backend.name:
        return hit, True
    binary = backend.compile(source, entry, options, device)
    put_binary(cache, key, binary)
    return binary, False
