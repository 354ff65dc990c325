"""porter.includes: the header walk never opens a FIFO or a device and skips headers over the size cap."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from porter import files
from porter.errors import UsageError
from porter.includes import reachable, resolve_local_include
from porter.scan.macros import collect

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _walk(main: Path) -> list[str]:
    return [os.path.basename(p) for p, _ in reachable([(str(main), None)])]


@needs_fifo
def test_fifo_header_is_skipped_with_a_warning(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.cuh")
    (tmp_path / "ok.cuh").write_text("#define KERNEL __global__\n")
    main = tmp_path / "main.cu"
    main.write_text('#include "ok.cuh"\n#include "pipe.cuh"\nKERNEL void k() {}\n')
    start = time.monotonic()
    with pytest.warns(files.InputWarning) as caught:
        found = _walk(main)
    assert time.monotonic() - start < 5
    assert found == ["main.cu", "ok.cuh"]
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f'{main}:2: #include "pipe.cuh": header {tmp_path / "pipe.cuh"} skipped: ')
    assert "FIFO" in message


@needs_fifo
def test_strict_walk_refuses_a_fifo_header_naming_the_include(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.cuh")
    main = tmp_path / "main.cu"
    main.write_text('// a comment\n#include "pipe.cuh"\n__global__ void k() {}\n')
    with pytest.raises(UsageError) as err:
        collect([(str(main), None)], strict=True)
    assert err.value.exit_code == 2
    assert str(err.value).startswith(f'{main}:2: #include "pipe.cuh" names {tmp_path / "pipe.cuh"}, a FIFO')


def test_device_include_is_never_read(tmp_path: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    main = tmp_path / "main.cu"
    main.write_text('#include "/dev/zero"\n__global__ void k() {}\n')
    with pytest.warns(files.InputWarning, match="character device"):
        assert _walk(main) == ["main.cu"]
    with pytest.raises(UsageError, match=r':1: #include "/dev/zero" names /dev/zero, a character device'):
        collect([(str(main), None)], strict=True)


@needs_fifo
def test_a_special_file_is_found_not_searched_past(tmp_path: Path) -> None:
    """As a compiler would: the first candidate that exists is the header, even when it is a FIFO."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "h.cuh").write_text("#define A 1\n")
    os.mkfifo(tmp_path / "h.cuh")
    found = resolve_local_include("h.cuh", tmp_path / "main.cu", [inc])
    assert found == tmp_path / "h.cuh"


def test_header_over_the_cap_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.cuh").write_text("#define KERNEL __global__\n" + "// padding\n" * 200)
    main = tmp_path / "main.cu"
    main.write_text('#include "big.cuh"\nKERNEL void k() {}\n')
    monkeypatch.setenv(files.MAX_BYTES_ENV, "1000")
    with pytest.warns(files.InputWarning, match="too large"):
        table = collect([(str(main), None)], strict=True)  # a big header is only skipped, even strictly
    assert "KERNEL" not in table


def test_given_special_input_is_skipped_silently(tmp_path: Path) -> None:
    """The inputs themselves are reported by the callers that read them (exit 2 there)."""
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    assert list(reachable([("/dev/zero", None)])) == []
