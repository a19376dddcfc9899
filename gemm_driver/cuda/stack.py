"""The CUDA stack gemm_driver runs on: cuda-bindings with its NVIDIA wheels, installed as the
``cu12`` or ``cu13`` extra to match the driver. Every use of ``cuda.bindings`` goes through
``bindings``, so a machine with neither stack gets one line saying what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import LibraryNotFoundError

MISSING = ("gemm_driver needs a CUDA stack: pip install 'gemm-driver[cu12]' (CUDA 12 driver) "
           "or 'gemm-driver[cu13]' (CUDA 13 driver)")


class CudaStackMissingError(LibraryNotFoundError):
    """cuda-bindings is not installed: neither the cu12 nor the cu13 extra is."""


_LOADED: dict[str, ModuleType] = {}


def bindings(module: str) -> ModuleType:
    """``cuda.bindings.<module>`` (driver, nvrtc, nvjitlink), or CudaStackMissingError. Kept
    once found: every driver call asks for it, and importlib's lookup of a loaded module
    cost ~6 us under cProfile (644 lookups in 20 steps of tools/train_mlp.py)."""
    found = _LOADED.get(module)
    if found is not None:
        return found
    try:
        found = _LOADED[module] = importlib.import_module(f"cuda.bindings.{module}")
        return found
    except ModuleNotFoundError as exc:
        if exc.name == "cuda" or (exc.name or "").startswith("cuda.bindings"):
            raise CudaStackMissingError(MISSING) from None
        raise
