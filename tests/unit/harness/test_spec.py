"""KernelSpec: the C expression evaluator, spec files, and inference from host code (real scans)."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.errors import PorterError, UsageError
from porter.harness.spec import (
    choose_sizes,
    find_spec_file,
    geometry,
    infer_spec,
    load_spec_file,
    spec_for,
    spec_snippet,
)
from porter.model import Role
from porter.scan import cexpr

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"


def _scan(name: str):
    from porter.scan import scan_file

    return scan_file(str(SAMPLES / name))


# ----------------------------------------------------------------------------- expressions


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("(1000000 + 256 - 1) / 256", 3907),
        ("-7 / 2", -3),  # C truncates toward zero
        ("-7 % 2", -1),  # the remainder takes the dividend's sign
        ("1 << 20", 1 << 20),
        ("0x10u + 010", 24),
        ("(int)2.9f", 2),
        ("min(3, 8) * max(2, 5)", 15),
        ("std::max(4, 9) - 1", 8),
        ("7 > 3 ? 10 : 20", 10),
        ("sizeof(double) * 3", 24),
    ],
)
def test_c_arithmetic(text, value):
    from porter.harness.inputs import _sizeof

    assert cexpr.eval_text(text, {}, _sizeof) == value


def test_names_and_macros_expand_without_eval():
    expr = cexpr.parse("DIV_UP(n, BLOCK) * BLOCK")
    body = cexpr.parse("((a) + (b) - 1) / (b)")
    out = cexpr.substitute(expr, {"BLOCK": cexpr.parse("128")}, {"DIV_UP": (("a", "b"), body)})
    assert cexpr.names(out) == {"n"}
    assert cexpr.evaluate(out, {"n": 1000}) == 1024


@pytest.mark.parametrize("text", ["__import__('os')", "n; rm -rf", "a[", "f(1,", ""])
def test_rejects_what_is_not_arithmetic(text):
    with pytest.raises(cexpr.ExprError):
        cexpr.evaluate(cexpr.parse(text), {"n": 1})


def test_unknown_name_is_an_error():
    with pytest.raises(cexpr.ExprError, match="no value for 'm'"):
        cexpr.eval_text("m + 1", {"n": 1})


# ----------------------------------------------------------------------------- spec files

SPEC_TEXT = """
[kernels.saxpy]
grid = ["(n + 255) / 256"]
block = [256]
sizes = [{ n = 4096 }, { n = 3001 }]
args = [
    { name = "x", role = "in", dtype = "float", shape = ["n"], low = -2.0, high = 2.0 },
    { name = "y", role = "inout", dtype = "float32", shape = ["n"] },
    { name = "a", role = "scalar", dtype = "float32", value = "0.5f" },
    { name = "n", role = "scalar", dtype = "int", value = "n" },
]
"""


def test_spec_file_next_to_the_source(tmp_path):
    src = tmp_path / "saxpy.cu"
    src.write_text("__global__ void saxpy() {}\n")
    assert find_spec_file(src) is None
    (tmp_path / "porter.toml").write_text(SPEC_TEXT)
    assert find_spec_file(src) == tmp_path / "porter.toml"
    (tmp_path / "saxpy.cu.porter.toml").write_text(SPEC_TEXT)
    assert find_spec_file(src) == tmp_path / "saxpy.cu.porter.toml"  # the file's own wins

    spec = load_spec_file(find_spec_file(src))["saxpy"]
    assert spec.source == "spec-file"
    assert [a.role for a in spec.args] == [Role.IN, Role.INOUT, Role.SCALAR, Role.SCALAR]
    assert spec.args[0].dtype == "float32" and spec.args[3].dtype == "int32"  # C names accepted
    assert (spec.args[0].low, spec.args[0].high) == (-2.0, 2.0)
    assert spec.block == ("256",)
    assert spec.hidden_sizes and spec.hidden_sizes[0] not in spec.sizes  # derived when not given
    assert geometry(spec, {"n": 3001}) == ((12,), (256,), 0)


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (lambda t: t.replace('role = "inout"', 'role = "output"'), "role must be"),
        (lambda t: t.replace('dtype = "float32", shape', 'dtype = "quad", shape'), "unknown dtype"),
        (lambda t: t.replace('value = "0.5f"', 'value = "0.5f +"'), "value"),
        (
            lambda t: t.replace("sizes = [{ n = 4096 }, { n = 3001 }]", "sizes = [{ m = 4096 }]"),
            "no value for 'n'",
        ),
        (lambda t: t.replace("[kernels.saxpy]", "[kernels.saxpy"), "not a valid spec file"),
    ],
)
def test_bad_spec_files_are_usage_errors(tmp_path, mutation, message):
    path = tmp_path / "porter.toml"
    path.write_text(mutation(SPEC_TEXT))
    with pytest.raises(UsageError, match=message) as err:
        load_spec_file(path)
    assert str(path) in str(err.value)


# ----------------------------------------------------------------------------- inference


def _assert_sizes_are_good(spec):
    block = 1
    for b in spec.block:
        block *= int(b)
    all_sizes = list(spec.sizes) + list(spec.hidden_sizes)
    assert len(spec.sizes) >= 2 and len(spec.hidden_sizes) >= 1
    assert len({tuple(sorted(s.items())) for s in all_sizes}) == len(all_sizes)  # all distinct
    # at least one size is not a multiple of the block in some scalable symbol
    assert any(any(v % 2 for v in s.values()) for s in all_sizes)
    for s in all_sizes:
        geometry(spec, s)


def test_infer_vector_add_from_host_code():
    spec = infer_spec(_scan("vector_add.cu"), "vector_add")
    assert spec.source == "inferred"
    assert [(a.name, a.role, a.dtype, a.shape) for a in spec.args[:3]] == [
        ("a", Role.IN, "float32", ("n",)),
        ("b", Role.IN, "float32", ("n",)),
        ("c", Role.OUT, "float32", ("n",)),
    ]
    assert spec.args[3].role is Role.SCALAR and spec.args[3].value == "n"
    assert spec.block == ("256",)  # BLOCK_SIZE from the included common.cuh
    assert geometry(spec, {"n": 1000}) == ((4,), (256,), 0)
    assert "program size n = 1000000" in spec.notes
    assert max(s["n"] for s in spec.sizes) < 1_000_000  # scaled down for validation
    _assert_sizes_are_good(spec)


def test_infer_matmul_dim3_and_ratios():
    spec = infer_spec(_scan("matmul_tiled.cu"), "matmul_tiled")
    assert [a.shape for a in spec.args[:3]] == [("M * K",), ("K * N",), ("M * N",)]
    assert spec.block == ("16", "16")
    first = spec.sizes[0]
    assert first["M"] > first["N"] > first["K"]  # the program's ratios 1000 : 777 : 513 are kept
    grid, block, _ = geometry(spec, {"M": 100, "N": 50, "K": 10})
    assert grid == (4, 7) and block == (16, 16)
    _assert_sizes_are_good(spec)


def test_infer_roles_from_memset_and_fixed_symbols():
    spec = infer_spec(_scan("histogram.cu"), "histogram_shared")
    roles = {a.name: a.role for a in spec.args}
    assert roles["hist"] is Role.INOUT  # cudaMemset before the launch: accumulates into it
    assert spec.args[0].dtype == "uint8"
    # NUM_BINS is a #define the kernel itself uses: it keeps its program value at every size
    assert all(s["NUM_BINS"] == 256 for s in spec.sizes + spec.hidden_sizes)


def test_a_buffer_the_kernel_reads_is_inout_even_if_no_host_copy_fills_it():
    from porter.scan import scan_file

    scan = scan_file(str(ROOT / "tests" / "fixtures" / "cuda" / "inplace_chain.cu"))
    roles = {a.name: a.role for a in infer_spec(scan, "double_in_place").args}
    assert roles["data"] is Role.INOUT  # d = 2 * d on what softsign_kernel wrote: drawn, not poisoned
    roles = {a.name: a.role for a in infer_spec(scan, "softsign_kernel").args}
    assert roles["in"] is Role.IN and roles["out"] is Role.OUT  # only stored to: poisoned


@pytest.mark.parametrize(
    ("body", "read"),
    [
        ("d[i] = 2.0f * d[i];", {"d"}),
        ("o[i] = a[i];", {"a"}),
        ("*o = 1.0f; *(o + 1) = 2.0f; o[i] = 0;", set()),
        ("o[i] += 1.0f;", {"o"}),
        ("o[i]++;", {"o"}),
        ("atomicAdd(&o[0], 1.0f);", {"o"}),
        ("o[(int)a[i]] = 1.0f;", {"a"}),
        ("float* q = o + 4; q[0] = 1.0f;", {"o"}),
        ("helper(o, i);", {"o"}),
    ],
)
def test_which_pointer_parameters_a_kernel_reads(body: str, read: set[str]) -> None:
    from porter.scan.reads import pointers_read as _read_params_in

    text = f"template <typename T>\n__global__ void k(float* d, const float* a, float* o, int i) {{ {body} }}"
    assert _read_params_in(text, frozenset({"d", "a", "o"})) == read


def test_infer_shared_bytes_and_float_atomics():
    spec = infer_spec(_scan("reduce_shfl.cu"), "reduce_sum")
    assert spec.shared_bytes == "64"  # (threads / 32) * sizeof(float) with threads = 512
    assert spec.float_atomics
    assert spec.args[1].shape == ("1",)


def test_inference_that_falls_short_names_what_is_missing_and_prints_a_snippet():
    from porter.scan import scan_file

    fixture = ROOT / "tests" / "fixtures" / "cuda" / "spec_helpers" / "unresolved.cu"
    with pytest.raises(PorterError) as err:
        infer_spec(scan_file(str(fixture)), "fill")
    text = str(err.value)
    assert "unresolved.cu:" in text.splitlines()[0]
    assert "no host value for read_size()" in text
    assert "[kernels.fill]" in text and "[[kernels.fill.args]]" in text


def test_kernels_in_namespaces_are_inferred_from_qualified_launches():
    """`lib::square_in_place<<<...>>>` from file scope launches the kernel of namespace lib (opened
    by a macro); a launch naming another namespace does not."""
    from dataclasses import replace

    from porter.scan import scan_file

    scan = scan_file(str(ROOT / "tests" / "fixtures" / "cuda" / "macros" / "scoped.cu"))
    spec = infer_spec(scan, "square_in_place")
    assert [(a.name, a.role, a.shape) for a in spec.args] == [
        ("data", Role.INOUT, ("n",)),
        ("n", Role.SCALAR, ()),
    ]
    assert spec.grid == ("(n + 255) / 256",) and spec.block == ("256",)
    elsewhere = tuple(replace(ls, kernel=ls.kernel.replace("lib::", "other::")) for ls in scan.launches)
    with pytest.raises(PorterError, match="never launches it"):
        infer_spec(replace(scan, launches=elsewhere), "square_in_place")


def test_a_kernel_its_file_never_launches_is_pointed_at_a_capture_of_the_programs_run(tmp_path):
    from porter.scan import scan_file

    header = tmp_path / "k.cuh"
    header.write_text(
        "__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }\n"
    )
    with pytest.raises(PorterError) as err:
        infer_spec(scan_file(str(header)), "scale")
    text = str(err.value)
    assert "the file never launches it" in text and "porter capture PROGRAM" in text
    assert "porter optimize k.cuh --capture CAP" in text and "k.cuh.porter.toml" in text


def test_unknown_kernel():
    with pytest.raises(PorterError, match="no kernel named 'nope'"):
        infer_spec(_scan("vector_add.cu"), "nope")


def test_snippet_round_trips_through_a_spec_file(tmp_path):
    spec = infer_spec(_scan("matmul_tiled.cu"), "matmul_tiled")
    path = tmp_path / "porter.toml"
    path.write_text(spec_snippet(spec))
    loaded = load_spec_file(path)["matmul_tiled"]
    assert loaded.args == spec.args and loaded.grid == spec.grid and loaded.block == spec.block
    assert loaded.sizes == spec.sizes and loaded.hidden_sizes == spec.hidden_sizes


def test_spec_file_takes_precedence_over_inference(tmp_path):
    src = tmp_path / "vector_add.cu"
    src.write_text((SAMPLES / "vector_add.cu").read_text())
    (tmp_path / "common.cuh").write_text((SAMPLES / "common.cuh").read_text())
    scan = _scan("vector_add.cu")
    assert spec_for(src, scan, "vector_add").source == "inferred"
    spec = infer_spec(scan, "vector_add")
    (tmp_path / "vector_add.cu.porter.toml").write_text(spec_snippet(spec).replace("32768", "1024"))
    from_file = spec_for(src, scan, "vector_add")
    assert from_file.source == "spec-file" and from_file.sizes[0] == {"n": 1024}


def test_choose_sizes_scales_keeps_fixed_and_adds_an_odd_and_a_hidden_size():
    spec = infer_spec(_scan("vector_add.cu"), "vector_add")
    sizes, hidden = choose_sizes(spec, {"n": 10_000_000}, target=5000)
    assert sizes[0]["n"] <= 5000 and sizes[0]["n"] % 32 == 0
    assert sizes[1]["n"] % 2 == 1 and hidden[0]["n"] % 2 == 1
    assert hidden[0] not in sizes


def test_element_types_behind_typedefs_using_and_defines_are_resolved(tmp_path):
    from porter.scan import scan_file

    src = tmp_path / "aliases.cu"
    src.write_text(
        "typedef float DATA_TYPE;\n#define REAL double\nusing idx_t = int;\ntypedef DATA_TYPE elem_t;\n"
        "__global__ void k(elem_t* a, const REAL* b, idx_t n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) a[i] = (DATA_TYPE)b[i];\n}\n"
        "int main() {\n    const int n = 1024;\n    elem_t* a; REAL* b;\n"
        "    cudaMalloc(&a, n * sizeof(elem_t));\n    cudaMalloc(&b, n * sizeof(REAL));\n"
        "    k<<<(n + 255) / 256, 256>>>(a, b, n);\n    return 0;\n}\n"
    )
    spec = infer_spec(scan_file(str(src)), "k")
    assert [(a.name, a.dtype) for a in spec.args] == [("a", "float32"), ("b", "float64"), ("n", "int32")]


def test_a_size_from_argv_says_which_run_would_settle_it():
    from porter.scan import scan_file

    path = ROOT / "tests" / "fixtures" / "programs" / "argv_size" / "main.cu"
    with pytest.raises(PorterError) as err:
        infer_spec(scan_file(str(path)), "bump")
    text = str(err.value)
    assert "no host value for n" in text
    assert 'porter port main.cu --run "./main ARGS"' in text and "replayed" in text
    # optimize takes a capture instead: the two commands that give it one
    assert 'porter capture main.cu --run "./main ARGS" --out CAP' in text
    assert "porter optimize main.cu --capture CAP" in text


# ----------------------------------------------------------------------------- sizes from the build's -D

SIZED_BY_DEFINE = ROOT / "tests" / "fixtures" / "cuda" / "sized_by_define.cu"


def _scan_fixture(path: Path):  # type: ignore[no-untyped-def]
    from porter.scan import scan_file

    return scan_file(str(path))


def test_a_size_only_a_command_line_define_gives_is_inferred_from_it() -> None:
    scan = _scan_fixture(SIZED_BY_DEFINE)
    with pytest.raises(PorterError, match="no host value for N"):
        spec_for(str(SIZED_BY_DEFINE), scan, "saxpy_n", specs={})
    spec = spec_for(str(SIZED_BY_DEFINE), scan, "saxpy_n", specs={}, defines=["N=5000"])
    assert spec.sizes == ({"N": 5000},) and not spec.hidden_sizes  # the kernel holds N: one size
    assert spec.fixed == ("N",)


def test_the_command_lines_define_wins_over_the_files_default(tmp_path: Path) -> None:
    text = SIZED_BY_DEFINE.read_text().replace("#ifndef N\n", "#ifndef N\n#define N 300\n", 1)
    src = tmp_path / "defaulted.cu"
    src.write_text(text.replace('#error "build with -DN=<elements>"\n', ""))
    scan = _scan_fixture(src)
    assert spec_for(str(src), scan, "saxpy_n", specs={}).sizes == ({"N": 300},)
    assert spec_for(str(src), scan, "saxpy_n", specs={}, defines=["N=4000"]).sizes == ({"N": 4000},)


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_a_size_the_kernel_body_holds_is_never_scaled_for_timing(kind: str) -> None:
    """The grid uses N too, so N looked scalable: timed at 2^24 elements on a GPU while the kernel,
    built with N=5000, touched 5000 of them (a time for work never done)."""
    from porter.harness.spec.sizes import timing_size

    spec = spec_for(
        str(SIZED_BY_DEFINE), _scan_fixture(SIZED_BY_DEFINE), "saxpy_n", specs={}, defines=["N=5000"]
    )
    assert timing_size(spec, kind, gpu_elements=1 << 24) == {"N": 5000}
