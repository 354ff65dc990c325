"""Porter's state signed with a per-user secret, so a file edit cannot forge it.

What porter reuses from disk without redoing it -- compile-cache entries (binaries and their metadata),
model replies, translations, checker findings, compiler self-descriptions, and the rows of a previous
``report.json`` that a re-run resumes -- carries an HMAC-SHA256 keyed by the *state key*: 32 random bytes
in ``$XDG_CONFIG_HOME/porter/state.key`` (else ``~/.config/porter/state.key``), made on first use with
``O_EXCL`` and mode 0600.  A cache entry or a report whose HMAC does not check is never trusted: it is
ignored and recomputed, with a ``porter: warning: ...`` line (:class:`StateWarning`).

* A key file that others may read or write, that is not a regular file or not the user's, or that does
  not hold a key is replaced by a new one (everything signed with the old one is recomputed); a config
  folder that others may write is refused (exit 2), as is a key that sandboxed children could read (a
  folder beneath the cache root or the toolchain folders they are given).
* ``porter doctor --rotate-state-key`` makes a new key (:func:`rotate`): every entry and report signed
  with the old one is recomputed.
* The key is never loaded in a sandboxed child (:func:`state_key` refuses): a child that compiles hands
  its entries to the parent, which signs them (:mod:`porter.cache`).

Threat model: this protects against anyone who can write porter's files but cannot read the key -- an
edited or swapped cache entry or report, a cache folder shared by several users or machines, code run
in porter's sandbox.  It does not protect against someone who can read the key file or runs as the
user (they can sign anything), nor against a child when the sandbox's file-system layer is missing.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from porter.errors import PorterError
from porter.files import InputWarning

KEY_NAME = "state.key"
KEY_BYTES = 32
ID_BYTES = 8
SIGNATURE_FIELD = "signature"  # the member of a signed JSON document (report.json) that holds its HMAC
_SCHEME = "hmac-sha256"
_CHILD_ENV = "PORTER_SANDBOX_PLAN"  # set in every sandboxed child (porter.sandbox.PLAN_ENV)

_KEYS: dict[str, bytes] = {}  # key file path -> the key read from it (one read per process)


class StateWarning(InputWarning):
    """Porter's own state (a cache entry, a report) that failed its signature check: not trusted,
    recomputed.  Shown by the CLI as a ``porter: warning: ...`` line, once per message."""


def warn(message: str) -> None:
    import warnings

    warnings.warn(message, StateWarning, stacklevel=2)


# --------------------------------------------------------------------------- the key file


def config_dir() -> Path:
    """Porter's config folder: ``$XDG_CONFIG_HOME/porter``, else ``~/.config/porter``."""
    if xdg := os.environ.get("XDG_CONFIG_HOME"):
        return Path(xdg).expanduser() / "porter"
    return Path.home() / ".config" / "porter"


def key_path() -> Path:
    return config_dir() / KEY_NAME


def state_key() -> bytes:
    """The state key, made on first use.  PorterError (exit 2) when it cannot be kept private."""
    if os.environ.get(_CHILD_ENV):
        raise RuntimeError("the state key is never used in a sandboxed child")
    path = key_path()
    known = _KEYS.get(str(path))
    if known is not None:
        return known
    folder = _private_folder(path.parent)
    _refuse_exposed(path)
    found = _read(path)
    if isinstance(found, str):
        warn(
            f"the state key {path} was not used ({found}): a new one was made; cache entries and "
            "reports signed with the old one are recomputed"
        )
        found = _write(folder, path, replace=True)
    elif found is None:
        found = _write(folder, path, replace=False)
    _KEYS[str(path)] = found
    return found


def rotate() -> Path:
    """A new state key in place of the old one (atomically); returns its path."""
    if os.environ.get(_CHILD_ENV):
        raise RuntimeError("the state key is never used in a sandboxed child")
    path = key_path()
    folder = _private_folder(path.parent)
    _refuse_exposed(path)
    _KEYS[str(path)] = _write(folder, path, replace=True)
    return path


def key_id(key: bytes | None = None) -> bytes:
    """A short public name of a key (which key signed an entry), never enough to sign."""
    key = state_key() if key is None else key
    return hashlib.sha256(b"porter-state-key-id\0" + key).digest()[:ID_BYTES]


def _private_folder(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = folder.stat()
    except OSError as err:
        raise PorterError(
            f"cannot make porter's config folder: {err.strerror or err}", path=str(folder), exit_code=2
        ) from None
    if st.st_uid != os.geteuid():
        raise PorterError(
            "porter's config folder belongs to another user, who could replace the state key in it; "
            "set XDG_CONFIG_HOME to a folder of your own",
            path=str(folder),
            exit_code=2,
        )
    if st.st_mode & 0o022:
        raise PorterError(
            f"porter's config folder is writable by others (mode {stat.S_IMODE(st.st_mode):o}), who could "
            f"replace the state key in it: chmod go-w {folder}",
            path=str(folder),
            exit_code=2,
        )
    return folder


def _refuse_exposed(path: Path) -> None:
    """The key must not lie where a sandboxed child may read (the cache root, the toolchain folders)."""
    from porter.sandbox import toolchain_paths

    where = os.path.realpath(path.parent)
    for root in (str(_cache_root()), *toolchain_paths()):
        real = os.path.realpath(root)
        if real != "/" and (where == real or where.startswith(real.rstrip("/") + "/")):
            raise PorterError(
                f"the state key would lie beneath {root}, a folder sandboxed children may read: set "
                "XDG_CONFIG_HOME to a private folder outside it",
                path=str(path),
                exit_code=2,
            )


def _cache_root() -> Path:
    """:func:`porter.cache.default_root` (which imports this module), read the same way."""
    if env := os.environ.get("PORTER_CACHE_DIR"):
        return Path(env).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "porter"
    return Path.home() / ".cache" / "porter"


def _read(path: Path) -> bytes | str | None:
    """The key in `path`; None when there is none; why it cannot be used otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "it is a symbolic link"
        return err.strerror or str(err)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_uid != os.geteuid():
            return "it belongs to another user"
        if st.st_mode & 0o077:
            return f"others may read or write it: mode {stat.S_IMODE(st.st_mode):o}"
        text = os.read(fd, 4 * KEY_BYTES).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    return key if len(key) == KEY_BYTES else "it does not hold a key"


def _write(folder: Path, path: Path, replace: bool) -> bytes:
    """A new key, written to a private temporary file (O_EXCL, 0600) and moved into place: by
    ``os.replace`` (`replace`) or by a link that fails when another process made one first (then its
    key is the one used)."""
    key = secrets.token_bytes(KEY_BYTES)
    tmp = folder / f".{KEY_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, key.hex().encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                found = _read(path)
                if isinstance(found, bytes):
                    return found
                os.replace(tmp, path)  # the one found is unusable: ours takes its place
    except OSError as err:
        raise PorterError(
            f"cannot write the state key: {err.strerror or err}", path=str(path), exit_code=2
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return key


# --------------------------------------------------------------------------- tags


def tag(purpose: str, *parts: bytes, key: bytes | None = None) -> bytes:
    """HMAC-SHA256 under the state key over `purpose` and the length-prefixed `parts`."""
    mac = hmac.new(state_key() if key is None else key, digestmod=hashlib.sha256)
    mac.update(purpose.encode("ascii") + b"\0")
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.digest()


def check(found: bytes, purpose: str, *parts: bytes) -> bool:
    return hmac.compare_digest(found, tag(purpose, *parts))


# --------------------------------------------------------------------------- signed JSON documents


def _canonical(doc: dict[str, Any]) -> bytes:
    body = {k: v for k, v in doc.items() if k != SIGNATURE_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def signature(doc: dict[str, Any]) -> str:
    """The ``signature`` member of `doc` (a report): scheme, key id and HMAC of the rest, canonical."""
    return f"{_SCHEME}:{key_id().hex()}:{tag('report', _canonical(doc)).hex()}"


def sign_json_text(text: str) -> str:
    """`text` (a JSON object, as a report writer formatted it) with its ``signature`` member added
    last; anything that is not a JSON object is returned unchanged."""
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    if not isinstance(doc, dict):
        return text
    member = json.dumps(signature(doc))
    if SIGNATURE_FIELD in doc:  # a document that carries one already: rewritten, not patched
        doc[SIGNATURE_FIELD] = json.loads(member)
        return json.dumps(doc, indent=2) + "\n"
    body = text.rstrip()
    inner = body[:-1].rstrip()
    sep = "" if inner.endswith("{") else ","
    return f'{inner}{sep}\n  "{SIGNATURE_FIELD}": {member}\n}}\n'


def json_problem(doc: dict[str, Any]) -> str | None:
    """None when `doc`'s ``signature`` checks under the state key; otherwise why it is not trusted."""
    found = doc.get(SIGNATURE_FIELD)
    if found is None:
        return "has no signature (written by an older porter, or edited)"
    parts = found.split(":") if isinstance(found, str) else []
    if len(parts) != 3 or parts[0] != _SCHEME:
        return "has a malformed signature (edited)"
    try:
        ident, mac = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
    except ValueError:
        return "has a malformed signature (edited)"
    if not hmac.compare_digest(ident, key_id()):
        return "was signed with another state key (rotated, or written on another machine)"
    if not check(mac, "report", _canonical(doc)):
        return "failed its signature check (edited after porter wrote it)"
    return None


__all__ = [
    "KEY_NAME",
    "SIGNATURE_FIELD",
    "StateWarning",
    "check",
    "config_dir",
    "json_problem",
    "key_id",
    "key_path",
    "rotate",
    "sign_json_text",
    "signature",
    "state_key",
    "tag",
    "warn",
]
