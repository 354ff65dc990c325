"""porter.harness.races: a checker's race in a port said with both accesses, and traced to the original
only where the port keeps the original's statements and synchronisation (the fixture program's real
OpenCL translation, and the same with one barrier dropped or the race moved into code porter adds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from porter.backends import CheckerFinding

from porter.harness import races

ROOT = Path(__file__).resolve().parents[3]
MAIN = ROOT / "tests" / "fixtures" / "programs" / "warp_tagged_histogram" / "main.cu"
ORIGINAL = [("main.cu", MAIN.read_text())]


@pytest.fixture(scope="module")
def port() -> str:
    from porter.backends.opencl.translate import translate_to_opencl

    return translate_to_opencl(MAIN.read_text(), str(MAIN)).text


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def _judge(source: str, lines: tuple[int, int], entry: str = "histogram") -> str | None:
    return races.originals_race(
        source,
        races.barrier_calls("opencl"),
        entry,
        "histogram",
        lines,
        ORIGINAL,
        races.barrier_calls("cuda"),
    )


def test_a_race_between_statements_the_port_keeps_is_the_originals(port: str) -> None:
    read, write = _line(port, "count = hist[bin] & 0x07FFFFFFu;"), _line(port, "hist[bin] = count;")
    why = _judge(port, (read, write))
    assert why is not None
    assert "`tagged_add` (main.cu line 14)" in why
    assert "histogram: 2" in why and "tagged_add: 0" in why


def test_a_port_that_drops_a_barrier_keeps_its_race(port: str) -> None:
    # the first barrier of the kernel gone: the zeroing races with the counting, and the port's race is its own
    first = port.index("barrier(")
    dropped = port[:first] + "/* gone */" + port[port.index(";", first) + 1 :]
    read, write = _line(dropped, "count = hist[bin] & 0x07FFFFFFu;"), _line(dropped, "hist[bin] = count;")
    assert _judge(dropped, (read, write)) is None
    # a barrier added where the original has none is no more the original's synchronisation
    added = port.replace("hist[bin] = count;", "hist[bin] = count; barrier(CLK_LOCAL_MEM_FENCE);")
    assert (
        _judge(added, (_line(added, "count = hist[bin] & 0x07FFFFFFu;"), _line(added, "hist[bin] = count;")))
        is None
    )


def test_a_race_in_code_porter_adds_or_outside_the_kernels_reach_stays_the_ports(port: str) -> None:
    helper = port.replace("hist[bin] = count;", "porter_store(hist, bin, count);")
    assert _judge(helper, (_line(helper, "count = hist"), _line(helper, "porter_store"))) is None
    # a line outside every function the kernel reaches (or past the source's end)
    assert _judge(port, (1, _line(port, "hist[bin] = count;"))) is None
    assert _judge(port, (len(port.splitlines()) + 5, 3)) is None
    # a kernel the original does not define under that name (nor under the original's kernel name)
    # a helper the kernel reaches defined twice in the port (overloads): its barriers cannot be compared
    twice = port.replace("__kernel", "void tagged_add(float x) { }\n__kernel", 1)
    assert _judge(twice, (_line(twice, "count = hist"), _line(twice, "hist[bin] = count;"))) is None
    renamed = port.replace("tagged_add", "tagged_add2")
    assert _judge(renamed, (_line(renamed, "count = hist"), _line(renamed, "hist[bin] = count;"))) is None


def test_a_race_reads_with_both_sides_and_their_work_items() -> None:
    race = CheckerFinding(
        "data-race",
        "Read-write data race at local memory address 0x1000000000044",
        18,
        "count = hist[bin] & 0x07FFFFFFu;",
        20,
        "hist[bin] = count;",
        ("Global(12,0,0) Local(12,0,0) Group(0,0,0)", "Global(9,0,0) Local(9,0,0) Group(0,0,0)"),
    )
    said = races.where(race)
    assert said == (
        " at lines 18 and 20 (count = hist[bin] & 0x07FFFFFFu; / hist[bin] = count;)"
        " between work-items (12,0,0) and (9,0,0) of work-group (0,0,0)"
    )
    reason = f"oclgrind: data-race: {race.message}{said} at launch 1 of run 1"
    assert races.race_lines(reason) == (18, 20)
    assert races.one_warp(reason)
    assert not races.one_warp(reason.replace("(9,0,0) of", "(40,0,0) of"))  # lanes of two warps
    # one line: as before; another kind of finding never reads as a race
    oob = CheckerFinding("out-of-bounds", "Invalid write of size 4", 3, "a[i + 1] = 1.0f;")
    assert races.where(oob) == " at line 3 (a[i + 1] = 1.0f;)"
    assert races.race_lines(f"oclgrind: out-of-bounds: {oob.message}{races.where(oob)}") is None
    other = CheckerFinding("data-race", "Write-write data race", 5, None, 5, None, ("a", "b", "c"))
    assert races.where(other) == " at lines 5 and 5"
