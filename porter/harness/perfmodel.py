"""The hardware performance model: the device table, occupancy, the roofline floor, % of peak.

* :func:`device_table` reads ``devices.toml`` (vendor datasheet figures, cited there).
* :func:`occupancy` is the classic occupancy calculation from the compile report: blocks per SM
  limited by threads, blocks, registers (allocated per warp, per scheduler partition) and shared
  memory (allocation granularity + the runtime's per-block reserve).
* :func:`roofline` gives the time *floor* of a kernel on a device before running it: the larger of
  compulsory bytes / peak bandwidth and FLOPs / peak FLOP/s (per dtype; matrix rates only for
  kernels that issue matrix instructions).  Written bytes that fit in the last-level cache can
  stay there when the kernel ends (they are written back later), so only the excess counts
  towards the memory floor; reads come from DRAM because the harness flushes the cache.
* :func:`assess` puts a measurement beside the floor: achieved bandwidth and FLOP/s, % of peak,
  the bound, and ``suspect`` when the time is below ``SUSPECT_FACTOR`` x the floor -- physically
  impossible, so a measurement error or a kernel that skips work, never a speedup.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

from porter.results import Assessment, KernelCost, Roofline

SUSPECT_FACTOR = 0.9


@dataclass(frozen=True)
class DeviceEntry:
    key: str
    name: str
    vendor: str
    arch: str
    aliases: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    memory_bandwidth: float | None = None  # bytes/s, datasheet
    measured_bandwidth: float | None = None  # bytes/s, measured device copy (read + write)
    multiprocessors: int | None = None
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    registers_per_sm: int | None = None
    max_registers_per_thread: int | None = None
    register_alloc_unit: int = 256
    register_partitions: int = 1
    shared_per_sm: int | None = None
    shared_per_block: int | None = None
    shared_alloc_unit: int = 128
    shared_reserved_per_block: int = 0
    l2_bytes: int | None = None
    last_level_cache_bytes: int | None = None
    per_core: bool = False  # flops are per core (CPU): multiplied by the core count
    no_roofline: str = ""  # the reason there is none (the emulator)
    flops_vector: dict[str, float] = field(default_factory=dict)
    flops_matrix: dict[str, float] = field(default_factory=dict)

    @property
    def cache_bytes(self) -> int:
        return int(self.last_level_cache_bytes or self.l2_bytes or 0)


@cache
def device_table() -> dict[str, DeviceEntry]:
    """Every device of ``devices.toml`` by key ("H200", "MI300X", "cpu", ...)."""
    text = resources.files("porter.harness").joinpath("devices.toml").read_text(encoding="utf-8")
    doc = tomllib.loads(text)
    out: dict[str, DeviceEntry] = {}
    for key, row in doc["devices"].items():
        flops = row.get("flops", {})
        fields = {k: v for k, v in row.items() if k in DeviceEntry.__dataclass_fields__ and k != "key"}
        fields["aliases"] = tuple(row.get("aliases", ()))
        fields["kinds"] = tuple(row.get("kinds", ()))
        out[key] = DeviceEntry(
            key=key,
            flops_vector={k: float(v) for k, v in flops.get("vector", {}).items()},
            flops_matrix={k: float(v) for k, v in flops.get("matrix", {}).items()},
            **fields,
        )
    return out


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def find_device(name: str, kind: str = "gpu") -> DeviceEntry | None:
    """The table entry for a runtime device name ("NVIDIA H200", "AMD Instinct MI300X", ...).

    Exact alias (case and punctuation ignored) first, then the longest alias found as a word
    sequence inside the name, then an entry that claims the device kind ("cpu", "emulator")."""
    table = device_table()
    wanted = _norm(name)
    for entry in table.values():
        if any(_norm(a) == wanted for a in (*entry.aliases, entry.key)):
            return entry
    best: tuple[int, DeviceEntry] | None = None
    for entry in table.values():
        for alias in entry.aliases:
            a = _norm(alias)
            if a and re.search(rf"(^| ){re.escape(a)}( |$)", wanted) and (best is None or len(a) > best[0]):
                best = (len(a), entry)
    if best is not None:
        return best[1]
    return next((e for e in table.values() if kind in e.kinds), None)


def entry_for(device: Any) -> DeviceEntry | None:
    """The table entry for a :class:`porter.backends.Device` (by its name and kind)."""
    return find_device(str(device.name), str(getattr(device, "kind", "gpu")))


# --------------------------------------------------------------------------- occupancy


class Occupancy(NamedTuple):
    active_blocks: int  # resident blocks per SM
    fraction: float  # active warps / maximum warps per SM
    limiter: str  # "threads" | "blocks" | "registers" | "shared" | "block-too-large" | ...


def occupancy(
    device: DeviceEntry, block_threads: int, registers_per_thread: int, shared_bytes_per_block: int = 0
) -> Occupancy:
    """Resident blocks per SM, occupancy and the limiting resource for one launch configuration."""
    if (
        device.registers_per_sm is None
        or device.max_threads_per_sm is None
        or device.max_blocks_per_sm is None
    ):
        return Occupancy(0, 0.0, "no occupancy model for this device")
    if block_threads < 1 or block_threads > device.max_threads_per_block:
        return Occupancy(0, 0.0, "block-too-large")
    warp = device.warp_size
    max_warps = device.max_threads_per_sm // warp
    warps_per_block = -(-block_threads // warp)
    limits: dict[str, int] = {
        "threads": max_warps // warps_per_block,
        "blocks": device.max_blocks_per_sm,
    }
    regs = max(0, int(registers_per_thread))
    if device.max_registers_per_thread is not None and regs > device.max_registers_per_thread:
        return Occupancy(0, 0.0, "registers")
    if regs:
        unit = device.register_alloc_unit
        per_warp = -(-regs * warp // unit) * unit
        per_partition = device.registers_per_sm // device.register_partitions
        warps_by_regs = (per_partition // per_warp) * device.register_partitions
        limits["registers"] = warps_by_regs // warps_per_block
    smem = max(0, int(shared_bytes_per_block))
    if smem:
        if device.shared_per_block is not None and smem > device.shared_per_block:
            return Occupancy(0, 0.0, "shared")
        unit = device.shared_alloc_unit
        per_block = -(-smem // unit) * unit + device.shared_reserved_per_block
        limits["shared"] = (device.shared_per_sm or 0) // per_block
    limiter = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    blocks = limits[limiter]
    fraction = blocks * warps_per_block / max_warps if max_warps else 0.0
    return Occupancy(blocks, min(1.0, fraction), limiter)


# --------------------------------------------------------------------------- roofline


def _cores() -> int:
    return os.cpu_count() or 1


def peak_flops(
    entry: DeviceEntry, dtype: str, tensor: bool = False, cores: int | None = None
) -> float | None:
    """The peak rate for operations in `dtype` ("float32" or "fp32" ...); matrix rates when `tensor`."""
    key = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int32": "int32"}.get(
        dtype, dtype
    )
    rates = [entry.flops_vector.get(key)]
    if tensor:
        rates.append(entry.flops_matrix.get(key))
    found = [r for r in rates if r]
    if not found:
        return None
    peak = max(found)
    if entry.per_core:
        peak *= cores or _cores()
    return peak


def roofline(cost: KernelCost, entry: DeviceEntry, cores: int | None = None) -> Roofline:
    """The time floor of the kernel on the device: max(bytes / bandwidth, FLOPs / peak)."""
    base = dict(device=entry.key, device_name=entry.name)
    if entry.no_roofline:
        return Roofline(
            **base,
            floor_ms=None,
            memory_ms=None,
            compute_ms=None,
            bound="",
            bandwidth=None,
            peak_flops=None,
            note=entry.no_roofline,
        )
    if not entry.memory_bandwidth:
        return Roofline(
            **base,
            floor_ms=None,
            memory_ms=None,
            compute_ms=None,
            bound="",
            bandwidth=None,
            peak_flops=None,
            note="no bandwidth figure for this device",
        )
    dram_bytes = cost.bytes_read + max(0, cost.bytes_written - entry.cache_bytes)
    memory_s = dram_bytes / entry.memory_bandwidth
    compute_s = 0.0
    missing = []
    for dtype, n in cost.flops.items():
        peak = peak_flops(entry, dtype, cost.tensor, cores)
        if peak is None:
            missing.append(dtype)
            continue
        compute_s += n / peak
    counted = sum(n for d, n in cost.flops.items() if d not in missing)
    effective_peak = counted / compute_s if compute_s > 0 else None
    note = f"no peak rate for {', '.join(missing)}: those FLOPs are not in the floor" if missing else ""
    floor_s = max(memory_s, compute_s)
    bound = "compute" if compute_s > memory_s else "memory"
    return Roofline(
        **base,
        floor_ms=floor_s * 1e3,
        memory_ms=memory_s * 1e3,
        compute_ms=compute_s * 1e3,
        bound=bound,
        bandwidth=entry.memory_bandwidth,
        peak_flops=effective_peak,
        note=note,
    )


def assess(
    cost: KernelCost, entry: DeviceEntry | None, median_ms: float, cores: int | None = None
) -> Assessment:
    """A measured median beside the model: % of peak and the suspect flag."""
    seconds = median_ms / 1e3
    achieved_bw = cost.bytes / seconds if seconds > 0 and cost.bytes else None
    achieved_fl = cost.total_flops / seconds if seconds > 0 and cost.total_flops else None
    if entry is None:
        return Assessment(
            median_ms,
            None,
            "",
            achieved_bw,
            None,
            None,
            achieved_fl,
            None,
            None,
            False,
            "device not in the table: no peak figures",
        )
    roof = roofline(cost, entry, cores)
    if roof.floor_ms is None:
        return Assessment(
            median_ms, None, "", achieved_bw, None, None, achieved_fl, None, None, False, roof.note
        )
    pct_bw = 100.0 * achieved_bw / entry.memory_bandwidth if achieved_bw and entry.memory_bandwidth else None
    pct_mbw = (
        100.0 * achieved_bw / entry.measured_bandwidth if achieved_bw and entry.measured_bandwidth else None
    )
    pct_fl = 100.0 * achieved_fl / roof.peak_flops if achieved_fl and roof.peak_flops else None
    pct_floor = 100.0 * roof.floor_ms / median_ms if median_ms > 0 else None
    suspect = median_ms <= 0 or median_ms < SUSPECT_FACTOR * roof.floor_ms
    reason = ""
    if suspect:
        reason = (
            f"measured {median_ms:.4g} ms is below the physical floor of {roof.floor_ms:.4g} ms "
            f"({roof.bound}-bound on {entry.name}): a measurement error or a kernel that skips work; "
            "not reported as a speedup"
        )
    return Assessment(
        median_ms=median_ms,
        floor_ms=roof.floor_ms,
        bound=roof.bound,
        achieved_bandwidth=achieved_bw,
        pct_bandwidth=pct_bw,
        pct_measured_bandwidth=pct_mbw,
        achieved_flops=achieved_fl,
        pct_compute=pct_fl,
        pct_of_floor=pct_floor,
        suspect=suspect,
        reason=reason,
    )


def gpu_entries() -> list[DeviceEntry]:
    """The table's accelerators (entries with a roofline and no per-core scaling)."""
    return [e for e in device_table().values() if not e.no_roofline and not e.per_core]


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
