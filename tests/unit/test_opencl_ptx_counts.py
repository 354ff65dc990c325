"""bench/opencl_ptx.py's reading of PTX: each entry's body, its instruction classes, a CUDA entry's name."""

from __future__ import annotations

from bench_scripts import load

PTX = """
.version 8.0
.target sm_90
.visible .entry _Z4tilePfS_i(
    .param .u64 _Z4tilePfS_i_param_0
)
{
    .reg .f32 %f<4>;
    ld.global.nc.f32 %f1, [%rd1];
    ld.global.f32 %f2, [%rd2];
    st.shared.f32 [%r1], %f1;
    bar.sync 0;
    ld.shared.f32 %f3, [%r2];
    fma.rn.f32 %f3, %f1, %f2, %f3;
    @%p1 bra $L__BB0_2;
    rem.s32 %r3, %r1, %r2;
$L__BB0_2:
    st.global.f32 [%rd3], %f3;
    ret;
}
.entry second(
)
{
    cvt.rn.f32.s32 %f1, %r1;
    ret;
}
"""


def test_each_entry_is_counted_by_class_and_cuda_names_are_unmangled() -> None:
    m = load("opencl_ptx")
    bodies = m.kernels(PTX)
    assert list(bodies) == ["_Z4tilePfS_i", "second"]
    c = m.counts(bodies["_Z4tilePfS_i"])
    assert c["ld.global"] == 2 and c["ld.global.nc"] == 1  # a non-coherent load is a global load too
    assert (c["st.global"], c["ld.shared"], c["st.shared"], c["bar"]) == (1, 1, 1, 1)
    assert (c["fma"], c["branch"], c["div/rem"]) == (1, 1, 1)
    assert c["total"] == 10  # instructions only: no directives, braces or labels
    assert m.counts(bodies["second"]) == {"cvt": 1, "total": 2}
    assert m.short("_Z4tilePfS_i") == "tile" and m.short("needle_cuda_shared_1") == "needle_cuda_shared_1"
