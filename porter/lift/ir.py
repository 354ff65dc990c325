"""What `porter lift` knows of one Python function, as plain data: its parameters and their types, the
sizes its arrays have, the kernels its loop nests became and the launches that run them in order.

Host-side expressions (sizes, grids, scalar arguments) are Python expressions over the function's
parameters and the size names it binds (``n`` from ``n = x.shape[0]``): they are the user's own, and
they are evaluated by :func:`porter.lift.hostexpr.evaluate` (a small evaluator, never ``eval``) and
written as they are into the generated module.  Device code is CUDA C (:mod:`porter.lift.cuda`); HIP and
OpenCL come from porter's own translators.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DTYPES = ("float32", "float64", "int32", "int64", "bool")
FLOAT_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Refusal:
    """Why a function (or one loop of it) is not lifted, with the line that decided it."""

    function: str
    line: int
    reason: str


@dataclass(frozen=True)
class Param:
    """A parameter of the function: an array (its dtype, dimensions and the size names of each) or a
    scalar.  ``dtype_from``: "annotation", "example", "inferred" (from how the body uses it) or
    "assumed" (nothing said: float64, NumPy's default)."""

    name: str
    kind: str  # "array" | "scalar"
    dtype: str
    ndim: int = 0
    shape: tuple[str, ...] = ()  # host expression per dimension ("n", "m"); a name the body binds
    dtype_from: str = "annotation"
    weak: bool = False  # a Python int/float scalar: NumPy's weak promotion (NEP 50)
    # an int array whose values index another array: drawn in [0, bound) for the reference's inputs
    index_bound: str | None = None


@dataclass(frozen=True)
class Local:
    """An array the function allocates (``out = np.zeros((n, m), dtype=np.float32)``)."""

    name: str
    dtype: str
    shape: tuple[str, ...]
    fill: str  # "zeros" | "empty" | "ones" | "full:<host expression>" | "copy:<array>"
    line: int


@dataclass(frozen=True)
class Kernel:
    """One generated kernel: its entry, CUDA source (a complete unit) and parameters in order, each
    ``(name, kind)`` with kind "array" or "scalar:<dtype>"."""

    name: str
    pattern: str
    source: str
    params: tuple[tuple[str, str], ...]
    line: int


@dataclass(frozen=True)
class Arg:
    """A kernel argument: an array by name, or a scalar host expression of a dtype."""

    kind: str  # "array" | "scalar"
    value: str  # the array's name, or the host expression
    dtype: str = ""


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[str, ...]  # host expressions, x first
    block: tuple[int, ...]
    args: tuple[Arg, ...]
    shared: str = "0"  # dynamic shared memory in bytes: a host expression


@dataclass(frozen=True)
class Repeat:
    """A sequential loop of the function around parallel nests (time stepping): its body's launches
    ``count`` times; after each pass the named arrays trade places (``a, b = b, a``).  ``var``: the
    loop variable, passed to the kernels that read it.  ``kind``: "" a loop of the function's own;
    "diagonal" the anti-diagonals of a wavefront (``var`` then porter's own name), which may run inside
    one of the function's loops."""

    var: str
    count: str
    body: tuple[Launch | Repeat, ...]
    swaps: tuple[tuple[str, str], ...] = ()
    start: str = "0"
    step: str = "1"
    kind: str = ""


Step = Launch | Repeat


@dataclass(frozen=True)
class Lifted:
    """A function porter can run on a GPU: its kernels and the launches that do what its loops did."""

    function: str
    line: int
    patterns: tuple[str, ...]
    params: tuple[Param, ...]
    sizes: tuple[tuple[str, str], ...]  # size name -> host expression over the parameters, in order
    locals: tuple[Local, ...]
    kernels: tuple[Kernel, ...]
    steps: tuple[Step, ...]
    returns: str = ""  # "" (None), an array's name, or "scalar:<buffer>" (element 0 of a result buffer)
    temporaries: tuple[Local, ...] = ()  # device buffers the launches need (partial sums, scan blocks)
    notes: tuple[str, ...] = ()
    # float accumulations whose order changes (reductions, atomics): compared with an order-aware
    # tolerance, as a float atomic kernel is
    reorders: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()  # the parameters and locals whose elements the function writes
    # a model's kernel that computes in reduced precision where the user allowed it ("float16",
    # "bfloat16"): its float results are judged with that dtype's tolerance
    precision: str = ""
    source: str = ""  # the function's own text, for the generated module's fallback
    imports: tuple[str, ...] = ()  # the module's import lines the function's text needs
    # a function lifted partly: its own Python, each lifted nest replaced by a call of that nest's
    # function (a Lifted of its own); the drop-in module holds this text as the function
    python: str = ""


@dataclass(frozen=True)
class Part:
    """One top-level loop nest of a function lifted partly: the function it became (its own parameters:
    the names the nest uses), or None and why it stays in Python."""

    line: int
    lifted: Lifted | None
    reason: str = ""


@dataclass(frozen=True)
class Partial:
    """A function the rules refused as a whole whose parallel nests lift on their own: `shell` is the
    function as the drop-in module runs it (its Python with those nests replaced by calls: ``python``)."""

    shell: Lifted
    parts: tuple[Part, ...]

    @property
    def sentence(self) -> str:
        """``lifted partly: nests at lines 4, 9 as kernels; the nest at line 6 stays in Python: <why>``."""
        done = [p.line for p in self.parts if p.lifted is not None]
        kept = [p for p in self.parts if p.lifted is None]
        head = f"lifted partly: {'nests at lines' if len(done) > 1 else 'the nest at line'} "
        head += ", ".join(str(x) for x in done) + " as kernels"
        for p in kept:
            head += f"; the nest at line {p.line} stays in Python: {p.reason}"
        return head


@dataclass(frozen=True)
class Analysis:
    """What lift made of a file (or one function of it)."""

    path: str
    lifted: tuple[Lifted, ...] = ()
    refused: tuple[Refusal, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    partial: tuple[Partial, ...] = ()  # refused functions whose parallel nests lift on their own
