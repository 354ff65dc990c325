"""Hostile model replies through `porter optimize`, end to end: the real Anthropic SDK against the
scripted loopback server, the real harness on the CPU emulator (and OpenCL devices where present).

Each reply tries to act on the host (run a command, write a file outside the scratch folder, load a
library, open a socket) by a route that once got past the screen.  None may have any effect; every
one must be reported `failed` or `rejected` with a reason, none `validated`, and no result file
written.  The first six are the replies of the security probe that created files on the host.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import optimize_once

pytestmark = pytest.mark.integration

SIGNATURE = "__global__ void vector_add(const float* a, const float* b, float* c, int n)"
BODY = "int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];"

# name -> (code before the kernel, a statement inside it); {mark} is a path outside every scratch folder.
ATTACKS: dict[str, tuple[str, str]] = {
    "parenthesised-system": ('extern "C" int system(const char*);', '(system)("touch {mark}");'),
    "freopen": ("#include <cstdio>", 'freopen("{mark}", "w", stdout); printf("owned\\n");'),
    "token-pasting": (
        '#define J(a, b) a##b\nextern "C" int J(sys, tem)(const char*);',
        'J(sys, tem)("touch {mark}");',
    ),
    "constructor": (
        'extern "C" int system(const char*);\n'
        '__device__ __attribute__((constructor)) void boot() { (system)("touch {mark}"); }',
        "",
    ),
    "line-splice": ('extern "C" int sys\\\ntem(const char*);', 'sys\\\ntem("touch {mark}");'),
    "global-initialiser": (
        'extern "C" int system(const char*);\n__device__ int booted = (system)("touch {mark}");',
        "if (booted == 12345) c[0] = 0;",
    ),
    # glibc aliases that no blocklist names: only a device compiler (and the sandbox) stop them
    "libc-alias-popen": (
        'extern "C" void* _IO_popen(const char*, const char*);',
        '_IO_popen("touch {mark}", "r");',
    ),
    "libc-alias-fopen": (
        'extern "C" void* _IO_fopen(const char*, const char*);',
        '_IO_fopen("{mark}", "w");',
    ),
    "asm-syscall": ("", 'asm volatile("mov $57, %%eax; syscall" ::: "rax", "rcx", "r11", "memory");'),
    "dlopen": (
        'extern "C" void* dlopen(const char*, int);',
        'dlopen("libc.so.6", 2);',
    ),
    "socket": (
        'extern "C" int socket(int, int, int);\nextern "C" int connect(int, const void*, unsigned);',
        "int s = socket(2, 1, 0); connect(s, 0, 0);",
    ),
    "section-init-array": (
        'extern "C" void* _IO_fopen(const char*, const char*);\n'
        'static void boot() { _IO_fopen("{mark}", "w"); }\n'
        '__attribute__((section(".init_array"), used)) static void (*boot_ptr)() = boot;',
        "",
    ),
    "trap-loop": ("", "while (i >= 0) __builtin_trap();"),
}


def reply(name: str, mark: Path) -> str:
    before, inside = ATTACKS[name]
    before, inside = before.replace("{mark}", str(mark)), inside.replace("{mark}", str(mark))
    return (
        "Here is a faster version.\n\n```cuda\n"
        f"{before}\n{SIGNATURE}\n{{\n    {inside}\n    {BODY}\n}}\n```\n"
    )


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hostile_reply_has_no_effect_and_is_not_validated(tmp_path, server, program, emulator, name):
    mark = tmp_path / "outside" / f"pwned-{name}"
    mark.parent.mkdir()
    server.script(reply(name, mark))
    out_dir = tmp_path / "out"
    out = optimize_once(tmp_path, server, program)
    assert not mark.exists(), f"{name}: the reply acted on the host"
    assert list(mark.parent.iterdir()) == []
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    (row,) = doc["kernels"][0]["variants"]
    assert row["status"] in ("failed", "rejected") and row["reason"], row
    report = json.loads((out_dir / "report.json").read_text())
    assert set(report["sandbox"]["layers"]) >= {"seccomp", "filesystem", "network", "rlimits"}
    (attempt,) = report["attempts"]
    assert attempt["status"] in ("failed", "rejected") and attempt["reason"], attempt
    assert not (out_dir / "vector_add.best.cu").exists()
    assert not list(out_dir.glob("*.best.*"))


# Replies the screen lets through (every function defined, no host call by name) that a GPU compiler
# refuses: only the device-build gate stops them before the emulator would run them natively.
GATED: dict[str, tuple[str, str]] = {
    "dynamic-initialiser": (
        "__device__ int compute_seed() { return 7; }\n__device__ int seed = compute_seed();",
        "if (seed == 12345) c[0] = 0;",
    ),
    "host-function-from-kernel": (
        "__host__ int host_only() { return 1; }",
        "if (host_only() == 2) c[0] = 0;",
    ),
}


@pytest.mark.parametrize("name", sorted(GATED))
def test_code_a_gpu_compiler_refuses_is_never_run(tmp_path, server, program, emulator, name):
    from porter.harness.gate import device_build_check
    from porter.model import Variant

    before, inside = GATED[name]
    code = f"{before}\n{SIGNATURE}\n{{\n    {inside}\n    {BODY}\n}}\n"
    probe = device_build_check(Variant("vector_add", "cuda", code, "vector_add", "test"))
    if "no GPU device compiler" in probe.reason:
        pytest.skip(probe.reason)
    assert not probe.ok and "does not build as device code" in probe.reason, probe
    server.script("Faster.\n\n```cuda\n" + code + "```\n")
    out_dir = tmp_path / "out"
    out = optimize_once(tmp_path, server, program)
    assert out.returncode == 1, out.stdout + out.stderr
    (attempt,) = json.loads((out_dir / "report.json").read_text())["attempts"]
    assert attempt["status"] == "failed" and "does not build as device code" in attempt["reason"], attempt
    assert not list(out_dir.glob("*.best.*"))
