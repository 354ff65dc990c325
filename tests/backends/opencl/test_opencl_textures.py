"""Texture references over linear memory in the OpenCL translation (backends/opencl/textures.py): each
kernel reading one takes its bound memory and element count as arguments, tex1Dfetch is a plain load that
reads zero past the bound range, and everything that needs the texture unit is refused with its line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from porter.backends.opencl.host import entries_of, host_text
from porter.backends.opencl.translate import translate_to_opencl

from porter.model import Severity, TranslatedKernel, Translation

LINEAR = """\
#include <cuda_runtime.h>
texture<float, 1, cudaReadModeElementType> texScale;
texture<float4, 1> texPoints;

__device__ float weight(int i) { return 0.5f + tex1Dfetch(texScale, i); }

__global__ void scale(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 p = tex1Dfetch(texPoints, i + 1);
    if (i < n) out[i] = weight(i) * p.y;
}

__global__ void plain(float* out) { out[threadIdx.x] = 1.0f; }

int main()
{
    float* d;
    float4* q;
    cudaMalloc(&d, 64 * sizeof(float));
    cudaMalloc(&q, 64 * sizeof(float4));
    size_t offset;
    cudaBindTexture(&offset, texPoints, q + 32, 32 * sizeof(float4));
    texScale.filterMode = cudaFilterModePoint;
    cudaBindTexture(0, texScale, d, cudaCreateChannelDesc<float>(), 64 * sizeof(float));
    scale<<<1, 32>>>(d, 32);
    return 0;
}
"""


def _translate(text: str) -> Translation:
    return translate_to_opencl(text, "main.cu")


def _kernel(tr: Translation, name: str) -> TranslatedKernel:
    (found,) = [k for k in tr.kernels if k.name == name]
    return found


def _errors(tr: Translation) -> list[tuple[int, str, str]]:
    return [(d.line, d.construct, d.reason) for d in tr.diagnostics if d.severity == Severity.ERROR]


def test_a_kernel_reading_textures_takes_their_memory_and_sizes_as_arguments() -> None:
    tr = _translate(LINEAR)
    k = _kernel(tr, "scale")
    assert not k.untranslatable and not _errors(tr)
    assert k.arg_map == (0, 1, None, None, None, None)
    kinds = [(e["kind"], e["symbol"], e["param"], e["type"], e["element_bytes"]) for e in k.extra_args]
    assert kinds == [
        ("texture", "texPoints", "texPoints", "float4", 16),
        ("texture_size", "texPoints", "texPoints_size", "float4", 16),
        ("texture", "texScale", "texScale", "float", 4),
        ("texture_size", "texScale", "texScale_size", "float", 4),
    ]
    text = " ".join(tr.text.split())
    assert (
        "__kernel void scale(__global float* out, int n, __global const float4* texPoints, uint texPoints_size, "
        "__global const float* texScale, uint texScale_size)"
    ) in text
    assert "float4 p = porter_tex1Dfetch_float4(texPoints, texPoints_size, i + 1);" in text
    # the helper reading a texture takes it as its caller does, and the caller passes it on
    assert "float weight(int i, __global const float* texScale, uint texScale_size)" in text
    assert "weight(i, texScale, texScale_size)" in text
    assert "return 0.5f + porter_tex1Dfetch_float(texScale, texScale_size, i);" in text
    # one fetch helper per element type: zero outside the bound range
    assert "static inline float4 porter_tex1Dfetch_float4(__global const float4* t, uint n, int i)" in text
    assert "return (uint)i < n ? t[i] : (float4)(0);" in text
    assert "texture<" not in tr.text.replace("/* porter: texture<", "")  # declarations commented out
    assert _kernel(tr, "plain").extra_args == ()


def test_the_host_stub_passes_each_texture_binding() -> None:
    tr = _translate(LINEAR)
    out = host_text(LINEAR, entries_of([("main.cl", tr.kernels)]))
    assert (
        'porter_launch.arg(out).arg(n).texref(texPoints, "texPoints").texref_size(texPoints)'
        '.texref(texScale, "texScale").texref_size(texScale).run();'
    ) in out
    assert out.count("\n") == LINEAR.count("\n")


TWO_D = """\
texture<float, 2, cudaReadModeElementType> texImage;
__global__ void blur(float* out, int w)
{
    int x = threadIdx.x, y = blockIdx.x;
    out[y * w + x] = tex2D(texImage, x + 0.5f, y + 0.5f);
}
"""


def test_a_2d_texture_and_its_tex2d_fetch_are_refused_naming_their_lines() -> None:
    tr = _translate(TWO_D)
    (why,) = _kernel(tr, "blur").untranslatable
    assert why.startswith("tex2D(texImage, ...): tex2D fetches through the texture unit")
    errors = _errors(tr)
    assert any(line == 5 and construct == "tex2D(texImage, ...)" for line, construct, _ in errors), errors
    assert any(line == 1 and "2-D texture reference" in reason for line, _, reason in errors), errors


ARRAY_BOUND = """\
texture<float, 1, cudaReadModeElementType> texTable;
__global__ void lookup(float* out)
{
    out[threadIdx.x] = tex1D(texTable, threadIdx.x * 0.25f);
}
__global__ void fetch(float* out) { out[threadIdx.x] = tex1Dfetch(texTable, threadIdx.x); }
void setup(cudaArray* table)
{
    cudaBindTextureToArray(texTable, table);
}
"""


def test_a_texture_bound_to_a_cuda_array_is_refused_naming_the_binding_line() -> None:
    tr = _translate(ARRAY_BOUND)
    (lookup,) = _kernel(tr, "lookup").untranslatable
    assert lookup.startswith("tex1D(texTable, ...): tex1D fetches through the texture unit")
    assert "cudaBindTextureToArray(texTable, ...) at main.cu line 9" in lookup
    (fetch,) = _kernel(tr, "fetch").untranslatable
    assert fetch == (
        "tex1Dfetch(texTable, ...): reads the texture reference texTable, bound to a CUDA array "
        "(cudaBindTextureToArray(texTable, ...) at main.cu line 9)"
    )
    errors = _errors(tr)
    assert (
        9,
        "cudaBindTextureToArray(texTable, ...)",
        "bound to a CUDA array: its fetches need an OpenCL image",
    ) in errors
    assert any(line == 4 and construct == "tex1D(texTable, ...)" for line, construct, _ in errors), errors


def test_filtering_a_texture_and_texture_objects_are_refused() -> None:
    filtered = LINEAR.replace("cudaFilterModePoint", "cudaFilterModeLinear")
    tr = _translate(filtered)
    (why,) = _kernel(tr, "scale").untranslatable
    assert "texScale.filterMode = cudaFilterModeLinear at main.cu line 24" in why
    objects = """\
__global__ void k(cudaTextureObject_t t, float* out)
{
    out[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x);
}
"""
    tr = _translate(objects)
    reasons = _kernel(tr, "k").untranslatable
    assert any(
        r.startswith("cudaTextureObject_t: texture and surface objects need OpenCL images") for r in reasons
    )
    assert any(r.startswith("tex1Dfetch<...>: texture object fetch") for r in reasons)
    assert all(line in (1, 3) for line, _, _ in _errors(tr))


def test_a_three_component_texture_is_refused() -> None:
    tr = _translate("texture<float3, 1> t3;\n__global__ void k(float* o) { o[0] = tex1Dfetch(t3, 0).x; }\n")
    (why,) = _kernel(tr, "k").untranslatable
    assert "OpenCL's float3 is 16 bytes, CUDA's 12" in why


def test_a_replay_passes_the_captured_binding_and_its_element_count() -> None:
    from porter.harness.trial import extra_value

    class _Inst:
        constants = {"texPoints": np.arange(24, dtype=np.float32)}  # 6 float4s, as a capture records them
        size: dict[str, int] = {}

    tex, size = (
        {"kind": "texture", "symbol": "texPoints", "element_bytes": 16},
        {"kind": "texture_size", "symbol": "texPoints", "element_bytes": 16},
    )
    data = extra_value(tex, _Inst(), 0)  # type: ignore[arg-type]
    assert isinstance(data, np.ndarray) and data.nbytes == 96
    assert extra_value(size, _Inst(), 0) == np.uint32(6)  # type: ignore[arg-type]


def test_a_constant_of_a_vector_type_numpy_does_not_name_goes_as_captured() -> None:
    """Rodinia cfd's ``__constant__ float3 ff_flux_contribution_momentum_x[1]``: the variant names its type
    float3, which NumPy has no dtype for; its bytes go to the kernel as the capture recorded them (before: a
    TypeError, porter's 'internal error').  A type NumPy does name must still agree."""
    from porter.harness.trial import Reject, extra_value

    class _Inst:
        constants = {"flux_x": np.array([0.5, 1.5, 2.5], dtype=np.float32)}
        size: dict[str, int] = {}

        class spec:  # noqa: N801 - the Instance's spec, as extra_value reads it
            kernel = "cuda_compute_flux"

    got = extra_value({"kind": "constant", "symbol": "flux_x", "dtype": "float3"}, _Inst(), 0)  # type: ignore[arg-type]
    assert isinstance(got, np.ndarray) and got.tobytes() == _Inst.constants["flux_x"].tobytes()
    with pytest.raises(Reject, match="is float64, the spec's constant is float32"):
        extra_value({"kind": "constant", "symbol": "flux_x", "dtype": "float64"}, _Inst(), 0)  # type: ignore[arg-type]


@pytest.mark.skipif(not Path("/usr/bin/g++").exists(), reason="g++ is not installed")
def test_the_runtime_header_declares_what_texture_programs_call(tmp_path: Path) -> None:
    """The port's host code (texture declarations, field settings, channel descriptors, binds and the
    stubs' texref calls) builds against porter_opencl.h."""
    import subprocess

    from porter.backends.opencl import program

    inc = tmp_path / "inc"
    inc.mkdir()
    import shutil

    from porter.backends.cpu.program import runtime_data_header
    from porter.backends.hip.names import NAMES_HEADER, hip_names_header

    for path in program.HEADERS:
        shutil.copyfile(path, inc / path.name)
    (inc / "porter_runtime_data.h").write_text(runtime_data_header())
    (inc / NAMES_HEADER).write_text(hip_names_header())
    tr = _translate(LINEAR)
    host = host_text(LINEAR, entries_of([("main.cl", tr.kernels)]))
    src = tmp_path / "main.cpp"
    src.write_text(host.replace("#include <cuda_runtime.h>", "").replace("scale<<<1, 32>>>(d, 32);", ""))
    r = subprocess.run(
        [
            "g++",
            "-std=gnu++17",
            "-fsyntax-only",
            "-w",
            "-I",
            str(inc),
            "-include",
            "porter_opencl.h",
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
