"""porter.harness.replay: a program's __constant__ symbols go to every variant that has them, whether
its source or a header it includes declares them."""

from __future__ import annotations

from pathlib import Path

from porter.harness import replay
from porter.model import ArgSpec, KernelSpec, Role, Variant

SCALE = ArgSpec("scale", "float32", Role.IN, shape=("c_scale",))
OTHER = ArgSpec("other", "float32", Role.IN, shape=("c_other",))


def _rep() -> replay.Replay:
    return replay.Replay("k", KernelSpec("k", (), ("1",), ("1",), constants=(SCALE, OTHER)))


def test_a_constant_declared_in_an_included_header_is_kept_for_the_variant(tmp_path: Path) -> None:
    # tests/fixtures/programs/header_kernels: `__constant__ float scale[2];` in include/kern.cuh, set
    # from the host; the kernel's device code names it only through the header (it was dropped: the
    # kernel read zeros and the original's replay failed)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "kern.cuh").write_text(
        "__constant__ float scale[2];\n__global__ void k(float* y) { y[0] = scale[0]; }\n"
    )
    variant = Variant("k", "cuda", '#include "kern.cuh"\n', "k", "original", str(tmp_path / "main.cu"))
    spec, _ = replay._for_variant(_rep(), variant, (str(tmp_path), str(tmp_path / "include")))
    assert [c.name for c in spec.constants] == ["scale"]  # `other` is in neither: still left out
    # without the include folders the header is not seen: only the source's own names count
    spec, _ = replay._for_variant(_rep(), variant)
    assert spec.constants == ()


def test_a_constant_the_source_names_is_kept_without_reading_headers() -> None:
    variant = Variant("k", "cuda", "__constant__ float scale[2];\n", "k", "original", "/nowhere/k.cu")
    spec, _ = replay._for_variant(_rep(), variant, ("/nowhere/include",))
    assert [c.name for c in spec.constants] == ["scale"]
