"""The golden translations of driver-API code compile through porter's HIP-on-CUDA headers with nvcc (#32 part 4):
HIP's driver-style calls (hipModuleLaunchKernel, hipCtxCreate, hipMemcpyHtoD...) return hipError_t, which is
CUDA's cudaError_t there, and take a hipDeviceptr_t (CUdeviceptr) where hipMalloc/hipFree also take one
(backends/hip/include/hip/porter_hip_driver.h); HIP's enumerations and their types agree (hipComputeMode)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from porter.backends import load_data
from porter.backends.hip import include_dir
from porter.backends.hip.names import NAMES_HEADER, hip_names_header

GOLDEN = Path(__file__).parent / "golden"
# every golden translation but those not_building.toml names: driver-API code, graphs in CUDA 12/13's forms, HIP
# names newer than HIP 5.2 (porter's hip/hip_math_constants.h, hip_bf16.h), launches in every syntax
NOT_BUILDING = tomllib.loads((GOLDEN / "not_building.toml").read_text())["cuda"]
BUILDING = sorted(p.name for p in GOLDEN.glob("*.hip") if p.name not in NOT_BUILDING)

pytestmark = pytest.mark.integration


def _nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    return nvcc


def _compile(nvcc: str, source: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / NAMES_HEADER).write_text(hip_names_header())
    cmd = [nvcc, "-x", "cu", "-arch=sm_90", "-c", "-o", os.devnull, f"-I{include_dir()}", f"-I{tmp_path}"]
    return subprocess.run(cmd + [str(source)], capture_output=True, text=True, timeout=600, cwd=tmp_path)


@pytest.mark.parametrize("name", BUILDING)
def test_golden_translations_compile_through_hip_on_cuda(name: str, tmp_path: Path) -> None:
    nvcc = _nvcc()
    copy = tmp_path / name
    copy.write_text((GOLDEN / name).read_text())
    done = _compile(nvcc, copy, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    if name.startswith("api_driver"):  # the wrappers name no deprecated driver call
        assert "deprecated" not in done.stderr, done.stderr[-3000:]


def test_the_golden_set_is_all_there() -> None:
    assert len(BUILDING) >= 25 and {
        "api_driver.hip",
        "api_graphs_cuda12.hip",
        "macro_launches.ggl.hip",
    } <= set(BUILDING)


def test_driver_calls_return_hips_errors_and_take_hips_pointers(tmp_path: Path) -> None:
    """A driver-style call's result is a hipError_t; a hipDeviceptr_t and a plain device pointer both pass, and
    HIP's runtime-typed arrays (hipArray_t) and access descriptors;
    hipFree(0) still frees nothing; the driver's error numbers are the runtime's for every pair porter maps."""
    nvcc = _nvcc()
    api = load_data("porter.backends.hip", "cuda2hip_api.toml")
    pairs: dict[str, tuple[list[str], list[str]]] = {}
    for rows in api.values():
        for cuda, row in rows.items() if isinstance(rows, dict) else ():
            hip = row.get("hip") if isinstance(row, dict) else None
            if isinstance(hip, str) and hip.startswith("hipError"):
                driver, runtime = pairs.setdefault(hip, ([], []))
                (driver if cuda.startswith("CUDA_ERROR_") else runtime).append(cuda)
    asserts = [
        f'static_assert((int){d} == (int){r}, "{d}");'
        for driver, runtime in pairs.values()
        for d in driver
        for r in runtime
        if re.fullmatch(r"\w+", d + r)
    ]
    assert len(asserts) > 40
    source = tmp_path / "calls.hip"
    source.write_text(
        "#include <hip/hip_runtime.h>\n"
        + "\n".join(asserts)
        + """
int calls(hipModule_t mod, hipStream_t stream) {
    hipDeviceptr_t d = 0;
    float* p = nullptr;
    hipError_t e = hipInit(0);
    e = hipMalloc(&d, 64);
    e = hipMalloc(&p, 64);
    e = hipMalloc((void**)&p, 64);
    float h[16] = {0};
    e = hipMemcpyHtoD(d, h, sizeof h);
    e = hipMemcpyHtoD(p, h, sizeof h);
    e = hipMemcpyDtoHAsync(h, p, sizeof h, stream);
    e = hipMemsetD32(p, 0, 16);
    size_t bytes = 0;
    e = hipModuleGetGlobal(&d, &bytes, mod, "g");
    e = hipModuleGetGlobal((hipDeviceptr_t*)&p, &bytes, mod, "g");
    hipFunction_t f;
    e = hipModuleGetFunction(&f, mod, "k");
    void* args[] = {&p};
    e = hipModuleLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, 0);
    e = hipModuleLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
    hipFuncCache_t cache;
    e = hipCtxGetCacheConfig(&cache);
    e = hipCtxSetCacheConfig(hipFuncCachePreferL1);
    hipArray_t array = nullptr;
    HIP_ARRAY_DESCRIPTOR desc{};
    e = hipArrayCreate(&array, &desc);
    e = hipMemcpyHtoA(array, 0, h, sizeof h);
    e = hipMemcpyAtoH(h, array, 0, sizeof h);
    e = hipArrayDestroy(array);
    hipMemAccessDesc access{};
    e = hipMemSetAccess(p, 64, &access, 1);
    e = hipFree(d);
    e = hipFree(p);
    e = hipFree(0);
    e = hipFree(nullptr);
    return e == hipSuccess || e == hipErrorNotFound ? 0 : 1;
}
"""
    )
    done = _compile(nvcc, source, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_c_file_keeps_the_driver_names(tmp_path: Path) -> None:
    """porter_hip_driver.h is C++; a C file including hip/hip_runtime.h still gets HIP's driver names as the
    driver's own (hipInit -> cuInit, returning CUresult), from porter_hip_names.h."""
    nvcc = _nvcc()
    source = tmp_path / "driver.c"
    source.write_text(
        "#include <hip/hip_runtime.h>\n"
        "int f(void) {\n"
        "    hipDeviceptr_t d = 0;\n"
        "    hipModule_t m;\n"
        "    CUresult r = hipInit(0);\n"
        "    r = hipMemcpyHtoD(d, 0, 0);\n"
        '    r = hipModuleLoad(&m, "k.cubin");\n'
        "    return (int)r;\n"
        "}\n"
    )
    (tmp_path / NAMES_HEADER).write_text(hip_names_header())
    cmd = [nvcc, "-c", "-o", os.devnull, f"-I{include_dir()}", f"-I{tmp_path}", str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
