"""Shared fixtures. GPU tests carry the ``gpu`` marker and skip cleanly without a GPU."""

from __future__ import annotations

import pytest

from gemm_driver.cuda.driver import gpu_available

HAVE_GPU = gpu_available()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and driver; skipped without one")


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
