"""Macros that hide structure from tree-sitter: qualifier macros (`#define KERNEL __global__`),
scope macros (`CUB_NAMESPACE_BEGIN`) and blank ones, in the file, its headers and -I dirs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from porter.grammars import parser

from porter.scan import scan_file, scan_paths, scan_source
from porter.scan.extract import device_code
from porter.scan.macros import (
    OPAQUE,
    CommandLine,
    MacroTable,
    ScopeMacro,
    collect,
    definitions,
    mask,
    resolve,
    spelled_out,
    without_dead,
)

ROOT = Path(__file__).resolve().parents[3]
MACROS = ROOT / "tests" / "fixtures" / "cuda" / "macros"
VENDOR = MACROS / "include"


def test_definitions_keep_identifier_bodies_only() -> None:
    defs = definitions(
        b"#define KERNEL __global__\n"
        b"#  define HD __host__ \\\n   __device__ // both\n"
        b"#define BLOCK 256\n"
        b"#define SQUARE(x) ((x) * (x))\n"
        b'#define API extern "C" __global__ __launch_bounds__(128, 2)\n'
        b'#define HIDDEN __attribute__((visibility("hidden")))\n'
        b"#define EMPTY\n"
        b"#define EXPR a + b\n"
    )
    assert defs["KERNEL"] == [("__global__",)]
    assert defs["HD"] == [("__host__", "__device__")]
    assert defs["API"] == [("__global__",)]
    assert defs["HIDDEN"] == [()] and defs["EMPTY"] == [()]  # stand for nothing
    # anything else is kept as opaque, so that it never passes for a macro that stands for nothing
    assert defs["BLOCK"] == [(OPAQUE,)] and defs["EXPR"] == [(OPAQUE,)]
    assert defs["SQUARE"] == [("(x)", OPAQUE)]  # a function-like macro: its parameters first


def test_resolve_follows_chains_unions_branches_and_survives_cycles() -> None:
    table = resolve(
        {
            "KERNEL": [("ATTRS", "HIDDEN")],
            "ATTRS": [("__global__",)],
            "HIDDEN": [()],
            "HD": [("__host__", "__device__"), ()],  # #ifdef __CUDACC__ ... #else (empty)
            "A": [("B",)],
            "B": [("A", "__device__")],
            "C": [("C",)],
        }
    )
    assert table["KERNEL"] == ("__global__",)
    assert table["HD"] == ("__device__", "__host__")
    assert table["A"] == ("__device__",) and table["B"] == ("__device__",)
    assert "C" not in table and "HIDDEN" not in table


def test_collect_reads_quoted_includes_and_include_dirs_once(tmp_path: Path) -> None:
    without = collect([(str(MACROS / "kernels.cu"), None)])
    assert without["KERNEL"] == ("__global__",) and without["DEV_INLINE"] == ("__device__",)
    assert "VENDOR_KERNEL" not in without  # <vendor/attrs.h> is only found through -I
    found = collect([(str(MACROS / "kernels.cu"), None)], [VENDOR])
    assert found["VENDOR_KERNEL"] == ("__global__",)
    assert found["DEV_INLINE"] == ("__device__", "__forceinline__")
    # an include cycle and a missing header end quietly
    (tmp_path / "a.h").write_text('#include "b.h"\n#include "missing.h"\n#define K __global__\n')
    (tmp_path / "b.h").write_text('#include "a.h"\n')
    assert collect([(str(tmp_path / "b.h"), None)]) == {"K": ("__global__",)}


def test_kernels_and_device_functions_declared_through_macros() -> None:
    scan = scan_file(str(MACROS / "kernels.cu"), include_dirs=[VENDOR])
    assert [k.name for k in scan.kernels] == ["scale", "fill", "twice", "cubes", "hidden"]
    by_name = {k.name: k for k in scan.kernels}
    assert [(p.name, p.written) for p in by_name["scale"].params] == [
        ("out", True),
        ("in", False),
        ("n", False),
    ]
    assert by_name["fill"].template_params == ("typename T",) and by_name["fill"].launch_bounds == "BLOCK"
    devices = {d.name: d.qualifiers for d in scan.device_functions}
    assert devices == {
        "square": ("__device__", "__host__", "inline"),
        "cube": ("__device__", "__forceinline__"),
    }
    # `not_a_kernel` is behind a macro cycle that expands to nothing: a host function
    assert "not_a_kernel" not in by_name and "not_a_kernel" not in devices
    assert [x.kernel for x in scan.launches] == ["scale"]
    # the return types tree-sitter cannot place after a macro are not reported as syntax errors;
    # the one after the cycle macro (which stands for no qualifier) still is
    assert [w.line for w in scan.warnings] == [25]


def test_without_the_include_dir_only_reachable_macros_count() -> None:
    scan = scan_file(str(MACROS / "kernels.cu"))
    assert [k.name for k in scan.kernels] == ["scale", "fill", "twice", "cubes"]
    assert 23 in [w.line for w in scan.warnings]  # VENDOR_KERNEL is unknown: the parse error stays


def test_a_source_alone_uses_its_own_macros() -> None:
    scan = scan_source(b"#define GLOBAL __global__\nGLOBAL void k(float* x) { x[0] = 1.0f; }\n", "k.cu")
    assert [k.name for k in scan.kernels] == ["k"] and scan.warnings == ()
    plain = scan_source(b"KERNEL void k(float* x) { x[0] = 1.0f; }\n", "k.cu")
    assert plain.kernels == () and plain.warnings


def test_macros_of_one_scanned_file_hold_in_the_others(tmp_path: Path) -> None:
    (tmp_path / "defs.cuh").write_text("#define DEVICE_FN __device__\n#define GLOBAL_FN __global__\n")
    (tmp_path / "use.cu").write_text(  # no #include: a build that passes -include defs.cuh
        "DEVICE_FN float two() { return 2.0f; }\nGLOBAL_FN void k(float* x) { x[0] = two(); }\n"
    )
    result = scan_paths([str(tmp_path)])
    use = next(f for f in result.files if f.path.endswith("use.cu"))
    assert [k.name for k in use.kernels] == ["k"]
    assert [d.name for d in use.device_functions] == ["two"]


SCOPED = (
    b"#define NS_PREFIX\n"
    b"#if defined(NO_ABI)\n#define ABI_BEGIN\n#define ABI_END\n"
    b"#else\n#define ABI_BEGIN inline namespace _SPLICE(v, 2) {\n#define ABI_END }\n#endif\n"
    b"#define LIB_NAMESPACE_BEGIN NS_PREFIX namespace lib { ABI_BEGIN\n"
    b"#define LIB_NAMESPACE_END ABI_END } /* lib */\n"
    b'#define C_BEGIN extern "C" {\n'
    b"#define NS_BEGIN(name) namespace name {\n"
    b"#define NS_END(name) }\n"
    b"#define OPEN {\n"
    b"#define HALF_OPEN namespace a { }\n"  # opens and closes: not a scope macro
    b"#define TYPED_BEGIN namespace a { int\n"  # a word that is no macro
    b"#define MAYBE_NUMBER\n#define MAYBE_NUMBER 3\n"  # empty in one configuration only
    b'#define HIDDEN __attribute__((visibility("hidden")))\n'
    b"#define HD __host__ __device__\n"
)


def test_resolve_finds_scope_macros_through_nested_macros_and_blank_ones() -> None:
    table = resolve(definitions(SCOPED))
    assert table.scopes == {
        "ABI_BEGIN": ScopeMacro(opens=True, namespace=True, function_like=False),  # inline: no name
        "ABI_END": ScopeMacro(opens=False, namespace=False, function_like=False),
        "LIB_NAMESPACE_BEGIN": ScopeMacro(opens=True, namespace=True, function_like=False, path=("lib",)),
        "LIB_NAMESPACE_END": ScopeMacro(opens=False, namespace=False, function_like=False),
        "C_BEGIN": ScopeMacro(opens=True, namespace=True, function_like=False),
        "NS_BEGIN": ScopeMacro(
            opens=True, namespace=True, function_like=True, path=("name",), params=("name",)
        ),
        "NS_END": ScopeMacro(opens=False, namespace=False, function_like=True, params=("name",)),
        "OPEN": ScopeMacro(opens=True, namespace=False, function_like=False),
    }
    assert table.blanks == {"NS_PREFIX", "HIDDEN"}
    assert dict(table) == {"HD": ("__device__", "__host__")}


def test_mask_keeps_offsets_lines_and_directives() -> None:
    table = resolve(definitions(SCOPED))
    code = (
        b"LIB_NAMESPACE_BEGIN\n"
        b"NS_BEGIN(detail) HIDDEN HD float f(float x) { return x; } NS_END(detail)\n"
        b"#ifdef LIB_NAMESPACE_END\n#endif\n"
        b"#define AGAIN \\\n  LIB_NAMESPACE_END\n"
        b"OPEN NS_BEGIN NS_PREFIX_NOT_A_MACRO\n"  # NS_BEGIN without arguments is not a use
        b"LIB_NAMESPACE_END\n"
    )
    masked = mask(SCOPED + code, table)
    out = masked.source[len(SCOPED) :]
    assert len(masked.source) == len(SCOPED + code) and out.count(b"\n") == code.count(b"\n")
    lines = out.decode().split("\n")
    assert lines[0] == "namespace{" + " " * 9  # one brace per use, whatever the depth
    assert lines[1].split() == ["namespace{", "float", "f(float", "x)", "{", "return", "x;", "}", "}"]
    assert lines[2:5] == ["#ifdef LIB_NAMESPACE_END", "#endif", "#define AGAIN \\"]
    assert lines[5] == "  LIB_NAMESPACE_END"  # a directive's continuation line
    assert lines[6].split() == ["{", "NS_BEGIN", "NS_PREFIX_NOT_A_MACRO"]
    assert lines[7].rstrip() == "}"
    # where the qualifier macro was is remembered with its qualifiers, the blank one with none
    hidden, hd = len(SCOPED) + code.index(b"HIDDEN"), len(SCOPED) + code.index(b"HD float")
    assert masked.spans == ((hidden, hidden + 6, ()), (hd, hd + 2, ("__device__", "__host__")))
    # and so are the names of the namespaces the scope macros open, arguments put in
    assert masked.namespaces == {
        len(SCOPED): ("lib",),
        len(SCOPED) + code.index(b"NS_BEGIN(detail)"): ("detail",),
    }
    # the definitions themselves are untouched
    assert masked.source[: len(SCOPED)] == SCOPED


def test_mask_writes_a_short_opener_as_a_block_and_the_scan_reads_into_it() -> None:
    source = (
        b"#define NS namespace lib {\n#define END }\n#define KERNEL __global__\n"
        b"NS\nKERNEL void k(float* x) { x[0] = 1.0f; }\nEND\n"
    )
    masked = mask(source, resolve(definitions(source)))
    assert masked.source.split(b"\n")[3] == b"{ "  # `namespace{` would not fit in `NS`
    scan = scan_source(source, "short.cu")
    assert [k.name for k in scan.kernels] == ["k"] and scan.warnings == ()


def test_a_plain_dict_table_still_masks_qualifiers() -> None:
    masked = mask(b"KERNEL void k() {}\n", {"KERNEL": ("__global__",)})
    assert masked.source == b"       void k() {}\n" and masked.spans == ((0, 6, ("__global__",)),)
    assert mask(b"KERNEL void k() {}\n", MacroTable()).source.startswith(b"KERNEL")


SCOPED_PROGRAM = MACROS / "scoped.cu"


def test_kernels_in_macro_opened_namespaces_are_found() -> None:
    """A program in a library's style (CUB, Thrust): without the scope macros, tree-sitter reads
    everything between `LIB_NAMESPACE_BEGIN` and `..._END` wrongly and no kernel is found."""
    scan = scan_file(str(SCOPED_PROGRAM))
    assert [k.name for k in scan.kernels] == ["affine_clamp", "square_in_place"]
    assert scan.warnings == ()
    by_name = {k.name: k for k in scan.kernels}
    assert [(p.name, p.const, p.written) for p in by_name["affine_clamp"].params] == [
        ("in", True, False),
        ("out", False, True),
        ("scale", False, False),
        ("shift", False, False),
        ("n", False, False),
    ]
    assert [(p.name, p.written) for p in by_name["square_in_place"].params] == [("data", True), ("n", False)]
    # two qualifier macros in a row, inside a struct and inside a function-like macro's namespace
    assert {d.name: d.qualifiers for d in scan.device_functions} == {
        "operator()": ("__device__", "__host__", "__forceinline__"),
        "clamp01": ("__device__", "__forceinline__"),
    }
    assert [(x.kernel, x.line) for x in scan.launches] == [
        ("lib::square_in_place", 52),
        ("lib::affine_clamp", 53),
    ]
    # lines are those of the file, and a kernel starts at the macros in front of it
    source = SCOPED_PROGRAM.read_text()
    assert "void affine_clamp(" in source.split("\n")[by_name["affine_clamp"].line - 1]
    assert source[by_name["affine_clamp"].start_byte :].startswith("LIB_KERNEL_ATTRIBUTES void affine_clamp(")
    assert source[by_name["square_in_place"].start_byte :].startswith("LIB_HIDDEN LIB_KERNEL_ATTRIBUTES void")


def test_device_code_keeps_macro_namespaces_and_drops_host_code() -> None:
    source = SCOPED_PROGRAM.read_text()
    out = device_code(source, macros=collect([(str(SCOPED_PROGRAM), None)]))
    assert out.count("\n") == source.count("\n")
    assert "LIB_NAMESPACE_BEGIN" in out and "LIB_NAMESPACE_END" in out and "NS_END(detail)" in out
    assert "void square_in_place(" in out and "clamp01" in out and "struct Affine" in out
    assert "int main" not in out and "static float reference" not in out
    only = device_code(
        source, kernels=["lib::square_in_place"], macros=collect([(str(SCOPED_PROGRAM), None)])
    )
    assert "void square_in_place(" in only and "void affine_clamp(" not in only
    # the macros in front of the kernel left out go with it
    assert only.count("LIB_KERNEL_ATTRIBUTES") == 1


@pytest.mark.parametrize("kernel", ["affine_clamp", "square_in_place"])
@pytest.mark.integration
def test_device_code_of_one_macro_declared_kernel_compiles(kernel: str, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    out = device_code(
        SCOPED_PROGRAM.read_text(), kernels=[kernel], macros=collect([(str(SCOPED_PROGRAM), None)])
    )
    shutil.copy(MACROS / "scoped.cuh", tmp_path / "scoped.cuh")
    (tmp_path / "k.cu").write_text(out)
    cmd = [nvcc, "-arch=sm_90", "-c", "-x", "cu", str(tmp_path / "k.cu"), "-o", str(tmp_path / "k.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr


@pytest.mark.parametrize("name", ["scoped.cu", "kernels.cu", "program.cu"])
def test_masked_fixtures_parse_without_errors(name: str) -> None:
    path = MACROS / name
    masked = mask(path.read_bytes(), collect([(str(path), None)], [VENDOR]))
    root = parser("cuda").parse(masked.source).root_node
    assert not root.has_error or name == "kernels.cu"  # kernels.cu keeps one deliberate error


def test_spelled_out_writes_namespaces_qualifiers_and_blanks() -> None:
    table = resolve(definitions(SCOPED))
    code = "LIB_NAMESPACE_BEGIN\nNS_BEGIN(detail) HIDDEN HD float f(float x) { return x; } NS_END(detail)\nLIB_NAMESPACE_END\n"
    out = spelled_out(SCOPED.decode() + code, table)
    assert out.startswith(SCOPED.decode())  # directives as written
    assert out[len(SCOPED) :].split("\n") == [
        "namespace lib {",
        "namespace detail {  __device__ __host__ float f(float x) { return x; } }",
        "}",
        "",
    ]
    assert spelled_out(code, MacroTable()) == code


def test_kernels_know_their_namespaces() -> None:
    scan = scan_file(str(SCOPED_PROGRAM))
    assert [(k.namespace, k.qualified) for k in scan.kernels] == [
        ("lib", "lib::affine_clamp"),
        ("lib", "lib::square_in_place"),
    ]
    plain = scan_source(
        b"namespace a { namespace b::c { inline namespace v1 { __global__ void k(int* p) { p[0] = 1; } } } }\n"
        b"namespace { __global__ void hidden(int* p) { p[0] = 2; } }\n",
        "plain.cu",
    )
    assert [k.qualified for k in plain.kernels] == ["a::b::c::k", "hidden"]


def test_merged_tables_keep_scope_and_blank_macros() -> None:
    first = resolve(definitions(SCOPED))
    second = resolve(definitions(b"#define KERNEL __global__\n#define HD __device__\n"))
    both = first.merged(second)
    assert both.scopes == first.scopes and both.blanks == first.blanks
    assert both["KERNEL"] == ("__global__",) and both["HD"] == ("__device__",)  # the second wins
    masked = mask(b"LIB_NAMESPACE_BEGIN\nKERNEL void k() {}\nLIB_NAMESPACE_END\n", both)
    assert masked.source.split(b"\n")[0].rstrip() == b"namespace{"


def test_a_files_dead_branch_or_its_blank_macros_never_hide_another_files_kernels(tmp_path: Path) -> None:
    # a host-compiler fallback header (never compiled as CUDA) and a header blanking a macro for itself
    (tmp_path / "compat.h").write_text(
        "#if !defined(__CUDACC__)\n#define __global__\n#define __device__\n#endif\n#define EXPORT\n"
    )
    (tmp_path / "host.cpp").write_text('#include "compat.h"\nint host_only() { return 1; }\n')
    (tmp_path / "k.cu").write_text(
        "#define EXPORT static\n__device__ float two() { return 2.0f; }\n"
        "__global__ void k(float* x) { x[0] = two(); }\n"
    )
    result = scan_paths([str(tmp_path)])
    k = next(f for f in result.files if f.path.endswith("k.cu"))
    assert [kernel.name for kernel in k.kernels] == ["k"]
    assert [d.name for d in k.device_functions] == ["two"]


def test_conditionals_are_decided_as_far_as_porter_knows() -> None:
    from porter.scan.macros import dead_ranges, definitions

    src = (
        b"#if !defined(__CUDACC__)\n#define A __global__\n#else\n#define B __global__\n#endif\n"
        b"#ifdef __CUDA_ARCH__\n#define C __device__\n#else\n#define C\n#endif\n"
        b"#define FAST 1\n#ifndef FAST\n#define D __host__\n#endif\n"
        b"#if defined(__HIPCC__) || defined(__HIP__)\n#define E __global__\n#elif defined(__CUDACC__)\n"
        b"#define F __global__\n#else\n#define G __global__\n#endif\n#if SOMETHING > 2\n#define H __device__\n#endif\n"
    )
    assert sorted(definitions(src)) == ["B", "C", "F", "FAST", "H"]
    assert len(dead_ranges(src)) == 4


def test_the_command_line_decides_its_conditionals_and_defines_macros() -> None:
    src = (
        b"#ifndef N\n#define N 1024\n#endif\n#ifdef FAST\n#define HD __device__\n#else\nint slow;\n#endif\n"
        b"#if !defined(__CUDACC__)\nint host_only;\n#endif\n"
    )
    line = CommandLine(("N=5", "FAST", "KERNEL=__global__"), ("GONE",))
    assert line.known()["N"] is True and line.known()["GONE"] is False and line.known()["__CUDACC__"] is True
    assert line.source() == b"#define N 5\n#define FAST 1\n#define KERNEL __global__\n"
    assert "N" not in definitions(src, line.known()) and "N" in definitions(src)
    cut = without_dead(src, line)
    assert len(cut) == len(src) and cut.count(b"\n") == src.count(b"\n")
    # the #ifndef default and the #else branch go; a branch dead without the command line is left as it was
    assert b"1024" not in cut and b"slow" not in cut and b"host_only" in cut and b"__device__" in cut
    assert without_dead(src, CommandLine()) is src
    table = collect([("k.cu", b"KERNEL void k(float* x) {}\n")], command_line=line)
    assert table["KERNEL"] == ("__global__",)
