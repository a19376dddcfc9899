"""Build a registered kernel for an architecture: sources -> NVRTC/nvJitLink -> cache."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..cuda import cache
from ..cuda.driver import Device, gpu_available
from ..cuda.nvrtc import Compiled, Resources, parse_arch
from .sources import included_headers, read_source
from .spec import KernelSpec, cc_of

FALLBACK_ARCH = "sm_90"  # the lent H100's, for builds on a machine without a GPU


@dataclass(frozen=True)
class Build:
    spec: KernelSpec
    tunables: Mapping[str, int]
    compiled: Compiled
    entries: Mapping[str, str]  # "main" (and each extra entry's name) -> the symbol to load
    cache_hit: bool

    @property
    def entry(self) -> str:
        return self.entries["main"]

    @property
    def resources(self) -> Resources:
        return self.compiled.resources[self.entry]

    @property
    def gemm_entry(self) -> str:
        """The symbol of the entry that computes the GEMM with these tunables (the spec's
        ``gemm_entry``): what inspect disassembles and reports."""
        return self.entries[self.spec.gemm_entry(self.tunables) if self.spec.gemm_entry else "main"]

    @property
    def gemm_resources(self) -> Resources:
        return self.compiled.resources[self.gemm_entry]

    @property
    def every_resources(self) -> list[Resources]:
        """Each loaded entry's resources (a spill in any of them is a spill of the build)."""
        return [self.compiled.resources[symbol] for symbol in self.entries.values()]


def default_arch() -> str:
    """This GPU's architecture, or sm_90 on a machine without one."""
    return Device.get(0).arch if gpu_available() else FALLBACK_ARCH


def build(spec: KernelSpec, arch: str, tunables: Mapping[str, int] | None = None) -> Build:
    """Compile ``spec`` with ``tunables`` (defaults filled in) for ``arch``, through the cache."""
    number, _ = parse_arch(arch)
    spec.check_runs_on(cc_of(number), f"cannot build it for {arch}")
    arch = spec.build_arch(arch)
    resolved = spec.resolve(tunables)
    expressions = spec.entry_expressions(resolved)
    compiled, hit = cache.build(
        filename=spec.source.rsplit("/", 1)[-1],
        source=read_source(spec.source),
        arch=arch,
        headers=included_headers(spec.source) if spec.kind == "cu" else {},
        options=spec.options if spec.kind == "cu" else (),
        # Templates are instantiated through NVRTC name expressions (plain extern "C" names are not).
        name_expressions=tuple(e for e in expressions.values() if "<" in e),
    )
    entries = {name: compiled.entry(expression) for name, expression in expressions.items()}
    return Build(spec, resolved, compiled, entries, hit)


def build_all(configurations: Iterable[tuple[KernelSpec, Mapping[str, int]]], arch: str) -> int:
    """Compile every (spec, tunables) of ``configurations`` in threads into the on-disk cache,
    each once: NVRTC releases the GIL, so a cold cache costs about the longest build instead of
    the sum of them. A build that fails is left for its run to report (it fails again there,
    under that run's name). Returns how many distinct configurations there were."""
    distinct = {(spec.name, tuple(sorted(spec.resolve(t).items()))): (spec, t) for spec, t in configurations}
    if distinct:
        with ThreadPoolExecutor(min(len(distinct), os.cpu_count() or 1)) as pool:
            for done in [pool.submit(build, spec, arch, t) for spec, t in distinct.values()]:
                done.exception()  # waited for
    return len(distinct)
