"""porter.source: the input read once, parsed once, whatever the command does with it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from porter import grammars
from porter.errors import UsageError
from porter.files import READS, read_input, snapshot
from porter.source import load

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples" / "cuda").glob("*.cu"))


def _start_counting() -> None:
    READS.clear()
    grammars.forget()


def _assert_read_and_parsed_once(inputs: list[Path]) -> None:
    """Every user file the command read came off the disk once; each input's bytes (and any other
    text) were parsed once."""
    assert READS, "the command read nothing: the counter is not wired"
    again = {os.path.basename(p): n for p, n in READS.items() if n > 1}
    assert not again, f"read more than once: {again}"
    for path in inputs:
        assert READS[str(path.resolve())] == 1, f"{path.name} was not read through porter.files"
        key = ("cuda", grammars.digest(path.read_bytes()))
        assert grammars.PARSES[key] == 1, f"{path.name} parsed {grammars.PARSES[key]} times"
    twice = [k for k, n in grammars.PARSES.items() if n > 1]
    assert not twice, f"{len(twice)} texts parsed more than once"


def test_a_unit_holds_the_input_its_headers_and_its_scan() -> None:
    unit = load(ROOT / "samples" / "cuda" / "vector_add.cu", "port")
    assert unit.data == (ROOT / "samples" / "cuda" / "vector_add.cu").read_bytes()
    assert unit.text == unit.data.decode("utf-8")
    assert [Path(h).name for h in unit.headers] == ["common.cuh"]
    assert [k.name for k in unit.scan.kernels] == ["vector_add"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "is a directory"),
        (b"int main() { return 0; }\n", "no __global__ kernel found"),
        (b"__global__ void k(float* x) { x[0] = 1; }\n\x00\x01", "binary file"),
    ],
)
def test_load_refuses_bad_input_naming_the_file(tmp_path: Path, content: bytes | None, expected: str) -> None:
    target = tmp_path / "input.cu"
    if content is None:
        target.mkdir()
    else:
        target.write_bytes(content)
    with pytest.raises(UsageError, match=expected) as err:
        load(target, "port")
    assert err.value.path == str(target)


def test_a_file_whose_kernels_live_in_its_headers_is_told_which_header_to_give(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "k.cuh").write_text("__global__ void scale(float* x, int n) { x[0] *= 2; }\n")
    (tmp_path / "helpers.h").write_text("inline int twice(int v) { return 2 * v; }\n")  # no kernel: not named
    main = tmp_path / "main.cu"
    main.write_text('#include "inc/k.cuh"\n#include "helpers.h"\nint main() { return 0; }\n')
    with pytest.raises(UsageError) as err:
        load(main, "optimize")
    assert "no __global__ kernel found; the headers it includes define inc/k.cuh (scale)" in str(err.value)
    assert "give porter optimize that header" in str(err.value) and "helpers.h" not in str(err.value)


def test_a_snapshot_serves_the_first_read_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    path.write_bytes(b"first")
    READS.clear()
    with snapshot():
        assert read_input(path) == b"first"
        path.write_bytes(b"second, longer")
        assert read_input(path) == b"first"  # every stage of one command sees the same bytes
        with snapshot():  # nested: the same snapshot
            assert read_input(path) == b"first"
    assert READS[str(path)] == 1
    assert read_input(path) == b"second, longer"  # outside a command: read again


def test_a_refused_read_stays_refused_within_a_snapshot(tmp_path: Path) -> None:
    missing = tmp_path / "gone.cu"
    with snapshot():
        for _ in range(2):
            with pytest.raises(UsageError, match="no such file"):
                read_input(missing)
        missing.write_bytes(b"late")
        with pytest.raises(UsageError, match="no such file"):
            read_input(missing)


def test_tree_sitter_is_only_called_through_grammars_parse() -> None:
    """The count of parses holds only if nothing parses around it."""
    offenders = []
    for folder in ("porter", "backends"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if re.search(r"\bparser\(\s*[\"'\w]", text) or re.search(r"\bParser\(", text):
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"parse through porter.grammars.parse: {offenders}"


@pytest.mark.parametrize("sample", SAMPLES[:1], ids=lambda p: p.stem)
def test_port_translate_only_reads_and_parses_once(tmp_path: Path, sample: Path) -> None:
    from porter.workflows.options import OutputOptions
    from porter.workflows.port import port_file

    _start_counting()
    port_file(
        str(sample), ("hip", "opencl"), output=OutputOptions(str(tmp_path / "out")), translate_only=True
    )
    _assert_read_and_parsed_once([sample])


@pytest.mark.integration
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_is_read_and_parsed_once_by_port(tmp_path: Path, sample: Path) -> None:
    from porter.workflows.options import OutputOptions
    from porter.workflows.port import port_file

    _start_counting()
    port_file(
        str(sample), ("hip", "opencl"), output=OutputOptions(str(tmp_path / "out")), translate_only=True
    )
    _assert_read_and_parsed_once([sample])


@pytest.mark.integration
def test_a_full_port_reads_and_parses_once(tmp_path: Path) -> None:
    """Translation, spec inference, compiles and validation on the devices here."""
    from porter.harness.trial import ValidateOptions
    from porter.workflows.options import OutputOptions, RunOptions
    from porter.workflows.port import port_file

    sample = ROOT / "samples" / "cuda" / "vector_add.cu"
    _start_counting()  # one input set per size: every stage still runs, a third of the runs
    port_file(
        str(sample),
        ("hip", "opencl"),
        run=RunOptions(validate=ValidateOptions(trials=1)),
        output=OutputOptions(str(tmp_path / "out")),
    )
    _assert_read_and_parsed_once([sample])


@pytest.mark.integration
def test_bench_reads_and_parses_once() -> None:
    from porter.backends import get_backend

    from porter.workflows.bench import bench_file

    emulators = [d for d in get_backend("cpu").devices() if d.kind == "emulator"]
    if not emulators:
        pytest.skip("the CPU emulator is unavailable here (no C++ compiler)")
    sample = ROOT / "samples" / "cuda" / "vector_add.cu"
    _start_counting()
    bench_file(str(sample), devices=emulators[:1])
    _assert_read_and_parsed_once([sample])


def test_scan_reads_each_file_once() -> None:
    from porter.scan import scan_paths

    _start_counting()
    result = scan_paths([str(ROOT / "samples" / "cuda")])
    assert len(result.files) == len(SAMPLES) + 1  # and common.cuh
    _assert_read_and_parsed_once(SAMPLES)


def test_a_latin1_byte_is_kept_and_every_kernel_still_found(tmp_path: Path) -> None:
    raw = b"// Copyright \xa9 2009 Caf\xe9\n__global__ void k(float* x) { x[0] = 1; } // \xab\xbb\n"
    target = tmp_path / "input.cu"
    target.write_bytes(raw)
    unit = load(target, "port")
    assert unit.data == raw and unit.text.encode("utf-8", "surrogateescape") == raw
    assert [k.name for k in unit.scan.kernels] == ["k"]


UNITY = ROOT / "tests" / "fixtures" / "programs" / "unity_types"


def test_a_unity_build_is_read_with_its_included_kernel_files_in_place() -> None:
    """wrapper.cu has no kernel: it includes params.h, then step.cu, whose kernel needs params.h's
    types.  Read as a unity build, the unit holds step's kernel after those types, and step.cu's own
    folder joins the include path; read plainly it is refused, naming the file with the kernel."""
    wrapper = UNITY / "kernel" / "wrapper.cu"
    unit = load(wrapper, "bench", unity=True)
    assert [k.name for k in unit.scan.kernels] == ["step"]
    assert unit.text.index('#include "../params.h"') < unit.text.index("__global__ void step")
    assert '#include "./step.cu"' not in unit.text
    assert str(UNITY / "kernel") in unit.include_dirs
    with pytest.raises(UsageError, match=r"step\.cu \(step\)"):
        load(wrapper, "bench")


def test_a_unity_build_inlines_each_file_once_and_leaves_headers_alone(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text('#include "t.h"\n__global__ void k(T* p) { p[0] = 1; }\n')
    (tmp_path / "t.h").write_text("typedef int T;\n")
    (tmp_path / "main.cu").write_text(
        '#include "t.h"\n#include "k.cu"\n#include "k.cu"\nint main() { return 0; }\n'
    )
    unit = load(tmp_path / "main.cu", "bench", unity=True)
    assert unit.text.count("__global__ void k") == 1
    assert unit.text.count('#include "t.h"') == 2  # a header stays an #include: its guard is the compiler's
