"""Small behaviour of the model's records: which launch launches which kernel."""

from __future__ import annotations

from porter.model import FileScan, Kernel, LaunchSite


def _kernel(name: str, namespace: str = "") -> Kernel:
    return Kernel(name, 1, 2, (), (), (), 0, (), (), None, namespace=namespace)


def _launch(kernel: str) -> LaunchSite:
    return LaunchSite(kernel=kernel, line=10, grid="1", block="1", shared_bytes=None, stream=None, args=())


def test_a_launch_names_its_kernel_with_or_without_namespaces() -> None:
    k = _kernel("axpby", "lib::detail")
    assert k.qualified == "lib::detail::axpby"
    for spelled in ("axpby", "axpby<float>", "detail::axpby", "lib::detail::axpby<float>", "::lib::axpby"):
        assert k.launched_by(_launch(spelled)), spelled
    for other in ("other::axpby", "axpbyx", "lib::scale"):
        assert not k.launched_by(_launch(other)), other
    assert _launch("lib::detail::axpby < float >").base == "axpby"


def test_a_kernel_at_file_scope_keeps_its_plain_name() -> None:
    k = _kernel("saxpy")
    assert k.qualified == "saxpy" and k.launched_by(_launch("saxpy"))
    assert not k.launched_by(_launch("ns::saxpy"))


def test_a_file_names_its_kernels_as_file_scope_reaches_them() -> None:
    scan = FileScan(path="k.cu", language="cuda", kernels=(_kernel("k", "lib::v"), _kernel("plain")))
    assert scan.entry("k") == "lib::v::k" and scan.entry("plain") == "plain"
    assert scan.entry("missing") == "missing"
