"""Kernel fields of `porter scan` on the samples and on focused fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.model import Kernel
from porter.scan import scan_file

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"


def sample(name: str) -> Path:
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"sample {name} not present yet")
    return path


def kernel(path: Path, name: str) -> Kernel:
    found = [k for k in scan_file(str(path)).kernels if k.name == name]
    assert found, f"kernel {name} not found in {path.name}"
    return found[0]


def params(k: Kernel) -> dict[str, tuple[str, bool, bool, bool]]:
    return {p.name: (p.type, p.pointer, p.const, p.written) for p in k.params}


def test_vector_add_parameters() -> None:
    k = kernel(sample("vector_add.cu"), "vector_add")
    assert params(k) == {
        "a": ("const float*", True, True, False),
        "b": ("const float*", True, True, False),
        "c": ("float*", True, False, True),
        "n": ("int", False, False, False),
    }
    assert k.template_params == () and k.shared == () and k.barriers == 0
    assert k.line < k.end_line


def test_matmul_tiled_shared_and_barriers() -> None:
    k = kernel(sample("matmul_tiled.cu"), "matmul_tiled")
    assert [(s.name, s.type, s.size, s.extern) for s in k.shared] == [
        ("As", "float", "TILE * TILE", False),
        ("Bs", "float", "TILE * TILE", False),
    ]
    assert k.barriers == 2
    assert params(k)["C"][3] is True and params(k)["A"][3] is False


def test_histogram_atomics() -> None:
    k = kernel(sample("histogram.cu"), "histogram_shared")
    assert k.atomics == ("atomicAdd",)
    assert params(k)["hist"] == ("unsigned int*", True, False, True)
    assert params(k)["data"][2] is True  # const unsigned char*


def test_reduce_shfl_warp_intrinsics_and_extern_shared() -> None:
    path = sample("reduce_shfl.cu")
    k = kernel(path, "reduce_sum")
    assert k.warp_intrinsics == ("__shfl_down_sync",)
    assert k.atomics == ("atomicAdd",)
    assert [(s.name, s.size, s.extern) for s in k.shared] == [("warp_sums", None, True)]
    # `out` is written only through atomicAdd(out, v)
    assert params(k)["out"][3] is True
    assert [d.name for d in scan_file(str(path)).device_functions] == ["warp_reduce_sum"]


def test_templated_kernels() -> None:
    path = sample("templated.cu")
    names = {k.name: k for k in scan_file(str(path)).kernels}
    assert names["axpby"].template_params == ("typename T",)
    assert names["block_sum"].template_params == ("int BLOCK",)
    assert params(names["axpby"])["y"] == ("T*", True, False, True)
    # start_byte covers the `template <...>` line so the slice is a complete definition
    source = path.read_bytes()
    k = names["axpby"]
    assert source[k.start_byte : k.end_byte].startswith(b"template")


def test_written_analysis_fixture() -> None:
    k = kernel(FIXTURES / "params.cu", "writes")
    written = {p.name for p in k.params if p.written}
    assert written == {
        "direct",
        "deref",
        "arrow",
        "atomic_addr",
        "atomic_offset",
        "via_device",
        "via_two_levels",
        "via_alias",
        "via_cast_alias",
    }
    p = params(k)
    assert p["ro"] == ("const float* __restrict__", True, True, False)
    assert p["also_const"][2] is True  # `float const*`: the pointee is const
    assert p["const_pointer"][2] is False  # `float* const`: only the pointer is const
    assert p["reassigned_only"][3] is False  # re-pointing is not a store
    assert p["n"] == ("int", False, False, False)


def test_kernel_features_fixture() -> None:
    k = kernel(FIXTURES / "kernel_features.cu", "features")
    assert k.template_params == ("typename T", "int BLOCK_SIZE")
    assert k.launch_bounds == "BLOCK_SIZE, 4"
    assert [(s.name, s.type, s.size, s.extern) for s in k.shared] == [
        ("tile", "T", "TILE * (TILE + 1)", False),
        ("total", "float", "1", False),
        ("a", "int", "BLOCK", False),
        ("b", "int", "2 * BLOCK", False),
        ("dynamic_smem", "unsigned char", None, True),
    ]
    assert k.barriers == 3  # two __syncthreads and one __syncwarp
    assert k.atomics == ("atomicAdd", "atomicCAS", "atomicMax")
    assert k.warp_intrinsics == ("__activemask", "__ballot_sync", "__shfl_xor_sync", "__syncwarp")
    assert params(k)["out"][3] is True and params(k)["counts"][3] is True and params(k)["in"][3] is False
    plain = kernel(FIXTURES / "kernel_features.cu", "plain")
    assert plain.launch_bounds is None and plain.template_params == ()


def test_every_sample_kernel_is_found() -> None:
    if not SAMPLES.exists() or not list(SAMPLES.glob("*.cu")):
        pytest.skip("no CUDA samples yet")
    for path in sorted(SAMPLES.glob("*.cu")):
        scan = scan_file(str(path))
        assert scan.language == "cuda"
        assert scan.kernels, f"{path.name}: no kernel found"
        assert scan.launches, f"{path.name}: no launch found"
        assert not scan.warnings, f"{path.name}: {scan.warnings}"
        for k in scan.kernels:
            assert k.params and all(p.name for p in k.params)
            assert any(p.written for p in k.params), f"{path.name}:{k.name} writes nothing?"
