"""Shared fixtures. GPU tests carry the ``gpu`` marker and skip cleanly without a GPU."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from gemm_driver.cuda.driver import gpu_available

HAVE_GPU = gpu_available()
_TEMPORARY_CACHE: str | None = None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and driver; skipped without one")
    # The suite never writes into the user's cache (~/.cache/gemm_driver): it gets a fresh
    # one, removed at the end, unless GEMM_DRIVER_CACHE_DIR names one on purpose (e.g. a
    # cache a GPU visit prebuilt). Subprocesses the tests start inherit it.
    global _TEMPORARY_CACHE
    if not os.environ.get("GEMM_DRIVER_CACHE_DIR"):
        _TEMPORARY_CACHE = tempfile.mkdtemp(prefix="gemm_driver-test-cache-")
        os.environ["GEMM_DRIVER_CACHE_DIR"] = _TEMPORARY_CACHE


def pytest_unconfigure(config):
    if _TEMPORARY_CACHE is not None:
        shutil.rmtree(_TEMPORARY_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU/driver on this machine (libcuda not loadable or no device)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def session():
    """One GPU Session for the whole run (context, stream, cuBLAS handle, loaded kernels)."""
    from gemm_driver import Session

    with Session() as s:
        yield s


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A fresh, empty cubin cache for one test."""
    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GEMM_DRIVER_NO_CACHE", raising=False)
    return tmp_path / "cache"
