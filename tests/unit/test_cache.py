"""The content-addressed compile cache: keys, hits, misses, invalidation, corruption, atomicity, switches."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from porter.backends import Binary, CompileOptions, Device, ResourceReport, binaries, get_backend
from porter.backends.binaries import compile_cached, decode_binary, encode_binary, get_binary, put_binary

from porter import cache as cache_mod
from porter.cache import Cache, default_root
from porter.signing import StateWarning


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PORTER_CACHE_DIR", str(root))
    monkeypatch.delenv("PORTER_NO_CACHE", raising=False)
    return root


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# ------------------------------------------------------------------------------- keys and roots


def test_key_is_stable_and_separates_parts() -> None:
    k = Cache.key("a", b"b", "c")
    assert k == Cache.key("a", b"b", "c")
    assert len(k) == 64 and all(c in "0123456789abcdef" for c in k)
    assert Cache.key("ab", "c") != Cache.key("a", "bc")  # length-prefixed
    assert Cache.key("ab") != Cache.key(b"ab")  # str and bytes are different parts
    assert Cache.key("a", "") != Cache.key("a")


def test_key_includes_format_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = Cache.key("x")
    monkeypatch.setattr(cache_mod, "CACHE_FORMAT_VERSION", cache_mod.CACHE_FORMAT_VERSION + 1)
    assert Cache.key("x") != before


def test_root_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _private_cache: Path) -> None:
    assert default_root() == _private_cache
    c = Cache()
    assert c.root == _private_cache
    c.put("things", Cache.key("k"), b"v")
    assert entries(_private_cache)
    monkeypatch.delenv("PORTER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_root() == tmp_path / "xdg" / "porter"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_root() == tmp_path / "home" / ".cache" / "porter"


def test_bad_namespace_or_key_is_refused() -> None:
    c = Cache()
    with pytest.raises(ValueError):
        c.get("../escape", Cache.key("k"))
    with pytest.raises(ValueError):
        c.put("ns", "not-a-key", b"")


# ------------------------------------------------------------------------------- bytes


def test_hit_and_miss(_private_cache: Path) -> None:
    c = Cache()
    k = Cache.key("source", "options")
    assert c.get("ns", k) is None
    assert c.put("ns", k, b"\x00payload\xff")
    assert c.get("ns", k) == b"\x00payload\xff"
    assert Cache().get("ns", k) == b"\x00payload\xff"  # another instance, same root
    assert c.get("other", k) is None  # namespaces are separate
    assert c.get("ns", Cache.key("source", "options2")) is None
    c.put("ns", k, b"")  # an empty payload is a value, not a miss
    assert c.get("ns", k) == b""


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage"])
def test_corrupt_entry_is_a_miss_and_removed(_private_cache: Path, damage: str) -> None:
    c = Cache()
    k = Cache.key("damaged", damage)
    c.put("ns", k, b"x" * 1000)
    path = c.path("ns", k)
    blob = bytearray(path.read_bytes())
    if damage == "flip":
        blob[-10] ^= 0x01
    elif damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "empty":
        blob = bytearray()
    else:
        blob = bytearray(b"not a cache entry at all" * 3)
    path.write_bytes(bytes(blob))
    # a flipped bit in a well-formed entry fails its signature, which porter says once
    with pytest.warns(StateWarning) if damage == "flip" else contextlib.nullcontext():
        assert c.get("ns", k) is None
    assert not path.exists()
    c.put("ns", k, b"fresh")
    assert c.get("ns", k) == b"fresh"


def test_atomic_write_leaves_no_temporary_files(_private_cache: Path) -> None:
    c = Cache()
    for i in range(20):
        c.put("ns", Cache.key(str(i)), bytes(range(256)) * i)
    c.put("ns", Cache.key("0"), b"overwritten")
    files = entries(_private_cache)
    assert len(files) == 20
    assert all(len(p.name) == 64 and p.parent.name == p.name[:2] for p in files)
    assert not [p for p in _private_cache.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert c.get("ns", Cache.key("0")) == b"overwritten"


def test_unwritable_root_is_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    c = Cache(root=blocker / "cache")
    assert c.put("ns", Cache.key("k"), b"v") is False
    assert c.get("ns", Cache.key("k")) is None


def test_disabled_by_flag_and_environment(_private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    k = Cache.key("k")
    Cache().put("ns", k, b"v")
    off = Cache(enabled=False)
    assert off.get("ns", k) is None
    assert off.put("ns", Cache.key("other"), b"v") is False
    monkeypatch.setenv("PORTER_NO_CACHE", "1")
    assert Cache().enabled is False
    assert Cache().get("ns", k) is None
    assert Cache(enabled=True).get("ns", k) == b"v"  # an explicit choice wins
    assert len(entries(_private_cache)) == 1


# ------------------------------------------------------------------------------- binaries


def test_binary_round_trip() -> None:
    b = Binary(
        backend="cuda",
        entry="_Z5saxpyifPKfPf",
        arch="sm_90",
        format="cubin",
        data=bytes(range(256)) * 3,
        toolchain="nvrtc 13.0 sm_90",
        log="warning: something",
        report=ResourceReport(registers=16, shared_bytes=0, raw="ptxas info"),
        meta={"lowered": {"saxpy": "_Z5saxpyifPKfPf"}, "n": 3, "options": ("-O3", ["x", 1.5, None, True])},
    )
    assert decode_binary(encode_binary(b) or b"") == b
    assert decode_binary(b"\x00\x00\x00\x00\x00\x00\x00\x05{bad}") is None
    raw = encode_binary(b) or b""
    assert decode_binary(raw[:-1]) is None  # data shorter than the header says
    odd = Binary("cpu", "k", "x86_64", "so", b"", "g++", meta={"handle": object()})
    assert encode_binary(odd) is None  # not plain data: not cached, never pickled
    assert encode_binary(Binary("cpu", "k", "x86_64", "so", b"", "g++", meta={"m": {1: "int key"}})) is None
    assert put_binary(Cache(), Cache.key("odd"), odd) is False


def test_undecodable_binary_entry_is_a_miss(_private_cache: Path) -> None:
    c = Cache()
    k = Cache.key("b")
    c.put(binaries.NAMESPACE, k, b"valid envelope, invalid binary")
    assert get_binary(c, k) is None
    assert not c.path(binaries.NAMESPACE, k).exists()


# ------------------------------------------------------------------------------- compile_cached, real compilers

SOURCES = {
    "cuda": 'extern "C" __global__ void scale(float *x, float a, int n) {\n'
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n",
    "opencl": "__kernel void scale(__global float *x, float a, int n) {\n"
    "  int i = get_global_id(0);\n  if (i < n) x[i] *= a;\n}\n",
}
SOURCES["cpu"] = SOURCES["cuda"]
SOURCES["hip"] = "#include <hip/hip_runtime.h>\n" + SOURCES["cuda"]


@dataclass
class Counting:
    """A real backend, counting its compiles; `upgrade` changes its toolchain id like a compiler update."""

    inner: Any
    upgrade: str = ""
    compiles: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    def toolchain_id(self, device: Device | None = None, arch: str | None = None) -> str:
        return self.inner.toolchain_id(device, arch) + self.upgrade

    def compile(
        self, source: str, entry: str, options: CompileOptions, device: Device | None = None
    ) -> Binary:
        self.compiles.append(source)
        return self.inner.compile(source, entry, options, device)


def compiling_backend() -> tuple[Counting, Device | None]:
    """The first backend that can compile here (compile-only ones first: they are the fastest)."""
    reasons = []
    for name in ("cuda", "cpu", "hip", "opencl"):
        try:
            be = get_backend(name)
            found = be.availability()
        except Exception as err:  # noqa: BLE001 - report and try the next one
            reasons.append(f"{name}: {err}")
            continue
        if found.compile:
            device = found.devices[0] if name == "opencl" and found.devices else None
            if name == "opencl" and device is None:
                continue
            return Counting(be), device
        reasons.append(f"{name}: {found.hint}")
    pytest.skip("no backend can compile here: " + "; ".join(reasons))


@pytest.mark.integration
def test_compile_cached_hit_miss_and_invalidation(_private_cache: Path) -> None:
    be, device = compiling_backend()
    src = SOURCES[be.name]
    opts = CompileOptions()
    c = Cache()

    first, hit = compile_cached(be, src, "scale", opts, device, c)
    assert not hit and len(be.compiles) == 1
    again, hit = compile_cached(be, src, "scale", opts, device, c)
    assert hit and len(be.compiles) == 1
    assert again == first  # the whole Binary comes back, data, entry, toolchain and report included

    # a changed source, entry options or toolchain is a miss (and a new entry)
    compile_cached(be, src + "\n// edited\n", "scale", opts, device, c)
    assert len(be.compiles) == 2
    compile_cached(be, src, "scale", CompileOptions(defines=("EXTRA=1",)), device, c)
    assert len(be.compiles) == 3
    be.upgrade = "+compiler-update"
    _, hit = compile_cached(be, src, "scale", opts, device, c)
    assert not hit and len(be.compiles) == 4
    assert len(entries(_private_cache / binaries.NAMESPACE)) == 4  # (tools/: compiler versions)

    # a corrupt entry is a miss, recompiled and rewritten
    be.upgrade = ""
    for path in entries(_private_cache):
        path.write_bytes(path.read_bytes()[:-3])
    _, hit = compile_cached(be, src, "scale", opts, device, c)
    assert not hit and len(be.compiles) == 5
    _, hit = compile_cached(be, src, "scale", opts, device, c)
    assert hit and len(be.compiles) == 5


@pytest.mark.integration
def test_an_edited_header_is_a_new_compile(_private_cache: Path, tmp_path: Path) -> None:
    """The key covers the headers the source reaches in the include directories, transitively;
    headers it does not include, and system headers, do not matter."""
    be, device = compiling_backend()
    if be.name == "opencl":
        pytest.skip("the OpenCL sources here include nothing")
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    (inc / "scale.cuh").write_text('#include "sub/factor.cuh"\n#define SCALE (2.0f * FACTOR)\n')
    (inc / "sub" / "factor.cuh").write_text("#define FACTOR 1.0f\n")
    (inc / "unrelated.cuh").write_text("#define UNRELATED 1\n")
    src = '#include "scale.cuh"\n' + SOURCES[be.name].replace("x[i] *= a", "x[i] *= a * SCALE")
    opts = CompileOptions(include_dirs=(str(inc),))
    c = Cache()
    compile_cached(be, src, "scale", opts, device, c)
    _, hit = compile_cached(be, src, "scale", opts, device, c)
    assert hit and len(be.compiles) == 1
    (inc / "unrelated.cuh").write_text("#define UNRELATED 2\n")
    _, hit = compile_cached(be, src, "scale", opts, device, c)
    assert hit and len(be.compiles) == 1
    (inc / "sub" / "factor.cuh").write_text("#define FACTOR 3.0f\n")  # two levels down
    _, hit = compile_cached(be, src, "scale", opts, device, c)
    assert not hit and len(be.compiles) == 2
    _, hit = compile_cached(be, src, "scale", opts, device, c)
    assert hit and len(be.compiles) == 2


def test_headers_digest_follows_quoted_and_angle_includes(tmp_path: Path) -> None:
    from porter.cache import headers_digest

    (tmp_path / "a.h").write_text("#include <b.h>\n")
    (tmp_path / "b.h").write_text("int b;\n")
    src = '#include "a.h"\n#include <cuda_runtime.h>\n'
    before = headers_digest(src, [str(tmp_path)])
    assert before != headers_digest("int x;\n", [str(tmp_path)])
    (tmp_path / "b.h").write_text("int b2;\n")
    assert headers_digest(src, [str(tmp_path)]) != before
    assert headers_digest(src, []) == headers_digest("", [])  # no include dirs: nothing to hash


@pytest.mark.integration
def test_compile_cached_disabled(monkeypatch: pytest.MonkeyPatch, _private_cache: Path) -> None:
    be, device = compiling_backend()
    monkeypatch.setenv("PORTER_NO_CACHE", "1")
    for _ in range(2):
        _, hit = compile_cached(be, SOURCES[be.name], "scale", CompileOptions(), device, Cache())
        assert not hit
    assert len(be.compiles) == 2
    assert not _private_cache.exists() or not entries(_private_cache)


# ------------------------------------------------------------------------------- entries bound to their keys


def test_entry_copied_over_another_key_is_a_miss(_private_cache: Path) -> None:
    """A well-formed entry moved to another key's path (or namespace) is never served there."""
    c = Cache()
    k1, k2 = Cache.key("one"), Cache.key("two")
    c.put("ns", k1, b"payload of one")
    c.put("ns", k2, b"payload of two")
    c.path("ns", k2).write_bytes(c.path("ns", k1).read_bytes())
    assert c.get("ns", k2) is None  # it names another key: a plain miss
    assert not c.path("ns", k2).exists()  # removed: the next put rebuilds it
    assert c.get("ns", k1) == b"payload of one"
    c.path("other", k1).parent.mkdir(parents=True)
    c.path("other", k1).write_bytes(c.path("ns", k1).read_bytes())
    with pytest.warns(StateWarning, match="signature"):
        assert c.get("other", k1) is None


def test_entry_of_a_previous_format_is_a_miss(_private_cache: Path) -> None:
    import hashlib
    import struct

    c = Cache()
    k = Cache.key("old")
    payload = b"written by porter with cache format 1"
    old = struct.pack(">8s32sQ", b"PORTERC\x01", hashlib.sha256(payload).digest(), len(payload)) + payload
    c.path("ns", k).parent.mkdir(parents=True)
    c.path("ns", k).write_bytes(old)
    assert cache_mod.CACHE_FORMAT_VERSION >= 3
    assert c.get("ns", k) is None
    # format 2: hashed, bound to its key, not signed -- what a file edit can recompute
    digest = hashlib.sha256(b"ns\0" + payload).digest()
    c.path("ns", k).write_bytes(
        struct.pack(">8s32s32sQ", b"PORTERC\x02", bytes.fromhex(k), digest, len(payload)) + payload
    )
    assert c.get("ns", k) is None


def test_payload_swapped_inside_a_valid_envelope_is_a_miss(_private_cache: Path) -> None:
    c = Cache()
    k = Cache.key("payload")
    c.put("ns", k, b"A" * 64)
    blob = bytearray(c.path("ns", k).read_bytes())
    blob[-64:] = b"B" * 64  # same length, same key: only the content hash can tell
    c.path("ns", k).write_bytes(bytes(blob))
    with pytest.warns(StateWarning, match="signature"):
        assert c.get("ns", k) is None


@pytest.mark.integration
def test_swapped_binary_entry_is_rebuilt_not_served(_private_cache: Path) -> None:
    """The binary of one kernel copied over another's entry: the wrong kernel must never come out."""
    be, device = compiling_backend()
    src_a = SOURCES[be.name]
    src_b = src_a.replace("x[i] *= a", "x[i] += a")
    opts = CompileOptions()
    c = Cache()
    bin_a, _ = compile_cached(be, src_a, "scale", opts, device, c)
    bin_b, _ = compile_cached(be, src_b, "scale", opts, device, c)
    assert len(be.compiles) == 2 and bin_a.data != bin_b.data
    key_a = binaries.binary_key(be, src_a, "scale", opts, device)
    key_b = binaries.binary_key(be, src_b, "scale", opts, device)
    path_a, path_b = (c.path(binaries.NAMESPACE, k) for k in (key_a, key_b))
    path_b.write_bytes(path_a.read_bytes())

    got, hit = compile_cached(be, src_b, "scale", opts, device, c)
    assert not hit and len(be.compiles) == 3  # a miss: compiled again ...
    assert got.data == bin_b.data != bin_a.data  # ... into the right kernel
    again, hit = compile_cached(be, src_b, "scale", opts, device, c)
    assert hit and again.data == bin_b.data and len(be.compiles) == 3  # and the entry was rebuilt
