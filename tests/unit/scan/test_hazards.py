"""Every hazard code: a positive fixture (lines marked `// HAZARD`) and a negative one (none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.model import Severity
from porter.scan import hazards as hz
from porter.scan import scan_file, scan_source

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "cuda" / "hazards"


def marked_lines(path: Path) -> list[int]:
    return [i for i, line in enumerate(path.read_text().splitlines(), 1) if "// HAZARD" in line]


@pytest.mark.parametrize("code", hz.CODES)
def test_positive(code: str) -> None:
    path = FIXTURES / f"{code}_pos.cu"
    scan = scan_file(str(path))
    flagged = sorted({h.line for h in scan.hazards if h.code == code})
    assert flagged == marked_lines(path)
    for h in scan.hazards:
        assert h.message and h.message[0] != " " and "{" not in h.message, h.message
    assert not scan.warnings


@pytest.mark.parametrize("code", hz.CODES)
def test_negative(code: str) -> None:
    path = FIXTURES / f"{code}_neg.cu"
    scan = scan_file(str(path))
    assert [h for h in scan.hazards if h.code == code] == []
    assert not scan.warnings


def test_every_code_has_a_message_and_fixtures() -> None:
    t = hz.tables()
    assert set(t.templates) >= set(hz.CODES)
    for code in hz.CODES:
        assert (FIXTURES / f"{code}_pos.cu").exists() and (FIXTURES / f"{code}_neg.cu").exists()


def test_messages_are_specific() -> None:
    scan = scan_file(str(FIXTURES / "removed-api_pos.cu"))
    by_line = {h.line: h for h in scan.hazards if h.code == "removed-api"}
    assert "cudaDeviceSynchronize" in by_line[12].message and "13.0" in by_line[12].message
    assert "cudaCreateTextureObject" in by_line[10].message and "12.0" in by_line[10].message
    assert "_sync" in by_line[5].message
    assert "cudaDeviceGetAttribute" in by_line[15].message
    assert by_line[12].severity == Severity.ERROR
    warp = scan_file(str(FIXTURES / "warp-size-assumption_pos.cu"))
    assert any("threadIdx.x % 32" in h.message for h in warp.hazards)
    assert all("64-wide" in h.message for h in warp.hazards if h.code == "warp-size-assumption")


def test_samples_hazards() -> None:
    samples = Path(__file__).resolve().parents[3] / "samples" / "cuda"
    reduce_path, legacy_path = samples / "reduce_shfl.cu", samples / "legacy_texture.cu"
    if not reduce_path.exists() or not legacy_path.exists():
        pytest.skip("samples not present yet")
    codes = {h.code for h in scan_file(str(reduce_path)).hazards}
    assert {"warp-size-assumption", "full-warp-mask"} <= codes
    legacy = {h.code for h in scan_file(str(legacy_path)).hazards}
    assert {"removed-api", "texture-api"} <= legacy
    for clean in ("vector_add.cu", "matmul_tiled.cu", "stencil2d.cu", "histogram.cu"):
        if (samples / clean).exists():
            assert scan_file(str(samples / clean)).hazards == (), clean


def test_one_hazard_per_line_and_code() -> None:
    src = (
        b"#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
        b"__global__ void k() { cg::thread_block b = cg::this_thread_block(); b.sync(); }\n"
    )
    scan = scan_source(src, "inline.cu")
    lines = [h.line for h in scan.hazards if h.code == "cooperative-groups"]
    assert lines == [1, 2, 3]
    (k,) = scan.kernels
    assert k.barriers == 1  # b.sync()


@pytest.mark.parametrize(
    ("text", "full"),
    [
        ("0xffffffff", True),
        ("0xFFFFFFFFu", True),
        ("~0u", True),
        ("(unsigned)-1", True),
        ("-1", True),
        ("0x0000ffff", False),
        ("mask", False),
        ("0xfffffffe", False),
    ],
)
def test_full_mask_spellings(text: str, full: bool) -> None:
    assert hz.is_full_mask_literal(text) is full


@pytest.mark.parametrize(
    ("name", "thread"),
    [
        ("lane", True),
        ("laneId", True),
        ("warp_id", True),
        ("tid", True),
        ("threadIdxLocal", True),
        ("n", False),
        ("row", False),
        ("count", False),
        ("width", False),
    ],
)
def test_thread_names(name: str, thread: bool) -> None:
    assert hz.is_thread_name(name) is thread
