"""Guard zones around the host memory a sandboxed child hands to a kernel (the CPU emulator's buffers,
an OpenCL CPU device's), so a write past or before an argument is a verdict and never heap corruption.

Child side.  Once :func:`arm` ran (the child does it for jobs on host-memory devices, before it loads the
kernel), :func:`host_bytes` gives each buffer its own mapping: inaccessible zones (``PROT_NONE``, at least
:data:`ZONE_MIN` each) before and after, the data starting :data:`ALIGN`-aligned as ``cudaMalloc``'s and
ending at most ``ALIGN - 1`` bytes before the zone after it -- exactly at it when its size is a multiple
of :data:`ALIGN`, as the harness makes every validated array (its poisoned software guard rounded up to
the page).  A native ``SIGSEGV`` handler (:data:`HANDLER_SOURCE`, built once through the cache) writes the
faulting address to :data:`FAULT_FILE` in the scratch folder and hands the signal on (Python's
faulthandler dumps the stack, the child dies of ``SIGSEGV`` as before).  Before each launch the child
writes where every argument's buffer lies (:func:`zones`) into its progress file.

Parent side.  :func:`locate` takes what the child wrote -- untrusted: the kernel ran in that process --
and answers only when the child died of ``SIGSEGV``, the address lies in the zone of one of the job's
arrays, and that buffer has the size the parent gave it.  The answer names a failure the parent already
knows happened (a child that died never passes); a forged report can only change its wording.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import os
import re
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HOST_MEMORY_KINDS = ("cpu", "emulator")  # the devices whose buffers are host memory: the zones guard them
PAGE = mmap.PAGESIZE
ALIGN = 256  # what cudaMalloc guarantees; kernels that cast to float4 rely on more than the element's
ZONE_MIN = 1 << 20  # inaccessible bytes on each side of a buffer, at least ...
ZONE_MAX = 64 << 20  # ... and at most (twice the buffer in between)
FAULT_FILE = "fault.txt"
NAMESPACE = "native"
PROT_NONE = 0

HANDLER_SOURCE = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include <sys/mman.h>

static int porter_fault_fd = -1;
static struct sigaction porter_fault_previous;
static volatile sig_atomic_t porter_fault_reported = 0;

/* Watched buffers (porter_watch_add): their data pages read-only while a launch runs, so the first store
   into one faults; the handler notes its address, gives every watched page its write access back and
   returns, and the store is retried and done.  Whether a kernel writes at all, even what was there. */
#define PORTER_WATCH_MAX 256
static uintptr_t porter_watch_lo[PORTER_WATCH_MAX], porter_watch_hi[PORTER_WATCH_MAX];
static volatile sig_atomic_t porter_watch_n = 0;
static volatile uintptr_t porter_watch_hit = 0;

static void porter_watch_release(void) {
    int i;
    for (i = 0; i < porter_watch_n; ++i)
        mprotect((void*)porter_watch_lo[i], porter_watch_hi[i] - porter_watch_lo[i], PROT_READ | PROT_WRITE);
    porter_watch_n = 0;
}

int porter_watch_add(uintptr_t lo, uintptr_t hi) {
    if (porter_watch_n >= PORTER_WATCH_MAX || hi <= lo) return -1;
    porter_watch_lo[porter_watch_n] = lo;
    porter_watch_hi[porter_watch_n] = hi;
    porter_watch_n = porter_watch_n + 1;
    return mprotect((void*)lo, hi - lo, PROT_READ);
}

uintptr_t porter_watch_end(void) {
    uintptr_t hit = porter_watch_hit;
    porter_watch_release();
    porter_watch_hit = 0;
    return hit;
}

/* The faulting address (and on x86-64 whether it was a write) on one line; then the previous handler
   (Python's faulthandler) takes the fault again when the instruction is retried, and the process dies. */
static void porter_fault_on_segv(int sig, siginfo_t* info, void* context) {
    int w;
    for (w = 0; w < porter_watch_n; ++w) {
        uintptr_t at = (uintptr_t)info->si_addr;
        if (at >= porter_watch_lo[w] && at < porter_watch_hi[w]) {
            if (!porter_watch_hit) porter_watch_hit = at;
            porter_watch_release();
            return; /* the store is retried, now allowed */
        }
    }
    if (!porter_fault_reported) {
        char line[] = "fault 0x0000000000000000 ?\n";
        uintptr_t address = (uintptr_t)info->si_addr;
        int i;
        porter_fault_reported = 1;
        for (i = 0; i < 16; ++i) line[23 - i] = "0123456789abcdef"[(address >> (4 * i)) & 15];
#if defined(__x86_64__)
        line[25] = (((ucontext_t*)context)->uc_mcontext.gregs[REG_ERR] & 2) ? 'w' : 'r';
#else
        (void)context;
#endif
        if (write(porter_fault_fd, line, sizeof line - 1) < 0) porter_fault_reported = 2;
    }
    sigaction(sig, &porter_fault_previous, 0);
}

int porter_fault_install(int fd) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = porter_fault_on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    porter_fault_fd = fd;
    return sigaction(SIGSEGV, &action, &porter_fault_previous);
}
"""

# ------------------------------------------------------------------------------- the child's side

_armed = False
_readable = 0  # arm(readable=B): the zones hold the byte B and may be read (writes still fault); 0: no access
_tag: str | None = None
_live: dict[int, tuple[str, int, int, int]] = {}  # data address -> (tag, bytes, zone start, zone end)
_keep: list[Any] = []  # the loaded handler library


@dataclass(frozen=True)
class Hit:
    """Where a child faulted, as the parent reads it: the buffer's tag, the fault's byte offset from the
    buffer's first byte (negative: before it) and the access ("write", "read" or "access")."""

    tag: str
    offset: int
    access: str


def armed() -> bool:
    """Whether buffers get guard zones in this process (only a child that ran :func:`arm`)."""
    return _armed


@contextlib.contextmanager
def tagged(tag: str) -> Iterator[None]:
    """Buffers made inside are recorded under `tag` (the argument's position, or a buffer's name)."""
    global _tag
    before, _tag = _tag, tag
    try:
        yield
    finally:
        _tag = before


@functools.cache
def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mprotect.restype = ctypes.c_int
    return libc


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def host_bytes(nbytes: int) -> np.ndarray:
    """`nbytes` (at least 1) of uninitialised host memory as a uint8 array: inside guard zones once
    :func:`arm` ran in this process, a plain NumPy array otherwise (the parent, tests)."""
    nbytes = max(int(nbytes), 1)
    if not _armed:
        return np.empty(nbytes, dtype=np.uint8)
    span = _round_up(nbytes, ALIGN)
    pages = _round_up(span, PAGE)
    zone = _round_up(min(max(2 * nbytes, ZONE_MIN), ZONE_MAX), PAGE)
    try:
        mapping = mmap.mmap(-1, zone + pages + zone, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError:  # no room for the zones (the sandbox's address-space limit): memory as before
        return np.empty(nbytes, dtype=np.uint8)
    anchor = ctypes.c_char.from_buffer(mapping)
    start = ctypes.addressof(anchor)
    del anchor  # the mapping can be unmapped once the array below is gone
    libc = _libc()
    offset = zone + pages - span
    protection = PROT_NONE
    if _readable:  # what a read out of bounds finds: the pattern, in the zones and the slack around the data
        ctypes.memset(start, _readable, offset)
        ctypes.memset(start + offset + nbytes, _readable, zone + pages - offset - nbytes + zone)
        protection = mmap.PROT_READ
    if libc.mprotect(start, zone, protection) or libc.mprotect(start + zone + pages, zone, protection):
        return np.empty(nbytes, dtype=np.uint8)  # memory as before rather than no memory
    data = start + offset
    if _tag is not None:
        _live[data] = (_tag, nbytes, start, start + zone + pages + zone)
        weakref.finalize(mapping, _live.pop, data, None)
    return np.frombuffer(mapping, dtype=np.uint8, count=nbytes, offset=offset)


def _pages(data: int, nbytes: int) -> tuple[int, int]:
    """The pages holding a buffer of `nbytes` at `data` (host_bytes: its own mapping, zones on both sides, so
    no other data shares them), as [first, end)."""
    return data - data % PAGE, _round_up(data + nbytes, PAGE)


def watch() -> bool:
    """Make the data pages of every tagged buffer alive read-only until :func:`watched`, so the first store
    of a launch into any of them is noted (the handler of :func:`arm` gives the pages back at once): whether
    it wrote at all, even the value that was there.  False where this process cannot (not armed, no handler)."""
    if not _armed or not _keep or not _live:
        return False
    lib = _keep[0]
    lib.porter_watch_add.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    for data, (_tag, nbytes, _lo, _hi) in _live.items():
        if lib.porter_watch_add(*_pages(data, nbytes)) != 0:
            watched()
            return False
    return True


def watched() -> tuple[str, int] | None:
    """End :func:`watch`: the first store it saw, as the buffer's tag and the byte offset from its first
    byte; None when there was none."""
    if not _keep:
        return None
    lib = _keep[0]
    lib.porter_watch_end.restype = ctypes.c_size_t
    at = int(lib.porter_watch_end())
    if not at:
        return None
    for data, (tag, nbytes, _lo, _hi) in _live.items():
        first, end = _pages(data, nbytes)
        if first <= at < end:
            return tag, at - data
    return None


def zones() -> list[list[Any]]:
    """Every tagged buffer alive: ``[tag, data address, bytes, mapping start, mapping end]`` (JSON)."""
    return [[tag, data, nbytes, lo, hi] for data, (tag, nbytes, lo, hi) in _live.items()]


def _compiler() -> str | None:
    for name in ("cc", "gcc", "clang", "g++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _handler_library(scratch: Path) -> bytes | str:
    """The handler's shared library (through the cache), or why there is none."""
    from porter.cache import Cache

    compiler = _compiler()
    if compiler is None:
        return "no C compiler for the fault handler"
    real = os.path.realpath(compiler)
    try:
        stat = os.stat(real)
    except OSError as err:
        return f"{compiler}: {err}"
    cache = Cache()
    key = Cache.key("porter-fault-handler", HANDLER_SOURCE, real, str(stat.st_size), str(stat.st_mtime_ns))
    data = cache.get(NAMESPACE, key)
    if data is not None:
        return data
    with tempfile.TemporaryDirectory(prefix="porter-fault-", dir=scratch) as tmp:
        src, out = Path(tmp) / "porter_fault.c", Path(tmp) / "porter_fault.so"
        src.write_text(HANDLER_SOURCE, encoding="utf-8")
        cmd = [compiler, "-x", "c", "-O1", "-fPIC", "-shared", "-w", str(src), "-o", str(out)]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"the fault handler does not build: {err}"
        if done.returncode != 0 or not out.is_file():
            first = done.stderr.decode(errors="replace").strip().splitlines()[:1]
            return f"the fault handler does not build: {first[0] if first else done.returncode}"
        data = out.read_bytes()
    cache.put(NAMESPACE, key, data)
    return data


def arm(scratch: Path, readable: int = 0) -> str:
    """Give every later buffer of this process guard zones, and report a fault's address in
    ``scratch/FAULT_FILE``: "" when both are in place, else why the address is not reported (the zones
    are in place regardless).  Porter's code, run before the kernel is loaded.  `readable` (a byte, 1-255):
    the zones, and the slack on either side of each buffer, hold that byte and may be read -- a write there still faults
    -- so that a kernel reading out of bounds runs on, and two runs with two bytes tell whether what it
    reads there changes its result (Job.readable_guards)."""
    global _armed, _readable
    _armed = True
    _readable = int(readable) & 0xFF
    if _keep:
        return ""
    built = _handler_library(scratch)
    if isinstance(built, str):
        return built
    fd_lib, lib_path = tempfile.mkstemp(prefix="porter-fault-", suffix=".so", dir=scratch)
    try:
        with os.fdopen(fd_lib, "wb") as fh:
            fh.write(built)
        lib = ctypes.CDLL(lib_path)
    except OSError as err:
        return f"the fault handler does not load: {err}"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lib_path)
    fd = os.open(scratch / FAULT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    if lib.porter_fault_install(ctypes.c_int(fd)) != 0:
        os.close(fd)
        return "sigaction refused the fault handler"
    _keep.append(lib)
    return ""


# ------------------------------------------------------------------------------- the parent's side

_FAULT = re.compile(r"fault 0x([0-9a-f]{16}) ([wr?])\n")
_ACCESS = {"w": "write", "r": "read", "?": "access"}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def locate(fault_text: str, reported: Any, expected: Mapping[str, int]) -> Hit | None:
    """The buffer whose guard zone a dead child faulted in, from its fault line and its progress file's
    ``guards`` (both untrusted), given the bytes the parent made each tagged buffer (`expected`): None
    unless everything is consistent."""
    m = _FAULT.match(fault_text)
    if m is None or not isinstance(reported, list):
        return None
    address = int(m.group(1), 16)
    for entry in reported[:4096]:
        if not (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str)):
            continue
        tag, data, nbytes, lo, hi = entry
        if not all(_whole(v) for v in (data, nbytes, lo, hi)) or expected.get(tag) != nbytes:
            continue
        end = data + nbytes
        if not lo + PAGE <= data < end <= hi - PAGE or hi - lo > 2 * ZONE_MAX + 2 * _round_up(nbytes, PAGE):
            continue
        slack = _round_up(_round_up(nbytes, ALIGN), PAGE) - _round_up(nbytes, ALIGN)
        zone = data - slack - lo
        if lo <= address < data - slack or hi - zone <= address < hi:
            return Hit(tag, address - data, _ACCESS[m.group(2)])
    return None
