"""Which kernel builds the CPU suite compiles: every code path, and a seeded sample of the rest.

The whole matrix (every configuration a spec names, every entry of the tuned kernels' sweep
spaces, on each architecture it runs on) is several hundred NVRTC builds, too many for a
2-core CI run. A run builds instead:

- every registered kernel's default configuration on each architecture (sm_80, sm_90; an
  sm_90a kernel on sm_90a alone): the rows the SASS facts, the CLI and ``list`` read;
- one configuration of each code path of each kernel family (source file), on one of the
  architectures it runs on, where ``PATHS`` says which tunables choose code (a schedule,
  cp.async or not, split-K, stream-K, launch bounds, cluster shape, consumer count) rather
  than sizes; a default build covers its path;
- ``EXTRA_PER_FAMILY`` more configurations per family, drawn at random from what is left
  (none at present: the Hopper builds take 5-20 s each, and a 2-core CI run must stay under
  5 minutes; the seeded choice of which configuration, on which architecture, stands for
  each code path still rotates run after run).

The draw is seeded: ``GEMM_DRIVER_TEST_SEED`` when set, else a fresh seed per run, chosen
once by conftest.py (so every xdist worker draws the same sample) and printed in the pytest
header; a failure is replayed with ``GEMM_DRIVER_TEST_SEED=<seed> python -m pytest ...``.
Different seeds cover different parts of the space, run after run.

``GEMM_DRIVER_FULL_MATRIX=1`` (or ``python -m pytest --full-matrix``) builds everything, as
the GPU machine's run should.

Builds and their SASS statistics are memoised per process and go through the session's
cubin cache (conftest.py); xdist workers take a lock per build and keep the statistics in
the run's scratch folder, so one build is compiled and disassembled once a run: the tests
that read a build's SASS (``sass``) and its statistics share one nvdisasm listing of it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import gemm_driver.inspection.sass as sass_listing
from gemm_driver import kernels
from gemm_driver.cuda.nvrtc import parse_arch
from gemm_driver.inspection import kernel_stats
from gemm_driver.inspection.sass import Sass, parse
from gemm_driver.inspection.tools import run_on_cubin
from gemm_driver.kernels import tensor
from gemm_driver.kernels.build import build
from gemm_driver.kernels.spec import KernelSpec, cc_of

try:
    import fcntl
except ImportError:  # not on Windows: workers may then compile one build twice, nothing worse
    fcntl = None

SEED_VARIABLE = "GEMM_DRIVER_TEST_SEED"
FULL_VARIABLE = "GEMM_DRIVER_FULL_MATRIX"
SCRATCH_VARIABLE = "GEMM_DRIVER_TEST_SCRATCH"  # the run's folder shared by xdist workers (conftest.py)
ARCHS = ("sm_80", "sm_90")
EXTRA_PER_FAMILY = 0  # none: the 2-core CI run stays under 5 minutes (see above)
# The tuned kernels whose sweep spaces join their family's matrix. The FP16 space is the
# BF16 one (test_tensor_specs asserts it), compiled alike but for the mma type.
SWEPT_KERNELS = ("mma_sync_tuned_bf16", "mma_sync_tuned_tf32")


# SASS counts that must be all but zero: NVRTC (12.9 and 13.5) does not emit the same PTX, nor
# always the same SASS, on every build of some configurations (tools/probes/nvrtc_determinism.py,
# results/no-gpu/). One clean CI build of bank_conflict_free for sm_90 had one scalar LDS beside
# its 256 LDS.128, where local builds had none; later ones of double_buffered (ASYNC=1, sm_90)
# and vectorized (sm_80) the same, and bank_conflict_free's 128 x 128 x 8 main loop again. The
# fact is "shared loads are vectorised", not an exact zero.
NEARLY_ZERO = {"bank_conflict_free": {"lds32": 2}, "double_buffered": {"lds32": 2}, "vectorized": {"lds32": 2}}


def full() -> bool:
    return os.environ.get(FULL_VARIABLE, "") not in ("", "0")


def seed() -> int:
    """The run's seed; conftest.py sets the variable before any test module is imported."""
    value = os.environ.get(SEED_VARIABLE, "")
    if not value.isdigit():
        raise ValueError(f"{SEED_VARIABLE}={value!r}: a non-negative integer is needed (conftest.py sets one)")
    return int(value)


# --- which tunables choose code, per family (source file) --------------------------------
# spec, tunables -> a key; two configurations with equal keys run the same code at other sizes.
Path = Callable[[KernelSpec, Mapping[str, int]], object]
_SIZES_ONLY: Path = lambda spec, t: ()
_TF32: Path = lambda spec, t: spec.precision == "tf32"  # B^T (K-major) through a transposing pack
PATHS: dict[str, Path] = {
    "cu/simt/naive.cu": _SIZES_ONLY,
    "ptx/naive.ptx": _SIZES_ONLY,
    "cu/simt/coalesced.cu": _SIZES_ONLY,
    "cu/simt/smem_tiled.cu": lambda spec, t: t["PAD"],  # padded rows lose the LDS.128 reads
    "cu/simt/blocktile_1d.cu": _SIZES_ONLY,
    "cu/simt/blocktile_2d.cu": _SIZES_ONLY,
    "cu/simt/vectorized.cu": _SIZES_ONLY,
    "cu/simt/bank_conflict_free.cu": _SIZES_ONLY,
    "cu/simt/double_buffered.cu": lambda spec, t: t["ASYNC"],  # cp.async ring or register prefetch
    # split-K's reduction, stream-K's persistent loop, launch bounds for one CTA an SM
    "cu/simt/warptiled.cu": lambda spec, t: (t["SPLITK"] > 1, t["STREAMK"], t["MIN_BLOCKS"]),
    "cu/tensor/wmma.cu": _SIZES_ONLY,  # BF16 and FP16 differ in the fragment type alone
    "cu/tensor/wmma_smem.cu": _SIZES_ONLY,
    # TF32 rounds each landed tile and reads B by LDS.32; ASYNC=0 is the register path; a
    # linear layer's D (another type, an epilogue) has its own store code
    "cu/tensor/mma_sync.cu": lambda spec, t: (spec.precision == "tf32", t["ASYNC"], t["OUT"] or t["EPI"]),
    "cu/hopper/wgmma_tma.cu": _TF32,
    "cu/hopper/warp_specialized.cu": _TF32,
    "cu/hopper/persistent.cu": _TF32,
    "cu/hopper/cluster_multicast.cu": lambda spec, t: (_TF32(spec, t), t["CM"], t["CN"]),  # who multicasts
    # one or two consumer warpgroups (setmaxnreg split, CTAs an SM), the cluster entry's shape,
    # the decode entry (DECODE > 0 adds it), the swapped entry (SWAPPED = 1 adds it), the
    # split-K cluster entry (CK > 1 adds it)
    "cu/hopper/any_shape.cu": lambda spec, t: (t["CONSUMERS"], t["CM"], t["CN"], t["DECODE"] > 0, t["SWAPPED"],
                                               t["CK"] > 1),
    # TRANS_B=1 adds any_shape's entry for B stored N x K (or its cluster entry)
    "cu/hopper/tf32_register_a.cu": lambda spec, t: (t["CONSUMERS"], t["CM"] * t["CN"] > 1, t["TRANS_B"]),
    # FP8: the consumers as any_shape's, and the loop the scaling mode and promotion choose
    "cu/hopper/fp8.cu": lambda spec, t: (t["CONSUMERS"], t["CM"] * t["CN"] > 1, t["SCALING"], t["PROMOTE"]),
}


# --- builds -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Build:
    """One build the suite compiles: a kernel, its resolved tunables, an architecture (the
    --arch a user names: sm_90 for an sm_90a kernel, as ``build`` takes it)."""

    spec: KernelSpec
    tunables: tuple[tuple[str, int], ...]
    arch: str

    @property
    def config(self) -> dict[str, int]:
        return dict(self.tunables)

    @property
    def key(self) -> tuple:
        """What NVRTC compiles: equal keys are one compile (autotuned's default is warptiled's)."""
        expressions = tuple(self.spec.entry_expressions(self.config).values())
        return self.spec.source, expressions, self.spec.build_arch(self.arch)

    @property
    def label(self) -> str:
        return "-".join([self.spec.name, *(f"{k}{v}" for k, v in self.tunables), self.arch])

    def param(self):
        """The pytest parameter, grouped by what NVRTC compiles: under ``--dist loadgroup`` the
        tests of one build run on one xdist worker, one after the other, so the second finds
        the build made instead of waiting, on the other core, for the first to make it."""
        import pytest

        return pytest.param(self, id=self.label, marks=pytest.mark.xdist_group(_digest(self)))

    @classmethod
    def of(cls, spec: KernelSpec, arch: str, tunables: Mapping[str, int] | None = None) -> Build:
        return cls(spec, tuple(spec.resolve(tunables).items()), arch)


def _runs_on(spec: KernelSpec, arch: str) -> bool:
    return spec.runs_on(cc_of(parse_arch(arch)[0]))


def universe(specs: Iterable[KernelSpec] | None = None) -> list[Build]:
    """The full matrix: every configuration (and swept entry) x every arch the kernel runs on,
    each distinct compile once, in registry order."""
    specs = list(kernels.KERNELS.values()) if specs is None else list(specs)
    found: dict[tuple, Build] = {}
    for spec in specs:
        configs = [*spec.configurations(), *(spec.resolve(c) for c in tensor.TUNE_SPACES.get(spec.name, ())
                                             if spec.name in SWEPT_KERNELS)]
        for arch in ARCHS:
            if _runs_on(spec, arch):
                for config in configs:
                    b = Build(spec, tuple(config.items()), arch)
                    found.setdefault(b.key, b)
    return list(found.values())


def _is_default(b: Build) -> bool:
    return b.config == b.spec.resolve()


def select(builds: list[Build], *, run_seed: int | None = None, everything: bool | None = None) -> list[Build]:
    """``builds`` in full (GEMM_DRIVER_FULL_MATRIX), else defaults, one per code path of each
    family and a seeded draw of the rest; the order of ``builds`` is kept."""
    if full() if everything is None else everything:
        return list(builds)
    run_seed = seed() if run_seed is None else run_seed
    chosen = {b.key for b in builds if _is_default(b)}
    families: dict[str, list[Build]] = {}
    for b in builds:
        families.setdefault(b.spec.source, []).append(b)
    for source, members in families.items():
        path_of = PATHS[source]  # KeyError: a new family must say which tunables choose its code
        draw = random.Random(f"{run_seed}:{source}")  # str seeds hash the same in every process
        paths: dict[object, list[Build]] = {}
        for b in members:  # code path -> its configurations on every arch; a default covers its own
            paths.setdefault(path_of(b.spec, b.config), []).append(b)
        for same_path in paths.values():
            if not any(b.key in chosen for b in same_path):
                chosen.add(draw.choice(same_path).key)
        rest = [b for b in members if b.key not in chosen]
        chosen.update(b.key for b in draw.sample(rest, min(EXTRA_PER_FAMILY, len(rest))))
    return [b for b in builds if b.key in chosen]


@functools.lru_cache(maxsize=None)
def this_run() -> tuple[Build, ...]:
    """The run's builds (made when first asked: conftest.py has chosen the seed by then)."""
    return tuple(select(universe()))


def selected(where: Callable[[Build], bool] = lambda b: True) -> list:
    """pytest params of the run's builds that ``where`` accepts."""
    return [b.param() for b in this_run() if where(b)]


def default_build(spec: KernelSpec, arch: str):
    """The pytest param of ``spec``'s default build on ``arch`` (one the matrix always makes),
    in the matrix's group: a test of it runs beside the matrix's and reads its build."""
    return Build.of(spec, arch).param()


def group(spec: KernelSpec, arch: str, tunables: Mapping[str, int] | None = None) -> list:
    """The marks that put a test reading this build in the build's xdist group: under ``--dist
    loadgroup`` it runs on the worker that runs the matrix's tests of the build (if the matrix
    makes it), one after the other, sharing the build, its statistics and its SASS listing.
    None for a kernel that does not run on ``arch`` (its test skips, building nothing)."""
    import pytest

    if not _runs_on(spec, arch):
        return []
    return [pytest.mark.xdist_group(_digest(Build.of(spec, arch, tunables)))]


def archs(spec: KernelSpec, tunables: Mapping[str, int], among: Iterable[str] = ARCHS) -> list[str]:
    """The architectures a test builds ``spec`` with ``tunables`` on, as the matrix builds a code
    path: every one of ``among`` under GEMM_DRIVER_FULL_MATRIX; else the one the run's matrix
    builds it on, if it does (one compile for both), else one drawn by the run's seed."""
    among = list(among)
    if full():
        return among
    made = {b.key for b in this_run()}
    for arch in among:
        if Build.of(spec, arch, tunables).key in made:
            return [arch]
    label = "-".join([spec.name, *(f"{k}{v}" for k, v in spec.resolve(tunables).items())])
    return [random.Random(f"{seed()}:{label}").choice(among)]


# --- memoised per process: every module asks the same few hundred questions -------------
def _digest(b: Build) -> str:
    return hashlib.blake2b(repr(b.key).encode(), digest_size=12).hexdigest()


@contextlib.contextmanager
def _alone(b: Build):
    """Hold a lock on ``b``'s compile in the shared cache: an xdist worker that wants the same
    build meanwhile waits and then reads it from the cache instead of compiling it again."""
    directory = os.environ.get(SCRATCH_VARIABLE)
    if fcntl is None or not directory:
        yield
        return
    with open(os.path.join(directory, f"compiling-{_digest(b)}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


@functools.lru_cache(maxsize=None)
def _built(name: str, arch: str, tunables: tuple):
    spec = kernels.KERNELS[name]
    with _alone(Build(spec, tunables, arch)):
        return build(spec, arch, dict(tunables))


# nvdisasm takes 0.3 s a cubin on its own and about a second under a CI run's load, most of it
# starting up; it prints every function of the cubin. The arguments are inspection.sass's.
LISTING_ARGS = ("-c", "-g")


@functools.lru_cache(maxsize=8)  # a build's tests run one after the other on one worker (Build.param)
def listing(cubin: bytes) -> str:
    """nvdisasm's listing of every function in ``cubin``, once per process."""
    return run_on_cubin("nvdisasm", list(LISTING_ARGS), cubin)


def sass(result, entry: str = "main") -> Sass:
    """The parsed SASS of one entry of a build (``built``'s result) from the shared listing."""
    return parse(listing(result.compiled.cubin), result.entries[entry])


@contextlib.contextmanager
def _shared_listing():
    """kernel_stats disassembles through inspection.sass's run_on_cubin, once per function it
    reads: for the duration, the listing it asks for comes from ``listing`` (the same
    arguments and cubin, so the same text), which the build's ``sass`` readers share."""
    run = sass_listing.run_on_cubin

    def shared(tool, args, cubin):
        return listing(cubin) if (tool, tuple(args)) == ("nvdisasm", LISTING_ARGS) else run(tool, args, cubin)

    sass_listing.run_on_cubin = shared
    try:
        yield
    finally:
        sass_listing.run_on_cubin = run


@functools.lru_cache(maxsize=None)
def _stats(name: str, arch: str, tunables: tuple):
    """kernel_stats, kept in the run's scratch folder too: nvdisasm (about half a second a
    build) then runs once a run, not once in each xdist worker that asks."""
    spec = kernels.KERNELS[name]
    b = Build(spec, tunables, arch)
    directory = os.environ.get(SCRATCH_VARIABLE)
    kept = os.path.join(directory, f"stats-{_digest(b)}-{name}.json") if directory else None
    with _alone(b):
        if kept and os.path.exists(kept):
            with open(kept) as f:
                return json.load(f)
        with _shared_listing():
            found = kernel_stats(spec, arch, dict(tunables))
        if kept and json.loads(json.dumps(found)) == found:
            with open(kept, "w") as f:
                json.dump(found, f)
        return found


def built(spec: KernelSpec, arch: str, tunables: Mapping[str, int] | None = None):
    """``build(spec, arch, tunables)``, once per process."""
    return _built(spec.name, arch, tuple(spec.resolve(tunables).items()))


def stats(spec: KernelSpec, arch: str, tunables: Mapping[str, int] | None = None) -> dict:
    """``kernel_stats(spec, arch, tunables)`` (resources and SASS mix), once per process."""
    return _stats(spec.name, arch, tuple(spec.resolve(tunables).items()))
