"""What the OpenCL kernel tests share: running one translated kernel on a device (imported by name: pytest puts
this folder on the path of the tests in it)."""

from __future__ import annotations

from typing import Any

import numpy as np


def launch_translated(
    backend: Any, device: Any, text: str, k: Any, args: list[Any], grid: Any, block: Any
) -> list[Any]:
    """Build translated kernel `k` of `text` for `device` (with the build options its requirements need there),
    launch it with `args` (arrays uploaded), and return the arrays as they came back, in argument order."""
    from porter.backends import CompileOptions
    from porter.backends.opencl import requirement_options

    options = CompileOptions(flags=requirement_options(device, k.requires))
    program = backend.load(backend.compile(text, k.entry, options, device=device), device)
    cl_args: list[Any] = []
    arrays: list[tuple[int, Any]] = []
    for value in args:
        if isinstance(value, np.ndarray):
            arrays.append((len(cl_args), value))
            value = backend.to_device(value, device)
        cl_args.append(value)
    program(*cl_args, grid=grid, block=block)
    backend.synchronize(device)
    return [backend.to_host(cl_args[i], host.dtype, host.shape) for i, host in arrays]
