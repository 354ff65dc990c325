"""A stdout line the program prints from a timer (its source shows it: porter.scan.timers) is not compared, and
the report says which and why; every other line, one from the same program included, still is."""

from __future__ import annotations

from porter.harness.outputs import (
    Rule,
    RunOutput,
    compare,
    default_rule,
    is_masked,
    timer_notes,
    unstable,
    with_timers,
)
from porter.scan.timers import printed_timers

SOURCE = (
    "#include <cstdio>\n#include <sys/time.h>\n"
    "double now() { struct timeval tv; gettimeofday(&tv, 0); return tv.tv_sec + tv.tv_usec * 1e-6; }\n"
    "double elapsed(double a, double b) { return b - a; }\n"
    "int main() {\n"
    "    double t0 = now(); double t1 = now(); double sum = 1.5;\n"
    '    printf("COPY BACK: %f\\n", elapsed(t0, t1));\n'
    '    printf("RESULT: %f\\n", sum);\n'
    "    return 0;\n}\n"
)


def _rule() -> Rule:
    return with_timers(default_rule(), printed_timers([("copy.cu", SOURCE.encode())]))


def _out(text: str, files: dict[str, bytes] | None = None) -> RunOutput:
    return RunOutput(exit=0, stdout=text, files=dict(files or {}))


ORIGINAL = "COPY BACK: 0.000010\nRESULT: 1.5\n"


def test_the_heuristic_alone_sees_no_time_in_the_line() -> None:
    # the false "differs" seen on an H100: nothing on the line says it is a time
    assert not is_masked("COPY BACK: 0.000010", default_rule())
    assert compare(_out(ORIGINAL), _out("COPY BACK: 0.000026\nRESULT: 1.5\n")) == [
        "stdout line 1: original 'COPY BACK: 0.000010', port 'COPY BACK: 0.000026'"
    ]


def test_a_line_printed_from_a_timer_is_not_compared_and_the_note_names_its_source() -> None:
    rule = _rule()
    assert compare(_out(ORIGINAL), _out("COPY BACK: 0.000026\nRESULT: 1.5\n"), rule) == []
    assert timer_notes(ORIGINAL, rule) == [
        "stdout line 1 printed from a timer (elapsed(...) at copy.cu:7): not compared"
    ]


def test_a_planted_difference_in_the_result_is_still_found() -> None:
    rule = _rule()
    assert compare(_out(ORIGINAL), _out("COPY BACK: 0.000026\nRESULT: 1.6\n"), rule) == [
        "stdout line 2: original 'RESULT: 1.5', port 'RESULT: 1.6'"
    ]
    # a port that prints the timer's line with other words is a difference too (it lines up with RESULT)
    assert compare(_out(ORIGINAL), _out("COPY: 0.000026\nRESULT: 1.5\n"), rule) != []


def test_a_line_masked_by_its_words_anyway_is_not_noted_and_a_long_line_is_never_a_timer_s() -> None:
    rule = _rule()
    assert timer_notes("Elapsed time 3 ms\nRESULT: 1.5\n", rule) == []
    assert not is_masked("COPY BACK: " + "1" * 5000, rule)


def test_what_varies_between_runs_is_counted_among_the_lines_still_compared() -> None:
    rule = _rule()
    first = _out("COPY BACK: 0.000010\nseed 7\nRESULT: 1.5\n")
    second = _out("COPY BACK: 0.000031\nseed 9\nRESULT: 1.5\n")
    varies = unstable(first, second, rule)
    assert varies.numbers == (2,)  # the timer's line is not counted as one that varies
    port = _out("COPY BACK: 0.000026\nseed 4\nRESULT: 1.6\n")
    assert compare(first, port, rule, varies) == ["stdout line 3: original 'RESULT: 1.5', port 'RESULT: 1.6'"]


def test_written_files_are_compared_as_written() -> None:
    # the patterns are the program's stdout lines: a file holding the same text is compared as any file
    rule = _rule()
    original = _out("", {"log.txt": b"COPY BACK: 0.000010\n"})
    port = _out("", {"log.txt": b"COPY BACK: 0.000026\n"})
    assert compare(original, port, rule) == [
        "file log.txt line 1: original 'COPY BACK: 0.000010', port 'COPY BACK: 0.000026'"
    ]


def test_many_timed_lines_are_noted_with_a_count() -> None:
    text = "COPY BACK: 0.1\n" * 25
    notes = timer_notes(text, _rule())
    assert len(notes) == 21 and notes[-1] == "... and 5 more stdout line(s) printed from a timer"
