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


def test_runs_are_compared_from_their_files_a_line_at_a_time(tmp_path: Path) -> None:
    """A run's stdout is the file it was streamed to: comparing two outputs holds a line, not the
    output (the probe's 1 GB program took 5.5 GB of porter's memory, the output held whole)."""
    import tracemalloc

    lines = [f"value {i} = {i * 0.5}\n" for i in range(20_000)]
    (tmp_path / "a.txt").write_text("".join(lines))
    lines[12_345] = "value 12345 = 7.25\n"
    (tmp_path / "b.txt").write_text("".join(lines))
    assert (tmp_path / "a.txt").stat().st_size > 350_000
    a, b = RunOutput(0, tmp_path / "a.txt"), RunOutput(0, tmp_path / "b.txt")
    tracemalloc.start()
    try:
        diff = compare(a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert diff == ["stdout line 12346: original 'value 12345 = 6172.5', port 'value 12345 = 7.25'"]
    assert peak < 64 << 10
    assert compare(a, RunOutput(0, "".join(lines))) == diff  # a file and a text compare alike


def test_written_files_stay_on_disk_and_large_ones_are_compared_by_digest(tmp_path: Path) -> None:
    from dataclasses import replace

    rule = replace(default_rule(), max_file_bytes=1000)
    before = snapshot(tmp_path)
    (tmp_path / "small.txt").write_text("x = 1\n")
    (tmp_path / "big.bin").write_bytes(b"\x01" * 5000)
    (tmp_path / "link").symlink_to(tmp_path / "small.txt")  # a link is never read through
    mine = written_files(tmp_path, before, rule)
    assert mine["small.txt"] == tmp_path / "small.txt" and "link" not in mine  # its path, not its bytes
    assert isinstance(mine["big.bin"], tuple) and mine["big.bin"][0] == 5000
    other = {"small.txt": b"x = 2\n", "big.bin": tmp_path / "big.bin"}
    (tmp_path / "big.bin").write_bytes(b"\x01" * 4999 + b"\x02")
    assert compare(RunOutput(0, "", mine), RunOutput(0, "", other), rule) == [
        "file big.bin: differs (5000 bytes in the original, 5000 in the port)",
        "file small.txt line 1: original 'x = 1', port 'x = 2'",
    ]


def test_what_varies_between_runs_of_the_original_is_bounded() -> None:
    from dataclasses import replace

    from porter.harness.outputs import unstable

    rule = replace(default_rule(), max_varying_lines=100)
    first = RunOutput(0, "".join(f"seed {i}\n" for i in range(5000)))
    second = RunOutput(0, "".join(f"seed {i + 1}\n" for i in range(5000)))
    few = unstable(first, RunOutput(0, "".join(f"seed {i + (i < 30)}\n" for i in range(5000))), rule)
    assert few.count == 30 and len(few.describe()) == 21  # 20 lines named, then how many more
    many = unstable(first, second, rule)
    assert many.stdout and not many.lines
    assert many.describe() == [
        "stdout: 100 or more lines vary between two runs of the original: stdout not compared"
    ]
    assert compare(first, RunOutput(0, "other\n"), rule, many) == []  # stdout is not compared then
