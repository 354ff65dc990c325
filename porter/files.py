"""Reading the user's files safely: regular files only, and none larger than a cap.

A FIFO, a socket or a character or block device (``/dev/zero``) given as an input, or reached
through ``#include``, would make a read block forever or never end; porter refuses such a path by
its type (``os.stat`` + ``S_ISREG``) before opening it, and checks the type again on the opened
descriptor (the path may have been swapped in between).  Inputs and headers are capped at
:data:`DEFAULT_MAX_INPUT_BYTES` (16 MiB), overridable through the environment variable
``PORTER_MAX_INPUT_BYTES`` (a number of bytes); the read itself never takes more than the cap.

An input that cannot be read is a :class:`~porter.errors.UsageError` (exit 2) naming the file; a
header porter skips is an :class:`InputWarning` (the CLI prints ``porter: warning: ...``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import stat
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from porter.errors import UsageError

# Every user file read from disk, by absolute path: how tests hold "the input is read once".
READS: Counter[str] = Counter()

# The files one command has read (absolute path -> bytes, or the refusal/error the read met): while a
# snapshot is open, each file is read from disk once and every later read sees the same bytes.
_SNAPSHOT: ContextVar[dict[str, bytes | Exception] | None] = ContextVar("porter_snapshot", default=None)
F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def snapshot() -> Iterator[None]:
    """Within this block every user file is read once (a nested block shares the outer one)."""
    if _SNAPSHOT.get() is not None:
        yield
        return
    token = _SNAPSHOT.set({})
    try:
        yield
    finally:
        _SNAPSHOT.reset(token)


def reads_once(fn: F) -> F:
    """Run `fn` (a command's workflow) inside :func:`snapshot`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with snapshot():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


def carried(fn: F) -> F:
    """`fn`, to run on another thread inside this thread's :func:`snapshot` (a worker thread starts with
    an empty context: without this, what it reads would be read from disk again)."""
    context = contextvars.copy_context()

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return context.copy().run(fn, *args, **kwargs)  # a copy per call: calls may overlap

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


MAX_BYTES_ENV = "PORTER_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 16 * 1024 * 1024


class InputWarning(UserWarning):
    """A file porter skipped (a header too large, or not a regular file); shown as a warning line."""


def warn(message: str) -> None:
    """Report a skipped file as a one-line warning (shown once per message)."""
    warnings.warn(message, InputWarning, stacklevel=2)


def max_input_bytes() -> int:
    """The largest input or header porter reads, in bytes (``PORTER_MAX_INPUT_BYTES``, else 16 MiB)."""
    raw = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise UsageError(f"{MAX_BYTES_ENV} must be a positive number of bytes, not {raw!r}")
    return value


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} bytes"


def too_large(size: int, limit: int) -> str:
    """The reason a file of ``size`` bytes is refused, naming the limit and how to raise it."""
    return (
        f"too large ({_human(size)}; porter reads files of at most {_human(limit)}, "
        f"set {MAX_BYTES_ENV} to raise the limit)"
    )


def kind_of(mode: int) -> str:
    """What a non-regular file is, for a message: 'a FIFO', 'a character device'..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_regular(mode: int) -> str:
    """The reason a file of this type is refused."""
    kind = kind_of(mode)
    if kind == "not a regular file":
        return "not a regular file; porter reads regular files only"
    return f"not a regular file ({kind}); porter reads regular files only"


def refusal(path: str | os.PathLike[str], limit: int | None = None) -> str | None:
    """Why porter would not read ``path`` (its type or its size, from ``os.stat``), or None.

    Missing or unreadable paths are not refused here (None): the read reports them."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return not_regular(st.st_mode)
    limit = max_input_bytes() if limit is None else limit
    if st.st_size > limit:
        return too_large(st.st_size, limit)
    return None


class _Refused(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _read(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; _Refused or OSError otherwise (from the
    open :func:`snapshot` when the file was read before)."""
    seen = _SNAPSHOT.get()
    if seen is None:
        return _read_disk(path, limit)
    key = os.path.abspath(path)
    if key not in seen:
        try:
            seen[key] = _read_disk(path, limit)
        except (_Refused, OSError, ValueError) as err:
            seen[key] = err
    found = seen[key]
    if isinstance(found, Exception):
        raise found
    if len(found) > limit:
        raise _Refused(too_large(len(found), limit))
    return found


def _read_disk(path: str | os.PathLike[str], limit: int) -> bytes:
    st = os.stat(path)  # by type before opening: opening a FIFO blocks, a tape device rewinds...
    READS[os.path.abspath(path)] += 1
    if not stat.S_ISREG(st.st_mode):
        raise _Refused(not_regular(st.st_mode))
    if st.st_size > limit:
        raise _Refused(too_large(st.st_size, limit))
    # O_NONBLOCK: should the path have become a FIFO since the stat, the open does not wait
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(not_regular(st.st_mode))
        data = fh.read(limit + 1)
    if len(data) > limit:  # it grew since the stat
        raise _Refused(too_large(len(data), limit))
    return data


def read_input(path: str | os.PathLike[str], what: str = "") -> bytes:
    """The bytes of an input file; UsageError (exit 2) naming it when it is missing, a directory, a
    special file, larger than :func:`max_input_bytes` or unreadable.  ``what``: a word for the
    message ("spec file")."""
    name = os.fspath(path)
    prefix = f"{what}: " if what else ""
    try:
        return _read(name, max_input_bytes())
    except _Refused as err:
        raise UsageError(f"{prefix}{err.reason}", path=name) from None
    except FileNotFoundError:
        raise UsageError(f"{prefix}no such file or directory", path=name) from None
    except IsADirectoryError:
        raise UsageError(f"{prefix}is a directory", path=name) from None
    except ValueError as err:  # an embedded NUL byte in the name
        raise UsageError(f"{prefix}not a usable path ({err})", path=repr(name)) from None
    except OSError as err:
        raise UsageError(f"{prefix}cannot read: {err.strerror or err}", path=name) from None


def read_text(path: str | os.PathLike[str], what: str = "", *, strict: bool = False) -> str:
    """:func:`read_input` as text (:func:`decode_text`); UsageError for a binary file (NUL bytes).
    ``strict``: a file of porter's own formats (a spec file), which must be UTF-8: UsageError naming
    the file and line of a byte that is not."""
    data = read_input(path, what)
    prefix = f"{what}: " if what else ""
    if strict:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = data[: err.start].count(b"\n") + 1
            raise UsageError(
                f"{prefix}not UTF-8 text (byte 0x{data[err.start]:02x})", path=os.fspath(path), line=line
            ) from None
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise UsageError(f"{prefix}binary file (contains NUL bytes)", path=os.fspath(path), line=line)
    return decode_text(data)


def decode_text(data: bytes, path: str | os.PathLike[str] | None = None) -> str:
    """`data` as text, losslessly: UTF-8, with every byte that is not (Latin-1, Windows-1252 in a
    comment) kept as a surrogate escape, so that :func:`encode_text` gives back the same bytes.
    Everything porter writes from user text encodes it that way; what is shown to a person or a
    model goes through :func:`printable` first."""
    return data.decode("utf-8", "surrogateescape")


def encode_text(text: str) -> bytes:
    """The bytes `text` was decoded from by :func:`decode_text`."""
    return text.encode("utf-8", "surrogateescape")


def printable(text: str) -> str:
    """`text` for a terminal, a report or a prompt: each byte kept as a surrogate escape shown as the
    Windows-1252 (Latin-1) character it most likely is (``\\xa9`` -> ``©``)."""
    if not any("\udc80" <= ch <= "\udcff" for ch in text):
        return text
    return "".join(
        bytes([ord(ch) - 0xDC00]).decode("cp1252", "replace") if "\udc80" <= ch <= "\udcff" else ch
        for ch in text
    )


def read_header(path: str | os.PathLike[str], quiet: bool = False) -> bytes | None:
    """The bytes of a header porter reads for its definitions, or None: missing or unreadable
    (silently), or refused by type or size (with an :class:`InputWarning` unless ``quiet``)."""
    try:
        return _read(path, max_input_bytes())
    except _Refused as err:
        if not quiet:
            warn(f"{os.fspath(path)}: header skipped: {err.reason}")
        return None
    except (OSError, ValueError):
        return None


def is_regular(path: str | os.PathLike[str]) -> bool:
    """Does ``path`` name a regular file (following symlinks)?  False for a missing path."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def exists(path: str | os.PathLike[str]) -> bool:
    """Does ``path`` name anything at all (a FIFO or a device too)?"""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True
