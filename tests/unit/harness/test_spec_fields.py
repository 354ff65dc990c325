"""Malformed spec-file fields and sizes are UsageErrors (exit 2) naming the file, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.harness.spec import check_size, find_spec_file, load_spec_file

SPEC = """
[kernels.k]
grid = ["(n + 255) / 256"]
block = ["256"]
sizes = [{ n = 4096 }]
{top}

[[kernels.k.args]]
{arg}

[[kernels.k.args]]
name = "n"
role = "scalar"
dtype = "int32"
value = "n"
"""
FIRST_ARG = {"name": '"x"', "role": '"in"', "dtype": '"float32"', "shape": '["n"]'}


def _write(tmp_path: Path, top: str = "", arg: str = "") -> Path:
    """The spec above, with ``top`` added to the kernel's table and ``arg``'s lines (``key = value``)
    replacing or adding fields of its first argument."""
    fields = dict(FIRST_ARG)
    for line in arg.splitlines():
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip()
    first = "\n".join(f"{k} = {v}" for k, v in fields.items())
    path = tmp_path / "porter.toml"
    path.write_text(SPEC.replace("{top}", top).replace("{arg}", first))
    return path


@pytest.mark.parametrize(
    ("top", "arg", "message"),
    [
        ("", 'role = "sideways"', "role must be in, out, inout or scalar, not 'sideways'"),
        ("", "role = 5", "args[0].role: expected a string, got 5"),
        ("", "dtype = 5", "args[0].dtype: expected a string, got 5"),
        ("", 'dtype = "complex64"', "unknown dtype 'complex64'"),
        ("", 'dtype = "float128"', "unknown dtype 'float128'"),
        ("", "name = 5", "args[0].name: expected a string"),
        ("", 'low = "abc"', "args[0].low: expected a number, got 'abc'"),
        ("", "low = [1]", "args[0].low: expected a number"),
        ("", "low = inf", "args[0].low: expected a finite number"),
        ("", "low = 5.0\nhigh = -5.0", "low (5) is above high (-5)"),
        ("", "low = -1.7e308\nhigh = 1.7e308", "too wide"),
        ("", 'shape = ["-n"]', "argument x has -4096 elements"),
        ("", 'shape = ["n*n*n*n*n*n*n"]', "integer overflow"),
        ("", 'shape = ["n*n*n*n"]', "more than half this machine's memory"),
        ("", 'shape = ["' + "(" * 3000 + "n" + ")" * 3000 + '"]', "too deeply nested"),
        ('rtol = "x"', "", "rtol: expected a number, got 'x'"),
        ("atol = -1.0", "", "atol: must be at least 0"),
        ('float_atomics = "no"', "", "float_atomics: expected true or false"),
        ("template_args = 5", "", "template_args: expected a list"),
        ("hidden_sizes = [{ n = -1 }]", "", "size values must be positive integers"),
        ("hidden_sizes = [{ n = 4.5 }]", "", "size values must be positive integers"),
        (
            "hidden_sizes = [{ n = 99999999999999 }]",
            "",
            "scalar argument n (int32) cannot hold 99999999999999",
        ),
        ("bench_sizes = [{ n = 9223372036854775807 }]", "", "cannot hold"),
        ('shared_bytes = "-5"', "", "dynamic shared memory of -5 bytes is out of range"),
        ('shared_bytes = "1 << 99999999"', "", "shift count 99999999 out of range"),
        ("constants = 5", "", "constants: expected"),
        (
            'constants = [{ name = "c", dtype = "float", shape = ["4"], low = "q" }]',
            "",
            "low: expected a number",
        ),
    ],
)
def test_malformed_fields(tmp_path: Path, top: str, arg: str, message: str) -> None:
    path = _write(tmp_path, top, arg)
    with pytest.raises(UsageError) as err:
        load_spec_file(path)
    text = str(err.value)
    assert err.value.exit_code == 2
    assert text.startswith(f"{path}: "), text
    assert message in text, text
    assert "\n" not in text


def test_the_template_itself_loads(tmp_path: Path) -> None:
    spec = load_spec_file(_write(tmp_path))["k"]
    assert [a.name for a in spec.args] == ["x", "n"]
    check_size(spec, {"n": 1 << 20})
    with pytest.raises(ValueError, match="cannot hold"):
        check_size(spec, {"n": 1 << 40})


def test_binary_spec_file(tmp_path: Path) -> None:
    path = tmp_path / "porter.toml"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match=r":1: spec file: not UTF-8 text \(byte 0xff\)"):
        load_spec_file(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_under_a_spec_files_name_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    os.mkfifo(tmp_path / "k.cu.porter.toml")
    with pytest.raises(UsageError, match=r"k.cu.porter.toml: spec file: not a regular file \(a FIFO"):
        find_spec_file(src)
