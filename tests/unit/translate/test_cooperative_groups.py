"""Cooperative groups, the thread block only: mapped for HIP and OpenCL; the rest stays refused."""

from __future__ import annotations

from pathlib import Path

from porter.backends.hip.translate import translate_to_hip
from porter.backends.opencl.translate import translate_to_opencl

from porter.model import Severity

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "cuda" / "cg_block_sum.cu"


def test_opencl_maps_the_block_handle_and_its_syncs_to_barriers() -> None:
    tr = translate_to_opencl(FIXTURE.read_text(), str(FIXTURE))
    (k,) = tr.kernels
    assert not k.untranslatable, k.untranslatable
    import re

    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", tr.text, flags=re.DOTALL)  # the code, comments left out
    assert "namespace" not in code and "cg::" not in code and ".sync()" not in code
    assert code.count("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)") == 2
    assert tr.text.count("\n") >= FIXTURE.read_text().count("\n") - 20  # lines kept for diagnostics


def test_opencl_ranks_a_tile_by_arithmetic_and_keeps_a_group_used_as_a_value_untranslatable() -> None:
    src = (
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
        "__global__ void k(float* x) {\n"
        "  cg::thread_block b = cg::this_thread_block();\n"
        "  auto tile = cg::tiled_partition<32>(b);\n"
        "  x[0] = tile.thread_rank();\n}\n"
    )
    (k,) = translate_to_opencl(src, "k.cu").kernels
    assert not k.untranslatable and not k.requires  # a tile's rank needs no sub-groups: the linear id % 32
    text = translate_to_opencl(src, "k.cu").text
    assert "get_local_size(0) * (get_local_id(1)" in text and "% 32u" in text
    (k,) = translate_to_opencl(
        src.replace("x[0] = tile.thread_rank();", "x[0] = helper(tile);"), "k.cu"
    ).kernels
    assert k.untranslatable, "a group handle passed as a value has no OpenCL C counterpart"


def test_hip_drops_an_unused_reduce_header_and_keeps_a_used_one_with_an_error() -> None:
    tr = translate_to_hip(FIXTURE.read_text(), str(FIXTURE))
    assert "#include <hip/hip_cooperative_groups.h>" in tr.text
    assert "// porter: #include <cooperative_groups/reduce.h> dropped" in tr.text
    assert tr.text.count("\n") == FIXTURE.read_text().count("\n") + 2  # the runtime include and #line only
    used = FIXTURE.read_text().replace(
        "cg::sync(block);", "float t = cg::reduce(block, 1.0f, cg::plus<float>());"
    )
    tr = translate_to_hip(used, "used.cu")
    assert "#include <cooperative_groups/reduce.h>" in tr.text
    errors = [d for d in tr.diagnostics if d.severity is Severity.ERROR and "reduce.h" in d.construct]
    assert errors and "no HIP counterpart" in errors[0].reason
