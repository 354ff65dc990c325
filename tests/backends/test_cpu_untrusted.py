"""The emulator builds untrusted device code (CompileOptions.untrusted) with libc's host functions
poisoned, however they are spelled; the user's own code, which may include host headers, builds as is."""

from __future__ import annotations

import shutil

import pytest
from porter.backends import CompileError, CompileOptions, get_backend

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ missing"),
]

UNTRUSTED = CompileOptions(untrusted=True)
KERNEL = "__global__ void k(float* a) { HOST a[0] = 1; }\n"

SPELLINGS = {
    "parenthesised": ('extern "C" int system(const char*);\n', '(system)("true");'),
    "token-pasting": (
        '#define J(a, b) a##b\nextern "C" int J(sys, tem)(const char*);\n',
        'J(sys, tem)("true");',
    ),
    "line-splice": ('extern "C" int sys\\\ntem(const char*);\n', 'sys\\\ntem("true");'),
    "constructor": ("__device__ __attribute__((constructor)) void boot() {}\n", ""),
    "section": ('__attribute__((section(".init_array"))) static void (*p)() = 0;\n', ""),
    "freopen": ("#include <cstdio>\n", 'freopen("x", "w", stdout);'),
    "getenv": ("#include <cstdlib>\n", 'if (getenv("HOME")) a[1] = 0;'),
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_untrusted_host_calls_do_not_compile(name: str) -> None:
    before, call = SPELLINGS[name]
    with pytest.raises(CompileError, match="poisoned"):
        get_backend("cpu").compile(before + KERNEL.replace("HOST", call), "k", UNTRUSTED)


def test_untrusted_device_code_with_standard_headers_compiles() -> None:
    src = '#include <cstdio>\n#include <cmath>\n__global__ void k(float* a) { printf("%f", sqrtf(a[0])); a[0] = 1; }\n'
    assert get_backend("cpu").compile(src, "k", UNTRUSTED).data


def test_the_users_own_code_may_include_host_headers() -> None:
    src = "#include <fstream>\n#include <cstdlib>\n" + KERNEL.replace("HOST", "")
    assert get_backend("cpu").compile(src, "k").data
    with pytest.raises(CompileError, match="poisoned"):
        get_backend("cpu").compile(src, "k", UNTRUSTED)


# Routes to the process's data that no name poisoning sees: only what the built .so imports tells.
IMPORTS = {
    "extern-environ": ('extern "C" __device__ char** environ;\n', "if (environ) a[1] = environ[0][0];"),
    "extern-__environ": ('extern "C" char** __environ;\n', "if (__environ) a[1] = __environ[0][0];"),
    "program-name": ('extern "C" char* program_invocation_name;\n', "a[1] = program_invocation_name[0];"),
    "weakref-alias": (
        'static char** w __attribute__((weakref("environ")));\n',
        "if (&w && w) a[1] = w[0][0];",
    ),
    "stdout": ("#include <cstdio>\n", "if (stdout) a[1] = 2;"),
    "libc-alias": ('extern "C" void* _IO_fopen(const char*, const char*);\n', '_IO_fopen("x", "w");'),
}


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_untrusted_code_cannot_import_host_symbols(name: str) -> None:
    before, use = IMPORTS[name]
    src = before + KERNEL.replace("HOST", use)
    assert get_backend("cpu").compile(src, "k").data  # the user's own code: built as written
    with pytest.raises(CompileError, match="host symbol"):
        get_backend("cpu").compile(src, "k", UNTRUSTED)


def test_a_kernels_own_global_named_like_libcs_stays_its_own(tmp_path) -> None:
    """`char** environ;` defined (not declared) by the kernel binds to itself (-Bsymbolic), never to the
    process environment the dynamic loader would otherwise pick (libc's definition comes first)."""
    import numpy as np
    from porter.backends.isolate import Job, run_job

    device = get_backend("cpu").devices()[0]
    src = 'extern "C" { __device__ char** environ; }\n' + KERNEL.replace(
        "HOST", "a[1] = environ ? 7.0f : -1.0f;"
    )
    res = run_job(Job("cpu", src, "k", UNTRUSTED, device, (np.zeros(2, np.float32),)), 120)
    assert res.ok, res.error + res.log
    assert res.outputs[0][0][1] == -1.0  # its own null pointer, not libc's environ


def test_what_device_code_uses_imports_fine() -> None:
    src = (
        "#include <cstdio>\n#include <cmath>\n#include <cassert>\n"
        "__global__ void k(float* a) { assert(a); float* p = (float*)malloc(4); *p = expf(a[0]);"
        ' a[0] = powf(*p, 2.0f) + (float)erf((double)a[1]) + lgammaf(a[2]); free(p); printf("%f", a[0]); }\n'
    )
    assert get_backend("cpu").compile(src, "k", UNTRUSTED).data
