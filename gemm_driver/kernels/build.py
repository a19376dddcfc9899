"""Build a registered kernel for an architecture: sources -> NVRTC/nvJitLink -> cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..cuda import cache
from ..cuda.nvrtc import Compiled, Resources, parse_arch
from .sources import included_headers, read_source
from .spec import KernelSpec


@dataclass(frozen=True)
class Build:
    spec: KernelSpec
    tunables: Mapping[str, int]
    compiled: Compiled
    entry: str  # the symbol to load
    cache_hit: bool

    @property
    def resources(self) -> Resources:
        return self.compiled.resources[self.entry]


def build(spec: KernelSpec, arch: str, tunables: Mapping[str, int] | None = None) -> Build:
    """Compile ``spec`` with ``tunables`` (defaults filled in) for ``arch``, through the cache."""
    number, _ = parse_arch(arch)
    if number < spec.min_cc[0] * 10 + spec.min_cc[1]:
        raise ValueError(f"{spec.name} needs {spec.min_arch} or newer; cannot build it for {arch}")
    resolved = spec.resolve(tunables)
    expression = spec.name_expression(resolved)
    is_template = "<" in expression
    compiled, hit = cache.build(
        filename=spec.source.rsplit("/", 1)[-1],
        source=read_source(spec.source),
        arch=arch,
        headers=included_headers(spec.source) if spec.kind == "cu" else {},
        options=spec.options if spec.kind == "cu" else (),
        name_expressions=(expression,) if is_template else (),
    )
    return Build(spec, resolved, compiled, compiled.entry(expression), hit)
