"""porter's fallback headers for AMD builds against an older HIP (backends/hip/include_amd) and the
HIP-on-CUDA math constants: generated from the API table and CUDA's math_constants.h, checked in, and
the golden translations that need them (fp16_bf16, defines) compile with hipcc 5.2 (test_api_tables) and
with nvcc (test_golden_on_cuda)."""

from __future__ import annotations

from pathlib import Path

import pytest
from porter.backends.hip.names import hip_names_header
from porter.backends.hip.tables import compat

GOLDEN = Path(__file__).parent / "golden"
CUDA_INCLUDE = Path("/usr/local/cuda/include")


@pytest.mark.skipif(
    not (CUDA_INCLUDE / "math_constants.h").is_file(), reason="CUDA's headers are not installed"
)
def test_the_checked_in_headers_are_what_the_generator_writes(tmp_path: Path) -> None:
    out = tmp_path / "hip_math_constants.h"
    assert compat.main(["--cuda-include", str(CUDA_INCLUDE), "--out", str(out)]) == 0
    assert out.read_text() == compat.OUT.read_text()
    assert compat.header_on_cuda() == compat.OUT_CUDA.read_text()


def test_the_fallback_defers_to_the_installed_hip_and_defines_what_the_table_maps() -> None:
    amd = compat.OUT.read_text()
    assert "__has_include_next(<hip/hip_math_constants.h>)" in amd and "#include_next" in amd
    assert "#define HIP_PI_F " in amd and "#define HIP_INF_F " in amd
    assert "CUDART_" not in amd.split("#else", 1)[1]  # the values carry no CUDA name
    on_cuda = compat.OUT_CUDA.read_text()
    assert "#include <math_constants.h>" in on_cuda and "HIP_PI_F                 CUDART_PI_F" in on_cuda
    assert set(compat.mapped_constants(missing_only=True)) <= set(compat.mapped_constants(missing_only=False))


def test_the_generator_refuses_a_missing_cuda_header_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compat.main(["--cuda-include", str(tmp_path), "--out", str(tmp_path / "x.h")]) == 2
    assert "math_constants.h not found" in capsys.readouterr().err


def test_a_name_the_targeted_hip_lacks_is_mapped_only_where_porter_gives_it() -> None:
    """hipErrorInvalidTexture is ROCm 6.4's: HIP 5.2 (and porter's CPU runtime) lack it, so helper_cuda.h's
    `case cudaErrorInvalidTexture:` cannot be mapped; HIP never returns a value it has no name for, so the
    label becomes a comment and its statement stays (hipcc rejected the undeclared name); HIP_PI_F is
    ROCm 5.3's, but porter's fallback header defines it, so CUDART_PI_F is mapped (an info, not a warning)."""
    from porter.backends.hip.translate import translate_to_hip

    src = (
        "#include <cuda_runtime.h>\n#include <math_constants.h>\n"
        "const char* name(cudaError_t e) {\n  switch (e) {\n"
        '  case cudaErrorInvalidTexture: return "tex";\n  default: return "?";\n  }\n}\n'
        "__global__ void k(float* o) { o[0] = CUDART_PI_F; }\n"
    )
    tr = translate_to_hip(src, "h.cu")
    (line,) = [x for x in tr.text.splitlines() if "case " in x and "Texture" in x]
    assert line == '  /* case cudaErrorInvalidTexture: */ return "tex";'
    assert "o[0] = HIP_PI_F;" in tr.text
    said = {d.construct: (d.severity.value, d.reason) for d in tr.diagnostics}
    assert said["CUDART_PI_F"][0] == "info" and said["cudaErrorInvalidTexture"][0] == "info"
    assert "has no HIP equivalent (HIP 5.2), so HIP never produces" in said["cudaErrorInvalidTexture"][1]


def test_the_names_header_gives_the_cpu_runtime_the_runtime_api_names() -> None:
    """HIP-on-CUDA may take a HIP name from the driver API (cuda.h); porter's CPU runtime has no cuda.h, so
    there the same name is the runtime API's (hipMipmappedArray_t: CUmipmappedArray on NVIDIA, as HIP's own NVIDIA
    headers have it, CUDA's cudaMipmappedArray_t on the CPU runtime).  Where HIP's headers do not decide, both
    take the runtime's name, since hipError_t is cudaError_t: hipErrorUnmapFailed is
    cudaErrorUnmapBufferObjectFailed, not CUresult's CUDA_ERROR_UNMAP_FAILED, and hipComputeMode is
    cudaComputeMode, the type of hipComputeModeDefault."""
    header = hip_names_header()
    nvidia, _, rest = header.partition("#if defined(PORTER_HIP_ON_CUDA)")[2].partition("#else")
    cpu = rest.partition("#endif\n#define hipLaunchParm")[0]
    assert "#define hipMipmappedArray_t CUmipmappedArray" in nvidia
    assert "#define hipMipmappedArray CUmipmappedArray_st" in nvidia  # a struct follows its handle
    assert "#define hipMipmappedArray_t cudaMipmappedArray_t" in cpu
    assert "CUDA_ERROR_" not in cpu and "CU_" not in cpu
    both = header.partition("#if defined(PORTER_HIP_ON_CUDA)")[0]
    assert "#define hipErrorUnmapFailed cudaErrorUnmapBufferObjectFailed" in both
    assert "#define hipComputeMode cudaComputeMode" in both
    assert "CUDA_ERROR_UNMAP_FAILED" not in header
