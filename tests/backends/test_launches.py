"""The launch rewrite and symbol registration shared by porter's instrumented program builds
(backends/launches.py), on text alone: no compiler."""

from __future__ import annotations

import re

import pytest
from porter.backends.launches import (
    global_kernels,
    has_launch_syntax,
    kernel_names,
    namespace_symbols,
    program_kernels,
    register_kernels,
    register_symbols,
    rewrite_api_launches,
    rewrite_launches,
    rewrite_preprocessed,
)


def test_rewrite_simple_launch() -> None:
    text = "void f() { k<<<g, b>>>(x, y); }\n"
    assert rewrite_launches(text, set()) == (
        'void f() { porter_emu::launch_kernel(k, porter_emu::config(g, b), decltype(porter_emu::params(k))(x, y), "k"); }\n'
    )


def test_rewrite_launch_spanning_lines_keeps_the_line_count() -> None:
    text = "void f() {\n  k<<<grid,\n     block,\n     smem>>>(a,\n             b);\n  after();\n}\n"
    out = rewrite_launches(text, set())
    assert out.count("\n") == text.count("\n")
    assert "<<<" not in out and ">>>" not in out
    lines = out.splitlines()
    assert lines[1].lstrip().startswith("porter_emu::launch_kernel(k, porter_emu::config(grid,")
    assert lines[3].lstrip().startswith("smem), decltype(porter_emu::params(k))(a,")
    assert lines[4].strip() == 'b), "k");'
    assert lines[5] == "  after();"  # the code after the launch stays on its line


def test_rewrite_spaced_chevrons() -> None:
    expected = 'void f() { porter_emu::launch_kernel(k, porter_emu::config(g, b), decltype(porter_emu::params(k))(x), "k"); }\n'
    assert rewrite_launches("void f() { k<< <g, b>> >(x); }\n", set()) == expected
    out = rewrite_launches("void f() { k < < < g, b > > > (x); }\n", set())
    assert not re.search(r"<\s*<\s*<|>\s*>\s*>", out)
    assert out.count("\n") == 1
    assert "porter_emu::launch_kernel(k, porter_emu::config( g, b ), " in out
    assert 'decltype(porter_emu::params(k))(x), "k")' in out


def test_rewrite_launch_in_a_macro_body() -> None:
    text = "#define LAUNCH(n) kern<<<(n + 255) / 256, 256>>>(ptr, n)\nvoid f() { LAUNCH(10); }\n"
    out = rewrite_launches(text, set())
    assert out == (
        "#define LAUNCH(n) porter_emu::launch_kernel(kern, porter_emu::config((n + 255) / 256, 256), "
        'decltype(porter_emu::params(kern))(ptr, n), "kern")\nvoid f() { LAUNCH(10); }\n'
    )


def test_rewrite_launch_in_a_continued_macro_body() -> None:
    text = "#define LAUNCH(n) \\\n  kern<<<(n + 255) / 256, \\\n         256>>>(ptr, n)\nvoid f() { LAUNCH(10); }\n"
    out = rewrite_launches(text, set())
    assert out.count("\n") == text.count("\n")
    assert "<<<" not in out
    lines = out.splitlines()
    assert lines[0] == "#define LAUNCH(n) \\"
    assert lines[1].endswith("\\") and lines[2].endswith('"kern")')  # the continuations stay
    assert lines[3] == "void f() { LAUNCH(10); }"


def test_rewrite_template_launch() -> None:
    out = rewrite_launches("void f() { k<float, 4><<<g, b, 0, s>>>(p, n); }\n", set())
    assert out == (
        "void f() { porter_emu::launch_kernel(k<float, 4>, porter_emu::config(g, b, 0, s), "
        'decltype(porter_emu::params(k<float, 4>))(p, n), "k<float, 4>"); }\n'
    )


def test_rewrite_deduced_template_launch() -> None:
    out = rewrite_launches("void f() { k2<<<g, b>>>(p, n); }\n", {"k2"})
    assert out == (
        "void f() { porter_emu::launch_deduced(porter_emu::config(g, b), "
        '[&](auto... porter_p) { PORTER_DEDUCED_LAUNCH(k2)(porter_p...); }, "k2", p, n); }\n'
    )
    # only the names in the set: another kernel keeps its typed launch
    other = rewrite_launches("void f() { k3<<<g, b>>>(p, n); }\n", {"k2"})
    assert "porter_emu::launch_kernel(k3," in other and "launch_deduced" not in other
    # explicit template arguments need no deduction
    explicit = rewrite_launches("void f() { k2<float><<<g, b>>>(p, n); }\n", {"k2"})
    assert "porter_emu::launch_kernel(k2<float>," in explicit


def test_rewrite_deduced_launch_without_arguments_and_in_a_macro() -> None:
    out = rewrite_launches("void f() { k2<<<1, 1>>>(); }\n", {"k2"})
    assert out == (
        "void f() { porter_emu::launch_deduced(porter_emu::config(1, 1), "
        '[&](auto... porter_p) { PORTER_DEDUCED_LAUNCH(k2)(porter_p...); }, "k2"); }\n'
    )
    macro = rewrite_launches("#define L(p) k2<<<1, 32>>>(p, 4)\n", {"k2"})
    assert macro.startswith("#define L(p) porter_emu::launch_deduced(porter_emu::config(1, 32), ")
    assert macro.endswith('"k2", p, 4)\n')


def test_rewrite_launch_through_a_function_pointer() -> None:
    text = "void f() { void (*fp)(int*) = kern; fp<<<1, 32>>>(p); }\n"
    assert rewrite_launches(text, set()) == (
        "void f() { void (*fp)(int*) = kern; porter_emu::launch_kernel(fp, porter_emu::config(1, 32), "
        'decltype(porter_emu::params(fp))(p), "fp"); }\n'
    )


def test_rewrite_launch_without_arguments() -> None:
    assert rewrite_launches("void f() { k<<<1, 1>>>(); }\n", set()) == (
        'void f() { porter_emu::launch_kernel(k, porter_emu::config(1, 1), decltype(porter_emu::params(k))(), "k"); }\n'
    )


def test_rewrite_keeps_nested_brackets_and_strings() -> None:
    out = rewrite_launches("void f() { k<<<dim3(a, b), n >> 1>>>(g(x, y), \"a)b\", ')'); }\n", set())
    assert "porter_emu::config(dim3(a, b), n >> 1)" in out
    assert 'decltype(porter_emu::params(k))(g(x, y), "a)b", \')\'), "k")' in out


def test_rewrite_two_launches_on_a_line() -> None:
    out = rewrite_launches("void f() { a<<<1, 1>>>(x); b<<<2, 2>>>(y); }\n", set())
    assert out.count("porter_emu::launch_kernel(") == 2
    assert "porter_emu::launch_kernel(a, porter_emu::config(1, 1)" in out
    assert "porter_emu::launch_kernel(b, porter_emu::config(2, 2)" in out


@pytest.mark.parametrize(
    "text",
    [
        "int main() { return 1 << 3 >> 1; }\n",
        "int x = a << b >> c;  // k<<<1, 1>>>(x) in a comment\n",
        'const char* s = "k<<<1, 1>>>()";\n',
        "/* k<<<grid, block>>>(p);\n   on two lines */\nint y;\n",
        "",
    ],
)
def test_rewrite_without_launches_is_unchanged(text: str) -> None:
    assert rewrite_launches(text, set()) == text
    assert rewrite_launches(text, {"k"}) == text


def test_kernel_names_finds_templates_and_overloads() -> None:
    text = (
        "template <typename T> __global__ void tk(T* p) {}\n"
        "__global__ void plain(int* p) {}\n"
        "__global__ void over(int* p) {}\n"
        "__global__ void over(float* p) {}\n"
        "// __global__ void in_comment(int* p) {}\n"
    )
    names, deduced = kernel_names([text])
    assert {"tk", "plain", "over"} <= names
    assert "in_comment" not in names
    assert deduced == {"tk", "over"}


def test_kernel_names_a_prototype_is_not_an_overload() -> None:
    header = "__global__ void fill_value(float* out, const float* extra, float value, int n);\n"
    unit = "__global__ void fill_value(float* out, const float* extra, float value, int n) {}\n"
    _, deduced = kernel_names([header, unit])
    assert deduced == set()


def test_global_constant_and_device_variables_are_registered_for_the_capture() -> None:
    text = (
        "#ifndef K_H\n#define K_H\n"
        "__constant__ float c_table[17];\n"
        "static __constant__ double k2 = 3.0;\n"
        "__device__ int counter = 0;\n"
        "__device__ float twice(float x) { return 2 * x; }\n"
        "namespace q { __constant__ int hidden[2]; }\n"
        "extern __constant__ float elsewhere[3];\n"
        "template <class T> __device__ T per_type;\n"
        "#ifdef USE_EXTRA\n__constant__ float maybe[3];\n#endif\n"
        "__global__ void k(float* x) { __shared__ float s[32]; x[0] = c_table[0]; }\n"
        "#endif\n"
    )
    # not: functions, namespaces' contents, extern declarations, templates, what an #if may leave out
    assert namespace_symbols(text) == [("c_table", True), ("k2", True), ("counter", False)]
    out = register_symbols(text)
    assert out.startswith(text) and out.count("\n") == text.count("\n") + 5  # appended: lines kept
    assert (
        "PORTER_REGISTER_SYMBOL(c_table, true);" in out and "PORTER_REGISTER_SYMBOL(counter, false);" in out
    )
    assert register_symbols("int main() { return 0; }\n") == "int main() { return 0; }\n"


# --------------------------------------------------------------------------- launches anywhere (#29)


def test_a_macro_holding_only_the_configuration_is_left_for_the_preprocessor() -> None:
    # the argument list follows the macro's use: the text cannot show the whole launch
    text = "#define CFG(k, n) k<<<(n + 63) / 64, 64>>>\n(void)0;\nvoid f() { CFG(kern, 10)(p, 10); }\n"
    out = rewrite_launches(text, set())
    assert out == text and has_launch_syntax(out)
    # nor is a macro holding the chevrons alone
    alone = "#define ARGS2(g, b) <<<g, b>>>\nvoid f() { kern ARGS2(1, 32)(p); }\n"
    assert rewrite_launches(alone, set()) == alone


def test_a_macro_whose_kernel_is_its_parameter_is_named_by_the_argument() -> None:
    text = "#define benchmark(k, g, ...) k<<<g, 64>>>(__VA_ARGS__)\n"
    out = rewrite_launches(text, set())
    assert out == (
        "#define benchmark(k, g, ...) porter_emu::launch_kernel(k, porter_emu::config(g, 64), "
        "decltype(porter_emu::params(k))(__VA_ARGS__), #k)\n"
    )
    # with a kernel that needs deducing, only the macro's use says which kernel it is
    assert rewrite_launches(text, {"negate"}) == text


def test_a_macro_launch_with_its_arguments_on_the_next_line_keeps_the_line_count() -> None:
    text = "#define RUN(n) kern<<<n, 32>>> \\\n   (ptr, n)\nint after;\n"
    out = rewrite_launches(text, set())
    assert out.count("\n") == text.count("\n") and "<<<" not in out
    assert out.splitlines()[0].endswith("\\") and out.splitlines()[-1] == "int after;"


def test_a_deduced_template_launch_is_labelled_with_its_template_parameters() -> None:
    kernels = program_kernels(
        ["template <typename T, int N = 2>\n__global__ void clamp_to(T* x, T hi, int n) {}\n"]
    )
    assert kernels.deduced == {"clamp_to"} and kernels.labels == {"clamp_to": "clamp_to<T, N>"}
    out = rewrite_launches("void f() { clamp_to<<<1, 32>>>(p, 5.0f, n); }\n", kernels.deduced, kernels.labels)
    assert '}, "clamp_to<T, N>", p, 5.0f, n); }' in out  # the replay deduces T from the captured types
    explicit = rewrite_launches(
        "void f() { clamp_to<float><<<1, 32>>>(p, 5.0f, n); }\n", kernels.deduced, kernels.labels
    )
    assert 'decltype(porter_emu::params(clamp_to<float>))(p, 5.0f, n), "clamp_to<float>")' in explicit


def test_runtime_launch_calls_go_through_porters_wrappers() -> None:
    text = (
        "void f() {\n"
        "  cudaLaunchKernel((const void*)k, g, b, args, 0, s);\n"
        "  e = ::cudaLaunchCooperativeKernel ((void*)k, g, b, args);\n"
        "  hipLaunchKernel(k, g, b, args, 0, 0); hipLaunchCooperativeKernel(k, g, b, args, 0, 0);\n"
        '  obj.cudaLaunchKernel(x); puts("cudaLaunchKernel(");  // cudaLaunchKernel(k)\n'
        "}\n"
    )
    out = rewrite_api_launches(text)
    lines = out.splitlines()
    assert lines[1] == "  porter_emu::launch_args((const void*)k, g, b, args, 0, s);"
    assert lines[2] == "  e = porter_emu::launch_args_cooperative ((void*)k, g, b, args);"
    assert (
        lines[3].count("porter_emu::launch_args(") == 1 and "porter_emu::launch_args_cooperative(" in lines[3]
    )
    assert lines[4] == text.splitlines()[4]  # a member, a string and a comment stay
    assert rewrite_launches(text, set()) == out


def test_kernels_defined_at_global_scope_are_registered_by_address() -> None:
    text = (
        "__global__ void proto(int* p);\n"
        "__global__ void plain(int* p) { p[0] = 1; }\n"
        "static __global__ void __launch_bounds__(256) hidden(float* p, int n) {}\n"
        "template <class T> __global__ void tk(T* p) {}\n"
        "__global__ void over(int* p) {}\n__global__ void over(float* p) {}\n"
        "namespace q { __global__ void inner(int* p) {} }\n"
        "#ifdef EXTRA\n__global__ void maybe(int* p) {}\n#endif\n"
        "int main() { plain<<<1, 1>>>(0); }\n"
    )
    _, deduced = kernel_names([text])
    assert global_kernels(text, deduced) == ["plain", "hidden"]
    out = register_kernels(text, deduced)
    assert out.startswith(text) and out.count("\n") == text.count("\n") + 4
    assert "PORTER_REGISTER_KERNEL(plain);\nPORTER_REGISTER_KERNEL(hidden);" in out
    assert register_kernels("int main() { return 0; }\n") == "int main() { return 0; }\n"


def test_preprocessed_launches_are_rewritten_in_the_users_files_only() -> None:
    pre = (
        '# 1 "/build/src/main.cu"\n'
        "int main() {\n"
        '# 1 "/usr/include/some.h" 1 3\n'
        "template <class T> struct A { enum { v = 1 <<< 2 }; };\n"
        '# 5 "/build/src/main.cu" 2\n'
        "  negate<<<(1000 + 63) / 64, 64>>>(d, n); scale<<<4, 64>>>(d, 3.0f, n);\n"
        "}\n"
    )
    out = rewrite_preprocessed(pre, {"negate"}, "/build/src/", {"negate": "negate<T>"})
    assert out.count("\n") == pre.count("\n")
    lines = out.splitlines()
    assert lines[3] == pre.splitlines()[3]  # the system header's text stays
    assert lines[4] == '# 5 "/build/src/main.cu" 2'  # the markers stay: errors name the user's line
    assert "porter_emu::launch_deduced(porter_emu::config((1000 + 63) / 64, 64), " in lines[5]
    assert "{ negate(porter_p...); }" in lines[5]  # macros expanded already: the kernel by its name
    assert '"negate<T>", d, n);' in lines[5]
    assert "porter_emu::launch_kernel(scale, porter_emu::config(4, 64)" in lines[5]


def test_host_macros_in_a_kernels_file_are_not_device_code() -> None:
    from porter.backends import CannotEmulate, get_backend
    from porter.backends.cpu.source import check_emulable

    dialect = get_backend("cpu").dialect
    kernel = "__global__ void k(float* x) { x[0] = SCALE(2.0f); }\n"
    host = (
        "#define SCALE(v) ((v) * 2)\n"
        "#define benchmark(k, g, ...) k<<<g, 64>>>(__VA_ARGS__)\n"
        "#define SYNCED(s) do { s; \\\n  cudaDeviceSynchronize(); } while (0)\n"
    )
    check_emulable(host + kernel, dialect)  # macros no device code uses
    with pytest.raises(CannotEmulate, match="dynamic parallelism"):  # a macro the kernel uses
        check_emulable(host + "__global__ void d(float* x) { SYNCED(x[0] = 1); }\n", dialect)
    # one macro defined per branch of an `#if` (a CUDA-version switch, as in rodinia's cutil.h): still host
    # code when no device code uses it
    versions = (
        "#if CUDART_VERSION >= 4000\n#define DEVICE_SYNC() cudaDeviceSynchronize();\n"
        "#else\n#define DEVICE_SYNC() cudaThreadSynchronize();\n#endif\n"
    )
    check_emulable(versions + kernel.replace("SCALE(2.0f)", "2.0f"), dialect)
    # and one that only another unused macro uses (an error check wrapping it)
    wrapped = versions + "#define CHECK_ERROR(msg) do { cudaError e = DEVICE_SYNC(); } while (0)\n"
    check_emulable(wrapped + kernel.replace("SCALE(2.0f)", "2.0f"), dialect)
    with pytest.raises(CannotEmulate, match="dynamic parallelism"):
        check_emulable(versions + "__global__ void d(float* x) { DEVICE_SYNC() }\n", dialect)
