"""Host-side fields: launch sites, allocations, copies, #defines and scalar assignments."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.model import FileScan
from porter.scan import scan_file

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"
FIXTURES = ROOT / "tests" / "fixtures" / "cuda"


@pytest.fixture(scope="module")
def host() -> FileScan:
    return scan_file(str(FIXTURES / "host.cu"))


def sample(name: str) -> FileScan:
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"sample {name} not present yet")
    return scan_file(str(path))


def test_chevron_launches(host: FileScan) -> None:
    rows = [
        (x.kernel, x.grid, x.block, x.shared_bytes, x.stream, x.args, x.template_args, x.function)
        for x in host.launches
        if x.via == "chevrons"
    ]
    assert rows == [
        ("scale", "grid", "block", None, None, ("d_x", "alpha", "n"), (), "main"),
        ("scale", "CEIL_DIV(n, 128)", "128", "0", "stream", ("d_x", "0.5f * alpha", "n"), (), "main"),
        ("fill", "grid", "block", "THREADS * sizeof(double)", None, ("d_y", "1.0", "n"), ("double",), "main"),
    ]


def test_cuda_launch_kernel(host: FileScan) -> None:
    (launch,) = [x for x in host.launches if x.via == "cudaLaunchKernel"]
    assert (launch.kernel, launch.grid, launch.block, launch.shared_bytes, launch.stream) == (
        "scale",
        "grid",
        "block",
        "0",
        "stream",
    )
    assert launch.args == ("d_x", "alpha", "n")  # read from `void* args[] = {&d_x, &alpha, &n}`


def test_allocations(host: FileScan) -> None:
    rows = [(a.var, a.bytes, a.api, a.elem_type) for a in host.allocations]
    assert rows == [
        ("d_x", "bytes", "cudaMalloc", None),
        ("d_y", "n * sizeof(double)", "cudaMalloc", "double"),
        ("d_m", "bytes", "cudaMallocManaged", None),
        ("h_x", "bytes", "malloc", "float"),
        ("h_i", "(n + 1) * sizeof(int)", "new[]", "int"),
        ("h_y", "n * sizeof(double)", "calloc", "double"),
    ]
    lines = [a.line for a in host.allocations]
    assert lines == sorted(lines) and lines[0] == 23


def test_copies(host: FileScan) -> None:
    rows = [(c.dst, c.src, c.bytes, c.kind, c.api) for c in host.copies]
    assert rows == [
        ("d_x", "h_x", "bytes", "cudaMemcpyHostToDevice", "cudaMemcpy"),
        ("d_y", "h_y", "n * sizeof(double)", "cudaMemcpyHostToDevice", "cudaMemcpyAsync"),
        ("h_x", "d_x", "bytes", "cudaMemcpyDeviceToHost", "cudaMemcpy"),
    ]


def test_defines(host: FileScan) -> None:
    defs = {d.name: (d.value, d.params) for d in host.defines}
    assert defs == {
        "N": ("(1 << 20)", None),
        "THREADS": ("256", None),
        "CEIL_DIV": ("(((a) + (b) - 1) / (b))", ("a", "b")),
    }


def test_assignments(host: FileScan) -> None:
    rows = [(a.var, a.type, a.value, a.function) for a in host.assignments]
    assert ("kRepeat", "const int", "3", None) in rows  # file-scope constant
    assert ("n", "int", "N", "main") in rows
    assert ("alpha", "const float", "2.0f", "main") in rows
    assert ("n", None, "atoi(argv[1])", "main") in rows
    assert ("bytes", "size_t", "n * sizeof(float)", "main") in rows
    assert ("block", "dim3", "dim3(THREADS)", "main") in rows
    assert ("grid", "dim3", "dim3(CEIL_DIV(n, THREADS), 1)", "main") in rows
    # loop counters and pointers from allocations are not scalar assignments
    assert not any(var in ("r", "h_x", "h_i", "d_x") for var, *_ in rows)


def test_samples_host_side() -> None:
    scan = sample("reduce_shfl.cu")
    (launch,) = scan.launches
    assert (launch.kernel, launch.grid, launch.block, launch.shared_bytes) == (
        "reduce_sum",
        "blocks",
        "threads",
        "smem",
    )
    assert launch.args == ("d_in", "d_out", "n")
    assert {(a.var, a.api) for a in scan.allocations} >= {("d_in", "cudaMalloc"), ("d_out", "cudaMalloc")}
    assert ("n", "1 << 24") in {(a.var, a.value) for a in scan.assignments}
    templated = sample("templated.cu")
    assert [(x.kernel, x.template_args) for x in templated.launches] == [
        ("axpby", ("T",)),
        ("block_sum", ("256",)),
        ("block_sum", ("128",)),
    ]
    common = SAMPLES / "common.cuh"
    if common.exists():
        defines = {d.name: d for d in scan_file(str(common)).defines}
        assert defines["CUDA_CHECK"].params == ("call",)
        assert " \\ " not in defines["CUDA_CHECK"].value  # line continuations are joined


def test_launches_in_a_macro_body_and_through_a_function_pointer_are_found() -> None:
    scan = scan_file(str(FIXTURES / "hidden_launches.cu"))
    rows = [(ls.kernel, ls.line, ls.grid, ls.block, ls.args, ls.via) for ls in scan.launches]
    assert ("scale", 18, "(N + 255) / 256", "256", ("x", "2.0f", "N"), "chevrons (macro LAUNCH)") in rows
    assert ("shift", 20, "N / 256", "256", ("y", "x", "N"), "chevrons through fp") in rows
    assert any(r[0] == "either" for r in rows)  # a pointer set to two things stays what it is


def test_a_host_launch_macro_is_not_device_code() -> None:
    from porter.scan.extract import device_code

    text = (FIXTURES / "hidden_launches.cu").read_text()
    code = device_code(text)
    assert "<<<" not in code and code.count("\n") == text.count("\n")
    assert "__global__ void scale" in code


def test_kernels_launched_only_that_way_get_an_inferred_spec() -> None:
    from porter.harness.spec.infer import infer_spec

    scan = scan_file(str(FIXTURES / "hidden_launches.cu"))
    scale = infer_spec(scan, "scale")
    assert scale.block == ("256",) and [a.name for a in scale.args] == ["x", "a", "n"]
    shift = infer_spec(scan, "shift")
    assert [(a.name, a.role.value) for a in shift.args][:2] == [("y", "out"), ("x", "in")]
