"""Shared fixtures and the run's settings. GPU tests carry the ``gpu`` marker and skip cleanly
without a GPU; ``gpu_alone`` marks the ones whose timing assertions need the GPU to
themselves: under pytest-xdist with several workers they are skipped, saying so (run them
with ``pytest -m gpu_alone`` and no ``-n``).

Under pytest-xdist the controller makes the settings once and hands them to its workers:
one temporary cubin cache and one scratch folder (build locks, SASS statistics) for all of
them, removed by the controller at the end, and one build-matrix seed, so every worker
collects the same tests (tests/build_matrix.py).

On a machine of several GPUs, ``GEMM_DRIVER_TEST_GPUS=0,1,2,3 pytest -n 16 -m gpu`` spreads
the workers over those GPUs in turn (worker i sees GPU i mod 4 alone, set before CUDA starts
in it), so one run balances the whole suite over every GPU.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import tempfile

import pytest

TEST_GPUS_VARIABLE = "GEMM_DRIVER_TEST_GPUS"
if os.environ.get(TEST_GPUS_VARIABLE) and os.environ.get("PYTEST_XDIST_WORKER"):  # before CUDA starts here
    _gpus, _worker = os.environ[TEST_GPUS_VARIABLE].split(","), os.environ["PYTEST_XDIST_WORKER"]
    os.environ["CUDA_VISIBLE_DEVICES"] = _gpus[int(_worker.removeprefix("gw")) % len(_gpus)]

from build_matrix import FULL_VARIABLE, SCRATCH_VARIABLE, SEED_VARIABLE, full
from gemm_driver.cuda.driver import gpu_available

HAVE_GPU = gpu_available()
CACHE_VARIABLE = "GEMM_DRIVER_CACHE_DIR"
_TEMPORARY_CACHE: str | None = None
_SCRATCH: str | None = None
_SESSION_CACHE: str | None = None  # what the variable held at the start, before any test changed it


def pytest_addoption(parser):
    parser.addoption("--full-matrix", action="store_true",
                     help="build every kernel configuration on every arch (GEMM_DRIVER_FULL_MATRIX=1), "
                          "not the seeded sample of tests/build_matrix.py")


def pytest_configure(config):
    global _TEMPORARY_CACHE, _SESSION_CACHE, _SCRATCH
    handed = getattr(config, "workerinput", None)  # an xdist worker: the controller's settings
    if handed is not None:
        os.environ.update(handed["gemm_driver_environment"])
        _SESSION_CACHE = os.environ.get(CACHE_VARIABLE)
        return
    # The suite never writes into the user's cache (~/.cache/gemm_driver): it gets a fresh
    # one, removed at the end, unless GEMM_DRIVER_CACHE_DIR names one on purpose (e.g. a
    # cache a GPU visit prebuilt). Subprocesses the tests start inherit it.
    if not os.environ.get(CACHE_VARIABLE):
        _TEMPORARY_CACHE = tempfile.mkdtemp(prefix="gemm_driver-test-cache-")
        os.environ[CACHE_VARIABLE] = _TEMPORARY_CACHE
    _SCRATCH = tempfile.mkdtemp(prefix="gemm_driver-test-run-")  # build locks and SASS statistics
    os.environ[SCRATCH_VARIABLE] = _SCRATCH
    if not os.environ.get(SEED_VARIABLE):
        os.environ[SEED_VARIABLE] = str(secrets.randbelow(2**32))
    if config.getoption("--full-matrix"):
        os.environ[FULL_VARIABLE] = "1"
    _SESSION_CACHE = os.environ[CACHE_VARIABLE]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist (controller): every worker gets this run's cache, scratch folder, seed and matrix size."""
    node.workerinput["gemm_driver_environment"] = {
        name: os.environ[name] for name in (CACHE_VARIABLE, SCRATCH_VARIABLE, SEED_VARIABLE, FULL_VARIABLE)
        if name in os.environ}


def pytest_report_header(config):
    seed = os.environ[SEED_VARIABLE]
    if full():
        return f"kernel build matrix: full ({FULL_VARIABLE}=1 or --full-matrix)"
    return (f"kernel build matrix: code paths and a sample, seed {seed} "
            f"(replay: {SEED_VARIABLE}={seed}; everything: --full-matrix)")


def pytest_unconfigure(config):
    for made in (_TEMPORARY_CACHE, _SCRATCH):
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def _keep_xdist_groups(config, items):
    """An xdist worker under ``--dist loadgroup``: give each test marked ``xdist_group`` its
    ``@group`` node-id suffix, which the controller's scheduler reads, where pytest-xdist's own
    assignment did not take. From pytest 9.2 node ids are structured (``Node._id``) and xdist
    (3.8 and before) sets the old ``_nodeid`` attribute, so every group was silently ignored
    (pytest-xdist issue #1386): a build's tests then ran on both workers, each disassembling
    the build, one waiting on the other's compile (tests/build_matrix.py)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid:
            from _pytest.nodeid import NodeId  # pytest >= 9.2, where xdist's suffix is lost

            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")  # parse keeps the string as given


def pytest_collection_modifyitems(config, items):
    _keep_xdist_groups(config, items)
    # Tests that read many builds the build matrix also makes run last, to find them in the
    # cache rather than compile them while an xdist worker beside them compiles the same.
    items.sort(key=lambda item: item.get_closest_marker("reuses_builds") is not None)  # stable
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers > 1:  # xdist workers share the GPU: another worker's kernels land in timed batches
        alone = pytest.mark.skip(reason=f"a timing assertion that needs the GPU alone, shared here by {workers} "
                                        "xdist workers: run pytest -m gpu_alone without -n")
        for item in items:
            if "gpu_alone" in item.keywords:
                item.add_marker(alone)
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


@pytest.fixture
def session_cache():
    """The run's shared cubin cache, for a test that wants builds other tests made (an
    autouse ``isolated_cache`` has replaced the variable by then)."""
    return _SESSION_CACHE


@pytest.fixture(scope="module")
def torch():
    """PyTorch, for the tests that run on torch tensors; skipped with the reason where it is
    absent or has no CUDA."""
    from gemm_driver.kernels.providers import torch_unavailable

    if (reason := torch_unavailable()) is not None:
        pytest.skip(reason)
    import torch

    return torch


@pytest.fixture
def log_console(monkeypatch):
    """A rich console as a CI log or `| cat` gives: not a terminal, 80 columns. (console, its text)"""
    from rich.console import Console

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    out = io.StringIO()
    console = Console(file=out)
    assert not console.is_terminal and console.width == 80
    return console, out
