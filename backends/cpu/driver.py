"""porter's compiler drivers for the CPU runtime: what ``NVCC``, ``HIPCC``, ``CXX`` and ``CC`` point at
during ``porter port --build "CMD"`` (``python -m porter.backends.cpu.driver nvcc|c++|cc ARGS``).

They take nvcc / hipcc / g++ command lines and build with g++ and porter's CPU runtime, in the
rewritten copy of the program porter made (launches and ``__shared__`` already rewritten there):

==========================================  ==================================================
nvcc / hipcc argument                       what the driver does
==========================================  ==================================================
``-c``, ``-o F``, ``-I D``, ``-D X``,       the same for g++
``-U X``, ``-O*``, ``-g``, ``-std=...``,
``-l L``, ``-L D``, ``-w``, ``-fPIC``
``.cu`` / ``.hip`` / ``-x cu`` / ``-x hip``  compiled as C++ with porter_runtime.h force-included
``.cpp`` ``.cc`` ``.cxx``                   C++ (porter's stub CUDA/HIP headers on the path)
``.c``                                      C, with the runtime's C view
``.o`` ``.a``                               linked
``-arch``, ``-gencode``, ``--offload-arch``,  dropped: there is one CPU
``-code``, ``--gpu-architecture``, ``-G``,
``-lineinfo``, ``--use_fast_math``,
``-Xptxas``, ``-ccbin``, ``-m64``,
``-Wno-deprecated-gpu-targets``
``-Xcompiler A,B``                          A and B passed to g++
``-lcudart`` ``-lcuda`` ``-lamdhip64``…     dropped (the runtime is porter's); ``-lm -lpthread`` added
``-rdc=true``, ``-dc``, ``-dlink``,          refused: separate device linking has no CPU meaning
other ``--long-option`` of nvcc             refused with its name (exit 2)
other ``-x`` options                        passed on to g++
==========================================  ==================================================

Every command it runs is appended to the build's ``drivers.log``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DROP_WITH_VALUE = {"-arch", "-gencode", "-code", "--gpu-architecture", "--gpu-code", "-ccbin", "--compiler-bindir",
                   "-Xptxas", "--ptxas-options", "-maxrregcount", "--maxrregcount", "-Xnvlink", "--generate-code"}  # fmt: skip
DROP = {"-G", "-lineinfo", "--use_fast_math", "-use_fast_math", "-m64", "-Wno-deprecated-gpu-targets",
        "--expt-relaxed-constexpr", "--expt-extended-lambda", "-extended-lambda", "--extended-lambda",
        "-Wno-deprecated-declarations", "--ptxas-options=-v", "-cudart=static", "--cudart=static",
        "-cudart=shared", "--cudart=shared", "-fgpu-rdc=false", "-Wno-unused-command-line-argument"}  # fmt: skip
DROP_PREFIX = ("-arch=", "--gpu-architecture=", "-gencode=", "--generate-code=", "--offload-arch=", "-code=",
               "-maxrregcount=", "--maxrregcount=", "-ccbin=", "--compiler-bindir=", "-Xptxas=",
               "--cuda-gpu-arch=", "--hip-link", "-fno-gpu-rdc")  # fmt: skip
REFUSE = {"-rdc=true", "--relocatable-device-code=true", "-dc", "--device-c", "-dlink", "--device-link",
          "-fgpu-rdc", "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin"}  # fmt: skip
RUNTIME_LIBS = {
    "-lcudart",
    "-lcuda",
    "-lcudadevrt",
    "-lcudart_static",
    "-lamdhip64",
    "-lhip_hcc",
    "-lnvToolsExt",
}
DEVICE_SUFFIXES = (".cu", ".hip")
CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C")


class DriverError(Exception):
    pass


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _config() -> dict[str, object]:
    path = os.environ.get("PORTER_DRIVER_CONFIG")
    if not path:
        raise DriverError(
            "PORTER_DRIVER_CONFIG is not set: the drivers run inside `porter port --build` only"
        )
    data: dict[str, object] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def parse(role: str, argv: list[str]) -> tuple[list[str], list[str], list[str], str | None, bool, str | None]:
    """(options for g++, source files, inputs to link, -o, -c, forced language) of a command line."""
    opts: list[str] = []
    sources: list[str] = []
    objects: list[str] = []
    out: str | None = None
    compile_only = False
    language: str | None = None
    i = 0
    while i < len(argv):
        a = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if a in REFUSE or a.startswith("-rdc=true") or a.startswith("--relocatable-device-code=true"):
            raise DriverError(f"{a}: separate device linking has no meaning on the CPU runtime")
        if a == "-c":
            compile_only = True
        elif a == "-o" and nxt is not None:
            out, i = nxt, i + 1
        elif a.startswith("-o") and len(a) > 2:
            out = a[2:]
        elif a == "-x" and nxt is not None:
            language, i = nxt, i + 1
        elif a in DROP_WITH_VALUE and nxt is not None:
            i += 1
        elif a in DROP or a.startswith(DROP_PREFIX):
            pass
        elif a in ("-Xcompiler", "--compiler-options") and nxt is not None:
            opts += [x for x in nxt.split(",") if x]
            i += 1
        elif a.startswith(("-Xcompiler=", "--compiler-options=")):
            opts += [x for x in a.split("=", 1)[1].split(",") if x]
        elif a in RUNTIME_LIBS:
            pass
        elif a in ("-I", "-D", "-U", "-L", "-l", "-include", "-isystem") and nxt is not None:
            opts += [a, nxt]
            i += 1
        elif (
            a.startswith("--")
            and role == "nvcc"
            and not a.startswith(("--std=", "--include-path", "--define-macro"))
        ):
            raise DriverError(f"{a}: an nvcc option porter's CPU-runtime driver does not know")
        elif a.startswith("--std="):
            opts.append("-std=" + a.split("=", 1)[1])
        elif a.startswith("-"):
            opts.append(a)
        elif a.endswith((*DEVICE_SUFFIXES, *CXX_SUFFIXES, ".c")):
            sources.append(a)
        else:
            objects.append(a)  # .o, .a, .so
        i += 1
    return opts, sources, objects, out, compile_only, language


def _log(config: dict[str, object], cmd: list[str]) -> None:
    with open(str(config["log"]), "a", encoding="utf-8") as f:
        f.write(" ".join(cmd) + "\n")


def _compile_one(
    config: dict[str, object], role: str, src: str, opts: list[str], obj: str, language: str | None
) -> int:
    base = _strings(config["flags"])
    inc = f"-I{config['include']}"
    suffix = Path(src).suffix
    device = language in ("cu", "cuda", "hip") or (language is None and suffix in DEVICE_SUFFIXES)
    if device or (role == "nvcc" and suffix in CXX_SUFFIXES and language is None):
        head = [str(config["compiler"]), *base, "-include", "porter_runtime.h", inc, *opts]
        pre = _expanded(config, head, src, obj)  # launches only macro expansion shows, rewritten
        cmd = [*head, "-x", "c++-cpp-output" if pre else "c++", "-c", pre or src, "-o", obj]
    elif suffix == ".c" and language in (None, "c"):
        cmd = [
            str(config["c_compiler"]),
            "-O1",
            "-w",
            inc,
            *[o for o in opts if not o.startswith("-std=c++")],
            "-c",
            src,
            "-o",
            obj,
        ]
    else:  # plain C++ (CXX), its CUDA headers answered by porter's stubs
        cmd = [str(config["compiler"]), *base, inc, *opts, "-c", src, "-o", obj]
    _log(config, cmd)
    return subprocess.run(cmd).returncode


def _expanded(config: dict[str, object], head: list[str], src: str, obj: str) -> str:
    """The unit preprocessed beside its object with the launches its macros held rewritten (as the CPU
    runtime's own build does: porter.backends.launches.rewrite_preprocessed, ``#line`` markers keeping
    the user's file and line), or "" when the text rewrite left no launch or it does not preprocess."""
    from porter.backends.launches import has_launch_syntax, rewrite_preprocessed

    from porter.files import decode_text, encode_text

    try:
        if not has_launch_syntax(decode_text(Path(src).read_bytes())):
            return ""
    except OSError:
        return ""
    dest = f"{obj}.ii"
    cmd = [*head, "-x", "c++", "-E", os.path.abspath(src), "-o", dest]  # markers name files in full
    _log(config, cmd)
    if subprocess.run(cmd).returncode != 0 or not Path(dest).is_file():
        return ""
    text = decode_text(Path(dest).read_bytes())
    labels = config.get("labels")
    rewritten = rewrite_preprocessed(
        text, _strings(config.get("deduced", [])), str(config.get("within", os.getcwd())),
        labels if isinstance(labels, dict) else {},
    )  # fmt: skip
    if rewritten == text:
        return ""
    Path(dest).write_bytes(encode_text(rewritten))
    return dest


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m porter.backends.cpu.driver nvcc|c++|cc ARGS...", file=sys.stderr)
        return 2
    role, rest = args[0], args[1:]
    try:
        config = _config()
        opts, sources, objects, out, compile_only, language = parse(role, rest)
    except DriverError as err:
        print(f"porter {args[0]} driver: {err}", file=sys.stderr)
        return 2
    if compile_only:
        for src in sources:
            obj = out if out is not None and len(sources) == 1 else str(Path(src).with_suffix(".o").name)
            code = _compile_one(config, role, src, opts, obj, language)
            if code != 0:
                return code
        return 0
    with tempfile.TemporaryDirectory(prefix="porter-driver-") as tmp:
        linked = list(objects)
        for n, src in enumerate(sources):
            obj = str(Path(tmp) / f"{n}.o")
            code = _compile_one(config, role, src, opts, obj, language)
            if code != 0:
                return code
            linked.append(obj)
        shim = str(Path(tmp) / "porter_runtime_c.o")
        cmd = [str(config["compiler"]), *_strings(config["flags"]), f"-I{config['include']}", "-c",
               str(config["runtime_c"]), "-o", shim]  # fmt: skip
        _log(config, cmd)
        if subprocess.run(cmd).returncode != 0:
            return 1
        link_opts = [
            o for o in opts if o.startswith(("-L", "-l", "-Wl", "-pthread", "-fopenmp", "-static", "-shared"))
        ]
        cmd = [
            str(config["compiler"]),
            *linked,
            shim,
            "-o",
            out or "a.out",
            *link_opts,
            *_strings(config["link"]),
        ]
        _log(config, cmd)
        return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
