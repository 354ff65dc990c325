"""Qualifier macros: `#define KERNEL __global__` and friends, in the file, its headers and -I dirs."""

from __future__ import annotations

from pathlib import Path

from porter.scan import scan_file, scan_paths, scan_source
from porter.scan.macros import collect, definitions, resolve

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
    assert defs["HIDDEN"] == [()] and "EMPTY" not in defs  # stands for nothing
    assert "BLOCK" not in defs and "SQUARE" not in defs and "EXPR" not in defs


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
