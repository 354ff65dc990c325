"""Intel's CPU OpenCL runtime from PyPI (intel-opencl-rt): ICD registration and sub-group facts.

The ICD-folder construction runs everywhere on files the test writes; the rest runs on the real
runtime when it is installed in this interpreter's prefix (``pip install intel-opencl-rt``, part
of the ``opencl`` extra on x86-64 Linux), each in a fresh process so that registration happens
before OpenCL is first used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from porter.backends.opencl import icd

REQUIREMENTS = [
    "subgroups",
    "subgroup_shuffle",
    "subgroup_shuffle_relative",
    "subgroup_ballot",
    "reqd_sub_group_size_32",
]


def _icd(folder: Path, name: str, library: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(library + "\n", encoding="utf-8")
    return path


def _read(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text().strip() for p in sorted(folder.iterdir())}


# --------------------------------------------------------------------------- the ICD folder


def test_vendors_dir_keeps_system_and_user_entries(tmp_path: Path) -> None:
    system = tmp_path / "etc"
    _icd(system, "pocl.icd", "libpocl.so.2")
    _icd(system, "other.icd", "/opt/other/libother.so")
    user = tmp_path / "user"
    _icd(user, "nvidia.icd", "libnvidia-opencl.so.1")
    _icd(user, "pocl.icd", "libpocl.so.2")  # the same library twice: listed once
    _icd(user, "other.icd", "/opt/newer/libother.so")  # same file name, another library: renamed
    single = _icd(tmp_path / "one", "extra.icd", "/opt/extra/libextra.so")
    entries = icd.existing_entries(f"{user}{os.pathsep}{single}", system)
    assert entries == [
        ("other.icd", "/opt/other/libother.so"),
        ("pocl.icd", "libpocl.so.2"),
        ("nvidia.icd", "libnvidia-opencl.so.1"),
        ("other.icd", "/opt/newer/libother.so"),
        ("extra.icd", "/opt/extra/libextra.so"),
    ]
    runtime = tmp_path / "prefix" / "lib" / "libintelocl.so"
    folder = icd.build_vendors_dir(runtime, entries, tmp_path / "cache")
    assert folder.parent == tmp_path / "cache" / "opencl-icd"
    assert _read(folder) == {
        "other.icd": "/opt/other/libother.so",
        "other-2.icd": "/opt/newer/libother.so",
        "pocl.icd": "libpocl.so.2",
        "nvidia.icd": "libnvidia-opencl.so.1",
        "extra.icd": "/opt/extra/libextra.so",
        icd.ICD_NAME: str(runtime),
    }
    # Content-addressed: the same inputs give the same folder, other inputs another one.
    assert icd.build_vendors_dir(runtime, entries, tmp_path / "cache") == folder
    assert icd.build_vendors_dir(runtime, entries[:1], tmp_path / "cache") != folder
    assert [p.name for p in (tmp_path / "cache" / "opencl-icd").iterdir() if p.name.startswith(".")] == []


def test_runtime_found_in_prefix_lib_and_by_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(icd.ENV_RUNTIME, raising=False)
    prefix = tmp_path / "venv"
    assert icd.find_intel_cpu_runtime([prefix]) is None
    versioned = _icd(prefix / "lib", "libintelocl.so.2026.22.10.0", "ELF")
    (prefix / "lib" / "libintelocl.so-gdb.py").write_text("")
    assert icd.find_intel_cpu_runtime([prefix]) == versioned.resolve()
    plain = _icd(prefix / "lib", "libintelocl.so", "ELF")
    assert icd.find_intel_cpu_runtime([prefix]) == plain.resolve()
    elsewhere = _icd(tmp_path / "opt" / "intel", "libintelocl.so", "ELF")
    monkeypatch.setenv(icd.ENV_RUNTIME, str(elsewhere.parent))
    assert icd.find_intel_cpu_runtime([prefix]) == elsewhere.resolve()
    monkeypatch.setenv(icd.ENV_RUNTIME, str(tmp_path / "missing.so"))
    assert icd.find_intel_cpu_runtime([prefix]) is None


def test_registration_sets_ocl_icd_vendors_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _icd(tmp_path / "rt", "libintelocl.so", "ELF")
    user = tmp_path / "user"
    _icd(user, "nvidia.icd", "libnvidia-opencl.so.1")
    monkeypatch.setenv(icd.ENV_RUNTIME, str(runtime))
    monkeypatch.setenv(icd.ENV_VENDORS, str(user))
    monkeypatch.delenv(icd.ENV_DISABLE, raising=False)
    reg = icd.register_intel_cpu_runtime(tmp_path / "cache")
    assert reg.runtime == runtime.resolve() and reg.vendors_dir is not None
    assert os.environ[icd.ENV_VENDORS] == str(reg.vendors_dir)
    listed = _read(reg.vendors_dir)
    assert listed["nvidia.icd"] == "libnvidia-opencl.so.1" and listed[icd.ICD_NAME] == str(runtime.resolve())
    system = {name: lib for name, lib in icd.existing_entries("", icd.SYSTEM_VENDORS)}
    assert system.items() <= listed.items()
    # A child process inherits the folder: registering again changes nothing.
    again = icd.register_intel_cpu_runtime(tmp_path / "cache")
    assert again.vendors_dir is None and "already registered" in again.reason
    assert os.environ[icd.ENV_VENDORS] == str(reg.vendors_dir)


def test_registration_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(icd.ENV_RUNTIME, str(_icd(tmp_path, "libintelocl.so", "ELF")))
    monkeypatch.setenv(icd.ENV_DISABLE, "1")
    monkeypatch.setenv(icd.ENV_VENDORS, "/nowhere")
    reg = icd.register_intel_cpu_runtime(tmp_path / "cache")
    assert reg.vendors_dir is None and icd.ENV_DISABLE in reg.reason
    assert os.environ[icd.ENV_VENDORS] == "/nowhere"
    assert not (tmp_path / "cache").exists()


# --------------------------------------------------------------------------- the real runtime

_LIST_DEVICES = """
import json, os
from porter.backends.opencl import OpenCLBackend, device_supports, icd_registration
from porter.backends.opencl.devices import capabilities
b = OpenCLBackend()
out = []
for d in b.devices():
    if d.kind == "checker":
        continue
    out.append({"label": d.label, "platform": d.platform, "driver": d.driver, "arch": d.arch,
                "warp": d.facts.warp_size, "subgroups": d.facts.subgroups,
                "toolchain": b.toolchain_id(d),
                "supports": [r for r in %r if device_supports(d, r)],
                "broken": sorted(capabilities(d).broken)})
print(json.dumps({"devices": out, "reason": icd_registration().reason,
                  "vendors": os.environ.get("OCL_ICD_VENDORS", "")}))
"""


def _list_devices(tmp_path: Path, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in (icd.ENV_VENDORS, icd.ENV_DISABLE)}
    clean |= {"PORTER_CACHE_DIR": str(tmp_path / "cache"), **env}
    res = subprocess.run(
        [sys.executable, "-c", _LIST_DEVICES % (REQUIREMENTS,)],
        capture_output=True,
        text=True,
        env=clean,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runtime() -> Path:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        pytest.skip("pyopencl is not installed (pip install pyopencl)")
    found = icd.find_intel_cpu_runtime()
    if found is None:
        pytest.skip(
            f"Intel's CPU OpenCL runtime is not installed in {sys.prefix} (pip install intel-opencl-rt)"
        )
    return found


@pytest.mark.integration
def test_pip_installed_runtime_is_a_device_with_32_wide_subgroups(runtime: Path, tmp_path: Path) -> None:
    found = _list_devices(tmp_path)
    assert found["vendors"].startswith(str(tmp_path / "cache")), found
    intel = [d for d in found["devices"] if d["platform"].startswith("Intel")]
    assert len(intel) == 1, found
    dev = intel[0]
    assert dev["arch"].endswith("/cpu") and dev["driver"]
    assert dev["subgroups"] is True
    # 32-wide sub-groups where porter's probe of them (a shuffle-down reduction's sum) passes, and every other
    # requirement but those a probe found computing wrong (this runtime's general shuffles sum a butterfly
    # wrongly at width 32): a requirement the device meets is one no probe marked broken
    assert set(dev["broken"]) <= set(REQUIREMENTS), dev
    if "reqd_sub_group_size_32" in dev["supports"]:
        assert dev["warp"] == 32 and dev["supports"] == [r for r in REQUIREMENTS if r not in dev["broken"]]
    else:
        assert dev["warp"] == 16 and dev["supports"] == [
            r for r in REQUIREMENTS if r != "reqd_sub_group_size_32" and r not in dev["broken"]
        ]
    assert dev["toolchain"].startswith(f"opencl|{dev['platform']}|") and dev["driver"] in dev["toolchain"]
    # The entries the loader read before are still there (PoCL in CI, NVIDIA on a GPU machine).
    system = {lib for _, lib in icd.existing_entries("", icd.SYSTEM_VENDORS)}
    listed = set(_read(Path(found["vendors"])).values())
    assert system | {str(runtime)} == listed
    for other in found["devices"]:
        if other not in intel:  # PoCL, NVIDIA: no sub-groups of any kind
            assert "reqd_sub_group_size_32" not in other["supports"], other


@pytest.mark.integration
def test_turned_off_runtime_is_not_listed(runtime: Path, tmp_path: Path) -> None:
    found = _list_devices(tmp_path, PORTER_NO_INTEL_OCL="1")
    assert not any(d["platform"].startswith("Intel") for d in found["devices"]), found
    assert found["vendors"] == ""


@pytest.mark.integration
def test_turning_it_off_holds_in_a_child_of_a_registering_parent(runtime: Path, tmp_path: Path) -> None:
    # A porter parent registered the runtime and passed OCL_ICD_VENDORS down; the child opts out.
    registered = icd.build_vendors_dir(runtime, icd.existing_entries(""), tmp_path / "cache")
    found = _list_devices(tmp_path, PORTER_NO_INTEL_OCL="1", OCL_ICD_VENDORS=str(registered))
    assert not any(d["platform"].startswith("Intel") for d in found["devices"]), found
    assert found["devices"], "the other entries (PoCL here) must stay listed"
