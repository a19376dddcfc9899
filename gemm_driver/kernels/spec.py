"""KernelSpec: everything the driver needs to know about one kernel, declared once.

A spec names its source file and entry point, its precision, its tunables with defaults
and allowed values, the rules a (problem, tunables) pair must satisfy, its launch geometry
and its minimum architecture. ``validate`` refuses a configuration that cannot work with a
UnsupportedProblem (a ValueError) naming the broken rule, before anything is compiled.

Two optional hooks let a kernel family launch more than one kernel with the standard
arguments (kernels/launch.py): ``extra_entries`` names further entry points of the same
source (a packing kernel, say), and ``launch_recipe`` turns the loaded kernels, the problem,
the operands, the tunables, the stream and Session-owned scratch into the callable that
enqueues the whole GEMM. Without them a launch is one kernel with the SGEMM arguments.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .. import precision as _precision
from ..cuda.errors import UnsupportedProblem
from ..problem import GemmProblem
from .target import check_capabilities, check_declared, declared_transposes

Dims = tuple[int, int, int]
Tunables = Mapping[str, int]
Rule = Callable[[GemmProblem, Tunables], "str | None"]

# The C signature every FP32 ladder kernel shares (see cu/simt/gemm_common.cuh).
SGEMM_SIGNATURE = ("int", "int", "int", "float", "ptr", "int", "ptr", "int", "float", "ptr", "int")

MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class Tunable:
    name: str
    default: int
    choices: tuple[int, ...]
    help: str


@dataclass(frozen=True)
class Entry:
    """A further entry point of a kernel's source (e.g. a packing kernel run before the
    GEMM), loaded beside the main one and handed to the spec's launch recipe by ``name``.
    ``expression`` may be a name expression template filled from the tunables. ``needed``
    says for which tunables a build holds it (an entry only some problems run is not
    compiled into the others' builds)."""

    name: str
    expression: str
    signature: tuple[str, ...]
    dynamic_smem: Callable[[Tunables], int] = field(default=lambda t: 0)
    needed: Callable[[Tunables], bool] = field(default=lambda t: True)


@dataclass(frozen=True)
class KernelSpec:
    """One registered kernel. ``entry`` may be a name expression template such as
    ``"sgemm_coalesced<{BLOCK}>"``, filled from the tunables."""

    name: str
    description: str
    source: str  # relative to the source root: "cu/simt/naive.cu" or "ptx/naive.ptx"
    entry: str
    block: Callable[[Tunables], Dims]
    grid: Callable[[GemmProblem, Tunables], Dims]
    tunables: tuple[Tunable, ...] = ()
    rules: tuple[Rule, ...] = ()
    dynamic_smem: Callable[[Tunables], int] = field(default=lambda t: 0)
    min_cc: tuple[int, int] = (7, 5)
    # Built for the arch-specific target sm_XYa (wgmma, setmaxnreg, TMA multicast): such code
    # runs on exactly min_cc and on no later GPU, so min_cc is then the only architecture.
    arch_specific: bool = False
    # The precision it computes in (precision.py's one spelling): A and B are handed to it
    # in that precision's storage (2-byte for bf16/fp16, FP32 for fp32/tf32; C is always
    # FP32), and its output is held to that precision's bound.
    precision: str = "fp32"
    # A rung of its precision's ladder: the bench reports its speed-up over the rung before
    # it (registry order). False for side branches (the PTX version of the first rung).
    in_ladder: bool = True
    signature: tuple[str, ...] = SGEMM_SIGNATURE
    options: tuple[str, ...] = ("--std=c++17", "-lineinfo")
    # The configurations tests and tools build. Empty: every combination of choices that the
    # rules accept (fine for small spaces); a tuning space of hundreds names a few instead.
    checked: tuple[Mapping[str, int], ...] = ()
    # Tunables chosen per problem and GPU when the caller gives none: (problem, GPU name) ->
    # (tunables, why). The autotuned rung reads its per-GPU table this way.
    choose: Callable[[GemmProblem, str], tuple[Mapping[str, int], str]] | None = None
    # Device scratch a launch needs beyond A, B and C: (problem, tunables) -> (workspace bytes,
    # zeroed counter bytes), passed as two extra pointer arguments (0 when a size is 0).
    scratch: Callable[[GemmProblem, Tunables], tuple[int, int]] | None = None
    # More entry points of the same source, loaded with the main one (kernels/launch.py).
    extra_entries: tuple[Entry, ...] = ()
    # launch.LaunchContext -> the callable that enqueues the whole GEMM; None: launch.standard_recipe.
    # (Typed loosely: launch.py imports this module, and the arrows point one way.)
    launch_recipe: Callable[..., Callable[[], None]] | None = None
    # tunables -> the entry ("main" or an extra entry's name) that computes the GEMM with them,
    # for what reads one kernel of a build (inspect's SASS and resources); None: always "main".
    # The Hopper rungs launch a cluster entry when CM x CN > 1, for instance.
    gemm_entry: Callable[[Tunables], str] | None = None
    # What it computes beyond row-major operands, FP32 D and no epilogue (problem.py spells
    # the values; validate() refuses the rest). A layout other than "nn" reads the operand
    # stored transposed with LaunchContext's ld its stored row stride; an out_dtype other
    # than "fp32" stores D and reads C in it (c.itemsize); an epilogue reads ctx.bias.
    layouts: tuple[str, ...] = ("nn",)
    out_dtypes: tuple[str, ...] = ("fp32",)
    epilogues: tuple[str, ...] = ("none",)

    def __post_init__(self):
        _precision.get(self.precision)  # ValueError naming the precisions there are
        check_declared(self.name, self.layouts, self.out_dtypes, self.epilogues)

    @property
    def kind(self) -> str:
        """'cu' for CUDA C++ through NVRTC, 'ptx' for hand-written PTX."""
        return "ptx" if self.source.endswith(".ptx") else "cu"

    @property
    def min_arch(self) -> str:
        return f"sm_{self.min_cc[0]}{self.min_cc[1]}{'a' if self.arch_specific else ''}"

    def build_arch(self, arch: str) -> str:
        """The NVRTC target for a GPU (or --arch) of ``arch``: sm_90 -> sm_90a for an
        arch-specific kernel, unchanged otherwise."""
        return arch + "a" if self.arch_specific and not arch.endswith("a") else arch

    def resolve(self, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        """Defaults merged with ``overrides``; unknown names and disallowed values refused."""
        known = {t.name: t for t in self.tunables}
        values = {t.name: t.default for t in self.tunables}
        for name, value in (overrides or {}).items():
            if name not in known:
                allowed = ", ".join(known) or "none"
                raise UnsupportedProblem(f"kernel {self.name!r} has no tunable {name!r}; its tunables: {allowed}")
            choices = known[name].choices
            if isinstance(value, bool) or not isinstance(value, int) or value not in choices:
                raise UnsupportedProblem(f"{self.name}: {name}={value!r} is not allowed; choose one of {list(choices)}")
            values[name] = value
        return values

    def probe(self, m: int, n: int, k: int, tunables: Tunables | None = None) -> GemmProblem:
        """An m x n x k problem this kernel computes with ``tunables`` (those a problem sets agree
        with it): what the checks of tunables that do not depend on a real problem validate
        against. The row-major FP32 GEMM, unless a kernel takes only other variants (FP8)."""
        return GemmProblem(m, n, k)

    def configurations(self) -> list[dict[str, int]]:
        """Resolved tunable sets worth building: ``checked`` (defaults first), else every valid combination."""
        if self.checked:
            chosen = [self.validate(self.probe(256, 256, 256)),
                      *(self.validate(self.probe(256, 256, 256, c), c) for c in self.checked)]
            unique = {tuple(c.items()): c for c in chosen}  # validate() keeps the tunables' order
            return list(unique.values())
        names = [t.name for t in self.tunables]
        combos = (dict(zip(names, values)) for values in itertools.product(*(t.choices for t in self.tunables)))
        return [c for c in combos if self.accepts(c)]

    def accepts(self, tunables: Tunables) -> bool:
        """Whether the rules accept ``tunables`` (on a 256^3 problem: rules about tiles, not sizes)."""
        try:
            self.validate(self.probe(256, 256, 256, tunables), tunables)
        except UnsupportedProblem:
            return False
        return True

    def name_expression(self, tunables: Tunables) -> str:
        return self.entry.format(**tunables)

    def validate(self, problem: GemmProblem, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        """Resolved tunables for ``problem``, or UnsupportedProblem naming the broken rule."""
        tunables = self.resolve(overrides)
        check_capabilities(self, problem)
        for rule in self.rules:
            if (broken := rule(problem, tunables)) is not None:
                raise UnsupportedProblem(f"{self.name}: {broken}")
        threads = _product(self.block(tunables))
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            raise UnsupportedProblem(f"{self.name}: {threads} threads per block; at most {MAX_THREADS_PER_BLOCK}")
        if not problem.is_empty:
            grid = self.grid(problem, tunables)
            for axis, (count, limit) in enumerate(zip(grid, MAX_GRID)):
                if count > limit:
                    raise UnsupportedProblem(
                        f"{self.name}: problem {problem.label} needs {count} blocks along grid axis "
                        f"{'xyz'[axis]}; the limit is {limit}"
                    )
        return tunables

    # GemmTarget (kernels/target.py): what callers ask of a kernel and a provider alike.
    single = True  # listed for unbatched shapes (as Provider.single)
    measures = False
    runs_on_host = False

    @property
    def transposes(self) -> bool:
        """Reads some layout with a transposed operand (``layouts``)."""
        return declared_transposes(self.layouts)

    @property
    def uses_scratch(self) -> bool:
        """Split-K scratch, or a launch recipe (which may pack operands into scratch)."""
        return self.scratch is not None or self.launch_recipe is not None

    def check_tunables(self, tunables: Mapping[str, int] | None) -> dict[str, int]:
        """``resolve``: the problem-independent check of the tunables (GemmTarget)."""
        return self.resolve(tunables)

    def takes_batch(self, batch: int) -> bool:
        """A kernel computes one GEMM per launch; batched shapes are for batched baselines."""
        return batch == 1

    def runs_on(self, compute_capability: tuple[int, int]) -> bool:
        if self.arch_specific:
            return tuple(compute_capability) == self.min_cc
        return tuple(compute_capability) >= self.min_cc

    def check_runs_on(self, compute_capability: tuple[int, int], where: str) -> None:
        """UnsupportedProblem when the kernel cannot run on ``compute_capability`` (too old, or not the
        one architecture an sm_XYa kernel runs on); ``where`` ends the message ("this GPU is
        sm_75", "cannot build it for sm_70")."""
        if not self.runs_on(compute_capability):
            if self.arch_specific:
                raise UnsupportedProblem(
                    f"{self.name} runs on {self.min_arch} only (arch-specific wgmma/TMA code); {where}")
            raise UnsupportedProblem(f"{self.name} needs {self.min_arch} or newer; {where}")

    def check_device(self, compute_capability: tuple[int, int]) -> None:
        have = f"sm_{compute_capability[0]}{compute_capability[1]}"
        self.check_runs_on(compute_capability, f"this GPU is {have}")

    def check_shared_memory(self, tunables: Tunables, per_block: int) -> None:
        """UnsupportedProblem when an entry's dynamic shared memory exceeds ``per_block``, the
        GPU's opt-in limit (Device.max_shared_per_block_optin); the rules only know the largest
        any GPU gives (cuda/arch_limits.py)."""
        for entry, needs in (("main", self.dynamic_smem(tunables)),
                             *((e.name, e.dynamic_smem(tunables)) for e in self.entries_for(tunables))):
            if needs > per_block:
                where = "" if entry == "main" else f" (entry {entry})"
                raise UnsupportedProblem(f"{self.name}{where} needs {needs} bytes of shared memory per block; "
                                         f"this GPU gives at most {per_block}")

    def entries_for(self, tunables: Tunables) -> tuple[Entry, ...]:
        """The extra entries a build with ``tunables`` holds (Entry.needed)."""
        return tuple(e for e in self.extra_entries if e.needed(tunables))

    def entry_expressions(self, tunables: Tunables) -> dict[str, str]:
        """Entry name -> name expression: ``"main"`` for ``entry``, then each extra entry it needs."""
        return {"main": self.name_expression(tunables),
                **{e.name: e.expression.format(**tunables) for e in self.entries_for(tunables)}}


def parse_tunable(pair: str) -> tuple[str, int]:
    """'TILE=16' -> ('TILE', 16): a tunable override as the command line spells it."""
    name, sep, value = pair.partition("=")
    if not sep or not name or not value.lstrip("-").isdigit():
        raise ValueError(f"--set takes NAME=INTEGER (e.g. --set TILE=16), got {pair!r}")
    return name, int(value)


def cc_of(arch_number: int) -> tuple[int, int]:
    """90 (from 'sm_90') -> (9, 0); 100 -> (10, 0)."""
    return divmod(arch_number, 10)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _product(dims: Dims) -> int:
    x, y, z = dims
    return x * y * z
