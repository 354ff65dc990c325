"""Wave-size hazards in HIP code: each fixture of ``tests/fixtures/hip/wave_hazards`` marks the lines
porter scan must flag (``// HAZARD <code>``), and ``clean.hip`` (the same work written for any
wavefront width) must be flagged nowhere."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from porter.model import Severity
from porter.scan import hazards as hz
from porter.scan import language_for, scan_file, scan_paths, scan_source

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "hip" / "wave_hazards"
SOURCES = sorted(p for p in FIXTURES.iterdir() if p.suffix in (".hip", ".cu", ".cpp"))
_MARK = re.compile(r"// HAZARD ([\w-]+)")


def marked(path: Path) -> set[tuple[int, str]]:
    out = set()
    for i, line in enumerate(path.read_text().splitlines(), 1):
        m = _MARK.search(line)
        if m:
            out.add((i, m.group(1)))
    return out


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_fixture_flags_exactly_its_marked_lines(path: Path) -> None:
    scan = scan_file(str(path))
    assert scan.language == "hip"
    assert not scan.warnings
    assert {(h.line, h.code) for h in scan.hazards} == marked(path)
    for h in scan.hazards:
        assert h.message and "{" not in h.message and "}" not in h.message, h.message


def test_every_pattern_has_a_fixture_and_clean_code_has_none() -> None:
    codes = {code for path in SOURCES for _, code in marked(path)}
    assert codes == {"warp-size-assumption", "full-warp-mask", *hz.HIP_CODES}
    clean = scan_file(str(FIXTURES / "clean.hip"))
    assert clean.hazards == () and len(clean.kernels) == 1


def test_messages_and_severities() -> None:
    scan = scan_file(str(FIXTURES / "popc_ballot.hip"))
    popc = next(h for h in scan.hazards if h.line == 5)
    assert "__popcll" in popc.message and "64-bit" in popc.message and popc.severity == Severity.WARNING
    narrow = {h.line: h for h in scan_file(str(FIXTURES / "narrow_ballot.hip")).hazards}
    assert "uint32_t" in narrow[12].message and "__activemask()" in narrow[12].message
    assert "unsigned long long" in narrow[11].message
    branch = scan_file(str(FIXTURES / "host_warp_branch.cpp")).hazards
    assert all(h.severity == Severity.INFO for h in branch)
    host = next(h for h in branch if h.line == 13)
    assert "host code in pick" in host.message and "prop.warpSize == 32" in host.message
    assert "not a defect by itself" in host.message and "both widths" in host.message
    device = next(h for h in branch if h.line == 7)
    assert "device function in half_wave" in device.message
    redefined = scan_file(str(FIXTURES / "warp_size_redefined.hip")).hazards
    assert "with 64" in redefined[0].message and "RDNA" in redefined[0].message


def test_dialect_of_a_file() -> None:
    assert language_for("k.hip") == "hip"
    assert language_for("k.hip", b"__global__ void k() {}") == "hip"
    assert language_for("k.cu", b"#include <hip/hip_runtime.h>\n__global__ void k() {}") == "hip"
    assert language_for("main.cpp", b"int main() { float* p; hipMalloc(&p, 4); }") == "hip"
    assert language_for("k.cu", b"__global__ void k() {}") == "cuda"
    # a source that builds with both stays CUDA; a name that merely contains hip is not HIP
    both = b"#ifdef __HIPCC__\n#include <hip/hip_runtime.h>\n#else\n#include <cuda_runtime.h>\n#endif\n"
    assert language_for("k.cu", both + b"__global__ void k() {}") == "cuda"
    assert language_for("main.cpp", b"int main() { return myhipMalloc(0); }") is None
    assert language_for("main.cpp", b"int main() { return 0; }") is None


def test_a_folder_scan_finds_hip_files() -> None:
    result = scan_paths([str(FIXTURES)])
    assert sorted(Path(f.path).name for f in result.files) == [p.name for p in SOURCES]
    assert {f.language for f in result.files} == {"hip"} and not result.errors


_WARP = b"""
__device__ float sum(float v) {
    v += __shfl_down(v, 1);
    v += __shfl_xor_sync(~0, v, 2);
    unsigned b = __ballot_sync(-1, v > 0.0f);
    return v + __popc(b);
}
"""


def test_the_same_code_as_cuda_and_as_hip() -> None:
    cuda = {h.code for h in scan_source(_WARP, "w.cu", "cuda").hazards}
    hip = {(h.line, h.code) for h in scan_source(_WARP, "w.hip", "hip").hazards}
    # CUDA: the mask-free shuffle is removed for sm_70+, ~0 / -1 are the 32-lane full mask
    assert cuda == {"removed-api", "full-warp-mask"}
    # HIP: __shfl_down is HIP's own API and ~0 / -1 are 64 ones; the ballot in a 32-bit variable
    # and its __popc are what break on 64 lanes
    assert hip == {(5, "narrow-ballot"), (6, "narrow-ballot")}


@pytest.mark.parametrize(
    ("mask", "narrow"),
    [
        ("0xffffffff", True),
        ("0xFFFFFFFFu", True),
        ("4294967295", True),
        ("~0u", True),
        ("-1u", True),
        ("(unsigned)-1", True),
        ("static_cast<uint32_t>(~0)", True),
        ("0xffffffffull", True),
        ("~0", False),
        ("-1", False),
        ("(int)0xffffffff", False),
        ("~0ull", False),
        ("0xffffffffffffffff", False),
        ("(unsigned long long)-1", False),
        ("0xff", False),
    ],
)
def test_narrow_mask_literals(mask: str, narrow: bool) -> None:
    assert hz.is_narrow_mask_literal(mask) is narrow


def test_porters_own_hip_port_is_not_flagged_for_what_it_made_safe() -> None:
    """porter's translation drops the 32-bit full masks (HIP's mask-free intrinsics take every
    active lane); what it leaves, a ballot kept in a 32-bit variable, is still reported."""
    from porter.backends.hip.translate import translate_to_hip

    cuda = """#define FULL 0xffffffff
__global__ void k(const float* in, float* out, int* count) {
    float v = in[threadIdx.x];
    for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down_sync(0xffffffff, v, o);
    unsigned vote = __ballot_sync(FULL, v > 0.0f);
    if ((threadIdx.x & (warpSize - 1)) == 0) { out[blockIdx.x] = v; count[blockIdx.x] = vote != 0; }
}
"""
    port = translate_to_hip(cuda, "k.cu").text
    hazards = scan_source(port.encode(), "k.hip").hazards
    assert [h.code for h in hazards] == ["narrow-ballot"], hazards
    assert "__ballot" in hazards[0].message


@pytest.mark.integration
def test_scan_json_carries_code_line_message() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "porter", "scan", "--json", str(FIXTURES)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    by_name = {Path(f["path"]).name: f for f in doc["files"]}
    assert by_name["clean.hip"]["hazards"] == []
    for path in SOURCES:
        f = by_name[path.name]
        assert f["language"] == "hip"
        assert {(h["line"], h["code"]) for h in f["hazards"]} == marked(path)
        assert all(set(h) >= {"code", "line", "message", "severity"} for h in f["hazards"])
