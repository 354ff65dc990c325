"""Runs on another device (issue #30): where a port's run prints the name of the device it ran on, that
name is read as the original's device's, and everything else on the line is still compared."""

from __future__ import annotations

from porter.harness.outputs import RunOutput, as_device, compare, default_rule


def _out(text: str) -> RunOutput:
    return RunOutput(exit=0, stdout=text)


NAMES = ("porter CPU runtime (virtual device)", "pthread-skylake-avx512")


def test_the_device_line_is_compared_as_the_original_s_masked_alike() -> None:
    # the original's line is masked by the rule ("runtime" is a time word): the port's must be too, or
    # every line after it would be compared with the wrong one
    original = _out(
        'GPU Device 0: "porter CPU runtime (virtual device)" with compute capability 8.0\nsum 10.5\n'
    )
    port = _out('GPU Device 0: "pthread-skylake-avx512" with compute capability 8.0\nsum 10.5\n')
    swapped, numbers = as_device(port, NAMES)
    assert numbers == (1,)
    assert compare(original, swapped, default_rule()) == []
    assert compare(original, port, default_rule()) != []  # as printed, the lines do not line up


def test_a_different_number_on_the_device_line_is_still_a_difference() -> None:
    names = ("NVIDIA H200", "NVIDIA H200 OpenCL")
    original = _out('GPU Device 0: "NVIDIA H200" with compute capability 9.0\n')
    port = _out('GPU Device 0: "NVIDIA H200 OpenCL" with compute capability 8.0\n')
    swapped, numbers = as_device(port, names)
    assert numbers == (1,)
    assert compare(original, swapped) == [
        "stdout line 1: original 'GPU Device 0: \"NVIDIA H200\" with compute capability 9.0', "
        "port 'GPU Device 0: \"NVIDIA H200\" with compute capability 8.0'"
    ]


def test_nothing_is_swapped_without_two_different_names() -> None:
    port = _out("device Y\n")
    assert as_device(port, ("X", "X")) == (port, ())
    assert as_device(port, ("", "Y")) == (port, ())
    assert as_device(port, ("X", "Z")) == (port, ())


def test_a_line_reporting_a_device_property_is_named_and_a_result_is_not() -> None:
    from porter.harness.outputs import property_lines

    original = _out(
        "Total Global Memory\t\t - 16777216 KB\nNumber of Multi processors - 8\nresult 42\nPASS\n"
    )
    port = _out("Total Global Memory\t\t - 22586640 KB\nNumber of Multi processors - 2\nresult 41\nPASS\n")
    props = property_lines(original, port)
    assert props.numbers == (1, 2)
    assert compare(original, port, varies=props) == ["stdout line 3: original 'result 42', port 'result 41'"]
    # the same property printed alike is compared as any line (and is no difference)
    assert property_lines(original, original).numbers == ()


def test_the_cuda_samples_device_banners_are_device_properties() -> None:
    """Seen on an H100: the samples' banners, original on the GPU, OpenCL port on PoCL's CPU device."""
    from porter.harness.outputs import property_lines

    original = _out(
        "CUDA device [NVIDIA H100 80GB HBM3] has 132 Multi-Processors, Compute 9.0\n"
        "> SM Capability 9.0 detected:\n> [NVIDIA H100 80GB HBM3] has 132 MP(s) x 128 (Cores/MP) = 16896 (Cores)\n"
        "sum 7\n"
    )
    port = _out(
        "CUDA device [NVIDIA H100 80GB HBM3] has 8 Multi-Processors, Compute 8.0\n"
        "> SM Capability 8.0 detected:\n> [NVIDIA H100 80GB HBM3] has 8 MP(s) x 64 (Cores/MP) = 512 (Cores)\n"
        "sum 8\n"
    )
    props = property_lines(original, port)
    assert props.numbers == (1, 2, 3)
    assert compare(original, port, varies=props) == ["stdout line 4: original 'sum 7', port 'sum 8'"]


# A self-checking program's printout (the shape of a CUDA sample's summary, written here): the error statistic it
# prints follows the device's rounding, its verdict is its own check against its threshold.
def _self_check(error: str, verdict: str = "Test passed") -> RunOutput:
    return _out(
        "Comparing the results...\n"
        f"L1 norm: 1.794E-07\nMax absolute error: {error}\n\nShutting down...\n"
        f"[sample] - Test Summary\n{verdict}\n"
    )


def test_an_error_statistic_that_follows_the_device_is_not_compared_when_both_checks_pass() -> None:
    from porter.harness.outputs import statistic_lines

    original, port = _self_check("1.192093E-05"), _self_check("1.049042E-05")
    assert compare(original, port) == [
        "stdout line 3: original 'Max absolute error: 1.192093E-05', port 'Max absolute error: 1.049042E-05'"
    ]
    lines, said = statistic_lines(original, port)
    assert lines.numbers == (3,)
    assert said == [
        "stdout line 3: original 'Max absolute error: 1.192093E-05', port 'Max absolute error: 1.049042E-05'"
    ]
    assert compare(original, port, default_rule(), lines) == []


def test_an_error_statistic_is_compared_when_a_check_did_not_pass_or_the_program_has_none() -> None:
    from porter.harness.outputs import statistic_lines

    original = _self_check("1.192093E-05")
    failing = _self_check("3.5E-01", verdict="Test failed!")
    assert statistic_lines(original, failing)[0].numbers == ()
    assert compare(original, failing) != []
    # no verdict word at all outside the statistic lines: nothing says the result was checked
    bare_a = _out("result 42\nMax absolute error: 1.0E-05\n")
    bare_b = _out("result 42\nMax absolute error: 2.0E-05\n")
    assert statistic_lines(bare_a, bare_b)[0].numbers == ()
    # a line that names no statistic is compared as ever, even when both checks pass
    a = _out("sum 10.5\nMax absolute error: 1E-05\nTest passed\n")
    b = _out("sum 10.6\nMax absolute error: 2E-05\nTest passed\n")
    stats, _said = statistic_lines(a, b)
    assert stats.numbers == (2,)
    assert compare(a, b, default_rule(), stats) == ["stdout line 1: original 'sum 10.5', port 'sum 10.6'"]


def test_a_line_the_source_prints_from_the_device_properties_is_not_compared_across_devices() -> None:
    """No word of device_property_words on the line ("family"): the program's source prints it from
    cudaGetDeviceProperties' fields (porter.scan.timers.printed_properties), so it is the device's."""
    from porter.harness.outputs import property_lines, with_timers
    from porter.scan.timers import printed_properties

    source = (
        "#include <cstdio>\nint main() {\n    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);\n"
        '    printf("\\nfamily - %d.%d", p.major, p.minor);\n'
        '    printf("\\nsum %d\\n", 7);\n    return 0;\n}\n'
    )
    rule = with_timers(default_rule(), (), printed_properties([("prog.cu", source.encode())]))
    original = _out("\nfamily - 8.0\nsum 7\n")
    port = _out("\nfamily - 9.0\nsum 7\n")
    found = property_lines(original, port, rule)
    assert found.numbers == (2,) and found.count == 1
    assert property_lines(original, port, default_rule()).count == 0  # the words alone do not know it
    # a result on such a line still counts where it is not the device's: another line that differs is kept
    wrong = _out("\nfamily - 9.0\nsum 8\n")
    assert property_lines(original, wrong, rule).numbers == (2,)
    assert compare(original, wrong, rule, found) == ["stdout line 3: original 'sum 7', port 'sum 8'"]
