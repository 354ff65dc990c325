"""Running code objects on AMD GPUs through hip-python (``from hip import hip``), when present.

Imported lazily; without hip-python or an AMD GPU there are simply no devices.  Buffers are
:class:`HipBuffer` (device pointer + size).  Kernel arguments are HipBuffers (passed as pointers)
and NumPy scalars (passed by value with their dtype's C type), packed by hip-python's ``extra``
argument handling of hipModuleLaunchKernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from porter.backends import Binary, Device, HardwareFacts, LaunchError, pci_uid


def hip_module() -> Any | None:
    try:
        from hip import hip
    except Exception:  # ImportError, or the ROCm runtime library missing
        return None
    return hip


def _call(hip: Any, what: str, result: Any) -> Any:
    """hip-python returns (err, value...) tuples; raise LaunchError on anything but hipSuccess."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != hip.hipError_t.hipSuccess:
        raise LaunchError(f"hip: {what} failed: {err}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _text(value: Any) -> str:
    return value.decode(errors="replace").rstrip("\x00") if isinstance(value, bytes) else str(value)


@cache
def list_devices() -> tuple[Device, ...]:
    hip = hip_module()
    if hip is None:
        return ()
    try:
        count = _call(hip, "hipGetDeviceCount", hip.hipGetDeviceCount())
        driver = str(_call(hip, "hipDriverGetVersion", hip.hipDriverGetVersion()))
        devices = []
        for index in range(count):
            props = hip.hipDeviceProp_t()
            _call(hip, "hipGetDeviceProperties", hip.hipGetDeviceProperties(props, index))
            arch = _text(props.gcnArchName).split(":")[0]
            devices.append(
                Device(
                    backend="hip",
                    name=_text(props.name),
                    arch=arch,
                    kind="gpu",
                    index=index,
                    platform="rocm",
                    compiler="amd-clang",
                    driver=driver,
                    facts=HardwareFacts(
                        warp_size=int(props.warpSize),
                        max_threads_per_block=int(props.maxThreadsPerBlock),
                        shared_mem_per_block=int(props.sharedMemPerBlock),
                        multiprocessors=int(props.multiProcessorCount),
                    ),
                    uid=pci_uid(
                        getattr(props, "pciDomainID", None),
                        getattr(props, "pciBusID", None),
                        getattr(props, "pciDeviceID", None),
                    ),  # fmt: skip
                    contracts=True,
                )
            )
        return tuple(devices)
    except Exception:
        return ()


@dataclass
class HipBuffer:
    ptr: Any
    nbytes: int
    device: int


def _hip() -> Any:
    hip = hip_module()
    if hip is None:
        raise LaunchError("hip: hip-python is not installed (pip install hip-python)")
    return hip


def _set_device(hip: Any, index: int) -> None:
    _call(hip, "hipSetDevice", hip.hipSetDevice(index))


def alloc(nbytes: int, index: int) -> HipBuffer:
    hip = _hip()
    _set_device(hip, index)
    size = max(int(nbytes), 1)
    return HipBuffer(_call(hip, "hipMalloc", hip.hipMalloc(size)), size, index)


def to_device(array: np.ndarray, index: int) -> HipBuffer:
    hip = _hip()
    host = np.ascontiguousarray(array)
    buf = alloc(host.nbytes, index)
    kind = hip.hipMemcpyKind.hipMemcpyHostToDevice
    _call(hip, "hipMemcpy(HtoD)", hip.hipMemcpy(buf.ptr, host, host.nbytes, kind))
    return buf


def to_host(buffer: HipBuffer, dtype: Any, shape: Sequence[int]) -> np.ndarray:
    hip = _hip()
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if count * dt.itemsize > buffer.nbytes:
        raise LaunchError(
            f"hip: buffer holds {buffer.nbytes} bytes, {count} x {dt} needs {count * dt.itemsize}"
        )
    host = np.empty(tuple(shape), dtype=dt)
    _set_device(hip, buffer.device)
    kind = hip.hipMemcpyKind.hipMemcpyDeviceToHost
    _call(hip, "hipMemcpy(DtoH)", hip.hipMemcpy(host, buffer.ptr, host.nbytes, kind))
    return host


def synchronize(index: int) -> None:
    hip = _hip()
    _set_device(hip, index)
    _call(hip, "hipDeviceSynchronize", hip.hipDeviceSynchronize())


_FLUSH: dict[int, HipBuffer] = {}


def flush_cache(index: int, l2_bytes: int) -> None:
    hip = _hip()
    buf = _FLUSH.get(index)
    if buf is None:
        buf = _FLUSH[index] = alloc(2 * l2_bytes, index)
    _set_device(hip, index)
    _call(hip, "hipMemset", hip.hipMemset(buf.ptr, index + 1, buf.nbytes))


def _kernel_arg(arg: Any, i: int) -> Any:
    if isinstance(arg, HipBuffer):
        return arg.ptr
    if arg is None:  # a pointer the program passed as null: a zero of a pointer's size
        arg = np.uintp(0)
    if isinstance(arg, np.generic):
        dtype: np.dtype[Any] = arg.dtype  # any scalar type: NumPy's overloads are per type
        return np.ctypeslib.as_ctypes_type(dtype)(arg.item())
    raise LaunchError(
        f"hip: kernel argument {i} is a {type(arg).__name__}; pass HipBuffers, NumPy scalars or None"
    )


class HipProgram:
    def __init__(self, binary: Binary, device: Device):
        hip = _hip()
        self._hip = hip
        self.entry = binary.entry
        self.device_index = device.index
        _set_device(hip, device.index)
        self._module = _call(hip, "hipModuleLoadData", hip.hipModuleLoadData(binary.data))
        self._function = _call(
            hip, "hipModuleGetFunction", hip.hipModuleGetFunction(self._module, binary.entry.encode())
        )

    def __call__(
        self,
        *args: Any,
        grid: Sequence[int],
        block: Sequence[int],
        shared_bytes: int = 0,
        timed: bool = False,
    ) -> float | None:
        hip = self._hip
        g = [*(int(v) for v in grid), 1, 1][:3]
        b = [*(int(v) for v in block), 1, 1][:3]
        extra = tuple(_kernel_arg(a, i) for i, a in enumerate(args))
        _set_device(hip, self.device_index)

        def launch() -> None:
            result = hip.hipModuleLaunchKernel(
                self._function,
                *g,
                *b,
                sharedMemBytes=int(shared_bytes),
                stream=None,
                kernelParams=None,
                extra=extra,
            )
            _call(hip, f"launch of {self.entry}", result)

        if not timed:
            launch()
            _call(hip, "hipDeviceSynchronize", hip.hipDeviceSynchronize())
            return None
        start = _call(hip, "hipEventCreate", hip.hipEventCreate())
        stop = _call(hip, "hipEventCreate", hip.hipEventCreate())
        try:
            _call(hip, "hipEventRecord", hip.hipEventRecord(start, None))
            launch()
            _call(hip, "hipEventRecord", hip.hipEventRecord(stop, None))
            _call(hip, "hipEventSynchronize", hip.hipEventSynchronize(stop))
            return float(_call(hip, "hipEventElapsedTime", hip.hipEventElapsedTime(start, stop)))
        finally:
            hip.hipEventDestroy(start)
            hip.hipEventDestroy(stop)
