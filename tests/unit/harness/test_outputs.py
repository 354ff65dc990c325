"""porter.harness.outputs: how two runs of a program are compared (the rule of outputs.toml)."""

from __future__ import annotations

from pathlib import Path

from porter.harness.outputs import (
    RunOutput,
    compare,
    default_rule,
    is_masked,
    snapshot,
    verdict_words,
    with_tolerance,
    written_files,
)


def test_lines_reporting_time_or_throughput_are_masked_and_others_are_not() -> None:
    rule = default_rule()
    for line in (
        "Time for CUDA kernels:\t0.003602 sec",
        "kernel took 12.5 ms",
        "Throughput = 0.1011 GB/s, Time = 77.29 ms, Size = 1048576 fp32 elements",
        "Performance= 1.23 GFlop/s",
        "elapsed: 3",
        "TIME TO SEND TO GPU: 0.000123",
    ):
        assert is_masked(line, rule), line
    for line in ("checksum = 1379.215392", "n = 1000", "PASS", "Result = 12 items", "sms = 8"):
        assert not is_masked(line, rule), line


def test_numbers_agree_within_the_tolerance_and_text_must_be_equal() -> None:
    a = RunOutput(0, "checksum = 1379.215392\nmax err 1.0e-07\nPASS\n")
    close = RunOutput(0, "checksum   =  1379.2154\nmax err 1.1e-07\nPASS\n")
    assert compare(a, close) == []
    far = RunOutput(0, "checksum = 1379.9\nmax err 1.0e-07\nPASS\n")
    diff = compare(a, far)
    assert diff == ["stdout line 1: original 'checksum = 1379.215392', port 'checksum = 1379.9'"]
    text = RunOutput(0, "checksum = 1379.215392\nmin err 1.0e-07\nPASS\n")
    assert compare(a, text)[0].startswith("stdout line 2:")
    # a tighter tolerance turns the close run into a difference
    assert compare(a, close, with_tolerance(rtol=1e-9, atol=0.0))


def test_masked_lines_are_skipped_on_both_sides_and_line_numbers_are_the_originals() -> None:
    a = RunOutput(0, "n = 4\ntime 1.5 ms\nsum = 10\n")
    b = RunOutput(0, "n = 4\nsum = 11\n")
    assert compare(a, b) == ["stdout line 3: original 'sum = 10', port 'sum = 11'"]


def test_exit_codes_verdict_words_and_missing_or_extra_lines_are_differences() -> None:
    a = RunOutput(0, "n = 1\nTest passed\n")
    b = RunOutput(1, "n = 1\nTest FAILED\nextra\n")
    diff = compare(a, b)
    assert diff[0] == "exit code: original 0, port 1"
    assert diff[1] == "verdict: the original prints passed, the port FAILED"
    assert any(d.startswith("stdout line 2:") for d in diff)
    assert diff[-1] == "stdout: extra line in the port: 'extra'"
    assert verdict_words("all PASS\nno error here\n", default_rule()) == ["PASS", "error"]


def test_nan_and_inf_compare_as_themselves() -> None:
    assert compare(RunOutput(0, "x = nan\ny = inf\n"), RunOutput(0, "x = nan\ny = inf\n")) == []
    assert compare(RunOutput(0, "x = nan\n"), RunOutput(0, "x = 0.5\n"))


def test_written_files_are_compared_as_text_or_bytes(tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    (tmp_path / "result.txt").write_text("1.000001 2\n")
    (tmp_path / "raw.bin").write_bytes(b"\x00\x01\x02")
    rule = default_rule()
    mine = written_files(tmp_path, before, rule)
    assert set(mine) == {"result.txt", "raw.bin"}
    a = RunOutput(0, "", mine)
    b = RunOutput(0, "", {"result.txt": b"1.0000011 2\n", "raw.bin": b"\x00\x01\x03"})
    assert compare(a, b) == [
        "file raw.bin: bytes differ from offset 2 (3 bytes in the original, 3 in the port)"
    ]
    c = RunOutput(0, "", {"result.txt": b"1.5 2\n"})
    diff = compare(a, c)
    assert "file raw.bin: written by the original only" in diff
    assert any(d.startswith("file result.txt line 1:") for d in diff)


def test_only_new_or_changed_files_count_as_written(tmp_path: Path) -> None:
    (tmp_path / "input.dat").write_text("data\n")
    before = snapshot(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "o.txt").write_text("x\n")
    assert list(written_files(tmp_path, before, default_rule())) == ["out/o.txt"]


def test_the_number_of_differences_listed_is_capped() -> None:
    rule = default_rule()
    a = RunOutput(0, "".join(f"v{i} = {i}\n" for i in range(100)))
    b = RunOutput(0, "".join(f"v{i} = {i + 1}\n" for i in range(100)))
    diff = compare(a, b, rule)
    assert len(diff) == rule.max_differences + 1
    assert diff[-1] == f"... and {100 - rule.max_differences} more difference(s)"
