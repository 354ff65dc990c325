"""Oclgrind as a checking device: real runs under the wrapper, verdicts read from its log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from porter.backends import get_backend
from porter.backends.opencl.oclgrind import (
    FINDING_KINDS,
    Finding,
    checker_device,
    oclgrind_path,
    oclgrind_wrapper,
    parse_oclgrind_log,
)

pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install 'porter-gpu[opencl]')")
needs_oclgrind = pytest.mark.skipif(
    oclgrind_path() is None, reason="oclgrind is not installed (apt-get install oclgrind)"
)

# Every test kernel takes (__global float *a, __local float *t, int n) and runs one group of N items.
N = 16

OUT_OF_BOUNDS = """__kernel void past_end(__global float *a, __local float *t, int n) {
    int i = get_global_id(0);
    a[i + 1] = 1.0f;
}
"""

UNINITIALIZED = """__kernel void uninit_local(__global float *a, __local float *t, int n) {
    int i = get_local_id(0);
    if (i > 0) t[i] = 1.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    a[i] = t[0];
}
"""

RACE = """__kernel void local_race(__global float *a, __local float *t, int n) {
    int i = get_local_id(0);
    t[0] = (float)i;
    barrier(CLK_LOCAL_MEM_FENCE);
    a[i] = t[0];
}
"""

CLEAN = """__kernel void rotate(__global float *a, __local float *t, int n) {
    int i = get_local_id(0);
    t[i] = a[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    a[i] = t[(i + 1) % n];
}
"""

# Runs one kernel on the checking device through the OpenCL backend, inside a process
# started under oclgrind; prints the devices it saw and the output as JSON.
RUNNER = """
import json, sys
import numpy as np
from porter.backends import CompileOptions, get_backend
from porter.backends.isolate import LocalBuffer

source, entry, n = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
be = get_backend("opencl")
devices = be.devices()
dev = next(d for d in devices if d.kind == "checker")
prog = be.load(be.compile(source, entry, CompileOptions(), dev), dev)
buf = be.to_device(np.arange(n, dtype=np.float32), dev)
prog(buf, LocalBuffer(4 * n), np.int32(n), grid=(1,), block=(n,))
out = be.to_host(buf, np.float32, (n,))
print(json.dumps({
    "devices": [[d.name, d.kind, d.platform, d.arch, d.driver, list(vars(d.facts).values())] for d in devices],
    "toolchain": be.toolchain_id(dev),
    "out": out.tolist(),
}))
"""


def run_under_oclgrind(tmp_path: Path, source: str, entry: str) -> tuple[dict, str, str]:
    """(runner's JSON, the --log file's text, the child's stderr)."""
    kernel = tmp_path / f"{entry}.cl"
    kernel.write_text(source)
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    log = tmp_path / f"{entry}.log"
    cmd = [*oclgrind_wrapper(str(log)), sys.executable, str(script), str(kernel), entry, str(N)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result, log.read_text() if log.exists() else "", proc.stderr


def kinds(findings: list[Finding]) -> set[str]:
    return {f.kind for f in findings}


@needs_oclgrind
@pytest.mark.integration
def test_out_of_bounds_write_is_found(tmp_path):
    _, log, stderr = run_under_oclgrind(tmp_path, OUT_OF_BOUNDS, "past_end")
    findings = parse_oclgrind_log(log + stderr)
    assert kinds(findings) == {"out-of-bounds"}
    (f,) = findings
    assert f.kernel == "past_end" and f.line == 3 and f.code == "a[i + 1] = 1.0f;"
    assert f.message.startswith("Invalid write of size 4")


@needs_oclgrind
@pytest.mark.integration
def test_uninitialized_local_read_is_found(tmp_path):
    _, log, stderr = run_under_oclgrind(tmp_path, UNINITIALIZED, "uninit_local")
    findings = parse_oclgrind_log(log + stderr)
    assert kinds(findings) == {"uninitialized"}
    assert all(f.kernel == "uninit_local" and f.line == 5 for f in findings)
    assert sum(f.count for f in findings) == N  # every work-item stored t[0], which nobody wrote


@needs_oclgrind
@pytest.mark.integration
def test_local_write_write_race_is_found(tmp_path):
    _, log, stderr = run_under_oclgrind(tmp_path, RACE, "local_race")
    findings = parse_oclgrind_log(log + stderr)
    assert kinds(findings) == {"data-race"}
    assert all(f.kernel == "local_race" and f.line == 3 for f in findings)
    assert any("Write-write" in f.message for f in findings)
    # both sides of the race: the same store, by two work-items of the one group
    assert all(f.other_line == 3 and f.other_code == "t[0] = (float)i;" for f in findings)
    assert all(len(f.entities) == 2 and all("Group(0,0,0)" in e for e in f.entities) for f in findings)


# a counter each work-item bumps and checks until its own tag reads back (a warp's lockstep assumed)
TAGGED = """__kernel void tagged(__global float *a, __local float *t, int n) {
    __local volatile uint c[1];
    uint i = get_local_id(0), v;
    if (i == 0) c[0] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    do {
        v = ((c[0] & 0x07FFFFFFu) + 1) | (i << 27);
        c[0] = v;
    } while (c[0] != v);
    barrier(CLK_LOCAL_MEM_FENCE);
    a[i] = (float)(c[0] & 0x07FFFFFFu);
}
"""


@needs_oclgrind
@pytest.mark.integration
def test_a_read_write_race_keeps_both_lines_and_work_items(tmp_path):
    from porter.backends import CheckerFinding

    from porter.harness import races

    _, log, stderr = run_under_oclgrind(tmp_path, TAGGED, "tagged")
    findings = [f for f in parse_oclgrind_log(log + stderr) if "Read-write" in f.message]
    assert findings
    f = findings[0]
    assert {f.line, f.other_line} == {7, 8} and f.kernel == "tagged"
    said = races.where(
        CheckerFinding(f.kind, f.message, f.line, f.code, f.other_line, f.other_code, f.entities)
    )
    assert said.startswith(f" at lines {f.line} and {f.other_line} (")
    assert "c[0] = v;" in said and " between work-items (" in said and "of work-group (0,0,0)" in said


@needs_oclgrind
@pytest.mark.integration
def test_clean_kernel_has_no_findings_and_the_checker_device_matches(tmp_path):
    result, log, stderr = run_under_oclgrind(tmp_path, CLEAN, "rotate")
    assert parse_oclgrind_log(log + stderr) == []
    assert result["out"] == np.roll(np.arange(N, dtype=np.float32), -1).tolist()
    # inside the wrapper only the Oclgrind platform exists, and its Device is the one listed outside
    outside = checker_device()
    assert result["devices"] == [
        [
            outside.name,
            outside.kind,
            outside.platform,
            outside.arch,
            outside.driver,
            list(vars(outside.facts).values()),
        ]
    ]
    assert result["toolchain"] == get_backend("opencl").toolchain_id(outside)


@needs_oclgrind
@pytest.mark.parametrize(
    ("source", "entry", "expect"), [(OUT_OF_BOUNDS, "past_end", {"out-of-bounds"}), (CLEAN, "rotate", set())]
)
@pytest.mark.integration
def test_checker_job_through_the_isolation_layer(tmp_path, source, entry, expect):
    from porter.backends.isolate import Job, LocalBuffer, run_job

    job = Job(
        backend="opencl",
        source=source,
        entry=entry,
        device=checker_device(),
        args=(np.arange(N, dtype=np.float32), LocalBuffer(4 * N), np.int32(N)),
        grid=(1,),
        block=(N,),
        use_cache=False,
        wrapper=oclgrind_wrapper("{scratch}/oclgrind.log"),  # the sandboxed child writes only there
        collect=("oclgrind.log",),
    )
    result = run_job(job, timeout_s=300)
    assert result.ok, (result.stage, result.error, result.log)
    assert "oclgrind.log" in result.files
    findings = parse_oclgrind_log(result.files["oclgrind.log"] + result.log)
    assert kinds(findings) == expect
    if not expect:  # the clean kernel's output came back through the child
        np.testing.assert_array_equal(result.outputs[0][0], np.roll(np.arange(N, dtype=np.float32), -1))


def test_wrapper_turns_every_check_on():
    wrapper = oclgrind_wrapper("/tmp/x.log", max_errors=7)
    assert Path(wrapper[0]).name == "oclgrind"
    for option in ("--check-api", "--data-races", "--uninitialized"):
        assert option in wrapper
    assert wrapper[-2:] == ("--log", "/tmp/x.log")
    assert wrapper[wrapper.index("--max-errors") + 1] == "7"


# Literal log text in Oclgrind 21.10's formats, for the parser's edge cases.
API_NOISE = """
Oclgrind - OpenCL runtime error detected
\tFunction: clGetDeviceInfo
\tError:    CL_INVALID_VALUE
\tFor argument 'param_name'

"""

API_ERROR = """
Oclgrind - OpenCL runtime error detected
\tFunction: clEnqueueNDRangeKernel
\tError:    CL_INVALID_WORK_GROUP_SIZE
\tFor argument 'local_work_size'

"""

DIVERGENCE = """
Work-group divergence detected (barrier):
\tKernel: diverge
\tWork-group: Group(0,0,0)

"""

TRACEBACK = """Traceback (most recent call last):
  File "runner.py", line 3, in <module>
RuntimeError: something unrelated
"""


def test_parser_keeps_real_api_errors_and_drops_feature_probes():
    findings = parse_oclgrind_log(API_NOISE + API_ERROR + API_NOISE)
    assert len(findings) == 1
    (f,) = findings
    assert f.kind == "invalid-api"
    assert "clEnqueueNDRangeKernel" in f.message and "CL_INVALID_WORK_GROUP_SIZE" in f.message
    assert "local_work_size" in f.message


def test_parser_classifies_other_messages_and_ignores_program_output():
    findings = parse_oclgrind_log(TRACEBACK + DIVERGENCE + "plain program output\n")
    assert [(f.kind, f.kernel) for f in findings] == [("other", "diverge")]
    assert parse_oclgrind_log("") == []
    assert set(FINDING_KINDS) == {"out-of-bounds", "uninitialized", "data-race", "invalid-api", "other"}


ATOMIC_HISTOGRAM = """
__global__ void scatter(const int* keys, float* fsum, double* dsum, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&fsum[keys[i]], 0.5f);
        atomicAdd(&dsum[keys[i]], 0.25);
    }
}
"""


@needs_oclgrind
@pytest.mark.integration
def test_translated_float_atomics_are_race_free_under_oclgrind():
    # CUDA's float and double atomicAdd become compare-and-swap loops in OpenCL C; their first read of
    # the old value must be atomic too, or Oclgrind reports a read-write race on every collision (seen
    # when `porter lift` validated a float64 histogram)
    from porter.backends import get_dialect
    from porter.backends.isolate import Job, run_job

    tr = get_dialect("opencl").translate(ATOMIC_HISTOGRAM, "scatter.cu")
    (tk,) = tr.kernels
    keys = (np.arange(64) % 4).astype(np.int32)  # sixteen work-items on each of four cells
    job = Job(
        backend="opencl", source=tr.text, entry=tk.entry, device=checker_device(),
        args=(keys, np.zeros(4, np.float32), np.zeros(4, np.float64), np.int32(64)), grid=(2,), block=(32,),
        use_cache=False, wrapper=oclgrind_wrapper("{scratch}/oclgrind.log"), collect=("oclgrind.log",),
    )  # fmt: skip
    result = run_job(job, timeout_s=300)
    assert result.ok, (result.stage, result.error, result.log)
    assert kinds(parse_oclgrind_log(result.files.get("oclgrind.log", "") + result.log)) == set()
    _, fsum, dsum = result.outputs[0]
    assert fsum.tolist() == [8.0] * 4 and dsum.tolist() == [4.0] * 4


def test_the_simulator_stopping_in_a_plugin_is_its_own_kind_and_names_the_option_to_drop() -> None:
    from porter.backends.opencl.oclgrind import plugin_option

    log = (
        "OCLGRIND FATAL ERROR (./src/plugins/Uninitialized.cpp:1805)\n"
        "\tUnhandled instruction: freeze\n"
        "When executing kernel 'row_sums'\n"
    )
    (stop,) = parse_oclgrind_log(log)
    assert stop.kind == "simulator-error"  # not a finding about the kernel (before: "uninitialized")
    assert plugin_option(stop.message) == "--uninitialized"
    assert plugin_option("OCLGRIND FATAL ERROR (./src/core/WorkItem.cpp:12)") == ""  # the core: no relief
    wrapped = oclgrind_wrapper("/tmp/log", without=("--uninitialized",))
    assert "--uninitialized" not in wrapped and "--data-races" in wrapped and "--check-api" in wrapped
    assert "--uninitialized" in oclgrind_wrapper("/tmp/log")
