"""OpenCL C as a dialect: the rule-based translator (:mod:`.translate`), the names of template
instantiations (:mod:`.launch`), and the contract and screening of model output in OpenCL C
(:mod:`.screen`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from porter.backends.dialect import Dialect

if TYPE_CHECKING:
    from porter.model import Kernel, TranslatedKernel, Translation
    from porter.records import Rejection, Screened
    from porter.source import Scanned


class OpenCLDialect(Dialect):
    name: ClassVar[str] = "opencl"
    package: ClassVar[str] = "porter.backends.opencl"
    suffixes: ClassVar[tuple[str, ...]] = (".cl",)
    single_source: ClassVar[bool] = False
    host_program: ClassVar[bool] = True  # the port is a program: host code over porter_opencl.h
    templates: ClassVar[bool] = False
    translates: ClassVar[bool] = True
    comment_marks: ClassVar[tuple[str, str]] = ("/*", "*/")  # OpenCL C 1.2 sources stay C89-safe

    def translate(
        self,
        source: str,
        path: str,
        include_dirs: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        *,
        scanned: Scanned | None = None,
    ) -> Translation:
        from porter.backends.opencl.translate import translate_to_opencl

        defines = scanned.defines if scanned is not None else None
        return translate_to_opencl(
            source,
            path,
            include_dirs=include_dirs,
            scanned=scanned,
            defines=defines or (),
            command_line_known=defines is not None,
        )

    def host_text(self, text: str, device_files: Sequence[tuple[str, Sequence[TranslatedKernel]]]) -> str:
        from porter.backends.opencl.host import entries_of, host_text

        return host_text(text, entries_of(device_files))

    def instance_entry(self, kernel: str, template_args: Sequence[str]) -> str:
        from porter.backends.opencl.launch import instance_entry

        return instance_entry(kernel, template_args)

    def model_signature(self, kernel: Kernel, tk: TranslatedKernel, translated: str) -> tuple[str, ...]:
        """The parameters the OpenCL kernel `tk.entry` must take: as the rule-based translation wrote
        them when it did, else the original's parameters in OpenCL spelling plus the added arguments."""
        from porter.backends.opencl.screen import opencl_params

        from porter.records import strip_comments

        found = opencl_params(strip_comments(translated), tk.entry)
        if found is not None:
            return tuple(found)
        slots: Sequence[int | None] = tk.arg_map or tuple(range(len(kernel.params)))
        extras = iter(tk.extra_args)
        out: list[str] = []
        for slot in slots:
            if slot is None:
                extra = next(extras, {})
                symbol = str(extra.get("symbol", f"arg{len(out)}"))
                if extra.get("kind") == "texture":
                    out.append(f"__global const {extra.get('type', 'float')}* {extra.get('param', symbol)}")
                    continue
                if extra.get("kind") == "texture_size":
                    out.append(f"uint {extra.get('param', symbol + '_size')}")
                    continue
                shared = next((a for a in kernel.shared if a.name == symbol), None)
                elem = shared.type if shared is not None else str(extra.get("type", "char"))
                space = "__constant" if extra.get("kind") == "constant" else "__local"
                out.append(f"{space} {elem}* {symbol}")
                continue
            p = kernel.params[slot]
            if p.pointer:
                base = " ".join(
                    w
                    for w in p.type.replace("*", " ").split()
                    if w not in ("const", "volatile", "__restrict__")
                )
                out.append(f"__global {'const ' if p.const else ''}{base}* {p.name}")
            else:
                out.append(f"{p.type} {p.name}")
        return tuple(out)

    def model_constraints(
        self, entry: str, signature: Sequence[str], tk: TranslatedKernel, lacking: bool
    ) -> str:
        from porter.backends.opencl.packed import model_hint

        lines = [f"The kernel must be exactly `__kernel void {entry}({', '.join(signature)})`."]
        lines += [hint for hint in map(model_hint, signature) if hint is not None]
        for extra in tk.extra_args:
            symbol = extra.get("symbol", "")
            if extra.get("kind") == "local":
                lines.append(
                    f"`{symbol}` is a `__local` buffer of the launch's dynamic shared memory size (the "
                    "original's `extern __shared__` array), sized by the launch exactly as in the original."
                )
            elif extra.get("kind") == "constant":
                lines.append(
                    f"`{symbol}` holds the original's `__constant__` data, passed as a `__constant` pointer."
                )
            elif extra.get("kind") == "texture":
                lines.append(
                    f"`{extra.get('param', symbol)}` is the memory bound to the original's texture reference "
                    f"`{symbol}`, and `{symbol}_size` its element count: `tex1Dfetch({symbol}, i)` reads "
                    f"`{extra.get('param', symbol)}[i]` when `(uint)i < {symbol}_size`, else zero."
                )
        if lacking:
            lines.append(
                "It must run on OpenCL 1.2 devices without sub-groups: no sub-group or warp functions, no "
                "extensions, no `__attribute__` on the kernel; use `__local` memory and barriers."
            )
        lines.append("The code block is compiled on its own as a .cl file: no `#include`, no host code.")
        return " ".join(lines)

    def screen(
        self, code: str, original: Kernel, entry: str, signature: Sequence[str]
    ) -> Screened | Rejection | None:
        from porter.backends.opencl.screen import screen

        return screen(code, original, entry, signature)
