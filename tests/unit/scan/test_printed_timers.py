"""porter.scan.timers: the lines a program prints from a timer, found in its source (the value printed derives
from a timer call, directly, through a helper of the program, or through variables), and only those."""

from __future__ import annotations

import re

from porter.scan.timers import PrintedTimer, format_pieces, printed_timers, timer_functions, unescape

NOW = (
    "#include <cstdio>\n#include <sys/time.h>\n"
    "double now() { struct timeval tv; gettimeofday(&tv, 0); return tv.tv_sec + tv.tv_usec * 1e-6; }\n"
    "double elapsed(double a, double b) { return b - a; }\n"
)


def _found(source: str, name: str = "prog.cu") -> dict[int, PrintedTimer]:
    """The print statements found, by line."""
    return {t.line: t for t in printed_timers([(name, source.encode())])}


def _line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def _matches(timer: PrintedTimer, line: str) -> bool:
    return re.fullmatch(timer.pattern, line, re.S) is not None


def test_a_value_measured_through_a_helper_that_calls_gettimeofday_is_found() -> None:
    source = NOW + (
        "int main() {\n"
        "    double t0 = now();\n"
        "    double t1 = now();\n"
        '    printf("COPY BACK: %f\\n", t1 - t0);\n'
        "    double sum = 1.5;\n"
        '    printf("RESULT: %f\\n", sum);\n'
        "    return 0;\n}\n"
    )
    found = _found(source)
    copy = found[_line_of(source, "COPY BACK")]
    assert copy.what == "t1 - t0" and copy.file == "prog.cu" and copy.stream == "stdout"
    assert _matches(copy, "COPY BACK: 0.000010") and _matches(copy, "COPY BACK: 0.000026")
    assert not _matches(copy, "COPY BACK: 0.000010 extra") and not _matches(copy, "RESULT: 1.5")
    # (b) a result is not a time
    assert _line_of(source, "RESULT") not in found
    assert len(found) == 1


def test_cuda_event_elapsed_time_writes_a_time_into_its_first_argument() -> None:
    source = (
        "#include <cstdio>\nint main() {\n"
        "    cudaEvent_t a, b; float ms = 0; int blocks = 4;\n"
        "    cudaEventElapsedTime(&ms, a, b);\n"
        '    printf("kernel: %.3f\\n", ms);\n'
        '    printf("blocks: %d\\n", blocks);\n'
        "    return 0;\n}\n"
    )
    found = _found(source)
    assert set(found) == {_line_of(source, "kernel:")}
    kernel = found[_line_of(source, "kernel:")]
    assert kernel.what == "ms" and _matches(kernel, "kernel: 0.125") and not _matches(kernel, "blocks: 4")


def test_a_value_printed_through_a_helper_of_its_arguments_is_found() -> None:
    # elapsed(a, b) calls no timer: it returns what it is given, and it is given times
    source = NOW + (
        "int main() {\n"
        "    double t0 = now(), t1 = now();\n"
        '    printf("SEND ARRAY Y BACK: %lf\\n", elapsed(t0, t1));\n'
        '    printf("SPAN: %lf\\n", elapsed(1.0, 2.5));\n'
        "    return 0;\n}\n"
    )
    found = _found(source)
    assert set(found) == {_line_of(source, "SEND ARRAY Y BACK")}
    timer = found[_line_of(source, "SEND ARRAY Y BACK")]
    assert timer.what == "elapsed(...)"
    assert timer.where() == f"elapsed(...) at prog.cu:{_line_of(source, 'SEND ARRAY Y BACK')}"


def test_a_variable_assigned_a_result_after_a_time_is_a_result_again() -> None:
    source = NOW + (
        "int main(int argc, char** argv) {\n"
        "    double v = now();\n"
        "    v = 2.0 * argc;\n"
        '    printf("VALUE: %f\\n", v);\n'
        "    double w = 0;\n"
        "    if (argc > 1) w = now();\n"
        '    printf("MAYBE: %f\\n", w);\n'  # a time on one path only: not marked
        "    double x;\n"
        "    if (argc > 1) x = now(); else x = now() + 1;\n"
        '    printf("BOTH: %f\\n", x);\n'  # a time on every path
        "    return 0;\n}\n"
    )
    found = _found(source)
    assert set(found) == {_line_of(source, "BOTH:")}


def test_a_parameter_is_a_time_where_every_call_gives_one() -> None:
    source = NOW + (
        'void report(const char* what, double v) { printf("%s took %f\\n", what, v); }\n'
        'void show(double v) { printf("SHOW %f\\n", v); }\n'
        "int main() {\n"
        "    double t0 = now();\n"
        '    report("copy", now() - t0);\n'
        "    show(now() - t0);\n"
        "    show(4.0);\n"
        "    return 0;\n}\n"
    )
    found = _found(source)
    assert set(found) == {_line_of(source, "void report")}
    assert _matches(found[_line_of(source, "void report")], "copy took 0.5")


def test_std_chrono_and_cout_are_followed() -> None:
    source = (
        "#include <chrono>\n#include <iostream>\nint main() {\n"
        "    auto s = std::chrono::high_resolution_clock::now();\n"
        "    auto e = std::chrono::high_resolution_clock::now();\n"
        "    double ms = std::chrono::duration<double, std::milli>(e - s).count();\n"
        '    std::cout << "Kernel: " << std::fixed << ms << std::endl;\n'
        '    std::cout << "Answer: " << 42 << std::endl;\n'
        "    return 0;\n}\n"
    )
    found = _found(source)
    assert set(found) == {_line_of(source, "Kernel")}
    assert _matches(found[_line_of(source, "Kernel")], "Kernel: 0.25")


def test_a_format_that_also_prints_a_result_or_has_no_words_is_left_out() -> None:
    source = NOW + (
        "int main() {\n"
        "    double t = now(), r = 3.0;\n"
        '    printf("VALUE: %f\\n", t);\n'
        '    printf("VALUE: %f\\n", r);\n'  # the same format with a result: the lines cannot be told apart
        '    printf("%f\\n", t);\n'  # no literal text: it could be any number line
        '    printf("%s: %f\\n", "clock", t);\n'  # a literal string argument is literal text
        '    fprintf(fp, "FILE %f\\n", t);\n'  # another file: not the run's output
        '    fprintf(stderr, "ERR %f\\n", t);\n'
        "    return 0;\n}\n"
    )
    found = _found(source)
    assert set(found) == {_line_of(source, '"clock"'), _line_of(source, "ERR")}
    assert _matches(found[_line_of(source, '"clock"')], "clock: 0.5")
    assert found[_line_of(source, "ERR")].stream == "stderr"


def test_time_seeding_a_generator_is_not_a_timer() -> None:
    source = (
        "#include <cstdio>\n#include <ctime>\n#include <cstdlib>\nint main() {\n"
        "    unsigned seed = time(NULL); srand(seed);\n"
        '    printf("SEED %u\\n", seed);\n'
        "    clock_t c0 = clock();\n"
        '    printf("TICKS %ld\\n", (long)(clock() - c0));\n'
        "    return 0;\n}\n"
    )
    assert set(_found(source)) == {_line_of(source, "TICKS")}
    assert not any(t.name == "time" for t in timer_functions())


def test_formats_become_whole_line_patterns() -> None:
    assert unescape('"a\\tb\\n\\x41\\101"') == "a\tb\nAA"
    pieces = format_pieces(
        "n=%5d t=%-8.3lf %%%s\n", [(False, "n", None), (True, "t", None), (False, "s", None)]
    )
    assert pieces is not None and [p.timed for p in pieces if not p.literal] == [False, True, False]
    assert format_pieces("%d %d\n", [(False, "a", None)]) is None  # too few values
    assert format_pieces("%y\n", [(False, "a", None)]) is None  # no such conversion
    width = format_pieces("%*.*f|\n", [(False, "w", None), (False, "p", None), (True, "t", None)])
    assert width is not None and [p.timed for p in width if not p.literal] == [True]
    source = NOW + (
        "int main() {\n    double t = now();\n"
        '    printf("head\\nLAP %d: %8.3e s-ish\\npartial %f", 3, t, t);\n'
        "    return 0;\n}\n"
    )
    (timer,) = _found(source).values()  # "head" prints no time; "partial" may go on with what comes next
    assert _matches(timer, "LAP 3:  1.250e-03 s-ish") and not _matches(timer, "LAP x:  1.250e-03 s-ish")


def test_rodinia_style_helpers_in_another_file_of_the_program() -> None:
    helpers = (
        "#include <sys/time.h>\n"
        "long long get_time() { struct timeval tv; gettimeofday(&tv, NULL); return (tv.tv_sec * 1000000) + tv.tv_usec; }\n"
        "double elapsed_time(long long start_time, long long end_time) { return (double) (end_time - start_time) / (1000 * 1000); }\n"
    )
    main = (
        "#include <cstdio>\nlong long get_time();\ndouble elapsed_time(long long, long long);\n"
        "int main() {\n"
        "    long long a = get_time();\n    long long b = get_time();\n"
        '    printf("SEND WEIGHTS BACK: %lf\\n", elapsed_time(a, b));\n'
        '    printf("XE: %lf\\n", 12.5);\n'
        "    return 0;\n}\n"
    )
    found = printed_timers([("timer.c", helpers.encode()), ("main.cu", main.encode())])
    assert [(t.what, t.file, t.line) for t in found] == [("elapsed_time(...)", "main.cu", 7)]
