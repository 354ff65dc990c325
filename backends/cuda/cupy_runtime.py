"""Running cubins/PTX on NVIDIA GPUs through CuPy (imported lazily; absent CuPy means no devices).

Buffers are CuPy arrays.  Kernel arguments are CuPy arrays (passed as pointers) and NumPy
scalars (passed by value with their dtype's C type); Python ints/floats are refused because their
C type would be a guess.  Every CUDA call goes through CuPy, which raises on error; those errors
become :class:`LaunchError`.  An untimed launch synchronizes, so an asynchronous fault surfaces at
the launch that caused it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from porter.backends import Binary, Device, HardwareFacts, LaunchError, pci_uid
from porter.backends.cuda.toolchain import facts


def cupy_module() -> Any | None:
    try:
        import cupy
    except Exception:  # ImportError, or a CuPy built for another CUDA failing at import
        return None
    return cupy


SPIN_ENV = "PORTER_CUDA_SPIN"  # "1": leave the driver's default (spin while waiting for the GPU)
CU_CTX_SCHED_BLOCKING_SYNC = 0x04  # cuda.h


@cache
def wait_mode(index: int) -> str:
    """How this process waits for device `index`: "blocking", or why it spins.

    A CUDA context's default schedule (CU_CTX_SCHED_AUTO) spins a core while the host waits for the GPU
    whenever the process has fewer contexts than the machine has processors -- always, for porter's
    children.  porter times kernels with CUDA events (GPU clocks), so the host's wake-up latency never
    enters a time; spinning only burns a core per waiting child, which on a machine porting many programs
    at once is taken from the compilers and the other children.  So the device's primary context (the one
    CuPy uses) is set to block on a synchronisation primitive, once per process, before CuPy creates it
    (CUDA 11 and later also accept it after).  ``PORTER_CUDA_SPIN=1`` keeps the driver's default."""
    if os.environ.get(SPIN_ENV, "").strip() == "1":
        return f"spin ({SPIN_ENV}=1)"
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        set_flags = getattr(lib, "cuDevicePrimaryCtxSetFlags_v2", None) or lib.cuDevicePrimaryCtxSetFlags
        handle = ctypes.c_int()
        rc = lib.cuInit(0) or lib.cuDeviceGet(ctypes.byref(handle), int(index))
        rc = rc or set_flags(handle, ctypes.c_uint(CU_CTX_SCHED_BLOCKING_SYNC))
    except (OSError, AttributeError) as err:
        return f"spin (the driver library: {err})"
    return "blocking" if rc == 0 else f"spin (CUDA driver error {rc})"


def _on(cp: Any, index: int) -> Any:
    """``cp.cuda.Device(index)``, its context set to block while waiting (:func:`wait_mode`) first."""
    wait_mode(int(index))
    return cp.cuda.Device(index)


def _version(code: int) -> str:
    """CUDA's 13000 -> '13.0'."""
    return f"{code // 1000}.{(code % 1000) // 10}"


@cache
def device_properties(index: int) -> dict[str, Any]:
    cp = cupy_module()
    assert cp is not None
    return dict(cp.cuda.runtime.getDeviceProperties(index))


@cache
def list_devices(backend: str = "cuda", platform: str = "cuda") -> tuple[Device, ...]:
    """The NVIDIA GPUs CuPy sees; () without CuPy or GPU. Never raises."""
    cp = cupy_module()
    if cp is None:
        return ()
    try:
        count = cp.cuda.runtime.getDeviceCount()
        driver = _version(cp.cuda.runtime.driverGetVersion())
    except Exception:
        return ()
    devices = []
    for index in range(count):
        try:
            props = device_properties(index)
        except Exception:
            continue
        name = props.get("name", b"NVIDIA GPU")
        devices.append(
            Device(
                backend=backend,
                name=name.decode() if isinstance(name, bytes) else str(name),
                arch=f"sm_{props['major']}{props['minor']}",
                kind="gpu",
                index=index,
                platform=platform,
                compiler="nvvm",  # nvcc, NVRTC and HIP on CUDA alike
                driver=driver,
                facts=HardwareFacts(
                    warp_size=int(props.get("warpSize", 32)),
                    max_threads_per_block=int(props.get("maxThreadsPerBlock", 1024)),
                    shared_mem_per_block=int(props.get("sharedMemPerBlock", 48 * 1024)),
                    multiprocessors=int(props["multiProcessorCount"])
                    if "multiProcessorCount" in props
                    else None,
                ),
                uid=pci_uid(props.get("pciDomainID"), props.get("pciBusID"), props.get("pciDeviceID")),
                contracts=True,
            )
        )
    return tuple(devices)


def _dims(dims: Sequence[int]) -> tuple[int, int, int]:
    values = [int(d) for d in dims]
    if not 1 <= len(values) <= 3 or any(v < 1 for v in values):
        raise LaunchError(f"cuda: launch dimensions must be 1 to 3 positive integers, got {tuple(dims)}")
    values += [1] * (3 - len(values))
    return values[0], values[1], values[2]


def _check_args(args: Sequence[Any], cp: Any) -> tuple[Any, ...]:
    """The arguments as CuPy passes them; None (a pointer the program passed as null) as a null pointer:
    a zero of a pointer's size."""
    out: list[Any] = []
    for i, arg in enumerate(args):
        if arg is None:
            out.append(np.uintp(0))
            continue
        if isinstance(arg, cp.ndarray | np.generic):
            out.append(arg)
            continue
        raise LaunchError(
            f"cuda: kernel argument {i} is a {type(arg).__name__}; pass CuPy arrays (from alloc/to_device), "
            "NumPy scalars such as np.int32(n), or None for a null pointer"
        )
    return tuple(out)


class CupyProgram:
    """One loaded kernel: call it with (*args, grid=, block=, shared_bytes=, timed=)."""

    def __init__(self, binary: Binary, device: Device):
        cp = cupy_module()
        if cp is None:
            raise LaunchError("cuda: CuPy is not installed; pip install 'porter-gpu[cuda-run]'")
        self._cp = cp
        self.entry = binary.entry
        self.device_index = device.index
        self._dir = tempfile.TemporaryDirectory(prefix="porter-cuda-")
        # CuPy memoizes modules by path: name the file by its content.
        digest = hashlib.sha256(binary.data).hexdigest()[:16]
        path = Path(self._dir.name, f"kernel-{digest}.{binary.format}")
        data = binary.data
        if binary.format == "ptx" and not data.endswith(b"\x00"):
            data += b"\x00"
        path.write_bytes(data)
        self._dynamic_limit = int(facts()["default_dynamic_shared_limit"])
        try:
            with _on(cp, self.device_index):
                module = cp.RawModule(path=str(path))
                self._module = module  # for set_symbol (module globals: __constant__/__device__)
                # bind_texture's device copies, alive as long as the module
                self._textures: dict[str, Any] = {}
                self._kernel = module.get_function(binary.entry)
                # Loads the module now (RawKernel loads lazily), so load errors surface here.
                self.static_shared = int(self._kernel.shared_size_bytes)
                self.registers = int(self._kernel.num_regs)
        except Exception as err:
            raise LaunchError(
                f"cuda: cannot load {binary.entry} ({binary.format}, {binary.arch}, {binary.toolchain}) on {device.label} (driver {device.driver or '?'}): {err}"
            ) from err
        self._dynamic_set = 0

    def _allow_dynamic_shared(self, shared_bytes: int) -> None:
        """Kernels using more than 48 KiB of dynamic shared memory must opt in first."""
        if shared_bytes <= self._dynamic_limit or shared_bytes <= self._dynamic_set:
            return
        self._kernel.max_dynamic_shared_size_bytes = int(shared_bytes)
        self._dynamic_set = int(shared_bytes)

    def set_symbol(self, name: str, value: np.ndarray | np.generic) -> None:
        """cudaMemcpyToSymbol: copy `value` into the module global `name` (at most its declared size)."""
        host = np.ascontiguousarray(value).reshape(-1)
        self._write_global(
            name, lambda: host,
            lambda size: f"cuda: {host.nbytes} bytes for the global {name!r} of {self.entry}'s module, which holds {size}",
            f"cuda: cannot set the global {name!r} of {self.entry}'s module",
        )  # fmt: skip

    def _write_global(
        self, name: str, contents: Callable[[], np.ndarray], too_small: Callable[[int], str], failed: str
    ) -> None:
        """The module global `name` set to `contents()` (made on the program's device) and the device
        synchronised; a global smaller than that is ``too_small(its size)``, any other failure `failed`."""
        cp = self._cp
        try:
            with _on(cp, self.device_index):
                host = contents()
                memptr = self._module.get_global(name)
                size = getattr(getattr(memptr, "mem", None), "size", None)
                if size is not None and 0 < int(size) < host.nbytes:
                    raise LaunchError(too_small(int(size)))
                cp.ndarray(host.shape, host.dtype, memptr).set(host)
                cp.cuda.runtime.deviceSynchronize()
        except LaunchError:
            raise
        except Exception as err:
            raise LaunchError(f"{failed}: {err}") from err

    def bind_texture(self, name: str, value: np.ndarray) -> None:
        """cudaBindTexture for the HIP translation's texture references (``porter_texref<T>``: the bound
        pointer and its size in bytes first, backends/hip/texrefs.py) -- CUDA 12 and later have no texture
        references of their own: a device copy of `value`, kept with the program, is what `name` reads."""
        host = np.ascontiguousarray(value).reshape(-1)

        def pointer_and_size() -> np.ndarray:  # the device copy made first, on the program's device
            data = self._cp.asarray(host) if host.nbytes else None
            self._textures[name] = data
            return np.array([int(data.data.ptr) if data is not None else 0, host.nbytes], dtype=np.uint64)

        self._write_global(
            name, pointer_and_size,
            lambda size: f"cuda: the texture reference {name!r} of {self.entry}'s module holds {size} bytes, not a pointer and a size",
            f"cuda: cannot bind the texture reference {name!r} of {self.entry}'s module",
        )  # fmt: skip

    def __call__(
        self,
        *args: Any,
        grid: Sequence[int],
        block: Sequence[int],
        shared_bytes: int = 0,
        timed: bool = False,
    ) -> float | None:
        cp = self._cp
        grid3, block3 = _dims(grid), _dims(block)
        kernel_args = _check_args(args, cp)
        try:
            with _on(cp, self.device_index):
                self._allow_dynamic_shared(int(shared_bytes))
                if not timed:
                    self._kernel(grid3, block3, kernel_args, shared_mem=int(shared_bytes))
                    cp.cuda.get_current_stream().synchronize()
                    return None
                start, end = cp.cuda.Event(block=True), cp.cuda.Event(block=True)
                start.record()
                self._kernel(grid3, block3, kernel_args, shared_mem=int(shared_bytes))
                end.record()
                end.synchronize()
                return float(cp.cuda.get_elapsed_time(start, end))
        except LaunchError:
            raise
        except Exception as err:
            raise LaunchError(
                f"cuda: launch of {self.entry} grid={grid3} block={block3} shared={shared_bytes} failed: {err}"
            ) from err


def _cupy_or_raise() -> Any:
    cp = cupy_module()
    if cp is None:
        raise LaunchError("cuda: CuPy is not installed; pip install 'porter-gpu[cuda-run]'")
    return cp


def alloc(nbytes: int, index: int) -> Any:
    cp = _cupy_or_raise()
    try:
        with _on(cp, index):
            return cp.empty(max(int(nbytes), 1), dtype=cp.uint8)
    except Exception as err:
        raise LaunchError(f"cuda: cannot allocate {nbytes} bytes: {err}") from err


def to_device(array: np.ndarray, index: int) -> Any:
    cp = _cupy_or_raise()
    try:
        with _on(cp, index):
            return cp.asarray(np.ascontiguousarray(array))
    except Exception as err:
        raise LaunchError(f"cuda: cannot copy {array.nbytes} bytes to the device: {err}") from err


def to_host(buffer: Any, dtype: Any, shape: Sequence[int]) -> np.ndarray:
    cp = _cupy_or_raise()
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    try:
        with _on(cp, buffer.device.id):
            host = cp.asnumpy(buffer)
    except Exception as err:
        raise LaunchError(f"cuda: cannot copy the buffer back to the host: {err}") from err
    flat = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
    if flat.nbytes < count * dt.itemsize:
        raise LaunchError(
            f"cuda: buffer holds {flat.nbytes} bytes, {count} x {dt} needs {count * dt.itemsize}"
        )
    return flat[: count * dt.itemsize].view(dt).reshape(tuple(shape)).copy()


def synchronize(index: int) -> None:
    cp = _cupy_or_raise()
    try:
        with _on(cp, index):
            cp.cuda.runtime.deviceSynchronize()
    except Exception as err:
        raise LaunchError(f"cuda: device synchronize failed: {err}") from err


_FLUSH: dict[int, Any] = {}


def flush_cache(index: int) -> None:
    """Write a buffer twice the size of L2 (size read from the device) so no timed input stays cached."""
    cp = _cupy_or_raise()
    try:
        with _on(cp, index):
            buf = _FLUSH.get(index)
            if buf is None:
                l2 = int(device_properties(index).get("l2CacheSize", 0)) or 64 * 1024 * 1024
                buf = _FLUSH[index] = cp.empty(2 * l2 // 4, dtype=cp.int32)
            buf.fill(index + 1)
    except Exception as err:
        raise LaunchError(f"cuda: L2 flush failed: {err}") from err


# Shared memory is not cleared between launches: a block that reads slots nothing wrote sees
# whatever an earlier kernel left there, often zeros on an idle SM, which can make a kernel
# that reads uninitialised shared memory look correct.  Before each validation launch the
# harness fills every SM's shared memory with 0xFF bytes (NaN for floats and doubles, -1 for
# integers) so such reads surface as mismatches.  Volatile stores: the compiler must not drop
# them as dead.
_SCRUB_SOURCE = r"""
extern "C" __global__ void porter_scrub_shared(unsigned int words) {
    extern __shared__ unsigned int porter_scrub[];
    volatile unsigned int* s = porter_scrub;
    for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) s[i] = 0xFFFFFFFFu;
}
"""
_SCRUB: dict[int, tuple[Any, int, int]] = {}


def scrub_shared(index: int) -> None:
    """Fill the shared memory of every multiprocessor of device `index` with 0xFF bytes."""
    cp = _cupy_or_raise()
    try:
        with _on(cp, index):
            entry = _SCRUB.get(index)
            if entry is None:
                props = device_properties(index)
                per_block = int(
                    props.get("sharedMemPerBlockOptin") or props.get("sharedMemPerBlock") or 49152
                )
                blocks = 2 * int(props.get("multiProcessorCount") or 1)
                kernel = cp.RawKernel(_SCRUB_SOURCE, "porter_scrub_shared")
                kernel.max_dynamic_shared_size_bytes = per_block
                entry = _SCRUB[index] = (kernel, per_block, blocks)
            kernel, per_block, blocks = entry
            kernel((blocks,), (1024,), (np.uint32(per_block // 4),), shared_mem=per_block)
            cp.cuda.get_current_stream().synchronize()
    except Exception as err:
        raise LaunchError(f"cuda: shared-memory scrub failed: {err}") from err
