"""OpenCL devices: enumerate every platform of every ICD, keep the ones that really work.

A device is kept when a small probe kernel (probe.cl) builds and computes the right answer
on it; names are never trusted.  The probe runs once per device per process.  Live handles
(context, in-order profiling queue) are created once per device and looked up again from a
plain :class:`~porter.backends.Device` by (platform, name, index).
"""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from importlib import resources
from types import ModuleType
from typing import Any

import numpy as np
from porter.backends import Device, HardwareFacts, pci_uid

from .icd import Registration, register_intel_cpu_runtime
from .oclgrind import checker_device, oclgrind_path, settings
from .requirements import (
    NONE,
    Capabilities,
    build_options,
    parse_version,
    ptx_subgroups_source,
    supports,
    with_ptx_subgroups,
)

PROBE_ENTRY = "porter_probe"
PROBE_N = 37  # not a multiple of any work-group size: the bounds check must work too


@functools.cache
def icd_registration() -> Registration:
    """Register a pip-installed Intel CPU runtime with the ICD loader, once per process (before
    pyopencl is imported, so before any platform is enumerated)."""
    return register_intel_cpu_runtime()


def pyopencl() -> ModuleType | None:
    """The pyopencl module, or None when it is not installed (imported on first use)."""
    icd_registration()
    try:
        import pyopencl as cl
    except ImportError:
        return None
    return cl


@dataclass
class Live:
    """The runtime objects behind one Device: created once per process."""

    device: Device
    cl_device: Any
    cl_platform: Any
    context: Any = None
    queue: Any = None
    scratch: Any = None  # buffer written by flush_cache
    info: dict[str, str] = field(default_factory=dict)
    caps: Capabilities = NONE  # extensions, features, sub-group sizes (requirements.py)

    def ensure_queue(self) -> Any:
        if self.queue is None:
            cl = pyopencl()
            assert cl is not None
            self.context = cl.Context([self.cl_device])
            self.queue = cl.CommandQueue(
                self.context, self.cl_device, properties=cl.command_queue_properties.PROFILING_ENABLE
            )
        return self.queue


@dataclass
class Inventory:
    live: list[Live] = field(default_factory=list)  # usable devices, in enumeration order
    rejected: list[str] = field(default_factory=list)  # "platform / device: why"
    error: str = ""  # why enumeration itself failed


def _version(text: str) -> str:
    match = re.search(r"OpenCL (?:C )?(\d+\.\d+)", text)
    return match.group(1) if match else "?"


def _kind(cl: ModuleType, cl_device: Any) -> str:
    dtype = int(cl_device.type)
    if dtype & int(cl.device_type.CPU):
        return "cpu"
    if dtype & int(cl.device_type.GPU):
        return "gpu"
    return "accelerator"


def build_quietly(program: Any, options: bytes, cl_device: Any) -> None:
    """Build `program` for `cl_device` without pyopencl's CompilerWarning (the log is read from the
    program instead; some runtimes, Intel's among them, always write one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program.build(options, [cl_device])


def _source(name: str) -> str:
    return resources.files("porter.backends.opencl").joinpath(name).read_text(encoding="utf-8")


def _probe_source() -> str:
    return _source("probe.cl")


PROBE_HELPERS = ("porter_shuffle_down",)  # [warp_helpers] of cuda2opencl.toml the sub-group probe calls


def subgroup_probe_source() -> str:
    """probe_subgroups.cl with the translation's own [warp_helpers] text (cuda2opencl.toml) where it says
    PORTER_WARP_HELPERS, behind porter's own sub-groups as a translation carries them ([facts.ptx_subgroups]):
    the probe runs exactly what a translated kernel calls."""
    from porter.backends import load_data

    helpers = load_data("porter.backends.opencl", "cuda2opencl.toml")["warp_helpers"]
    text = "\n".join(str(helpers[name]["source"]).strip("\n") for name in PROBE_HELPERS)
    probe = _source("probe_subgroups.cl").replace("PORTER_WARP_HELPERS", text)
    return ptx_subgroups_source() + "\n\n" + probe


def _probe(cl: ModuleType, cl_device: Any) -> int:
    """Build and run the probe kernel; returns the preferred work-group multiple. Raises on failure."""
    ctx = cl.Context([cl_device])
    queue = cl.CommandQueue(ctx, cl_device)
    program = cl._cl._Program(ctx, _probe_source())
    build_quietly(program, b"", cl_device)
    kernel = cl.Kernel(program, PROBE_ENTRY)
    a = np.arange(PROBE_N, dtype=np.float32)
    b = np.full(PROBE_N, 0.5, dtype=np.float32)
    flags = cl.mem_flags
    buf_a = cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=a)
    buf_b = cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=b)
    buf_c = cl.Buffer(ctx, flags.READ_WRITE, a.nbytes)
    cl.enqueue_fill_buffer(queue, buf_c, np.float32(-1.0), 0, a.nbytes)
    kernel.set_arg(0, buf_a)
    kernel.set_arg(1, buf_b)
    kernel.set_arg(2, buf_c)
    kernel.set_arg(3, np.int32(PROBE_N))
    cl.enqueue_nd_range_kernel(queue, kernel, (64,), None)
    out = np.empty_like(a)
    cl.enqueue_copy(queue, out, buf_c, is_blocking=True)
    queue.finish()
    if not np.array_equal(out, 2.0 * a + b):
        raise ValueError("probe kernel computed wrong values")
    warp = int(
        kernel.get_work_group_info(cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, cl_device)
    )
    return max(warp, 1)


def _c_versions(cl_device: Any) -> tuple[tuple[int, int], ...]:
    found: set[tuple[int, int]] = set()
    try:
        for nv in cl_device.opencl_c_all_versions:  # OpenCL 3.0 devices
            v = int(nv.version)
            found.add((v >> 22, (v >> 12) & 0x3FF))
    except Exception:  # noqa: BLE001 - older devices and runtimes: the one version string
        pass
    newest = parse_version(str(cl_device.opencl_c_version))
    if newest is not None:
        found.add(newest)
        if newest < (3, 0):
            found |= {v for v in _KNOWN_C_VERSIONS if v <= newest}
    return tuple(sorted(found))


_KNOWN_C_VERSIONS = ((1, 0), (1, 1), (1, 2), (2, 0))  # a 3.x device lists its versions itself


def _features(cl_device: Any) -> frozenset[str]:
    try:
        return frozenset(str(nv.name) for nv in cl_device.opencl_c_features)
    except Exception:  # noqa: BLE001 - not an OpenCL 3.0 device
        return frozenset()


def _run_ints(cl: ModuleType, program: Any, ctx: Any, queue: Any, entry: str, local: int) -> np.ndarray:
    kernel = cl.Kernel(program, entry)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, local * 4)
    cl.enqueue_fill_buffer(queue, buf, np.int32(-7), 0, local * 4)
    kernel.set_arg(0, buf)
    cl.enqueue_nd_range_kernel(queue, kernel, (local,), (local,))
    out = np.empty(local, np.int32)
    cl.enqueue_copy(queue, out, buf, is_blocking=True)
    return out


def _declared(cl: ModuleType, cl_device: Any) -> Capabilities:
    """What the device says it offers (extensions, features, OpenCL C versions) and what it is (its type and
    vendor): nothing is run."""
    return Capabilities(
        extensions=frozenset(str(cl_device.extensions).split()),
        features=_features(cl_device),
        c_versions=_c_versions(cl_device),
        device_type=_kind(cl, cl_device),
        vendor=str(cl_device.vendor).strip(),
    )


BRANCH_BARRIER_GROUPS = 4  # of probe_barriers.cl's run; its sums: 253 per group, 122 for the last


def _branch_barriers_wrong(cl: ModuleType, cl_device: Any) -> bool:
    """Whether the device computes probe_barriers.cl wrongly: barriers in a loop in both branches of an if/else
    on the group's id (Debian's PoCL 3.1 does).  A probe that does not build or run says nothing (False)."""
    try:
        if int(cl_device.max_work_group_size) < 64:
            return False
        ctx = cl.Context([cl_device])
        queue = cl.CommandQueue(ctx, cl_device)
        program = cl._cl._Program(ctx, _source("probe_barriers.cl"))
        build_quietly(program, b"", cl_device)
        kernel = cl.Kernel(program, "porter_branch_barriers")
        n = BRANCH_BARRIER_GROUPS
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, n * 4)
        cl.enqueue_fill_buffer(queue, buf, np.int32(-7), 0, n * 4)
        kernel.set_arg(0, buf)
        cl.enqueue_nd_range_kernel(queue, kernel, (64 * n,), (64,))
        out = np.empty(n, np.int32)
        cl.enqueue_copy(queue, out, buf, is_blocking=True)
    except Exception:  # noqa: BLE001 - a probe that cannot run proves nothing against the device
        return False
    return [int(v) for v in out] != [253] * (n - 1) + [122]


def _capabilities(cl: ModuleType, cl_device: Any) -> Capabilities:
    """Extensions, features, OpenCL C versions and the sub-group sizes that really run; the requirements
    whose probe computed a wrong answer are `broken` (the device does not meet them, its builds leave out the
    kernels needing them: requirements.disabled) -- barriers in both branches of an if/else among them."""
    caps = _sub_group_capabilities(cl, cl_device)
    if _branch_barriers_wrong(cl, cl_device):
        caps = replace(caps, broken=caps.broken | {"branch_barriers"})
    return caps


def _sub_group_capabilities(cl: ModuleType, cl_device: Any) -> Capabilities:
    """What the device declares, with the sub-group sizes that really run and the sub-group requirements whose
    probe (probe_subgroups.cl) computed a wrong answer."""
    declared = _declared(cl, cl_device)
    caps = declared
    if not any(n in caps.extensions or n in caps.features for n in _SUBGROUP_MARKS):
        # porter's own sub-groups where a rule names the device ([facts.ptx_subgroups]), kept only if the probe
        # computes right with them
        caps = with_ptx_subgroups(declared) or declared
        if not caps.emulated:
            return caps
    options = " ".join(build_options(replace(caps, sub_group_sizes=frozenset()), ["subgroups"]))
    try:
        ctx = cl.Context([cl_device])
        queue = cl.CommandQueue(ctx, cl_device)
        program = cl._cl._Program(ctx, subgroup_probe_source())
        build_quietly(program, options.encode(), cl_device)
        names = str(program.get_info(cl.program_info.KERNEL_NAMES)).split(";")
        local = min(64, int(cl_device.max_work_group_size))
        if "porter_subgroup_size" not in names:
            return declared
        if caps.emulated and not set(_PROBE_KERNELS) <= set(names):
            return declared  # porter's own sub-groups are proven by every probe kernel or not used at all
        size = int(_run_ints(cl, program, ctx, queue, "porter_subgroup_size", local).max())
        sizes: set[int] = set()
        broken: set[str] = set()
        runs_32 = "porter_subgroup_32" in names and local % 32 == 0
        if runs_32 and np.all(_run_ints(cl, program, ctx, queue, "porter_subgroup_32", local) == 32):
            # and a warp reduction through the translation's porter_shuffle_down gives the right sum: sizes that
            # run wrong are sizes the device does not have
            summed = (
                _run_ints(cl, program, ctx, queue, "porter_subgroup_32_sum", local)
                if "porter_subgroup_32_sum" in names
                else None
            )
            if summed is None or summed[0] == 496:
                sizes.add(32)
            else:
                broken.add("reqd_sub_group_size_32")
        if "porter_subgroup_xor_sum" in names and not _xor_sum_right(
            cl, program, ctx, queue, caps, size, local
        ):
            broken.add("subgroup_shuffle")  # the general shuffles (Intel's CPU runtime 2025, 32 wide: 42)
        queue.finish()
    except Exception:  # noqa: BLE001 - sub-groups that do not work are no sub-groups
        return declared
    if caps.emulated and (broken or 32 not in sizes):
        return declared  # porter's own sub-groups are all right or not used at all
    return replace(
        caps, sub_group_sizes=frozenset(sizes), max_sub_group_size=max(size, 0), broken=frozenset(broken)
    )


def _xor_sum_right(
    cl: ModuleType, program: Any, ctx: Any, queue: Any, caps: Capabilities, size: int, local: int
) -> bool:
    """Whether porter_subgroup_xor_sum (a sub_group_shuffle_xor butterfly sum, stored by the first work-item)
    gives the sum of its sub-group's lanes: 496 in the 32-wide sub-group it requires where sizes can be
    required, else n(n-1)/2 in sub-groups of the device's size n (not checked where n is no power of two)."""
    if "cl_intel_required_subgroup_size" in caps.extensions:
        if local % 32:
            return True
        n = 32
    else:
        n = min(size, local)
        if n <= 0 or n & (n - 1) or local % n:
            return True
    return int(_run_ints(cl, program, ctx, queue, "porter_subgroup_xor_sum", local)[0]) == n * (n - 1) // 2


_SUBGROUP_MARKS = ("cl_khr_subgroups", "__opencl_c_subgroups")
_PROBE_KERNELS = (
    "porter_subgroup_size",
    "porter_subgroup_32",
    "porter_subgroup_32_sum",
    "porter_subgroup_xor_sum",
)


def _checker_live(cl_platform: Any, cl_device: Any) -> Live:
    device = checker_device(_version(str(cl_device.version)), str(cl_device.driver_version))
    return Live(
        device=device, cl_device=cl_device, cl_platform=cl_platform, info=_info(cl_platform, cl_device)
    )


def _info(cl_platform: Any, cl_device: Any) -> dict[str, str]:
    return {
        "platform": str(cl_platform.name).strip(),
        "platform_version": str(cl_platform.version).strip(),
        "device": str(cl_device.name).strip(),
        "driver": str(cl_device.driver_version).strip(),
        "opencl_c": str(cl_device.opencl_c_version).strip(),
    }


def _pci_uid(cl: ModuleType, cl_device: Any) -> str:
    """A GPU's PCI address through its vendor's OpenCL extension (NVIDIA's cl_nv_device_attribute_query,
    AMD's cl_amd_device_attribute_query topology), the one its CUDA or HIP view reports; "" elsewhere."""
    extensions = str(getattr(cl_device, "extensions", ""))
    with contextlib.suppress(Exception):
        if "cl_nv_device_attribute_query" in extensions:
            info = cl.device_info
            domain = cl_device.get_info(info.PCI_DOMAIN_ID_NV) if hasattr(info, "PCI_DOMAIN_ID_NV") else 0
            bus, slot = (
                int(cl_device.get_info(info.PCI_BUS_ID_NV)),
                int(cl_device.get_info(info.PCI_SLOT_ID_NV)),
            )
            # the slot is the PCI device number itself: an H100 at 00:06.0 (nvidia-smi) reads bus 0, slot 6 on
            # driver 580 (measured on the lent machine, 2026-12-05), not device << 3 | function
            return pci_uid(domain, bus & 0xFF, slot & 0x1F)
        if "cl_amd_device_attribute_query" in extensions:
            topology = cl_device.get_info(cl.device_info.TOPOLOGY_AMD)
            return pci_uid(0, topology.bus, topology.device)
    return ""


def _enumerate(cl: ModuleType) -> Inventory:
    inventory = Inventory()
    try:
        platforms = cl.get_platforms()
    except cl.Error as err:  # no ICD registered: PLATFORM_NOT_FOUND_KHR
        inventory.error = f"no OpenCL platform ({err})"
        return inventory
    seen: dict[tuple[str, str], int] = {}
    checker_platform = settings()["platform"]
    for cl_platform in platforms:
        platform_name = str(cl_platform.name).strip()
        try:
            cl_devices = cl_platform.get_devices()
        except cl.Error as err:
            inventory.rejected.append(f"{platform_name}: cannot list devices ({err})")
            continue
        for cl_device in cl_devices:
            name = str(cl_device.name).strip()
            index = seen.get((platform_name, name), 0)
            seen[(platform_name, name)] = index + 1
            if platform_name == checker_platform:
                inventory.live.append(_checker_live(cl_platform, cl_device))
                continue
            try:
                warp = _probe(cl, cl_device)
                caps = _capabilities(cl, cl_device)
            except Exception as err:  # any failure at all disqualifies the device
                inventory.rejected.append(
                    f"{platform_name} / {name}: probe failed ({str(err).strip()[:300]})"
                )
                continue
            info = _info(cl_platform, cl_device)
            kind = _kind(cl, cl_device)
            if supports(caps, "reqd_sub_group_size_32"):
                warp = 32  # a kernel assuming 32-wide warps is built to run with 32-wide sub-groups
            elif caps.max_sub_group_size:
                warp = caps.max_sub_group_size
            device = Device(
                backend="opencl",
                name=name,
                arch=f"opencl-{_version(str(cl_device.version))}/{kind}",
                kind=kind,
                index=index,
                platform=platform_name,
                compiler=f"opencl:{platform_name}",
                driver=info["driver"],
                facts=HardwareFacts(
                    warp_size=warp,
                    max_threads_per_block=int(cl_device.max_work_group_size),
                    shared_mem_per_block=int(cl_device.local_mem_size),
                    multiprocessors=int(cl_device.max_compute_units),
                    subgroups=supports(caps, "subgroups"),
                ),
                uid=_pci_uid(cl, cl_device) if kind == "gpu" else "",
                contracts=True,
            )
            inventory.live.append(
                Live(device=device, cl_device=cl_device, cl_platform=cl_platform, info=info, caps=caps)
            )
    return inventory


@functools.cache
def inventory() -> Inventory:
    """Every usable OpenCL device of this process (probed once)."""
    cl = pyopencl()
    if cl is None:
        return Inventory(error="pyopencl is not installed")
    try:
        return _enumerate(cl)
    except Exception as err:  # a broken ICD must not take porter down
        return Inventory(error=f"OpenCL enumeration failed: {err}")


def listed_devices() -> list[Device]:
    """Usable devices, then the Oclgrind checker when it is installed but not the live platform."""
    found = [live.device for live in inventory().live]
    if not any(d.kind == "checker" for d in found) and oclgrind_path() is not None:
        found.append(checker_device())
    return found


def capabilities(device: Device) -> Capabilities:
    """What `device` offers beyond OpenCL C 1.2 (nothing when it is not reachable here)."""
    entry = live(device)
    return entry.caps if entry is not None else NONE


_adopted: dict[tuple[str, str, int], Live] = {}


def adopt(device: Device) -> None:
    """In a job's child process: take `device` as its parent found and probed it -- the handles of that
    one device, no probe kernels built or run on any device (with the runtimes' caches in the child's
    scratch folder, the probes cost more than the job's own launches).  Its capabilities are the ones
    the device declares (the child plans nothing by them), marked unprobed: the -D options leaving out what
    the device failed porter's probe of come with the parent's build options, not from the declaration.  Nothing happens for the checker device, or
    when the device is not found here (the job then reports it as every other failure)."""
    cl = pyopencl()
    if cl is None or device.kind == "checker":
        return
    key = (device.platform, device.name, device.index)
    if key in _adopted:
        return
    try:
        for cl_platform in cl.get_platforms():
            if str(cl_platform.name).strip() != device.platform:
                continue
            named = [d for d in cl_platform.get_devices() if str(d.name).strip() == device.name]
            if device.index < len(named):
                cl_device = named[device.index]
                _adopted[key] = Live(device=device, cl_device=cl_device, cl_platform=cl_platform,
                                     info=_info(cl_platform, cl_device),
                                     caps=replace(_declared(cl, cl_device), probed=False))  # fmt: skip
                return
    except Exception:  # noqa: BLE001 - then the device is found as in any process
        return


def opened() -> Iterator[Live]:
    """The live devices of this process: the adopted ones, then (only if asked for more) the inventory."""
    yield from list(_adopted.values())
    yield from inventory().live


def live(device: Device) -> Live | None:
    """The live handles for `device` in this process, or None when it is not reachable here."""
    adopted = _adopted.get((device.platform, device.name, device.index))
    if adopted is not None:
        return adopted
    for entry in inventory().live:
        d = entry.device
        if (d.platform, d.name, d.index) == (device.platform, device.name, device.index):
            return entry
    return None
