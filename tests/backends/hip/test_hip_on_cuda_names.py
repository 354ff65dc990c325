"""Every HIP runtime/driver name porter's tables map must build on both platforms (#32 part 4): with hipcc for
AMD and through porter's HIP-on-CUDA headers (backends/hip/include + the generated porter_hip_names.h) with nvcc.

The names: the HIP targets of the hand table's runtime/driver groups and of the generated tables' runtime,
driver, types, enums, unions and defines families (supported or deprecated, present in the installed HIP 5.2).
Each is referenced once, on its own line, so a compiler error names it: ``using ::hipX;`` (functions, overloads
and templates included, types, enumerators) or ``(void)sizeof(hipX);`` for a macro HIP defines as a value.
A second source calls every function whose HIP 5.2 declaration the test can read with arguments of HIP's own
parameter types (``decltype(hipX(std::declval<T&>()...))``), which finds CUDA 13's changed signatures.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from porter.backends.hip.names import NAMES_HEADER, hip_names_header
from porter.backends.hip.tables import generate

ROOT = Path(__file__).resolve().parents[3]
HIP = Path("/usr/include/hip")
INCLUDE = ROOT / "backends" / "hip" / "include"
HAND_GROUPS = ("runtime", "runtime_removed", "types", "constants", "errors", "driver")
API_FAMILIES = ("runtime", "driver", "types", "enums", "unions", "defines")

# Names HIP-on-CUDA does not provide, with why.  The test fails if any other name stops compiling.
GL_HEADERS = Path("/usr/include/GL/gl.h").exists()  # .ci/system-deps.sh installs them (libgl-dev)
NOT_ON_CUDA: dict[str, str] = {
    **dict.fromkeys(
        ()
        if GL_HEADERS
        else ("GLenum", "GLuint", "hipGLDeviceList", "hipGLDeviceListAll", "hipGLDeviceListCurrentFrame")
        + (
            "hipGLDeviceListNextFrame",
            "hipGLGetDevices",
            "hipGraphicsGLRegisterBuffer",
            "hipGraphicsGLRegisterImage",
        ),
        "OpenGL interop: CUDA's cuda_gl_interop.h needs the system's GL headers, which this machine lacks",
    ),
    **dict.fromkeys(
        ("hipBindTexture", "hipBindTexture2D", "hipBindTextureToArray", "hipBindTextureToMipmappedArray")
        + (
            "hipUnbindTexture",
            "hipGetTextureAlignmentOffset",
            "hipGetTextureReference",
            "texture",
            "surfaceReference",
        ),
        "texture and surface references: removed in CUDA 12 (porter ports them through porter_bind_texture)",
    ),
    **dict.fromkeys(
        ("hipConfigureCall", "hipSetupArgument", "hipLaunchByPtr"),
        "the execution-control API cudaConfigureCall/cudaSetupArgument/cudaLaunch: removed in CUDA 10.1",
    ),
    **dict.fromkeys(
        ("hipLaunchCooperativeKernelMultiDevice", "hipLaunchParams")
        + ("hipCooperativeLaunchMultiDeviceNoPostSync", "hipCooperativeLaunchMultiDeviceNoPreSync"),
        "multi-device cooperative launch: removed in CUDA 13",
    ),
}

# Functions whose name compiles on CUDA 13 but not a call with HIP 5.2's parameter types (HIP-on-CUDA maps the
# name, the types differ); the test fails if another call stops compiling, and shrinking this list is the work left.
CALL_GAPS: dict[str, str] = {
    **dict.fromkeys(
        ("hipCtxGetSharedMemConfig", "hipCtxSetSharedMemConfig"),
        "cuCtxGetSharedMemConfig/cuCtxSetSharedMemConfig are deprecated in CUDA 13 and take CUsharedconfig",
    ),
    **dict.fromkeys(
        ("hipTexRefGetAddress", "hipTexRefGetAddressMode", "hipTexRefGetFilterMode", "hipTexRefGetFlags")
        + ("hipTexRefGetFormat", "hipTexRefGetMaxAnisotropy", "hipTexRefGetMipMappedArray")
        + ("hipTexRefGetMipmapFilterMode", "hipTexRefGetMipmapLevelBias", "hipTexRefGetMipmapLevelClamp")
        + (
            "hipTexRefSetAddressMode",
            "hipTexRefSetArray",
            "hipTexRefSetFilterMode",
            "hipTexRefSetMipmapFilterMode",
        ),
        "texture references (deprecated in both): HIP's const textureReference* and runtime enums vs CUtexref",
    ),
}

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _mapped_hip_names() -> dict[str, str]:
    """HIP name -> the CUDA name it maps from, for the names the installed HIP has."""
    index = generate.hip_index(HIP)
    api = tomllib.loads((ROOT / "backends" / "hip" / "cuda2hip_api.toml").read_text())
    hand = tomllib.loads((ROOT / "backends" / "hip" / "cuda2hip.toml").read_text())
    names: dict[str, str] = {}
    for group in HAND_GROUPS:
        for cuda, hip in hand["rename"][group].items():
            if isinstance(hip, str) and re.fullmatch(r"[A-Za-z_]\w*", hip):
                names.setdefault(hip, cuda)
    for family in API_FAMILIES:
        for cuda, row in api[family].items():
            hip = row.get("hip")
            if (
                isinstance(hip, str)
                and row["status"] != "unsupported"
                and row.get("in_hip", True)
                and re.fullmatch(r"[A-Za-z_]\w*", hip)
            ):
                names.setdefault(hip, cuda)
    # hiprtc and hip_complex live outside hip_runtime.h (porter's HIP-on-CUDA has neither header yet)
    skip = re.compile(r"(nvrtc|NVRTC|cuComplex|cuFloatComplex|cuDoubleComplex)")
    return {h: c for h, c in names.items() if index.has(h) and not skip.match(c)}


def _compile(side: str, lines: list[str], tag: dict[int, str], tmp: Path) -> tuple[int, dict[str, str], str]:
    src = tmp / f"{side}.cpp"
    src.write_text("\n".join(lines) + "\n")
    if side == "amd":
        cmd = ["hipcc", "--offload-arch=gfx90a", "-x", "hip", "-fsyntax-only", "-ferror-limit=0", str(src)]
        env = {**os.environ, "HIP_PLATFORM": "amd"}
    else:
        (tmp / NAMES_HEADER).write_text(hip_names_header())
        cmd = ["nvcc", "-arch=sm_90", "-c", "-x", "cu", "-I", str(INCLUDE), "-I", str(tmp), str(src)]
        cmd += ["-o", str(tmp / "nv.o")]
        env = dict(os.environ)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp)
    bad: dict[str, str] = {}
    for m in re.finditer(rf"{side}\.cpp[:(](\d+)[:)]?[^\n]*?error[: ]+([^\n]*)", done.stderr):
        if int(m.group(1)) in tag:
            bad.setdefault(tag[int(m.group(1))], m.group(2).strip())
    return done.returncode, bad, done.stderr


def _until_clean(side: str, build, names: set[str], tmp: Path) -> tuple[dict[str, str], int]:
    """Compile, drop the names that fail, again until it builds: (failing name -> first error, return code)."""
    failing: dict[str, str] = {}
    for _ in range(8):
        lines, tag = build(names - set(failing))
        rc, bad, stderr = _compile(side, lines, tag, tmp)
        if not bad:
            assert rc == 0, stderr[-3000:]
            return failing, rc
        failing.update(bad)
    raise AssertionError(f"{side}: still failing after 8 rounds: {sorted(failing)[:20]}")


@pytest.fixture(scope="module")
def compilers() -> None:
    for tool in ("hipcc", "nvcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")
    if not (HIP / "hip_runtime_api.h").exists():
        pytest.skip("HIP's headers not installed")


def _name_source(forms: dict[str, str]):
    def build(names: set[str]) -> tuple[list[str], dict[int, str]]:
        lines = ["#include <hip/hip_runtime.h>", "namespace porter_ref {"]
        tag: dict[int, str] = {}
        for h in sorted(n for n in names if forms[n] == "using"):
            lines.append(f"using ::{h};")
            tag[len(lines)] = h
        lines += ["}", "void porter_ref_values() {"]
        for h in sorted(n for n in names if forms[n] == "value"):
            lines.append(f"  (void)sizeof({h});")
            tag[len(lines)] = h
        lines.append("}")
        return lines, tag

    return build


def test_every_mapped_name_compiles_with_hipcc_and_through_hip_on_cuda(
    compilers: None, tmp_path: Path
) -> None:
    names = _mapped_hip_names()
    assert len(names) > 900
    forms = dict.fromkeys(names, "using")
    lines, tag = _name_source(forms)(set(names))
    _, bad, _ = _compile("amd", lines, tag, tmp_path)
    for h in bad:  # a macro HIP defines as a value (hipHostMallocMapped, HIP_LAUNCH_PARAM_END...)
        forms[h] = "value"
    amd_failing, _ = _until_clean("amd", _name_source(forms), set(names), tmp_path)
    assert not amd_failing, amd_failing
    nv_failing, _ = _until_clean("nv", _name_source(forms), set(names), tmp_path)
    unexpected = {h: e for h, e in nv_failing.items() if h not in NOT_ON_CUDA}
    assert not unexpected, (
        f"{len(unexpected)} mapped HIP names do not compile through HIP-on-CUDA: {unexpected}"
    )
    print(f"names: {len(names)} compile with hipcc, {len(names) - len(nv_failing)} through HIP-on-CUDA")


_QUALIFIERS = {"const", "volatile", "unsigned", "signed", "long", "short", "struct", "enum", "union"}


def _declarations(names: set[str]) -> dict[str, list[str]]:
    """HIP 5.2's parameter types of each mapped function declared plainly in hip_runtime_api.h."""
    text = generate._strip_comments((HIP / "hip_runtime_api.h").read_text(encoding="utf-8", errors="replace"))
    decls: dict[str, list[str]] = {}
    for m in re.finditer(r"\bhipError_t\s+(hip\w+)\s*\(([^;{}]*?)\)\s*;", text):
        name, params = m.group(1), m.group(2).strip()
        if name not in names or name in decls or "(" in params:
            continue
        types: list[str] = []
        for param in [] if params in ("", "void") else params.split(","):
            param = re.sub(r"\s+", " ", re.sub(r"\s*=.*$", "", param.strip(), flags=re.DOTALL))
            array = re.search(r"\[\s*\w*\s*\]$", param)
            if array:
                param = param[: array.start()].strip()
            named = re.match(r"^(.*?[\s*&])([A-Za-z_]\w*)$", param)
            if (
                named
                and named.group(1).strip()
                and not set(named.group(1).replace("*", " ").split()) <= _QUALIFIERS
            ):
                param = named.group(1).strip()
            types.append(param + ("*" if array else ""))
        decls[name] = types
    return decls


def test_mapped_functions_take_hips_argument_types_through_hip_on_cuda(
    compilers: None, tmp_path: Path
) -> None:
    names = _mapped_hip_names()
    decls = _declarations(set(names) - set(NOT_ON_CUDA))
    assert len(decls) > 250

    def build(todo: set[str]) -> tuple[list[str], dict[int, str]]:
        lines = ["#include <hip/hip_runtime.h>", "#include <utility>", "namespace porter_call {"]
        tag: dict[int, str] = {}
        for i, h in enumerate(sorted(todo)):
            args = ", ".join(f"std::declval<{t}&>()" for t in decls[h])
            lines.append(f"using r{i} = decltype({h}({args}));")
            tag[len(lines)] = h
        lines.append("}")
        return lines, tag

    # a declaration this reader gets wrong (a default argument with a comma...) fails on AMD too: left out
    unread, _ = _until_clean("amd", build, set(decls), tmp_path)
    nv_failing, _ = _until_clean("nv", build, set(decls) - set(unread), tmp_path)
    unexpected = {h: e for h, e in nv_failing.items() if h not in CALL_GAPS}
    assert not unexpected, f"calls with HIP's argument types that stopped compiling on CUDA: {unexpected}"
    closed = sorted(h for h in CALL_GAPS if h in decls and h not in unread and h not in nv_failing)
    assert not closed, f"calls that compile on CUDA now: take them off CALL_GAPS: {closed}"
    checked = len(decls) - len(unread)
    print(f"calls: {checked} checked, {checked - len(nv_failing)} compile through HIP-on-CUDA")
