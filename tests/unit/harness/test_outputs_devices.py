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
