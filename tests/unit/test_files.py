"""porter.files: special files refused by type before any open, and the size cap on inputs and headers."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from porter import files
from porter.errors import UsageError

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.cu"
    os.mkfifo(path)
    return path


@needs_fifo
def test_fifo_input_is_refused_without_blocking(fifo: Path) -> None:
    start = time.monotonic()
    with pytest.raises(UsageError) as err:
        files.read_input(fifo)
    assert time.monotonic() - start < 5  # opening a FIFO for reading would wait for a writer
    assert err.value.exit_code == 2
    assert (
        str(err.value) == f"{fifo}: not a regular file (a FIFO (named pipe)); porter reads regular files only"
    )


def test_character_device_is_refused() -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    with pytest.raises(UsageError, match=r"^/dev/zero: not a regular file \(a character device\)"):
        files.read_input("/dev/zero")


def test_socket_is_refused(tmp_path: Path) -> None:
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no Unix sockets")
    path = tmp_path / "s.cu"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        with pytest.raises(UsageError, match=r"not a regular file \(a socket\)"):
            files.read_input(path)
    finally:
        sock.close()


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or directory"):
        files.read_input(tmp_path / "nope.cu")
    with pytest.raises(UsageError, match=r"not a regular file \(a directory\)"):
        files.read_input(tmp_path)


def test_size_cap_default_and_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(files.MAX_BYTES_ENV, raising=False)
    assert files.max_input_bytes() == 16 * 1024 * 1024
    path = tmp_path / "big.cu"
    path.write_bytes(b"x" * 2000)
    monkeypatch.setenv(files.MAX_BYTES_ENV, "1000")
    with pytest.raises(UsageError) as err:
        files.read_input(path)
    message = str(err.value)
    assert message.startswith(f"{path}: too large (")
    assert files.MAX_BYTES_ENV in message and "\n" not in message
    monkeypatch.setenv(files.MAX_BYTES_ENV, "2000")
    assert files.read_input(path) == b"x" * 2000


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5"])
def test_bad_cap_value_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(files.MAX_BYTES_ENV, value)
    with pytest.raises(UsageError, match=files.MAX_BYTES_ENV):
        files.max_input_bytes()


def test_read_text_names_the_line_of_a_bad_byte_in_porters_own_formats(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(b"int x;\n\xff\n")
    with pytest.raises(UsageError) as err:
        files.read_text(path, "spec file", strict=True)
    assert str(err.value) == f"{path}:2: spec file: not UTF-8 text (byte 0xff)"


def test_a_users_text_keeps_bytes_that_are_not_utf8_and_refuses_nul(tmp_path: Path) -> None:
    raw = (
        "// (c) caf\u00e9 \u2014 UTF-8\n".encode()
        + b"// Copyright \xa9 1999 Caf\xe9\n__global__ void k() {}\n"
    )
    path = tmp_path / "latin1.cu"
    path.write_bytes(raw)
    text = files.read_text(path)
    assert files.encode_text(text) == raw  # byte for byte
    assert "\u00e9 \u2014" in text  # the UTF-8 part decodes as UTF-8
    assert files.printable(text).splitlines()[1] == "// Copyright \u00a9 1999 Caf\u00e9"  # shown as Latin-1
    assert files.printable("plain") == "plain"
    (tmp_path / "nul.cu").write_bytes(b"int x;\n\0\n")
    with pytest.raises(UsageError, match=r"nul.cu:2: binary file \(contains NUL bytes\)"):
        files.read_text(tmp_path / "nul.cu")


@needs_fifo
def test_header_refused_with_a_warning(fifo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.warns(files.InputWarning, match="header skipped: not a regular file"):
        assert files.read_header(fifo) is None
    big = tmp_path / "big.cuh"
    big.write_bytes(b"#define X 1\n" * 200)
    monkeypatch.setenv(files.MAX_BYTES_ENV, "100")
    with pytest.warns(files.InputWarning, match="too large"):
        assert files.read_header(big) is None
    assert files.read_header(tmp_path / "missing.cuh") is None  # silently: callers search on
