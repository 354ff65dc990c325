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
