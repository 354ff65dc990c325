"""Content-addressed disk cache: compiled binaries now, LLM replies later.

Layout: ``<root>/<namespace>/<key[:2]>/<key>``.  Every entry is an envelope::

    MAGIC (8 bytes) | key (32 bytes) | sha256(namespace NUL payload) (32 bytes)
        | len(payload) (8 bytes, big-endian) | payload

so a truncated or corrupted entry is detected on read, treated as a miss and removed -- and so is an
entry that was written for another key or namespace (a file copied or moved over another one's path):
an entry is only ever served for the key it records.  Writes go to a
temporary file in the entry's own directory and are moved into place with :func:`os.replace`, so a
reader never sees half an entry and two writers of one key simply race to the same content.

The root is ``$PORTER_CACHE_DIR``, else ``$XDG_CACHE_HOME/porter``, else ``~/.cache/porter``.
``PORTER_NO_CACHE=1`` (what ``porter --no-cache`` sets, so child processes inherit it) disables the
cache: every ``get`` misses and every ``put`` is dropped.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import os
import re
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from porter.backends import Backend, Binary, CompileOptions, Device

# Bump when the key derivation or any entry layout changes: every old entry becomes a miss.
# 2: the envelope records the key (and namespace) it was written for.
CACHE_FORMAT_VERSION = 2

ENV_DIR = "PORTER_CACHE_DIR"
ENV_DISABLE = "PORTER_NO_CACHE"

_MAGIC = b"PORTERC\x02"
_HEADER = struct.Struct(">8s32s32sQ")
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.-]+$")
_KEY = re.compile(r"^[0-9a-f]{64}$")
# What a backend package ships that can change a compiled binary (build outputs are not listed).
_FINGERPRINT_SUFFIXES = (".py", ".toml", ".h", ".hpp", ".cuh", ".c", ".cc", ".cpp", ".cl", ".inc")


def default_root() -> Path:
    """Where the cache lives when no root is given."""
    if env := os.environ.get(ENV_DIR):
        return Path(env).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "porter"
    return Path.home() / ".cache" / "porter"


def disabled_by_env() -> bool:
    return os.environ.get(ENV_DISABLE, "").strip().lower() in {"1", "true", "yes", "on"}


class Cache:
    """A content-addressed store of byte strings, grouped in namespaces ("binaries", "llm", ...)."""

    def __init__(self, root: Path | None = None, enabled: bool | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.enabled = (not disabled_by_env()) if enabled is None else enabled

    # ---------------------------------------------------------------- keys

    @staticmethod
    def key(*parts: str | bytes) -> str:
        """sha256 over the length-prefixed parts and the cache format version (hex, 64 chars)."""
        h = hashlib.sha256()
        h.update(f"porter-cache-v{CACHE_FORMAT_VERSION}\0".encode())
        for part in parts:
            raw = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else bytes(part)
            h.update(b"s" if isinstance(part, str) else b"b")
            h.update(len(raw).to_bytes(8, "big"))
            h.update(raw)
        return h.hexdigest()

    def path(self, namespace: str, key: str) -> Path:
        if not _NAMESPACE.match(namespace):
            raise ValueError(f"bad cache namespace {namespace!r}")
        if not _KEY.match(key):
            raise ValueError(f"bad cache key {key!r} (use Cache.key)")
        return self.root / namespace / key[:2] / key

    # ---------------------------------------------------------------- bytes

    def get(self, namespace: str, key: str) -> bytes | None:
        """The stored bytes, or None on a miss.  A corrupt or truncated entry, or one recording another
        key or namespace than asked for, is a miss and is removed (the caller rebuilds it)."""
        if not self.enabled:
            return None
        path = self.path(namespace, key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        payload = _unwrap(blob, namespace, key)
        if payload is None:  # corrupt, truncated, or written for another key: never served
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: lets a future pruner keep hot entries
        return payload

    def put(self, namespace: str, key: str, data: bytes) -> bool:
        """Store `data` atomically.  Returns False (never raises) when disabled or the disk refuses."""
        if not self.enabled:
            return False
        path = self.path(namespace, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_wrap(namespace, key, bytes(data)))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True

    def remove(self, namespace: str, key: str) -> None:
        with contextlib.suppress(OSError):
            self.path(namespace, key).unlink()

    # ---------------------------------------------------------------- binaries

    def get_binary(self, key: str) -> Binary | None:
        raw = self.get(BINARY_NAMESPACE, key)
        if raw is None:
            return None
        binary = decode_binary(raw)
        if binary is None:
            self.remove(BINARY_NAMESPACE, key)
        return binary

    def put_binary(self, key: str, binary: Binary) -> bool:
        raw = encode_binary(binary)
        return raw is not None and self.put(BINARY_NAMESPACE, key, raw)


BINARY_NAMESPACE = "binaries"


def _digest(namespace: str, payload: bytes) -> bytes:
    return hashlib.sha256(namespace.encode("ascii") + b"\0" + payload).digest()


def _wrap(namespace: str, key: str, payload: bytes) -> bytes:
    """The envelope of `payload` stored under (`namespace`, `key`): it records both."""
    return _HEADER.pack(_MAGIC, bytes.fromhex(key), _digest(namespace, payload), len(payload)) + payload


def _unwrap(blob: bytes, namespace: str, key: str) -> bytes | None:
    """The payload, or None when the envelope is damaged or was written for another key or namespace."""
    if len(blob) < _HEADER.size:
        return None
    magic, recorded, digest, length = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size :]
    if magic != _MAGIC or recorded != bytes.fromhex(key) or length != len(payload):
        return None
    if _digest(namespace, payload) != digest:
        return None
    return payload


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
    from porter.backends import Binary, ResourceReport

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


@functools.cache
def backend_fingerprint(name: str) -> str:
    """A hash of the source files shipped in the backend's package (code, headers, runtime sources, tables).

    Part of every binary key: editing the CPU emulator's runtime header or a backend's default flags
    invalidates what was compiled with the old ones, even when the compiler itself did not change.
    """
    h = hashlib.sha256()
    try:
        root = resources.files(f"porter.backends.{name}")
    except (ModuleNotFoundError, TypeError):
        return "none"
    hash_tree(h, root, _FINGERPRINT_SUFFIXES)
    return h.hexdigest()[:16]


def hash_tree(h: Any, root: Any, suffixes: tuple[str, ...], prefix: str = "") -> None:
    """Add every file under the package folder `root` whose name ends in one of `suffixes` to the hash
    `h`, by relative path (`prefix` first) and length-prefixed content, in sorted order."""
    files: list[tuple[str, bytes]] = []
    stack: list[tuple[str, Any]] = [(prefix, root)]
    while stack:
        at, node = stack.pop()
        for child in node.iterdir():
            if child.name == "__pycache__" or child.name.startswith("."):
                continue
            if child.is_dir():
                stack.append((f"{at}{child.name}/", child))
            elif child.is_file() and child.name.endswith(suffixes):
                files.append((at + child.name, child.read_bytes()))
    for rel, data in sorted(files):
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "big") + data)


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


def headers_digest(source: str, include_dirs: Sequence[str]) -> str:
    """A digest of every header ``source`` reaches in ``include_dirs``: an edited header is a new
    compile, never a stale binary (system headers belong to the toolchain id)."""
    from porter.includes import reachable

    h = hashlib.sha256()
    if include_dirs and "include" in source:
        for path, data in itertools.islice(
            reachable([("", source.encode("utf-8", "surrogateescape"))], include_dirs), 1, None
        ):
            h.update(os.path.abspath(path).encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


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
    hit = cache.get_binary(key)
    if hit is not None and hit.backend == backend.name:
        return hit, True
    binary = backend.compile(source, entry, options, device)
    cache.put_binary(key, binary)
    return binary, False
