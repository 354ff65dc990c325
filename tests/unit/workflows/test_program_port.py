"""porter.workflows.program: a whole program ported -- mirrored HIP tree, OpenCL per unit, one report."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from porter.errors import UsageError
from porter.report import program_view
from porter.workflows.program import Hooks, port_program

ROOT = Path(__file__).resolve().parents[3]
SMOOTH = ROOT / "samples" / "programs" / "smooth"


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.fixture
def smooth(tmp_path: Path) -> Path:
    shutil.copytree(SMOOTH, tmp_path / "smooth")
    return tmp_path / "smooth"


def test_translate_only_mirrors_the_tree_and_writes_one_opencl_file_per_unit(smooth: Path) -> None:
    before = _tree(smooth)
    report = port_program([str(smooth)], translate_only=True, hooks=Hooks(markdown=program_view.markdown))
    out = smooth.parent / "smooth.ported"
    assert report.out_dir == str(out) and report.complete
    assert _tree(smooth) == before  # the inputs untouched
    hip = out / "hip"
    # every file mirrored under its own name; files with nothing to translate byte for byte
    assert sorted(_tree(hip)) == sorted(before)
    for same in ("Makefile", "data/values.txt", "include/util.h", "src/util.cpp"):
        assert (hip / same).read_bytes() == (smooth / same).read_bytes(), same
    header = (hip / "include" / "smooth_kernels.cuh").read_text()
    assert header.startswith("#include <hip/hip_runtime.h>") and "__global__ void box_smooth" in header
    main = (hip / "src" / "main.cu").read_text()
    assert "hipMalloc" in main and "cudaMalloc" not in main and '#include "smooth_kernels.cuh"' in main
    # OpenCL: the unit that reaches the header's kernels, with its launch mapping
    cl = (out / "opencl" / "src" / "main.cl").read_text()
    assert "__kernel void box_smooth" in cl and "__kernel void affine" in cl
    mapping = json.loads((out / "opencl" / "src" / "main.launch.json").read_text())
    assert [k["name"] for k in mapping["kernels"]] == ["box_smooth", "affine"]
    assert mapping["kernels"][1]["arg_map"] == [0, 1, 2, 3, 4]
    doc = json.loads((out / "report.json").read_text())
    assert doc["schema"] == "porter-program-report/1" and doc["complete"] is True
    files = {f["path"]: f for f in doc["program"]["files"]}
    assert files["src/util.cpp"]["targets"]["hip"]["status"] == "copied"
    assert files["src/util.cpp"]["targets"]["opencl"]["status"] == "none"
    assert files["include/smooth_kernels.cuh"]["targets"]["hip"]["status"] == "translated"
    assert set(files["src/main.cu"]["targets"]["hip"]) >= {"path", "status", "diagnostics"}
    assert {k["name"]: k["file"] for k in doc["kernels"]} == {
        "box_smooth": "include/smooth_kernels.cuh",
        "affine": "include/smooth_kernels.cuh",
    }
    assert doc["program"]["build"]["flags_from"].startswith("Makefile")
    md = (out / "report.md").read_text()
    assert "| `src/main.cu` | translated |" in md and "`include/smooth_kernels.cuh:9`" in md


def test_an_output_folder_holding_user_files_is_refused_and_a_rerun_is_welcome(smooth: Path) -> None:
    inside = smooth / "mine"
    inside.mkdir()
    (inside / "notes.txt").write_text("my notes\n")
    with pytest.raises(UsageError, match="not a porter output"):
        port_program([str(smooth)], out_dir=str(inside), translate_only=True)
    assert (inside / "notes.txt").read_text() == "my notes\n"
    out = smooth.parent / "ported"
    first = port_program([str(smooth)], out_dir=str(out), translate_only=True)
    again = port_program([str(smooth)], out_dir=str(out), translate_only=True)
    assert program_view.to_json(first)["program"]["files"] == program_view.to_json(again)["program"]["files"]


def test_a_translator_crash_fails_that_file_for_that_target_only(
    smooth: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from porter.backends import get_dialect

    def crash(*args: object, **kwargs: object) -> object:
        raise ValueError("overlapping edits")

    monkeypatch.setattr(get_dialect("opencl"), "translate", crash)
    report = port_program([str(smooth)], translate_only=True)
    by_path = {f.path: f.targets for f in report.files}
    assert by_path["src/main.cu"]["opencl"].status == "failed"
    assert "ValueError: overlapping edits" in by_path["src/main.cu"]["opencl"].reason
    assert by_path["src/main.cu"]["hip"].status == "translated"
    assert report.exit_code == 1


@pytest.mark.integration
def test_every_output_with_a_kernel_is_built_and_a_broken_one_is_failed(smooth: Path) -> None:
    said: list[str] = []
    report = port_program(
        [str(smooth)], out_dir=str(smooth.parent / "built"), hooks=Hooks(progress=said.append), jobs=2
    )
    assert "hip builds: 2/2 done" in said and "opencl units: 2/2 done" in said, said  # counts as it goes
    by_path = {f.path: f.targets for f in report.files}
    for target in ("hip", "opencl"):
        t = by_path["src/main.cu"][target]
        if t.status == "translated" and t.reason.startswith("no compiler here"):
            pytest.skip(f"no {target} compiler here: {t.reason}")
        assert t.status == "compiled", (target, t.reason)
        assert t.toolchain
    # a kernel no compiler takes: reported failed, with the compiler's log
    header = smooth / "include" / "smooth_kernels.cuh"
    header.write_text(
        header.read_text().replace("out[i] = sum / (2 * RADIUS + 1);", "out[i] = sum / undeclared_name;")
    )
    broken = port_program([str(smooth)], out_dir=str(smooth.parent / "broken"))
    by_path = {f.path: f.targets for f in broken.files}
    for target in ("hip", "opencl"):
        t = by_path["src/main.cu"][target]
        assert t.status == "failed" and "undeclared_name" in t.reason, (target, t.reason)  # the first error
    assert broken.exit_code == 1


# A namespace's template kernel launched with its arguments, and template kernels that only a template host
# function launches (its arguments unknown until an explicit instantiation): both units compile as they are
# (before: "use of undeclared identifier 'scale'" from the unqualified instance, and "entry 'fill' not found
# among kernels []" from a template no launch instantiates).
NAMESPACED = """namespace img {
template <int N> __global__ void scale(float *x) { x[threadIdx.x] *= N; }
void run(float *d) { scale<4><<<1, 32>>>(d); }
}  // namespace img
int main() { float *d; cudaMalloc(&d, 128); img::run(d); cudaFree(d); return 0; }
"""
TEMPLATE_ONLY = """template <typename T> __global__ void fill(T *x, T v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}
template <typename T> void fill_all(T *d, T v, int n) { fill<<<(n + 31) / 32, 32>>>(d, v, n); }
template void fill_all<int>(int *, int, int);
"""


@pytest.mark.integration
def test_a_unit_with_no_cuda_of_its_own_that_includes_a_kernel_file_is_built(tmp_path: Path) -> None:
    # rodinia's hotspot3D: 3D.cu names nothing of CUDA's and #includes opt1.cu, the kernel and its launch; the
    # unit was copied as it is and never compiled, so nothing said whether the port compiles for AMD
    src = tmp_path / "prog"
    src.mkdir()
    (src / "Makefile").write_text("prog: main.cu\n\tnvcc main.cu -o prog\n")
    (src / "kern.cu").write_text(
        "__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n"
        "void run(float *d) { twice<<<1, 32>>>(d); cudaDeviceSynchronize(); }\n"
    )
    (src / "main.cu").write_text(
        '#include <stdio.h>\n#include "kern.cu"\nint main() { puts("hi"); return 0; }\n'
    )
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"))
    main = {f.path: f.targets["hip"] for f in report.files}["main.cu"]
    if main.reason.startswith("no compiler here"):
        pytest.skip(f"no HIP compiler here: {main.reason}")
    assert main.status == "compiled", (main.status, main.reason, main.log[-2000:])
    assert (tmp_path / "out" / "hip" / "main.cu").read_bytes() == (src / "main.cu").read_bytes()  # as it was


@pytest.mark.integration
def test_a_namespaced_template_kernel_and_a_template_only_unit_compile_for_hip(tmp_path: Path) -> None:
    src = tmp_path / "prog"
    src.mkdir()
    (src / "scale.cu").write_text(NAMESPACED)
    (src / "fill.cu").write_text(TEMPLATE_ONLY)
    report = port_program([str(src)], ["hip"], out_dir=str(tmp_path / "out"))
    by_path = {f.path: f.targets["hip"] for f in report.files}
    if any(t.reason.startswith("no compiler here") for t in by_path.values()):
        pytest.skip(f"no HIP compiler here: {by_path['scale.cu'].reason}")
    for name in ("scale.cu", "fill.cu"):
        assert by_path[name].status == "compiled", (name, by_path[name].reason, by_path[name].log[-2000:])


@pytest.mark.integration
def test_a_rerun_keeps_build_verdicts_whose_inputs_are_the_same_and_rebuilds_the_rest(smooth: Path) -> None:
    out = smooth.parent / "again"
    first = port_program([str(smooth)], ["hip"], out_dir=str(out))
    built = {f.path: f.targets for f in first.files}["src/main.cu"]
    if built["hip"].status != "compiled":
        pytest.skip(f"the HIP unit is not built here: {built['hip'].reason}")
    second = port_program([str(smooth)], ["hip"], out_dir=str(out))
    kept = {f.path: f.targets for f in second.files}["src/main.cu"]
    assert kept["hip"].resumed and kept["hip"].status == "compiled" and kept["hip"].key == built["hip"].key
    doc = json.loads((out / "report.json").read_text())
    main = next(f for f in doc["program"]["files"] if f["path"] == "src/main.cu")
    assert main["targets"]["hip"]["resumed"] is True and main["targets"]["hip"]["key"]
    header = smooth / "include" / "smooth_kernels.cuh"
    header.write_text(header.read_text().replace("scale * in[i] + offset", "scale * in[i] - offset"))
    third = port_program([str(smooth)], ["hip"], out_dir=str(out))
    redone = {f.path: f.targets for f in third.files}["src/main.cu"]
    assert (
        not redone["hip"].resumed and redone["hip"].key != built["hip"].key
    )  # an edited header: built again
    fresh = port_program([str(smooth)], ["hip"], out_dir=str(out), fresh=True)
    assert not {f.path: f.targets for f in fresh.files}["src/main.cu"]["hip"].resumed


def test_a_program_without_any_cuda_is_refused(tmp_path: Path) -> None:
    (tmp_path / "main.cpp").write_text("int main() { return 0; }\n")
    (tmp_path / "util.h").write_text("int twice(int x);\n")
    with pytest.raises(UsageError, match="nothing to port"):
        port_program([str(tmp_path)], translate_only=True)
    assert not (tmp_path.parent / f"{tmp_path.name}.ported").exists()  # refused before anything is written
