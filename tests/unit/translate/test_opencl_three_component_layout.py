"""CUDA's three-component vectors in global memory are 12 (float3) or 24 (double3) bytes apart; OpenCL C's
are 16 and 32.  A kernel taking a ``float3*`` translated to ``__global float3*`` read and wrote every element
but the first at the wrong place: seen with a program of our own (``bump(float3* v, int n)``), whose OpenCL
replay failed on PoCL, Intel's CPU runtime and Oclgrind (200 of 300 floats out of tolerance) and whose OpenCL
program aborted.  Until the translation keeps CUDA's layout, such a pointer is refused up front, naming it;
a three-component vector in private memory (a local variable) is OpenCL's own business and stays."""

from __future__ import annotations

from pathlib import Path

import pytest
from porter.backends.opencl.translate import translate_to_opencl


def _kernel(tmp_path: Path, source: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "k.cu"
    path.write_text(source)
    tr = translate_to_opencl(source, str(path))
    return next(k for k in tr.kernels if k.name == "bump")


@pytest.mark.parametrize(
    ("vec", "cuda", "opencl"), [("float3", 12, 16), ("const double3", 24, 32), ("int3", 12, 16)]
)
def test_a_pointer_to_a_three_component_vector_is_refused_naming_both_layouts(
    tmp_path: Path, vec: str, cuda: int, opencl: int
) -> None:
    source = f"__global__ void bump({vec}* v, float* out, int n) {{ int i = threadIdx.x; if (i < n) out[i] = v[i].x; }}\n"
    (why,) = _kernel(tmp_path, source).untranslatable
    bare = vec.split()[-1]
    assert (
        f"a pointer to {bare} in global memory: CUDA's {bare} elements are {cuda} bytes apart, OpenCL C's {opencl}"
        in why
    )


def test_a_three_component_vector_in_private_memory_is_translated(tmp_path: Path) -> None:
    source = (
        "__global__ void bump(float* v, int n) { int i = threadIdx.x; float3 p = make_float3(v[i], 1.0f, 2.0f);"
        " if (i < n) v[i] = p.x + p.z; }\n"
    )
    assert not _kernel(tmp_path, source).untranslatable
