"""Content-addressed disk cache: compiled binaries, model replies, translations, checker findings.

Layout: ``<root>/<namespace>/<key[:2]>/<key>``.  Every entry is a signed envelope::

    MAGIC (8 bytes) | key (32 bytes) | state key id (8 bytes)
        | HMAC-SHA256(state key; namespace, key, payload) (32 bytes) | len(payload) (8 bytes) | payload

keyed by porter's per-user state key (:mod:`porter.signing`), so an entry rewritten by anyone without
the key -- its hash recomputed or not, copied from another key's path, planted in a shared cache -- is
never served: a damaged entry is a miss and is removed, one whose HMAC fails is also reported
(``porter: warning: ...``), one signed with another key (rotated, another machine's) is a miss.  Writes
go to a temporary file in the entry's own directory and are moved into place with :func:`os.replace`,
so a reader never sees half an entry and two writers of one key simply race to the same content.

Sandboxed children never hold the key.  A child (``$PORTER_CACHE_OUTBOX`` set, by
:func:`porter.backends.isolate.child_plan`) reads the shared cache without being able to check
signatures, and notes each entry it used (its hash) in a journal; what it compiles it writes, unsigned,
to its *outbox*: a private folder it may write only until it loads code porter did not write (Landlock
makes it read-only from then on).  After the child exits the parent (:func:`settle_outbox`) checks
every entry the child used against its signature -- one that fails makes the job's result untrusted
and the job is run again without the cache -- and signs what the child compiled into the shared cache.

The root is ``$PORTER_CACHE_DIR``, else ``$XDG_CACHE_HOME/porter``, else ``~/.cache/porter``.
``PORTER_NO_CACHE=1`` (what ``porter --no-cache`` sets, so child processes inherit it) disables the
cache: every ``get`` misses and every ``put`` is dropped.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import hmac
import itertools
import json
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from porter import signing

# Bump when the key derivation or any entry layout changes: every old entry becomes a miss.
# 2: the envelope records the key (and namespace) it was written for.  3: entries are signed (HMAC).
CACHE_FORMAT_VERSION = 3

ENV_DIR = "PORTER_CACHE_DIR"
ENV_DISABLE = "PORTER_NO_CACHE"
ENV_OUTBOX = "PORTER_CACHE_OUTBOX"  # in a sandboxed child: where it writes what it compiles
_CHILD_ENV = "PORTER_SANDBOX_PLAN"  # set in every sandboxed child (porter.sandbox.PLAN_ENV)
JOURNAL = "used.jsonl"  # in an outbox: the shared entries the child used, one JSON line each

_MAGIC = b"PORTERC\x03"  # a signed entry of the shared cache
_HEADER = struct.Struct(">8s32s8s32sQ")  # magic, key, state key id, HMAC, payload length
_CHILD_MAGIC = b"PORTERC\x02"  # an unsigned entry in a child's outbox, hashed
_CHILD_HEADER = struct.Struct(">8s32s32sQ")  # magic, key, sha256(namespace NUL payload), length
_PURPOSE = "cache-entry"
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
        # in a sandboxed child: its outbox (None: no cache at all there, the key being out of reach)
        self.outbox = Path(os.environ[ENV_OUTBOX]) if os.environ.get(ENV_OUTBOX) else None
        if os.environ.get(_CHILD_ENV) and self.outbox is None:
            self.enabled = False

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
        return _entry_path(self.root, namespace, key)

    # ---------------------------------------------------------------- bytes

    def get(self, namespace: str, key: str) -> bytes | None:
        """The stored bytes, or None on a miss.  A damaged entry, one recording another key or
        namespace than asked for, or one whose signature fails is a miss and is removed (the caller
        rebuilds it); a failed signature is also reported.  An entry signed with another state key is
        a miss."""
        if not self.enabled:
            return None
        path = self.path(namespace, key)
        if self.outbox is not None:
            return self._child_get(namespace, key, path)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        payload, why = _open_signed(blob, namespace, key)
        if payload is None:
            if why != _FOREIGN:  # corrupt, written for another key, or forged: never served
                with contextlib.suppress(OSError):
                    path.unlink()
            _report(why, namespace, key, "ignored and recomputed")
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: lets a future pruner keep hot entries
        return payload

    def put(self, namespace: str, key: str, data: bytes) -> bool:
        """Store `data` atomically (signed; in a child, in its outbox).  Returns False when disabled or
        the disk refuses (never raises for that; a state key that cannot be kept private is a
        PorterError, see :mod:`porter.signing`)."""
        if not self.enabled:
            return False
        if self.outbox is not None:  # a child: unsigned, for the parent to check and sign
            return _write_entry(_entry_path(self.outbox, namespace, key), _wrap_child(namespace, key, data))
        return _write_entry(self.path(namespace, key), _wrap(namespace, key, bytes(data)))

    def remove(self, namespace: str, key: str) -> None:
        with contextlib.suppress(OSError):
            (_entry_path(self.outbox, namespace, key) if self.outbox else self.path(namespace, key)).unlink()

    def _child_get(self, namespace: str, key: str, path: Path) -> bytes | None:
        """A child's read: its own outbox first, then the shared entry -- whose signature it cannot
        check: it is noted in the journal (with its hash) for the parent to check after the job."""
        assert self.outbox is not None
        try:
            own = _unwrap_child(_entry_path(self.outbox, namespace, key).read_bytes(), namespace, key)
        except OSError:
            own = None
        if own is not None:
            return own
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        payload = _shape(blob, key)
        if payload is None:
            return None
        line = json.dumps({"namespace": namespace, "key": key, "sha256": hashlib.sha256(blob).hexdigest()})
        try:  # noted before it is used: an entry the parent cannot be told of is not used
            with open(self.outbox / JOURNAL, "a", encoding="ascii") as fh:
                fh.write(line + "\n")
        except OSError:
            return None
        return payload


def _entry_path(root: Path, namespace: str, key: str) -> Path:
    if not _NAMESPACE.match(namespace):
        raise ValueError(f"bad cache namespace {namespace!r}")
    if not _KEY.match(key):
        raise ValueError(f"bad cache key {key!r} (use Cache.key)")
    return root / namespace / key[:2] / key


def _write_entry(path: Path, blob: bytes) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:16]}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True


def _digest(namespace: str, payload: bytes) -> bytes:
    return hashlib.sha256(namespace.encode("ascii") + b"\0" + payload).digest()


def _mac(namespace: str, key: str, payload: bytes, state_key: bytes | None = None) -> bytes:
    return signing.tag(_PURPOSE, namespace.encode("ascii"), bytes.fromhex(key), payload, key=state_key)


def _wrap(namespace: str, key: str, payload: bytes) -> bytes:
    """The signed envelope of `payload` stored under (`namespace`, `key`): it records both."""
    state = signing.state_key()
    head = _HEADER.pack(
        _MAGIC, bytes.fromhex(key), signing.key_id(state), _mac(namespace, key, payload, state), len(payload)
    )
    return head + payload


_CORRUPT, _FOREIGN, _FORGED = "corrupt", "foreign", "forged"


def _shape(blob: bytes, key: str) -> bytes | None:
    """The payload of a signed envelope whose frame is whole and records `key` (signature unchecked)."""
    if len(blob) < _HEADER.size:
        return None
    magic, recorded, _, _, length = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size :]
    if magic != _MAGIC or recorded != bytes.fromhex(key) or length != len(payload):
        return None
    return payload


def _open_signed(blob: bytes, namespace: str, key: str) -> tuple[bytes | None, str]:
    """(payload, "") when the envelope is whole, records `key` and its HMAC checks under the state key;
    otherwise (None, why): corrupt, signed with another key (foreign), or forged."""
    payload = _shape(blob, key)
    if payload is None:
        return None, _CORRUPT
    _, _, ident, mac, _ = _HEADER.unpack_from(blob)
    state = signing.state_key()
    if ident != signing.key_id(state):
        return None, _FOREIGN
    if not hmac.compare_digest(mac, _mac(namespace, key, payload, state)):
        return None, _FORGED
    return payload, ""


def _report(why: str, namespace: str, key: str, outcome: str) -> None:
    if why == _FORGED:
        signing.warn(
            f"cache entry {namespace}/{key[:16]} failed its signature check (edited or forged): {outcome}"
        )
    elif why == _FOREIGN:
        signing.warn(
            "cache entries signed with another state key (rotated, or another machine's) are ignored "
            "and recomputed"
        )


def _wrap_child(namespace: str, key: str, payload: bytes) -> bytes:
    return (
        _CHILD_HEADER.pack(_CHILD_MAGIC, bytes.fromhex(key), _digest(namespace, payload), len(payload))
        + payload
    )


def _unwrap_child(blob: bytes, namespace: str, key: str) -> bytes | None:
    """The payload of an outbox entry, or None when it is damaged or was written for another key."""
    if len(blob) < _CHILD_HEADER.size:
        return None
    magic, recorded, digest, length = _CHILD_HEADER.unpack_from(blob)
    payload = blob[_CHILD_HEADER.size :]
    if magic != _CHILD_MAGIC or recorded != bytes.fromhex(key) or length != len(payload):
        return None
    if _digest(namespace, payload) != digest:
        return None
    return payload


# ---------------------------------------------------------------- children's outboxes

_OUTBOXES: set[str] = set()


def make_outbox() -> str:
    """A private folder (0700, in the temporary folder) where one child writes what it compiles."""
    folder = tempfile.mkdtemp(prefix="porter-job-", suffix=".cache")
    _OUTBOXES.add(folder)
    return folder


def child_env(outbox: str) -> dict[str, str]:
    """What a sandboxed child is told of the cache: the shared root (read) and its outbox (write)."""
    return {ENV_DIR: str(default_root()), ENV_OUTBOX: outbox} if outbox else {}


def settle_outbox(outbox: str, root: Path | None = None) -> list[str]:
    """After a child has exited: check every shared entry it used (noted in its journal) against its
    signature and the hash the child read, and -- when all hold -- sign what it compiled into the
    shared cache.  The outbox is removed.  Returns the entries that failed (``namespace/key``): the
    child's result rests on something forged and must not be trusted."""
    if not outbox:
        return []
    folder = Path(outbox)
    bad: list[str] = []
    try:
        if not folder.is_dir():
            return []
        cache = Cache(root)
        bad = _check_journal(folder / JOURNAL, cache)
        if not bad and cache.enabled:
            for path in sorted(folder.glob("*/??/*")):
                namespace, key = path.parent.parent.name, path.name
                if not (_NAMESPACE.match(namespace) and _KEY.match(key)) or path.parent.name != key[:2]:
                    continue
                try:
                    payload = _unwrap_child(path.read_bytes(), namespace, key)
                except OSError:
                    continue
                if payload is not None:
                    cache.put(namespace, key, payload)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        _OUTBOXES.discard(outbox)
    return bad


def _check_journal(journal: Path, cache: Cache) -> list[str]:
    try:
        lines = journal.read_text(encoding="ascii").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError):
        return ["journal/unreadable"]
    bad: list[str] = []
    for line in lines:
        try:
            doc = json.loads(line)
            namespace, key, digest = str(doc["namespace"]), str(doc["key"]), str(doc["sha256"])
            path = cache.path(namespace, key)
        except (ValueError, KeyError, TypeError):
            bad.append("journal/damaged")
            continue
        try:
            blob = path.read_bytes()
        except OSError:
            blob = b""
        payload, why = _open_signed(blob, namespace, key)
        if payload is None or hashlib.sha256(blob).hexdigest() != digest:
            bad.append(f"{namespace}/{key[:16]}")
            if payload is None and why != _FOREIGN:
                with contextlib.suppress(OSError):
                    path.unlink()
            why = why if why == _FOREIGN else _FORGED  # changed since the child read it: forged too
            _report(why, namespace, key, "not trusted; the job is run again without the cache")
    return bad


@atexit.register
def _remove_outboxes() -> None:
    for folder in list(_OUTBOXES):
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- what a compiled entry depends on


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
