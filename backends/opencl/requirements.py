"""What a translated kernel needs beyond OpenCL C 1.2, and whether a device has it.

A :class:`~porter.model.TranslatedKernel` lists its needs by name in ``requires`` (for instance
``("subgroups", "subgroup_shuffle_relative", "reqd_sub_group_size_32")``); the names, their
source guards and how a device is checked for them are the ``[requirements]`` table of
``dialect.toml``.  A device's side is a :class:`Capabilities`, measured once when the device is
probed (extensions, OpenCL C features and versions, the sub-group sizes a probe kernel really ran
with).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from porter.backends.dialect import load_facts


@functools.cache
def table() -> dict[str, dict[str, Any]]:
    """``[requirements]`` of dialect.toml: name -> what, guard, extensions, features, needs..."""
    return {k: dict(v) for k, v in load_facts("porter.backends.opencl").requirements.items()}


@dataclass(frozen=True)
class Capabilities:
    extensions: frozenset[str] = frozenset()
    features: frozenset[str] = frozenset()  # OpenCL C 3.0 feature macros (__opencl_c_subgroups ...)
    c_versions: tuple[tuple[int, int], ...] = ()  # OpenCL C versions the compiler accepts
    sub_group_sizes: frozenset[int] = field(default_factory=frozenset)  # requirable sizes, probed
    max_sub_group_size: int = 0  # 0: no sub-groups
    device_type: str = ""  # "gpu", "cpu", "accelerator" (CL_DEVICE_TYPE); "" when not known
    vendor: str = ""  # CL_DEVICE_VENDOR ("NVIDIA Corporation")
    # requirements the device declares but whose porter probe (probe_subgroups.cl) computed a wrong answer
    broken: frozenset[str] = frozenset()
    # False: only what the device declares, its probe not run here (a job's child, devices.adopt): builds there
    # take the probe's verdicts from the parent (the variant's options), never a guess from the declaration
    probed: bool = True
    # the extensions porter's own text provides on this device ([facts.ptx_subgroups]: sub-groups as PTX warp
    # instructions), listed in `extensions` too; builds define the rule's macro (emulation_defines)
    emulated: frozenset[str] = frozenset()


NONE = Capabilities()


def parse_version(text: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def closure(requires: Iterable[str]) -> list[str]:
    """`requires` plus every requirement they need, in table order; unknown names kept last."""
    data = table()
    wanted: set[str] = set()
    stack = list(requires)
    while stack:
        name = stack.pop()
        if name in wanted:
            continue
        wanted.add(name)
        stack.extend(data.get(name, {}).get("needs", []))
    return [n for n in data if n in wanted] + sorted(wanted - set(data))


def _meets_one(caps: Capabilities, name: str) -> bool:
    entry = table().get(name)
    if entry is None or name in caps.broken:
        return False
    listed = (
        bool(entry.get("core"))
        or any(e in caps.extensions for e in entry.get("extensions", []))
        or any(f in caps.features for f in entry.get("features", []))
    )
    size = entry.get("sub_group_size")
    return listed and (size is None or int(size) in caps.sub_group_sizes)


def supports(caps: Capabilities, requirement: str) -> bool:
    """Whether a device with `caps` meets `requirement` and everything it needs."""
    return all(_meets_one(caps, n) for n in closure([requirement]))


def missing(caps: Capabilities, requires: Sequence[str]) -> list[str]:
    """The requirements (closure of `requires`) a device with `caps` does not meet."""
    return [n for n in closure(requires) if not _meets_one(caps, n)]


def build_options(caps: Capabilities, requires: Sequence[str]) -> tuple[str, ...]:
    """The OpenCL C build options `requires` needs on a device with `caps` (``-cl-std=CL3.0``
    where sub-groups come as an OpenCL C 3.0 feature, ``CL2.0`` on a 2.x device)."""
    out: list[str] = []
    # porter's own sub-groups are OpenCL C 1.2 functions: no newer OpenCL C for what only they give.  On an H100,
    # NVIDIA's OpenCL ran them in the reduction sample's program, built as OpenCL C 1.2, while the kernels' own
    # builds with -cl-std=CL3.0 (the probe's and the replays') came without the shuffle kernels
    native = replace(caps, extensions=caps.extensions - caps.emulated)
    for name in closure(requires):
        if not _meets_one(native, name):
            continue
        for std in table().get(name, {}).get("cl_std", []):
            version = parse_version(std)
            if version is not None and version in caps.c_versions:
                flag = f"-cl-std={std}"
                if flag not in out and not any(o.startswith("-cl-std=") for o in out):
                    out.append(flag)
                break
    return (*out, *probed_defines(caps))


def disabled(caps: Capabilities) -> tuple[str, ...]:
    """``-D`` options that leave out kernels needing what a device with `caps` declares but failed porter's
    probe of (a requirement's ``disable`` macro, where its extension is listed and the requirement not met)."""
    out: list[str] = []
    if not caps.probed:
        return ()
    for name, entry in table().items():
        macro = entry.get("disable")
        declared = bool(entry.get("core")) or any(e in caps.extensions for e in entry.get("extensions", []))
        if macro and declared and not _meets_one(caps, name):
            out.append(f"-D{macro}")
    return tuple(out)


def device_rule_matches(caps: Capabilities, rule: dict[str, Any]) -> bool:
    """Whether a device with `caps` is of a CL_DEVICE_TYPE `rule` names (its ``device_types``) and its
    CL_DEVICE_VENDOR begins with one of the rule's ``vendors``."""
    vendor = caps.vendor.strip()
    return caps.device_type in rule["device_types"] and any(vendor.startswith(v) for v in rule["vendors"])


@functools.cache
def ptx_subgroups_rule() -> dict[str, Any]:
    """``[facts.ptx_subgroups]`` of dialect.toml: the ``define``, ``source``, ``device_types``, ``vendors`` and
    ``provides`` of sub-groups as PTX warp instructions."""
    return dict(load_facts("porter.backends.opencl").facts["ptx_subgroups"])


SUBGROUP_MARKS = ("cl_khr_subgroups", "__opencl_c_subgroups", "cl_intel_subgroups")


def with_ptx_subgroups(caps: Capabilities) -> Capabilities | None:
    """`caps` with the sub-groups of [facts.ptx_subgroups] (its extensions listed and marked emulated) when the
    rule names the device and the device declares no sub-groups of its own; None otherwise.  Not yet proven:
    the caller runs porter's sub-group probe with it (devices.py)."""
    rule = ptx_subgroups_rule()
    own = any(m in caps.extensions or m in caps.features for m in SUBGROUP_MARKS)
    if own or not device_rule_matches(caps, rule):
        return None
    provided = frozenset(str(e) for e in rule["provides"])
    return replace(caps, extensions=caps.extensions | provided, emulated=provided - caps.extensions)


@functools.cache
def ptx_subgroups_source() -> str:
    """The text a translation whose kernels need sub-groups carries ahead of them: [facts.ptx_subgroups]'s
    `source`, built only where its `define` is defined."""
    rule = ptx_subgroups_rule()
    text = resources.files("porter.backends.opencl").joinpath(str(rule["source"])).read_text(encoding="utf-8")
    return f"#if defined({rule['define']})\n{text.strip()}\n#endif"


def emulation_defines(caps: Capabilities) -> tuple[str, ...]:
    """``-D`` options that switch on porter's own sub-groups in a translation ([facts.ptx_subgroups]) on a
    device whose capabilities carry them."""
    return (f"-D{ptx_subgroups_rule()['define']}",) if caps.emulated else ()


@functools.cache
def native_math_rule() -> dict[str, Any]:
    """``[facts.native_math]`` of dialect.toml: the ``define`` choosing the native_ functions for CUDA's
    fast-math intrinsics, and the ``device_types`` and ``vendors`` (prefixes of CL_DEVICE_VENDOR) of the
    devices porter's builds define it for."""
    return dict(load_facts("porter.backends.opencl").facts["native_math"])


def native_math(caps: Capabilities) -> bool:
    """Whether a device with `caps` computes CUDA's fast-math intrinsics with OpenCL's native_ functions: a
    device type and vendor [facts.native_math] names (GPUs whose native_ functions are the hardware
    approximations CUDA's intrinsics use; never a CPU runtime, where they have no bound)."""
    return device_rule_matches(caps, native_math_rule())


def probed_defines(caps: Capabilities) -> tuple[str, ...]:
    """The ``-D`` options a device's probe decides (:func:`disabled`, :func:`emulation_defines`): none for
    capabilities a job's child adopted unprobed, whose parent passes its own with the job."""
    return (*disabled(caps), *emulation_defines(caps))


def device_defines(caps: Capabilities) -> tuple[str, ...]:
    """``-D`` options of every kernel build on a device with `caps`: the kernels it cannot run left out
    (:func:`disabled`), porter's own sub-groups where the device has them (:func:`emulation_defines`), CUDA's
    fast-math intrinsics as native_ functions where :func:`native_math`."""
    native = (f"-D{native_math_rule()['define']}",) if native_math(caps) else ()
    return (*probed_defines(caps), *native)


def describe(requires: Sequence[str], broken: Iterable[str] = ()) -> str:
    """Human words for `requires`: "32-wide sub-groups, relative sub-group shuffles
    (cl_intel_required_subgroup_size + cl_khr_subgroup_shuffle_relative)"; those of `broken` (a device's
    :attr:`Capabilities.broken`) say so: "(cl_khr_subgroup_shuffle: declared, but it failed porter's probe)"."""
    data = table()
    failed = set(broken)
    names = [n for n in closure(requires) if n != "subgroups"] or closure(requires)
    words = [str(data.get(n, {}).get("what", n)) for n in names]
    marks = [
        (
            "core OpenCL C, which this device computes wrongly (porter's probe)"
            if n in failed
            else "core OpenCL C"
        )
        if data.get(n, {}).get("core")
        else str((data.get(n, {}).get("extensions") or [n])[0])
        + (": declared, but it failed porter's probe" if n in failed else "")
        for n in names
    ]
    return f"{', '.join(words)} ({' + '.join(marks)})"


def guard_words(text: str, broken: Iterable[str] = ()) -> str:
    """`text` (what porter_opencl.h printed of a kernel it left out: "needs !defined(PORTER_NO_BRANCH_BARRIERS)")
    with each requirement's guard condition in it told in words (:func:`describe`)."""
    for name, entry in table().items():
        guard = str(entry.get("guard") or "")
        if guard and guard in text:
            text = text.replace(guard, describe([name], broken))
    return text
