"""porter.scan.instances: each kernel once per template instantiation it is launched with."""

from __future__ import annotations

from pathlib import Path

from porter.scan import scan_file
from porter.scan.instances import Instance, kernel_instances, template_instantiations

ROOT = Path(__file__).resolve().parents[3]
TEMPLATED = ROOT / "samples" / "cuda" / "templated.cu"


def test_one_instance_per_template_instantiation_in_kernel_order() -> None:
    scan = scan_file(str(TEMPLATED))
    found = kernel_instances(scan, TEMPLATED.read_text())
    assert [i.name for i in found] == ["axpby<float>", "axpby<double>", "block_sum<256>", "block_sum<128>"]
    assert found[0] == Instance("axpby<float>", "axpby", ("float",))


def test_an_instantiation_only_a_translator_found_is_added_after_its_kernel() -> None:
    scan = scan_file(str(TEMPLATED))
    found = kernel_instances(scan, TEMPLATED.read_text(), ["axpby<int>", "axpby", "not_a_kernel<int>"])
    names = [i.name for i in found]
    # kept in kernel order; a plain name of a templated kernel and a name of no kernel add nothing
    assert names == ["axpby<float>", "axpby<double>", "axpby<int>", "block_sum<256>", "block_sum<128>"]
    assert found[2].template_args == ("int",)


def test_a_plain_kernel_is_one_instance(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[0] = 1; }\nint main() { k<<<1, 1>>>(0); }\n")
    assert kernel_instances(scan_file(str(src)), src.read_text()) == [Instance("k", "k", ())]


def test_template_arguments_are_followed_through_host_templates(tmp_path: Path) -> None:
    src = tmp_path / "t.cu"
    src.write_text(
        "template <typename T> __global__ void fill(T* x) { x[0] = T(1); }\n"
        "template <typename U> void run(U* x) { fill<U><<<1, 1>>>(x); }\n"
        "int main() { run<float>(0); run<int>(0); fill<char><<<1, 1>>>(0); }\n"
    )
    scan = scan_file(str(src))
    result = template_instantiations(src.read_text(), scan.launches, ["fill"])
    assert result.found == {"fill": [("float",), ("int",), ("char",)]}
    assert not result.unresolved


def test_template_arguments_are_followed_to_explicit_instantiations_of_the_host_template(
    tmp_path: Path,
) -> None:
    """cuda-samples' reduction: the launches sit in a host template instantiated only explicitly
    (`template void reduce<int>(...);`); one spelled without arguments is deduced from its parameters."""
    src = tmp_path / "t.cu"
    src.write_text(
        "template <class T, unsigned B> __global__ void red(const T* x, T* y) { y[0] = x[0] * B; }\n"
        "template <class T> void reduce(int n, const T* x, T* y) {\n"
        "    if (n > 64) red<T, 128><<<1, 128>>>(x, y); else red<T, 64><<<1, 64>>>(x, y);\n"
        "}\n"
        "template void reduce<int>(int n, const int* x, int* y);\n"
        "extern template void reduce<float>(int, const float*, float*);\n"
        "template void reduce(int n, const double* x, double* y);\n"
        "template void reduce(int n, const double* x, float* y);\n"  # T is not one type: not deduced
    )
    scan = scan_file(str(src))
    result = template_instantiations(src.read_text(), scan.launches, ["red"])
    assert result.found == {
        "red": [
            ("int", "128"), ("float", "128"), ("double", "128"), ("int", "64"), ("float", "64"), ("double", "64"),
        ]
    }  # fmt: skip
    assert not result.unresolved
    names = [i.name for i in kernel_instances(scan, src.read_text())]
    assert names[:2] == ["red<int, 128>", "red<float, 128>"] and len(names) == 6


def test_a_host_template_never_instantiated_leaves_the_launch_unresolved(tmp_path: Path) -> None:
    src = tmp_path / "t.cu"
    src.write_text(
        "template <class T> __global__ void k(T* y) { y[0] = 1; }\n"
        "template <class T> void go(T* y) { k<T><<<1, 1>>>(y); }\n"
    )
    scan = scan_file(str(src))
    result = template_instantiations(src.read_text(), scan.launches, ["k"])
    assert result.found == {"k": []}
    assert result.unresolved and "nor explicitly instantiated" in result.unresolved[0][2]


def test_integral_constants_of_the_launching_function_are_folded_into_the_instance(tmp_path: Path) -> None:
    """A tile size written with a host constant (`256 / groups`): the instance is named by its value, as the
    compiler names it (a port's host code can spell it anywhere, and a capture's `<int, 256ul, 128ul>` is it)."""
    from porter.scan.instances import fold_integer

    src = tmp_path / "m.cu"
    src.write_text(
        "constexpr int kWarps = 4;\n"
        "template <typename T, int B, int G> __global__ void red(T* x) { x[0] = B + G; }\n"
        "template <typename T> void run(T* x, int n) {\n"
        "    constexpr int groups = 2;\n"
        "    const unsigned tile = kWarps * 32 / groups;\n"
        "    int runtime = n;\n"
        "    if (n > 1) red<T, 256, 256 / groups><<<1, 256>>>(x);\n"
        "    else red<T, 64, (tile - 1) % 7><<<1, 64>>>(x);\n"
        "    red<T, 32, runtime><<<1, 32>>>(x);\n"
        "}\n"
        "template void run<int>(int*, int);\n"
    )
    names = [i.name for i in kernel_instances(scan_file(str(src)), src.read_text())]
    assert names == ["red<int, 256, 128>", "red<int, 64, 0>", "red<int, 32, runtime>"]  # 63 % 7 = 0
    assert fold_integer("-7 / 2") == -3 and fold_integer("-7 % 2") == -1  # C truncates toward zero
    assert fold_integer("1 << 5") == 32 and fold_integer("10ul / 3") == 3
    assert fold_integer("x + 1") is None and fold_integer("1 / 0") is None and fold_integer("2 ** 8") is None
