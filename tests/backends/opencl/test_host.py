"""The host side of an OpenCL program port (backends/opencl/host.py): kernels become host stubs, device-only
functions go, every line stays where it was, and a kernel without a translation refuses the build."""

from __future__ import annotations

import json
from pathlib import Path

from porter.backends.opencl.host import entries_of, host_text, untranslatable

from porter.model import TranslatedKernel

SOURCE = """#include <cuda_runtime.h>
__constant__ float scale[2];
__device__ float twice(float v) { return 2.0f * v; }
__host__ __device__ float both(float v) { return v; }
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n)
{
    int i = threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void smooth(const float* in, float* out) { extern __shared__ float s[]; out[0] = in[0] * scale[0]; }
int main() { return 0; }
"""


def _tk(name: str, entry: str, arg_map: tuple, extra: tuple = ()) -> TranslatedKernel:  # type: ignore[type-arg]
    return TranslatedKernel(name, entry, "opencl", arg_map, extra, (), ())


def test_kernels_become_stubs_device_functions_go_and_lines_stay() -> None:
    kernels = [
        _tk("axpy<float>", "axpy_float", (0, 1, 2, 3)),
        _tk("axpy<double>", "axpy_double", (0, 1, 2, 3)),
        _tk(
            "smooth",
            "smooth",
            (0, 1, None, None),
            ({"kind": "local"}, {"kind": "constant", "symbol": "scale"}),
        ),
    ]
    out = host_text(SOURCE, entries_of([("src/main.cl", kernels)]))
    assert out.count("\n") == SOURCE.count("\n")
    lines = out.split("\n")
    assert lines[2] == ""  # twice(): device only
    assert lines[3] == SOURCE.split("\n")[3]  # both(): kept
    assert lines[1] == "__constant__ float scale[2];"  # the symbol: a host variable of the runtime's
    body = "\n".join(lines[6:10])
    assert "if constexpr (std::is_same_v<T, float>)" in body and '"axpy_double", "src/main.cl"' in body
    assert "porter_launch.arg(a).arg(x).arg(y).arg(n).run();" in body
    assert (
        'porter_opencl::Launch porter_launch("smooth", "src/main.cl"); porter_launch.arg(in).arg(out).local().symbol(scale).run();'
        in lines[10]
    )
    assert "extern __shared__" not in out and "threadIdx" not in out
    assert lines[11] == "int main() { return 0; }"


def test_a_template_instance_without_a_translation_fails_only_when_launched(tmp_path: Path) -> None:
    out = host_text(SOURCE, entries_of([("main.cl", [_tk("axpy<float>", "axpy_float", (0, 1, 2, 3))])]))
    assert 'porter_opencl::no_instance("axpy"' in out
    (tmp_path / "main.cu").write_text(
        out.replace("porter_opencl::untranslatable", "x")
    )  # smooth's stub aside
    assert untranslatable(tmp_path) == ""


def test_a_kernel_no_unit_translated_refuses_the_build_with_its_line(tmp_path: Path) -> None:
    out = host_text(SOURCE, entries_of([("main.cl", [_tk("axpy<float>", "axpy_float", (0, 1, 2, 3))])]))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.cu").write_text(out)
    why = untranslatable(tmp_path)
    assert why.startswith("cannot translate: smooth: no unit's OpenCL translation holds it")
    assert why.endswith("(src/main.cu line 11)")


def test_a_template_kernel_without_any_instance_refuses_a_program_that_launches_it(tmp_path: Path) -> None:
    out = host_text(SOURCE, entries_of([("main.cl", [_tk("smooth", "smooth", (0, 1))])]))
    assert 'porter_opencl::no_instances("axpy"' in out
    (tmp_path / "main.cu").write_text(out)
    assert untranslatable(tmp_path) == ""  # nothing launches axpy<...>
    (tmp_path / "host.cu").write_text(
        "template <class T> void go(T* x) { axpy<T><<<1, 32>>>(T(1), x, x, 32); }\n"
    )
    why = untranslatable(tmp_path)
    assert why.startswith("cannot translate: axpy: launched with template arguments porter could not resolve")
    assert why.endswith("(main.cu line 8)")  # the stub, inside the kernel's body


def test_a_refused_kernel_names_the_first_line_of_its_construct(tmp_path: Path) -> None:
    """Several kernels hold the same construct (reduction's cg::thread_block_tile in reduce4, reduce5,
    cg_reduce): the first refused kernel names the construct's first line, not its last."""
    what = "cg::thread_block_tile: cooperative groups: no OpenCL C counterpart"
    doc = {
        "source": "k.cu",
        "kernels": [
            {"name": "plain", "untranslatable": []},
            {"name": "reduce4<int, 512>", "untranslatable": [what]},
            {"name": "cg_reduce<int>", "untranslatable": [what]},
        ],
        "errors": [{"file": "k.cu", "line": 276, "what": what}, {"file": "k.cu", "line": 526, "what": what}],
    }
    (tmp_path / "k.launch.json").write_text(json.dumps(doc))
    assert untranslatable(tmp_path) == f"cannot translate: reduce4<int, 512>: {what} (k.cu line 276)"
