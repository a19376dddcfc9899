"""The kernel registry: every kernel and baseline provider, by name.

Kernels come in families, one registry module (or package) per family, each listing its
specs in ladder order: ``simt`` (the FP32 ladder, cu/simt/), ``tensor`` (WMMA and mma.sync,
sm_80+, cu/tensor/) and ``hopper`` (wgmma + TMA, sm_90a, cu/hopper/). A KernelSpec's ``precision`` puts it on that
precision's ladder and beside that precision's cuBLAS baseline, with nothing else to change.
``providers`` holds the baselines; ``tuned`` the per-GPU tables' lookup; ``launch`` how a
kernel is enqueued. Everything here is pure: no GPU is needed to import or query it.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
from pathlib import Path

from . import hopper, providers, simt, tensor
from .providers import Provider
from .spec import Entry, KernelSpec, Tunable
from .target import GemmTarget

EXTRA_KERNELS_VARIABLE = "GEMM_DRIVER_EXTRA_KERNELS"


def _extra_specs() -> tuple[tuple[KernelSpec, ...], str | None]:
    """Kernels from the Python files named in GEMM_DRIVER_EXTRA_KERNELS (``os.pathsep``
    separated), each defining ``SPECS``: your own kernels, or the test suite's faulting
    ones, benched like the registry's. A file that cannot be loaded is reported, in one
    line, by the CLI (``EXTRA_KERNELS_ERROR``), not raised at import."""
    specs: list[KernelSpec] = []
    for path in filter(None, os.environ.get(EXTRA_KERNELS_VARIABLE, "").split(os.pathsep)):
        try:
            module_spec = importlib.util.spec_from_file_location(f"gemm_driver_extra_{Path(path).stem}", path)
            if module_spec is None or not Path(path).is_file():
                raise FileNotFoundError("no such Python file")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            found = tuple(getattr(module, "SPECS"))
            if not all(isinstance(spec, KernelSpec) for spec in found):
                raise TypeError("SPECS must hold KernelSpec objects")
        except Exception as exc:  # noqa: BLE001 - any failure of the user's file is one line
            return (), f"{EXTRA_KERNELS_VARIABLE}: {path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        specs += found
    return tuple(specs), None


EXTRA_SPECS, EXTRA_KERNELS_ERROR = _extra_specs()
FAMILIES = (simt, tensor, hopper)
PROVIDERS = providers.PROVIDERS
SPECS: tuple[KernelSpec, ...] = tuple(spec for family in FAMILIES for spec in family.SPECS) + EXTRA_SPECS
# Rungs in registry order; a precision's ladder is its rungs in this order (bench/report.py).
LADDER = tuple(spec for spec in SPECS if spec.in_ladder)
KERNELS: dict[str, KernelSpec] = {spec.name: spec for spec in SPECS}
ALL: dict[str, GemmTarget] = {**{p.name: p for p in PROVIDERS}, **KERNELS}


def get(name: str) -> GemmTarget:
    """The kernel or provider called ``name``; ValueError naming the closest known names."""
    try:
        return ALL[name]
    except KeyError:
        close = difflib.get_close_matches(name, ALL, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown kernel {name!r}{hint} (`list` shows all)") from None


def precision_of(name: str) -> str:
    """The precision a registered kernel or provider computes in."""
    return get(name).precision


def absent_baselines() -> dict[str, str]:
    """Baselines that this installation cannot offer, with the reason."""
    return {p.name: reason for p in PROVIDERS if (reason := p.unavailable()) is not None}


__all__ = ["ALL", "Entry", "FAMILIES", "GemmTarget", "KERNELS", "LADDER", "PROVIDERS", "KernelSpec", "Provider",
           "SPECS", "Tunable", "absent_baselines", "get", "precision_of"]
