"""Plain frozen data shared by every stage of porter.

This module imports nothing else from porter.  Every stage (scan, translate, llm,
backends, harness, workflows, report) speaks in these types, and every one of them
turns into JSON through :func:`to_jsonable`.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------- scan


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # the declared type without the name, e.g. "const float *__restrict__"
    pointer: bool
    const: bool  # the pointee (for pointers) or the value is const
    written: bool  # the kernel (or a device function it passes the pointer to) stores through it


@dataclass(frozen=True)
class SharedArray:
    name: str
    type: str  # element type
    size: str | None  # size expression as written ("BLOCK*2"), None for `extern __shared__ T x[]`
    extern: bool
    line: int


@dataclass(frozen=True)
class Kernel:
    name: str
    line: int
    end_line: int
    template_params: tuple[str, ...]  # as written: "typename T", "int BLOCK"
    params: tuple[Param, ...]
    shared: tuple[SharedArray, ...]
    barriers: int  # __syncthreads / __syncwarp / cg sync calls
    atomics: tuple[str, ...]  # distinct atomic functions used, sorted
    warp_intrinsics: tuple[str, ...]  # distinct shuffle / vote / warp sync functions, sorted
    launch_bounds: str | None  # the argument text of __launch_bounds__(...)
    start_byte: int = 0
    end_byte: int = 0
    # the namespaces it is declared in, outermost first, as C++ spells them ("lib::detail"; ""
    # at file scope or in an anonymous namespace; inline namespaces left out)
    namespace: str = ""

    @property
    def qualified(self) -> str:
        """The name that reaches the kernel from file scope: `lib::detail::axpby`."""
        return f"{self.namespace}::{self.name}" if self.namespace else self.name

    def launched_by(self, launch: LaunchSite) -> bool:
        """Whether ``launch`` launches this kernel: same name, and the namespaces it spells (if
        any: `lib::k` from file scope, `k` or `detail::k` from inside them) are among this one's."""
        if launch.base != self.name:
            return False
        spelled = launch.kernel.split("<", 1)[0].replace(" ", "").lstrip(":").split("::")[:-1]
        return set(spelled) <= set(self.namespace.split("::"))


@dataclass(frozen=True)
class DeviceFunction:
    name: str
    line: int
    end_line: int
    qualifiers: tuple[str, ...]  # "__device__", "__host__", "__forceinline__"...
    start_byte: int = 0
    end_byte: int = 0


@dataclass(frozen=True)
class LaunchSite:
    kernel: str
    line: int
    grid: str
    block: str
    shared_bytes: str | None
    stream: str | None
    args: tuple[str, ...]
    template_args: tuple[str, ...] = ()
    via: str = "chevrons"  # "chevrons" | "cudaLaunchKernel" | "hipLaunchKernelGGL"
    function: str | None = None  # enclosing host function

    @property
    def base(self) -> str:
        """The launched kernel's own name: `lib::detail::axpby<float>` -> `axpby`."""
        return self.kernel.split("<", 1)[0].split("::")[-1].strip()


@dataclass(frozen=True)
class Allocation:
    var: str
    bytes: str  # byte-size expression as written
    line: int
    api: str  # cudaMalloc | cudaMallocManaged | cudaMallocHost | malloc | calloc | new[] | ...
    elem_type: str | None = None  # element type when it can be read off (new T[n], T* p = (T*)malloc)
    function: str | None = None


@dataclass(frozen=True)
class Copy:
    dst: str
    src: str
    bytes: str
    kind: str  # cudaMemcpyHostToDevice ... as written, or "" when absent
    line: int
    api: str = "cudaMemcpy"


@dataclass(frozen=True)
class Define:
    name: str
    value: str
    line: int
    params: tuple[str, ...] | None = None  # function-like macro parameters


@dataclass(frozen=True)
class Assignment:
    """A host-side scalar assignment `int n = 1 << 20;` (raw material for spec inference)."""

    var: str
    type: str | None
    value: str
    line: int
    function: str | None = None


@dataclass(frozen=True)
class ArrayAccess:
    array: str
    index: tuple[str, ...]  # one expression per subscript dimension
    line: int


class LoopKind(enum.StrEnum):
    MAP = "map"
    REDUCTION = "reduction"
    STENCIL = "stencil"
    SEQUENTIAL = "sequential"


@dataclass(frozen=True)
class LoopNest:
    function: str
    line: int
    vars: tuple[str, ...]  # outermost first
    bounds: tuple[str, ...]  # the range(...) argument text for each loop variable
    reads: tuple[ArrayAccess, ...]
    writes: tuple[ArrayAccess, ...]
    kind: LoopKind
    reason: str
    params: tuple[str, ...] = ()  # the enclosing function's parameters
    reduction_op: str | None = None  # "+", "*", "max", "min", ... for reductions
    end_line: int = 0


class Severity(enum.StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Hazard:
    code: str
    line: int
    message: str
    severity: Severity = Severity.WARNING


@dataclass(frozen=True)
class ParseWarning:
    line: int
    column: int
    message: str


@dataclass(frozen=True)
class FileScan:
    path: str
    language: str  # "cuda" | "python"
    kernels: tuple[Kernel, ...] = ()
    device_functions: tuple[DeviceFunction, ...] = ()
    launches: tuple[LaunchSite, ...] = ()
    allocations: tuple[Allocation, ...] = ()
    copies: tuple[Copy, ...] = ()
    defines: tuple[Define, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    loops: tuple[LoopNest, ...] = ()
    hazards: tuple[Hazard, ...] = ()
    warnings: tuple[ParseWarning, ...] = ()

    def entry(self, kernel: str) -> str:
        """The name that reaches kernel ``kernel`` from file scope (`lib::k` for a kernel in a
        namespace); ``kernel`` itself when this file defines no such kernel."""
        return next((k.qualified for k in self.kernels if k.name == kernel), kernel)


# --------------------------------------------------------------------------- translation


@dataclass(frozen=True)
class Diagnostic:
    """Something a translator did not (or could not faithfully) translate."""

    path: str
    line: int
    construct: str  # the source text or API name concerned
    reason: str
    severity: Severity = Severity.WARNING  # ERROR: the kernel is untranslatable as is
    code: str = ""  # a stable kind, where one is given: UNMAPPED_API (what `porter port --strict` fails on)


# Diagnostic.code of a CUDA API name a translator left as written because the target has no equivalent
UNMAPPED_API = "unmapped-api"

# how a verdict names an output whose stores race in the original (porter.harness.checks.Raced): its program's
# output may move with the race, the original's run as much as a port's
RACED_WORDS = "its stores race on in the original"
# begins the clause of a port's program run (and of its program verdict) naming what was left out of the comparison
# because it varies between two runs of the original (porter.harness.outputs.Unstable.uncompared)
UNCOMPARED = "not compared, as they vary between two runs of the original:"


@dataclass(frozen=True)
class TranslatedKernel:
    name: str  # the CUDA kernel name (with template args for an instantiation: "axpby<float>")
    entry: str  # the symbol to launch in the translated source
    target: str  # "hip" | "opencl"
    # Target argument i is CUDA argument arg_map[i] (None: an added argument described in extra_args).
    arg_map: tuple[int | None, ...] = ()
    # Added arguments, e.g. {"kind": "local", "bytes": "<launch shared bytes>"} for extern __shared__,
    # {"kind": "constant", "symbol": "coeffs"} for __constant__ memory passed as an argument.
    extra_args: tuple[dict[str, Any], ...] = ()
    untranslatable: tuple[str, ...] = ()  # constructs that make this kernel untranslatable
    # What the kernel needs of a device beyond the target's baseline, by name (OpenCL: entries of
    # [requirements] in backends/opencl/dialect.toml, e.g. "subgroup_shuffle_relative",
    # "reqd_sub_group_size_32"); a device without them cannot run this kernel.
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class Translation:
    source_path: str
    target: str
    text: str
    kernels: tuple[TranslatedKernel, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()


# --------------------------------------------------------------------------- running kernels


class Role(enum.StrEnum):
    IN = "in"
    OUT = "out"
    INOUT = "inout"
    SCALAR = "scalar"


@dataclass(frozen=True)
class ArgSpec:
    name: str
    dtype: str  # numpy dtype name: float32, float64, float16, int32, uint32, int64, uint8, ...
    role: Role
    shape: tuple[str, ...] = ()  # size-symbol expressions, e.g. ("N",) or ("M", "K"); () for scalars
    value: str | None = None  # for scalars: an expression in the size symbols ("N", "0.5f", "2*N")
    low: float | None = None  # input value range (None: dtype default)
    high: float | None = None


@dataclass(frozen=True)
class KernelSpec:
    kernel: str
    args: tuple[ArgSpec, ...]
    grid: tuple[str, ...]  # expressions in the size symbols, 1 to 3 of them
    block: tuple[str, ...]
    shared_bytes: str = "0"
    sizes: tuple[dict[str, int], ...] = ()  # problem sizes to test; each binds every size symbol
    hidden_sizes: tuple[dict[str, int], ...] = ()  # sizes never shown to a variant's author
    bench_sizes: tuple[dict[str, int], ...] = ()
    rtol: float | None = None  # None: per-dtype default
    atol: float | None = None
    template_args: tuple[str, ...] = ()
    float_atomics: bool = False  # outputs may differ in rounding between runs
    source: str = "inferred"  # "spec-file" | "inferred" | "llm"
    notes: tuple[str, ...] = ()
    # Namespace-scope device arrays the kernel reads (`__constant__ float coeffs[9]`, set by the host
    # with cudaMemcpyToSymbol): inputs drawn per trial like `in` arguments; name is the symbol, shape
    # its element count(s).  Role is always IN.
    constants: tuple[ArgSpec, ...] = ()
    # Those of `constants` that are texture references (a captured `texture<T, 1>`): bound to their
    # array -- a pointer and a size, as cudaBindTexture does -- instead of copied into the symbol.
    textures: tuple[str, ...] = ()
    # Size symbols the kernel itself holds at their program value (a #define its body uses, from the
    # file or a -D): never scaled for timing, or the arrays would not be the size the kernel works on.
    fixed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variant:
    kernel: str
    target: str  # "cuda" | "hip" | "opencl"
    source: str
    entry: str  # the symbol to launch (mangled or extern "C" name chosen by the producer)
    provenance: str  # "original" | "translate" | "llm:<model>" | "user"
    path: str | None = None
    # How the variant's arguments map onto the spec's: indices into KernelSpec.args, plus
    # extra trailing arguments the target needs (e.g. OpenCL __local buffers sized from the launch).
    arg_map: tuple[int, ...] | None = None
    extra_args: tuple[dict[str, Any], ...] = ()
    options: tuple[str, ...] = ()


class Status(enum.StrEnum):
    VALIDATED = "validated"
    COMPILED = "compiled"
    FAILED = "failed"
    UNTRANSLATABLE = "untranslatable"


@dataclass(frozen=True)
class Timing:
    median_ms: float
    iqr_ms: float
    runs: int
    size: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    kernel: str
    target: str
    device: str  # "" when compiled only
    backend: str
    toolchain: str
    compiled: bool
    executed: bool
    correct: bool
    status: Status
    reason: str = ""
    trials: int = 0
    sizes: tuple[dict[str, int], ...] = ()
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    timing: Timing | None = None
    logs: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()  # names of the checks that ran and passed


# --------------------------------------------------------------------------- helpers


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, enums, tuples and dicts to plain JSON types; text read from a user's file that
    kept non-UTF-8 bytes (:func:`porter.files.decode_text`) becomes printable, so that every
    document porter writes is valid UTF-8 JSON."""
    cls = type(obj)
    if cls is str and not obj.isascii():
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            from porter.files import printable

            return printable(obj)
        return obj
    if cls in _SCALARS:  # exact types: str/int subclasses (enums) go on below
        return obj
    names = _FIELD_NAMES.get(cls)
    if names is None and dataclasses.is_dataclass(cls):
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    if names is not None:
        return {name: to_jsonable(getattr(obj, name)) for name in names}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    return obj
