"""File discovery, language dispatch and bad inputs; the .scm queries against the samples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from porter.grammars import query

from porter.errors import UsageError
from porter.report import scan_view
from porter.scan import language_for, scan_file, scan_paths, scan_source

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        scan_paths([str(tmp_path / "nope.cu")])
    assert err.value.exit_code == 2 and "nope.cu" in str(err.value)


def test_binary_and_unreadable_files_are_skipped_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "bin.cu").write_bytes(b"\x7fELF\x00\x01")
    (tmp_path / "latin1.cu").write_bytes(b"// caf\xe9\n__global__ void k() {}\n")
    good = tmp_path / "good.cu"
    good.write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    result = scan_paths([str(tmp_path)])
    # a Latin-1 byte in a comment is text, read losslessly; NUL bytes make a binary file
    assert sorted(Path(f.path).name for f in result.files) == ["good.cu", "latin1.cu"]
    assert [k.name for f in result.files if f.path.endswith("latin1.cu") for k in f.kernels] == ["k"]
    assert any("bin.cu" in e and "binary" in e for e in result.errors)
    assert not any("latin1.cu" in e for e in result.errors)
    assert scan_view.exit_code(result) == 0
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        locked = tmp_path / "locked.cu"
        locked.write_text("__global__ void k() {}\n")
        locked.chmod(0)
        assert any("locked.cu" in e for e in scan_paths([str(locked)]).errors)


def test_nothing_usable_gives_exit_code_2(tmp_path: Path) -> None:
    (tmp_path / "bin.cu").write_bytes(b"\x00\x01")
    result = scan_paths([str(tmp_path / "bin.cu")])
    assert result.files == [] and scan_view.exit_code(result) == 2
    with pytest.raises(UsageError):
        scan_file(str(tmp_path / "bin.cu"))


def test_syntax_errors_become_warnings_and_the_rest_is_scanned() -> None:
    scan = scan_file(str(FIXTURES / "syntax_error.cu"))
    assert [k.name for k in scan.kernels] == ["good_before", "broken", "good_after"]
    assert scan.warnings and all(w.line == 5 for w in scan.warnings)
    assert "syntax error" in scan.warnings[0].message
    assert [x.kernel for x in scan.launches] == ["good_after"]
    assert [a.var for a in scan.allocations] == ["d"]


def test_directory_recursion_and_cpp_dispatch() -> None:
    result = scan_paths([str(FIXTURES)])
    paths = {Path(f.path).name for f in result.files}
    assert "cuda_in_cpp.cpp" in paths and "plain_host.cpp" not in paths
    assert "warp-size-assumption_pos.cu" in paths  # from the hazards/ subdirectory
    assert any(p.endswith("plain_host.cpp") for p in result.skipped)
    cpp = next(f for f in result.files if f.path.endswith("cuda_in_cpp.cpp"))
    assert cpp.language == "cuda" and [k.name for k in cpp.kernels] == ["cpp_kernel"]


def test_language_for() -> None:
    assert language_for("a.cu") == "cuda" and language_for("a.cuh") == "cuda"
    assert language_for("a.py") == "python"
    assert language_for("a.cpp", b"int main() {}") is None
    assert language_for("a.hpp", b"__device__ int f();") == "cuda"
    assert language_for("a.cc", b"#include <cuda_runtime.h>\n") == "cuda"
    assert language_for("a.txt", b"__global__") is None


def test_python_files_are_dispatched(tmp_path: Path) -> None:
    pytest.importorskip("porter.scan.python", reason="the Python scanner is another engineer's module")
    path = tmp_path / "loops.py"
    path.write_text("def f(a, b, n):\n    for i in range(n):\n        b[i] = a[i] * 2\n")
    (scan,) = scan_paths([str(path)]).files
    assert scan.language == "python"


def test_empty_and_comment_only_sources() -> None:
    assert scan_source(b"", "empty.cu").kernels == ()
    only = scan_source(b"// nothing here\n/* still nothing */\n", "c.cu")
    assert only.kernels == () and only.hazards == () and only.warnings == ()


@pytest.mark.parametrize("name", ["cuda-toplevel", "cuda-device", "cuda-host"])
def test_queries_compile_and_match_samples(name: str) -> None:
    q = query(name)
    assert q.pattern_count > 0
    samples = sorted((ROOT / "samples" / "cuda").glob("*.cu"))
    if not samples:
        pytest.skip("no samples yet")
    from porter.grammars import parser
    from tree_sitter import QueryCursor

    hits = 0
    for path in samples:
        tree = parser("cuda").parse(path.read_bytes())
        hits += len(QueryCursor(q).matches(tree.root_node))
    assert hits > 0
