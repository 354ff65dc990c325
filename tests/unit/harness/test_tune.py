"""porter.harness.tune: the configurations the autotuner tries and how it picks one (fake timings)."""

from __future__ import annotations

from dataclasses import replace

from porter.backends import Device, HardwareFacts

from porter.harness.tune import Config, Timed, configurations, flag_sets, grid_stride, tune
from porter.model import ArgSpec, KernelSpec, Role, Status, Verdict
from porter.workflows.tune import _rewrite

SPEC = KernelSpec("k", (ArgSpec("x", "float32", Role.INOUT, ("n",)),), ("(n + 255) / 256",), ("256",))
GPU = Device("cuda", "Fake GPU", "sm_90", "gpu", facts=HardwareFacts(32, 1024, 48 * 1024, multiprocessors=4))


def _verdict(ok: bool) -> Verdict:
    return Verdict("k", "cuda", "cuda:Fake GPU", "cuda", "t", True, True, ok, Status.VALIDATED if ok else Status.FAILED,
                   "fine" if ok else "matches-reference: wrong")  # fmt: skip


def test_one_dimension_tries_every_block_size_keeping_the_thread_count_and_the_original_first() -> None:
    configs = configurations(SPEC, stride=False, max_threads=512, multiprocessors=4)
    assert configs[0].original and configs[0].block == ("256",)
    assert [c.block[0] for c in configs[1:]] == ["64", "128", "256", "512"]  # 1024 is over the device's limit
    assert configs[1].grid == ("(((n + 255) / 256) * (256) + 63) / 64",)
    strided = configurations(SPEC, stride=True, max_threads=256, multiprocessors=4)
    assert any(c.grid[0].startswith("min(") and c.grid[0].endswith(", 64)") for c in strided)  # 16 per SM


def test_two_dimensions_try_block_shapes() -> None:
    spec = KernelSpec("k", (), ("(w + 15) / 16", "(h + 15) / 16"), ("16", "16"))
    configs = configurations(spec, stride=False, max_threads=1024, multiprocessors=None)
    shapes = {c.block for c in configs}
    assert ("32", "8") in shapes and ("16", "16") in shapes
    c = next(c for c in configs if c.block == ("32", "8"))
    assert c.grid == ("(((w + 15) / 16) * (16) + 31) / 32", "(((h + 15) / 16) * (16) + 7) / 8")


def test_the_fastest_validated_configuration_wins_and_rejected_ones_are_never_timed() -> None:
    configs = configurations(SPEC, stride=False, max_threads=1024, multiprocessors=4)
    timed: list[str] = []
    times = {"the original's": 2.0, "block 64": 1.0, "block 128": 1.5, "block 512": 0.5, "block 1024": 3.0}

    def validate_at(spec: KernelSpec, c: Config) -> list[Verdict]:
        return [_verdict(spec.block[0] != "512")]  # 512 computes wrong: never chosen, however fast

    def timer(c: Config, spec: KernelSpec, device: Device) -> Timed:
        timed.append(c.label)
        return Timed(times.get(c.label))

    result = tune("k", SPEC, configs, validate_at, timer, GPU)
    assert result.best is not None and result.best.config.label == "block 64"
    assert "block 512" not in timed and result.speedup == 2.0
    assert next(t for t in result.trials if t.config.label == "block 512").reason.startswith("rejected")


def test_a_tie_keeps_the_original() -> None:
    configs = configurations(SPEC, stride=False, max_threads=128, multiprocessors=None)
    result = tune("k", SPEC, configs, lambda s, c: [_verdict(True)], lambda c, s, d: Timed(1.0), GPU)
    assert result.best is not None and result.best.config.original


def test_a_time_below_the_floor_is_shown_but_never_chosen() -> None:
    configs = configurations(SPEC, stride=False, max_threads=128, multiprocessors=None)

    def timer(c: Config, spec: KernelSpec, device: Device) -> Timed:
        fast = c.label == "block 64"
        return Timed(0.01 if fast else 1.0, "below the floor" if fast else "", suspect=fast)

    result = tune("k", SPEC, configs, lambda s, c: [_verdict(True)], timer, GPU)
    assert result.best is not None and result.best.config.original and result.speedup == 1.0
    shown = next(t for t in result.trials if t.config.label == "block 64")
    assert shown.time_ms == 0.01 and shown.reason.startswith("suspect, not chosen")


def test_compile_options_are_tried_on_the_fastest_geometry_each_validated_with_them() -> None:
    configs = configurations(SPEC, stride=False, max_threads=256, multiprocessors=None)
    validated_with: list[tuple[str, ...]] = []
    times = {"block 128": 1.0, "block 128 + -fast": 0.8, "block 128 + -wrong": 0.1}

    def validate_at(spec: KernelSpec, c: Config) -> list[Verdict]:
        validated_with.append(c.flags)
        return [_verdict(c.flags != ("-wrong",))]  # an option that changes the results: rejected, never timed

    def timer(c: Config, spec: KernelSpec, device: Device) -> Timed:
        return Timed(times.get(c.label, 2.0))

    result = tune("k", SPEC, configs, validate_at, timer, GPU, flags=[("-fast",), ("-wrong",)])
    assert result.best is not None and result.best.config.label == "block 128 + -fast"
    assert result.best.config.flags == ("-fast",) and result.best.config.block == ("128",)
    assert validated_with[-2:] == [("-fast",), ("-wrong",)]
    assert next(t for t in result.trials if t.config.flags == ("-wrong",)).time_ms is None
    assert result.speedup == 2.0 / 0.8


def test_the_option_sets_are_the_backends_data() -> None:
    cuda = flag_sets("cuda")
    assert ("--extra-device-vectorization",) in cuda and all(isinstance(f, tuple) for f in cuda)
    assert flag_sets("cpu") == [] and flag_sets("no-such-backend") == []


def test_grid_stride_is_read_from_the_kernel_body_and_the_launch_is_rewritten_in_place() -> None:
    from porter.scan import scan_source

    src = (
        "__global__ void k(float* x, int n) {\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] += 1; }\n"
        "void run(float* x, int n) { k<<<(n + 255) / 256, 256>>>(x, n); }\n"
    )
    (kernel,) = scan_source(src.encode(), "k.cu", "cuda").kernels
    assert grid_stride(kernel, src)
    out = _rewrite(src, 3, "(n + 255) / 256", "256", "((n + 255) / 256 * 256 + 63) / 64", "64")
    assert out is not None and "k<<<((n + 255) / 256 * 256 + 63) / 64, 64>>>(x, n)" in out
    assert _rewrite(src, 3, "grid", "256", "g", "64") is None  # not the text the scan read


def test_a_configuration_that_launches_as_the_original_does_is_not_written_as_a_new_launch() -> None:
    configs = {c.label: c for c in configurations(SPEC, stride=False, max_threads=1024, multiprocessors=None)}
    assert configs["block 256"].launches_as(SPEC, [{"n": 1000}, {"n": 3}])  # other text, the same launch
    assert not configs["block 128"].launches_as(SPEC, [{"n": 1000}])
    assert not configs["block 256"].launches_as(SPEC, [])  # nowhere to tell


def test_a_rewrite_joins_the_search_with_every_geometry_and_can_win() -> None:
    from porter.harness.tune import joined

    base = configurations(SPEC, stride=False, max_threads=256, multiprocessors=None)
    configs = base + joined(base, "rewrite")
    assert len(configs) == 2 * len(base) and not any(c.original for c in configs[len(base) :])
    assert configs[len(base)].label == "rewrite, the original's" and configs[-1].source == "rewrite"
    judged: list[str] = []

    def validate_at(spec: KernelSpec, c: Config) -> list[Verdict]:
        judged.append(c.source)
        return [_verdict(True)]

    def timer(c: Config, spec: KernelSpec, device: Device) -> Timed:
        return Timed((0.5 if c.source == "rewrite" else 1.0) * (0.9 if spec.block == ("128",) else 1.0))

    result = tune("k", SPEC, configs, validate_at, timer, GPU)
    assert result.best is not None and result.best.config.label == "rewrite, block 128"
    assert judged.count("rewrite") == len(base) and result.speedup == 1.0 / 0.45


def test_a_larger_block_gets_dynamic_shared_memory_in_proportion_and_a_smaller_keeps_the_originals() -> None:
    from porter.harness.spec import geometry

    # one float per warp, as a block reduction sizes it: 64 bytes at 512 threads
    spec = replace(
        SPEC, grid=("min((n + 511) / 512, 2048)",), block=("512",), shared_bytes="(512 / 32) * sizeof(float)"
    )
    sizes = [{"n": 5000}, {"n": 70000}]
    configs = {
        c.label: c
        for c in configurations(spec, stride=True, max_threads=1024, multiprocessors=None, sizes=sizes)
    }
    big = configs["block 1024, shared memory in proportion"]
    assert geometry(big.shaped(spec), sizes[0])[1:] == ((1024,), 128)
    assert (
        configs["block 128"].shared is None and geometry(configs["block 128"].shaped(spec), sizes[0])[2] == 64
    )
    assert configs["block 512"].shared is None
    # not a whole number of bytes in proportion (100 bytes at 384 threads, 512 asked): the original's amount
    odd = replace(SPEC, block=("384",), shared_bytes="100")
    assert all(c.shared is None for c in configurations(odd, stride=False, max_threads=512, multiprocessors=None,
                                                        sizes=[{"n": 10}]))  # fmt: skip
    # the block depends on the size (256 at one, 1024 at the other): larger than some launches' only
    varying = replace(SPEC, block=("n < 1000 ? 256 : 1024",), shared_bytes="(n < 1000 ? 256 : 1024) * 4")
    c = next(c for c in configurations(varying, stride=False, max_threads=1024, multiprocessors=None,
                                       sizes=[{"n": 10}, {"n": 5000}]) if c.block == ("512",))  # fmt: skip
    assert c.shared is not None and c.shared.startswith("max(")
    assert (
        geometry(c.shaped(varying), {"n": 10})[2] == 2048
        and geometry(c.shaped(varying), {"n": 5000})[2] == 4096
    )


def test_the_tuner_validates_and_times_a_configuration_with_its_shared_memory_and_keeps_it_under_options() -> (
    None
):
    spec = replace(SPEC, shared_bytes="256 * 4")
    configs = configurations(spec, stride=False, max_threads=1024, multiprocessors=None, sizes=[{"n": 4096}])
    seen: dict[str, str] = {}

    def validate_at(shaped: KernelSpec, c: Config) -> list[Verdict]:
        seen[c.label] = shaped.shared_bytes
        return [_verdict(True)]

    def timer(c: Config, shaped: KernelSpec, device: Device) -> Timed:
        return Timed(0.5 if shaped.block == ("1024",) else 1.0)

    result = tune("k", spec, configs, validate_at, timer, GPU, flags=[("-fast",)])
    assert (
        seen["block 64"] == "256 * 4"
        and seen["block 1024, shared memory in proportion"] == "(256 * 4) * 1024 / (256)"
    )
    best = result.best
    assert best is not None and best.config.label == "block 1024, shared memory in proportion"
    flagged = next(t for t in result.trials if t.config.flags)
    assert (
        flagged.config.shared == "(256 * 4) * 1024 / (256)"
        and seen[flagged.config.label] == flagged.config.shared
    )


def test_a_launch_with_shared_memory_is_rewritten_with_its_third_argument() -> None:
    src = "void run(float* x, int n) {\n  k<<<blocks, threads, smem>>>(x, n);\n}\n"
    out = _rewrite(src, 2, "blocks", "threads", "g", "1024", "smem", "(smem) * 1024 / (threads)")
    assert out is not None and "k<<<g, 1024, (smem) * 1024 / (threads)>>>(x, n);" in out
    assert _rewrite(src, 2, "blocks", "threads", "g", "1024", None, "x") is None  # no third argument read
    assert _rewrite(src, 2, "blocks", "threads", "g", "64") == src.replace("<<<blocks, threads", "<<<g, 64")
