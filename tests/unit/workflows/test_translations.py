"""porter.workflows.translations: a program port's translations remembered by everything they depend on."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from porter.cache import Cache
from porter.model import Diagnostic, Severity, TranslatedKernel, Translation
from porter.workflows.program import port_program
from porter.workflows.translations import NAMESPACE, Facts, recall, remember, translation_key

SMOOTH = Path(__file__).resolve().parents[3] / "samples" / "programs" / "smooth"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PORTER_NO_CACHE", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def smooth(tmp_path: Path) -> Path:
    shutil.copytree(SMOOTH, tmp_path / "smooth")
    return tmp_path / "smooth"


def _outputs(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name not in ("report.json", "report.md", "diagnostics.txt")
    }


def test_a_rerun_translates_nothing_and_writes_the_same_outputs_and_kernels(
    smooth: Path, cache_dir: Path, translated: list[str]
) -> None:
    out = smooth.parent / "out"
    first = port_program([str(smooth)], out_dir=str(out), translate_only=True)
    # the host-only unit too: OpenCL translates every unit (this one reaches no kernel)
    assert sorted(translated) == [
        "hip:main.cu",
        "hip:smooth_kernels.cuh",
        "opencl:main.cu",
        "opencl:util.cpp",
    ]
    before, kernels = _outputs(out), [(k.name, k.file, k.line, dict(k.targets)) for k in first.kernels]
    translated.clear()
    second = port_program([str(smooth)], out_dir=str(out), translate_only=True)
    assert translated == []  # every file remembered
    assert _outputs(out) == before
    assert [(k.name, k.file, k.line, dict(k.targets)) for k in second.kernels] == kernels
    assert kernels and all(line > 0 for _, _, line, _ in kernels)


def test_an_edited_header_or_other_options_translate_again(
    smooth: Path, cache_dir: Path, translated: list[str]
) -> None:
    out = smooth.parent / "out"
    port_program([str(smooth)], out_dir=str(out), translate_only=True)
    header = smooth / "include" / "smooth_kernels.cuh"
    header.write_text(header.read_text().replace("scale * in[i] + offset", "scale * in[i] - offset"))
    translated.clear()
    port_program([str(smooth)], out_dir=str(out), translate_only=True)
    # the header itself, and the units that reach it (their translation reads it)
    assert sorted(translated) == ["hip:main.cu", "hip:smooth_kernels.cuh", "opencl:main.cu"]
    assert "scale * in[i] - offset" in (out / "opencl" / "src" / "main.cl").read_text()
    translated.clear()
    port_program(
        [str(smooth)], ["hip"], out_dir=str(out), translate_only=True,
        translate_options={"hip": {"launch": "ggl"}},
    )  # fmt: skip
    assert sorted(translated) == ["hip:main.cu", "hip:smooth_kernels.cuh"]
    assert "hipLaunchKernelGGL" in (out / "hip" / "src" / "main.cu").read_text()


def test_without_the_cache_every_run_translates(
    smooth: Path, cache_dir: Path, translated: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PORTER_NO_CACHE", "1")
    out = smooth.parent / "out"
    port_program([str(smooth)], ["hip"], out_dir=str(out), translate_only=True)
    port_program([str(smooth)], ["hip"], out_dir=str(out), translate_only=True)
    assert sorted(translated) == ["hip:main.cu"] * 2 + ["hip:smooth_kernels.cuh"] * 2
    assert not (cache_dir / NAMESPACE).exists()


def test_a_latin1_file_round_trips_through_a_remembered_translation(
    smooth: Path, cache_dir: Path, translated: list[str]
) -> None:
    main = smooth / "src" / "main.cu"
    main.write_bytes(b"// (c) \xa9 M\xfcller\n" + main.read_bytes())
    out = smooth.parent / "out"
    port_program([str(smooth)], ["hip"], out_dir=str(out), translate_only=True)
    first = (out / "hip" / "src" / "main.cu").read_bytes()
    assert first.startswith(b"// (c) \xa9 M\xfcller\n")
    translated.clear()
    port_program([str(smooth)], ["hip"], out_dir=str(out), translate_only=True)
    assert translated == [] and (out / "hip" / "src" / "main.cu").read_bytes() == first


def test_a_record_is_served_only_for_its_key_and_a_damaged_one_is_a_miss(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    (tmp_path / "k.cu").write_bytes(b'#include "h.cuh"\n__global__ void k() {}\n')
    (tmp_path / "h.cuh").write_bytes(b"#define N 4\n")
    key = translation_key("hip", b'#include "h.cuh"\n', str(tmp_path / "k.cu"), (), {})
    tr = Translation(
        "k.cu", "hip", "text \udca9",
        (TranslatedKernel("k", "k", "hip", (0, None), ({"kind": "local", "bytes": "8"},)),),
        (Diagnostic("k.cu", 3, "texture", "no", Severity.ERROR),),
    )  # fmt: skip
    facts = Facts((("k", 2),), (("k<int>", "k", ("int",)),))
    remember(key, tr, facts, cache)
    assert recall(key, cache) == (tr, facts)
    # the header's bytes are part of the key
    (tmp_path / "h.cuh").write_bytes(b"#define N 8\n")
    assert translation_key("hip", b'#include "h.cuh"\n', str(tmp_path / "k.cu"), (), {}) != key
    cache.put(NAMESPACE, key, b"{not json")
    assert recall(key, cache) is None
