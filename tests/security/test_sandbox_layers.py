"""Each sandbox layer on its own: what code inside a confined child can and cannot do.

These tests do not go through the screen or the device-build gate: they are what holds when both are
fooled.  A child confined by :func:`porter.sandbox.enter` and :func:`porter.sandbox.lock_down` tries
to run commands, fork, open sockets, write outside its scratch folder, read the user's files and
signal its parent; then real emulated kernels try the same through inline system calls and glibc
aliases from a load-time constructor.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from porter.backends.isolate import Job, run_job

from porter import sandbox

pytestmark = pytest.mark.integration

PROBE = textwrap.dedent(
    """
    import json, os, socket, subprocess, sys, threading
    from porter import sandbox
    scratch, mark, secret = sys.argv[1:4]
    plan = sandbox.Plan(scratch=scratch, limits=sandbox.limits_for("cpu", 60, None))
    sandbox.enter(plan)
    sandbox.lock_down(plan)
    out = {"layers": sorted(sandbox.state().active)}
    def attempt(name, fn):
        try:
            fn()
            out[name] = "allowed"
        except OSError as err:
            out[name] = f"denied: {err.strerror}"
    out["system"] = os.system(f"touch {mark}")
    attempt("subprocess", lambda: subprocess.run(["/bin/true"]))
    attempt("fork", os.fork)
    attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    attempt("unix-socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    attempt("write-outside", lambda: open(mark, "w").write("x"))
    attempt("read-user-file", lambda: open(secret).read())
    attempt("write-scratch", lambda: open(os.path.join(scratch, "ok"), "w").write("x"))
    attempt("signal-parent", lambda: os.kill(os.getppid(), 0))
    t = threading.Thread(target=lambda: out.__setitem__("thread", "ran"))
    t.start(); t.join()
    print(json.dumps(out))
    """
)


def test_a_confined_child_can_compute_but_not_reach_out(tmp_path: Path) -> None:
    missing = sandbox.missing_required()
    if any(m.name in ("filesystem", "seccomp") for m in missing):
        pytest.skip(f"sandbox layers unavailable here: {missing}")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    mark = tmp_path / "pwned"
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's data")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(scratch), str(mark), str(secret)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"filesystem", "seccomp", "rlimits", "parent-death"} <= set(out["layers"])
    assert out["system"] != 0 and not mark.exists()
    for name in ("subprocess", "fork", "socket", "unix-socket", "write-outside", "read-user-file"):
        assert out[name].startswith("denied"), (name, out[name])
    assert out["signal-parent"].startswith("denied")
    assert out["write-scratch"] == "allowed" and (scratch / "ok").read_text() == "x"
    assert out["thread"] == "ran"  # threads are not processes: runtimes keep their worker threads


# Native code that reaches for the host by routes no blocklist names: glibc aliases, raw system calls
# in inline assembly, and a constructor in .init_array that runs when the library is loaded.  The
# emulator would refuse to build it (poisoned names, no inline assembly); this is what holds if a
# binary like it were loaded anyway: the child loads it after lock_down, as it loads every kernel.
NATIVE = r"""
extern "C" void* _IO_popen(const char*, const char*);
extern "C" void* _IO_fopen(const char*, const char*);
extern "C" int _Fork(void);
static void boot() { _IO_fopen("MARK-ctor", "w"); _IO_popen("touch MARK-ctor-popen", "r"); }
__attribute__((section(".init_array"), used)) static void (*boot_ptr)() = boot;

static long raw3(long nr, long a, long b, long c) {
    long ret;
    asm volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

extern "C" void attack(long* out)
{
    const char* sh = "/bin/sh";
    const char* argv[] = {"/bin/sh", "-c", "touch MARK-execve", 0};
    out[0] = (long)(_IO_popen("touch MARK-popen", "r") != 0);
    out[1] = (long)(_IO_fopen("MARK-fopen", "w") != 0);
    out[2] = raw3(59, (long)sh, (long)argv, 0);                 // execve
    out[3] = raw3(2, (long)"MARK-open", 0101, 0644);            // open(O_WRONLY|O_CREAT)
    out[4] = raw3(41, 2, 1, 0);                                 // socket(AF_INET, SOCK_STREAM)
    int pid = _Fork();
    if (pid == 0) { _IO_fopen("MARK-fork", "w"); __builtin_trap(); }
    out[5] = pid;
    out[6] = raw3(57, 0, 0, 0);                                 // fork
}
"""

LOADER = textwrap.dedent(
    """
    import ctypes, json, sys
    from porter import sandbox
    scratch, library = sys.argv[1:3]
    plan = sandbox.Plan(scratch=scratch, readable=(library,), limits=sandbox.limits_for("cpu", 60, None))
    sandbox.enter(plan)
    sandbox.lock_down(plan)
    lib = ctypes.CDLL(library + "/native.so")  # its constructor runs here, under the filter
    out = (ctypes.c_long * 8)()
    lib.attack(out)
    print(json.dumps(list(out)))
    """
)


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86_64 system calls")
def test_native_code_and_its_load_time_constructor_are_contained(tmp_path: Path) -> None:
    missing = sandbox.missing_required()
    if any(m.name in ("filesystem", "seccomp") for m in missing):
        pytest.skip(f"sandbox layers unavailable here: {missing}")
    if shutil.which("g++") is None:
        pytest.skip("g++ missing")
    marks = tmp_path / "outside"
    marks.mkdir()
    src = tmp_path / "native.cpp"
    src.write_text(NATIVE.replace("MARK", str(marks / "pwned")))
    lib = tmp_path / "lib" / "native.so"
    lib.parent.mkdir()
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True, timeout=120)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, str(scratch), str(lib.parent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert list(marks.iterdir()) == [], "native code acted on the host"
    assert proc.returncode == 0, proc.stderr
    popen, fopen, execve, open_, sock, fork_c, fork_raw, _ = json.loads(proc.stdout)
    assert (popen, fopen) == (0, 0)
    assert execve < 0 and open_ < 0 and sock < 0 and fork_raw < 0  # -EPERM / -EACCES from the kernel
    assert fork_c < 0


OPENCL_HOST_CALL = """
int system(__constant char* command);
__kernel void k(__global float* out)
{
    out[get_global_id(0)] = (float)system("touch MARK");
}
"""


def test_opencl_kernels_cannot_reach_the_host(tmp_path: Path) -> None:
    from porter.backends import get_backend

    try:
        devices = get_backend("opencl").devices()
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"OpenCL unavailable: {err}")
    runnable = [d for d in devices if d.kind != "checker"]
    if not runnable:
        pytest.skip("no OpenCL device here")
    for device in runnable:
        mark = tmp_path / f"pwned-{device.index}-{device.platform.split()[0]}"
        job = Job(
            backend="opencl",
            source=OPENCL_HOST_CALL.replace("MARK", str(mark)),
            entry="k",
            device=device,
            args=(np.zeros(4, dtype=np.float32),),
            grid=(4,),
            block=(1,),
            use_cache=False,
        )
        res = run_job(job, timeout_s=120)
        assert not mark.exists(), f"{device.label}: the kernel ran a host command"
        if res.ok:  # the runtime resolved `system` from libc: it ran, and the sandbox refused it
            assert (res.outputs[0][0] != 0).all(), device.label
