"""The hardware fields of a prompt (``prompts/hardware.md``): what the performance model's device
table says of the device a candidate is timed on, and the kernel's static cost and floor there."""

from __future__ import annotations

from porter.backends import Device
from porter.harness import perfmodel
from porter.results import KernelCost


def _fmt_rate(value: float | None, unit: str) -> str:
    if not value:
        return "unknown"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _fmt_bytes(value: int | float | None) -> str:
    if value is None:
        return "unknown"
    for scale, prefix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= scale:
            return f"{value / scale:.4g} {prefix}"
    return f"{int(value)} B"


def hardware_fields(device: Device, cost: KernelCost | None, size: dict[str, int]) -> dict[str, str]:
    """The hardware.md fields for `device` from the performance model's table."""
    entry = perfmodel.entry_for(device)
    fields = {
        "device_name": device.name,
        "device_kind": device.kind,
        "arch": device.arch,
        "warp_size": str(device.facts.warp_size),
        "bench_size": ", ".join(f"{k}={v}" for k, v in size.items()) or "unknown",
    }
    notes: list[str] = []
    if not device.times:
        notes.append(
            f"Note: this is a {device.kind} device; its times say little about GPU speed, so favour "
            "changes that help real GPUs (coalescing, fewer memory passes, occupancy)."
        )
    if entry is not None:
        fields.update(
            bandwidth=_fmt_rate(entry.memory_bandwidth, "B/s"),
            fp32_flops=_fmt_rate(entry.flops_vector.get("fp32"), "FLOP/s"),
            fp64_flops=_fmt_rate(entry.flops_vector.get("fp64"), "FLOP/s"),
            multiprocessors=str(entry.multiprocessors or device.facts.multiprocessors or "unknown"),
            warp_size=str(entry.warp_size),
            shared_per_sm=_fmt_bytes(entry.shared_per_sm),
            registers_per_sm=str(entry.registers_per_sm or "unknown"),
            max_threads_per_sm=str(entry.max_threads_per_sm or "unknown"),
            cache_bytes=_fmt_bytes(entry.cache_bytes or None),
        )
    if cost is not None:
        fields.update(bytes=str(cost.bytes), flops=str(cost.total_flops))
        if entry is not None:
            roof = perfmodel.roofline(cost, entry, device.host_cores)
            if roof.floor_ms is not None:
                fields.update(floor=f"{roof.floor_ms:.4g} ms", bound=roof.bound)
            elif roof.note:
                notes.append(f"No roofline floor here: {roof.note}.")
    fields.setdefault("floor", "unknown")
    fields.setdefault("bound", "unknown")
    fields["hardware_notes"] = "\n".join(notes)
    return fields
