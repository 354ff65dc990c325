"""`port_file(..., model=M)`: what the rules leave goes to the LLM loop (fake server, real SDK, real
harness on PoCL / Oclgrind), and the OpenCL screening of translated candidates."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.llm_server import FakeLLMServer
from porter.backends.opencl.screen import opencl_param_key

from porter.llm.loop import screen
from porter.model import Kernel
from porter.records import Rejection, Screened
from porter.workflows.options import ModelOptions, OutputOptions, RunOptions

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples" / "cuda"
KEY = "sk-proj-UNITfake1111SECRET2222value3333port"
SIGNATURE = (
    "__global const float* in",
    "__global float* out",
    "int n",
    "__local float* warp_sums",
)

# A correct OpenCL C 1.2 reduction without sub-groups: each work-item adds its partial into its warp's
# __local slot with a compare-and-swap loop, then work-item 0 adds the block's slots into *out.
HELPERS = """
static void local_add(volatile __local float* p, float v)
{
    volatile __local uint* bits = (volatile __local uint*)p;
    uint seen;
    uint expected = atomic_or(bits, 0u);
    do {
        seen = expected;
        expected = atomic_cmpxchg(bits, seen, as_uint(as_float(seen) + v));
    } while (expected != seen);
}

static void global_add(volatile __global float* p, float v)
{
    volatile __global uint* bits = (volatile __global uint*)p;
    uint seen;
    uint expected = atomic_or(bits, 0u);
    do {
        seen = expected;
        expected = atomic_cmpxchg(bits, seen, as_uint(as_float(seen) + v));
    } while (expected != seen);
}
"""
KERNEL = """
__kernel void reduce_sum(__global const float* in, __global float* out, int n, __local float* warp_sums)
{
    int lid = (int)get_local_id(0);
    int num_warps = (int)get_local_size(0) / 32;
    if (lid < num_warps) {
        warp_sums[lid] = 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float v = 0.0f;
    int stride = (int)(get_local_size(0) * get_num_groups(0));
    for (int i = (int)get_global_id(0); i < n; i += stride) {
        v += in[i];
    }
    local_add(&warp_sums[lid / 32], v);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        float total = 0.0f;
        for (int w = 0; w < LAST; ++w) {
            total += warp_sums[w];
        }
        global_add(out, total);
    }
}
"""
CORRECT_CL = HELPERS + KERNEL.replace("LAST", "num_warps")
WRONG_CL = HELPERS + KERNEL.replace("LAST", "1")  # only the first warp's partial reaches *out


def reply(code: str) -> str:
    return f"Local memory and barriers instead of sub-group shuffles.\n\n```opencl\n{code}```\n"


def _kernel() -> Kernel:
    from porter.scan import scan_file

    return next(k for k in scan_file(str(SAMPLES / "reduce_shfl.cu")).kernels if k.name == "reduce_sum")


# --------------------------------------------------------------------------- screening


def test_opencl_param_keys_ignore_qualifiers_and_names() -> None:
    assert opencl_param_key("__global const float* restrict in") == "global float*"
    assert opencl_param_key("global float *out") == opencl_param_key("__global float* dst")
    assert opencl_param_key("const unsigned int m") == "uint"
    assert opencl_param_key("__local float* s") != opencl_param_key("__global float* s")


def test_screen_accepts_the_translated_signature() -> None:
    got = screen(CORRECT_CL, _kernel(), "opencl", entry="reduce_sum", signature=SIGNATURE)
    assert isinstance(got, Screened) and "__kernel void reduce_sum" in got.code


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (CORRECT_CL.replace("__local float* warp_sums)", "__global float* warp_sums)"), "parameter 4"),
        (CORRECT_CL.replace(", __local float* warp_sums)", ")"), "exactly 4 parameters"),
        (CORRECT_CL.replace("void reduce_sum(", "void reduce(", 1), "no `__kernel void reduce_sum"),
        ('#include "common.cuh"\n' + CORRECT_CL, "#include"),
        (CORRECT_CL.replace("barrier(CLK_LOCAL_MEM_FENCE);", "__syncthreads();", 1), "__syncthreads"),
        (CORRECT_CL + "\nvoid host(void) { clFinish(0); }\n", "clFinish"),
        (CORRECT_CL + "\nint main(void) { return 0; }\n", "main"),
    ],
)
def test_screen_rejects(code: str, message: str) -> None:
    got = screen(code, _kernel(), "opencl", entry="reduce_sum", signature=SIGNATURE)
    assert isinstance(got, Rejection) and message in got.reason, got


def test_expected_signature_comes_from_the_translation() -> None:
    from porter.backends import get_dialect
    from porter.backends.opencl.translate import translate_to_opencl

    _opencl_signature = get_dialect("opencl").model_signature
    path = SAMPLES / "reduce_shfl.cu"
    tr = translate_to_opencl(path.read_text(), str(path))
    (tk,) = [k for k in tr.kernels if k.name == "reduce_sum"]
    assert tuple(map(opencl_param_key, _opencl_signature(_kernel(), tk, tr.text))) == tuple(
        map(opencl_param_key, SIGNATURE)
    )
    # Without the translated text (an untranslatable kernel is not emitted) it is rebuilt from the map.
    built = _opencl_signature(_kernel(), tk, "")
    assert tuple(map(opencl_param_key, built)) == tuple(map(opencl_param_key, SIGNATURE))


# --------------------------------------------------------------------------- the workflow


@pytest.fixture
def no_subgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only OpenCL devices without sub-groups (PoCL, Oclgrind), and a fake key."""
    monkeypatch.setenv("PORTER_NO_INTEL_OCL", "1")
    from porter.backends import get_backend
    from porter.backends.isolate import probe_backend

    # Earlier tests may have registered the Intel runtime in this process; the workflow's devices
    # come from child processes, where PORTER_NO_INTEL_OCL undoes that registration: ask one.
    devices = list(probe_backend("opencl").devices)
    if not devices:
        pytest.skip("no OpenCL device (PoCL) here")
    if not get_backend("cpu").devices():
        pytest.skip("the CPU emulator (the reference) is unavailable")
    need = ("subgroups", "subgroup_shuffle_relative", "reqd_sub_group_size_32")
    if not any(get_backend("opencl").missing_requirements(d, need) for d in devices):
        pytest.skip("every OpenCL device here has 32-wide sub-groups; the rules translate the kernel there")
    # The workflow lists devices in this process, where an earlier test may have registered Intel's
    # runtime (which has the sub-groups): scope this test to the devices that lack them.
    import porter.plan as planning

    listed = planning.devices_of

    def lacking(backend: str) -> list:
        found = listed(backend)
        if backend != "opencl":
            return found
        # without sub-groups at all (PoCL, Oclgrind): Intel's runtime has them but may lack 32-wide ones (its
        # probe failed), and PORTER_NO_INTEL_OCL keeps it out of the children that would run on it
        return [d for d in found if get_backend("opencl").missing_requirements(d, ("subgroups",))]

    monkeypatch.setattr(planning, "devices_of", lacking)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeLLMServer]:
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "PORTER_NO_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    with FakeLLMServer() as s:
        yield s


def _program(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    shutil.copy(SAMPLES / "reduce_shfl.cu", folder)
    shutil.copy(SAMPLES / "common.cuh", folder)
    return folder / "reduce_shfl.cu"


def _port(tmp_path: Path, server: FakeLLMServer, **kw: Any):
    from porter.harness.validate import ValidateOptions
    from porter.workflows.port import port_file

    return port_file(
        str(_program(tmp_path)),
        ["opencl"],
        run=RunOptions(validate=ValidateOptions(trials=1)),
        output=OutputOptions(str(tmp_path / "out")),
        model=ModelOptions("openai:gpt-4o-mini", base_url=server.url + "/v1", **kw),
        bench=False,
    )


@pytest.mark.integration
def test_wrong_then_correct_reply_carries_the_mismatch(tmp_path, server, no_subgroups) -> None:
    server.script(reply(WRONG_CL), reply(CORRECT_CL))
    report = _port(tmp_path, server, rounds=3)
    assert len(server.requests) == 2  # validated in round 2: the conversation stops there
    evidence = server.requests[1].body["messages"][-1]["content"]
    assert "failed validation" in evidence and "out of tolerance" in evidence, evidence
    assert "out[0] =" in evidence and "expected" in evidence
    first = server.requests[0].body["messages"][-1]["content"]
    assert "__kernel void reduce_sum(__global const float* in" in first  # the expected signature
    rows = report.rows()
    assert rows and all(r.status == "validated" for r in rows), rows
    assert all(r.provenance == "llm:openai:gpt-4o-mini" and r.target == "opencl" for r in rows)
    assert any(r.device.startswith("opencl:") and "oclgrind" not in r.device for r in rows)
    assert Path(rows[0].path).read_text().count("total += warp_sums[w]") == 1
    (conv,) = report.llm
    assert [a["status"] for a in conv["attempts"]] == ["failed", "validated"]
    assert report.exit_code == 0
    doc = report.document()
    assert doc["usage"]["requests"] == 2 and doc["usage"]["input_tokens"] == 200
    assert doc["usage"]["cost_usd"] > 0
    assert {"time_ms", "speedup", "provenance"} <= set(doc["kernels"][0]["variants"][0])


@pytest.mark.integration
def test_no_validated_candidate_fails_the_rows(tmp_path, server, no_subgroups) -> None:
    server.script(reply(WRONG_CL))
    report = _port(tmp_path, server, rounds=1)
    rows = report.rows()
    assert rows and all(r.status == "failed" for r in rows), rows
    assert all("no validated candidate" in r.reason for r in rows)
    assert report.exit_code == 1


@pytest.mark.integration
def test_spent_dollar_budget_asks_nothing(tmp_path, server, no_subgroups) -> None:
    report = _port(tmp_path, server, max_dollars=0.0)
    assert not server.requests
    rows = report.rows()
    assert rows and all(r.status == "failed" and "dollar budget" in r.reason for r in rows)


@pytest.mark.integration
def test_without_a_model_nothing_changes(tmp_path, no_subgroups) -> None:
    from porter.workflows.port import port_file

    report = port_file(
        str(_program(tmp_path)), ["opencl"], output=OutputOptions(str(tmp_path / "out")), translate_only=False
    )
    assert report.rows() and all(r.status == "untranslatable" for r in report.rows())
    assert "usage" not in report.document()
    assert list(report.document()["kernels"][0]["variants"][0]) == [
        "target",
        "path",
        "status",
        "device",
        "max_rel_err",
        "trials",
        "reason",
    ]


@pytest.mark.integration
def test_rerun_keeps_the_models_validated_translation(tmp_path, server, no_subgroups) -> None:
    """A re-run with the same inputs keeps the model's validated rows (and its conversation) instead of
    asking and validating again; --fresh asks (here: the reply cache answers) and validates again."""
    server.script(reply(CORRECT_CL))
    first = _port(tmp_path, server, rounds=1)
    assert first.rows() and all(r.status == "validated" for r in first.rows())
    seen: list[str] = []
    from porter.harness.validate import ValidateOptions
    from porter.workflows.port import port_file

    def again(fresh: bool = False):
        return port_file(
            str(tmp_path / "src" / "reduce_shfl.cu"),
            ["opencl"],
            run=RunOptions(validate=ValidateOptions(trials=1)),
            output=OutputOptions(str(tmp_path / "out"), fresh=fresh),
            model=ModelOptions("openai:gpt-4o-mini", base_url=server.url + "/v1", rounds=1),
            bench=False,
            progress=seen.append,
        )

    second = again()
    assert len(server.requests) == 1 and not any("round 1" in m for m in seen)
    assert any("validated earlier, same inputs; kept" in m for m in seen)
    assert [r.status for r in second.rows()] == [r.status for r in first.rows()]
    assert all(r.resumed for r in second.rows() if r.provenance.startswith("llm:"))
    assert second.llm and all(c.get("resumed") for c in second.llm)
    assert Path(second.rows()[0].path).is_file()
    seen.clear()
    third = again(fresh=True)
    assert any("round 1" in m for m in seen) and not any(r.resumed for r in third.rows())
