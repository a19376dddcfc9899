"""Kernel sources: where they are found, which headers each includes, and packaging."""

from __future__ import annotations

import fnmatch
import shutil
import sys
from pathlib import Path

import pytest

from gemm_driver import kernels
from gemm_driver.kernels import sources
from gemm_driver.kernels.build import build

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A private copy of cu/ and ptx/ that the package reads instead of the real ones."""
    root = tmp_path / "src"
    shutil.copytree(REPO / "cu", root / "cu")
    shutil.copytree(REPO / "ptx", root / "ptx")
    monkeypatch.setattr(sources, "source_root", lambda: root)
    return root


def test_source_root_is_the_checkout():
    assert sources.source_root() == REPO
    assert sources.read_source("cu/naive.cu") == (REPO / "cu" / "naive.cu").read_bytes()


def test_real_includes():
    headers = sources.included_headers("cu/smem_tiled.cu")
    assert headers == {"gemm_common.cuh": (REPO / "cu" / "gemm_common.cuh").read_bytes()}
    assert sources.included_headers("cu/hold_stream.cu") == {}


def test_includes_are_followed_recursively(tree):
    (tree / "cu" / "sub").mkdir()
    (tree / "cu" / "top.cu").write_bytes(
        b'#include "a.cuh"\n'
        b'  #  include "sub/b.cuh"\n'  # spacing allowed by the preprocessor
        b"#include <cuda_fp16.h>\n"  # angle brackets: NVRTC's own, not ours
        b'// #include "commented.cuh"\n'
        b'#include "missing.cuh"\n'  # left for NVRTC to report
    )
    (tree / "cu" / "a.cuh").write_bytes(b'#pragma once\n#include "c.cuh"\n')
    (tree / "cu" / "sub" / "b.cuh").write_bytes(b'#pragma once\n#include "a.cuh"\n')  # already seen
    (tree / "cu" / "c.cuh").write_bytes(b'#pragma once\n#include "d.cuh"\n#include "a.cuh"\n')  # a cycle
    (tree / "cu" / "d.cuh").write_bytes(b"#pragma once\n// the deepest\n")
    (tree / "cu" / "commented.cuh").write_bytes(b"never included\n")
    found = sources.included_headers("cu/top.cu")
    assert set(found) == {"a.cuh", "sub/b.cuh", "c.cuh", "d.cuh"}
    assert found["d.cuh"] == b"#pragma once\n// the deepest\n"


def test_editing_a_header_is_a_cache_miss(tree, isolated_cache):
    spec = kernels.KERNELS["naive"]
    first = build(spec, "sm_80")
    assert build(spec, "sm_80").cache_hit is True
    header = tree / "cu" / "gemm_common.cuh"
    header.write_bytes(header.read_bytes() + b"\n// an edit that changes no code\n")
    edited = build(spec, "sm_80")
    assert edited.cache_hit is False, "an edited header must invalidate every kernel that includes it"
    assert edited.compiled.cubin[:4] == b"\x7fELF"
    assert len(list(isolated_cache.iterdir())) == 2  # the old entry and the new one
    assert first.entry == edited.entry


def test_editing_a_header_reaches_nvrtc(tree, isolated_cache):
    spec = kernels.KERNELS["smem_tiled"]
    (tree / "cu" / "gemm_common.cuh").write_bytes(b"#error edited-header-seen-by-nvrtc\n")
    from gemm_driver.cuda.errors import NvrtcError

    with pytest.raises(NvrtcError, match="edited-header-seen-by-nvrtc"):
        build(spec, "sm_80")


def test_installed_layout_fallback(tmp_path, monkeypatch):
    """Without cu/ beside the package, the copy shipped inside it (gemm_driver/_sources) is used."""
    package = tmp_path / "site-packages" / "gemm_driver"
    (package / "_sources" / "cu").mkdir(parents=True)
    (package / "_sources" / "ptx").mkdir()
    monkeypatch.setattr(sources, "_PACKAGE", package)
    assert sources.source_root.__wrapped__() == package / "_sources"
    # the checkout layout wins when both exist
    (tmp_path / "site-packages" / "cu").mkdir()
    (tmp_path / "site-packages" / "ptx").mkdir()
    assert sources.source_root.__wrapped__() == tmp_path / "site-packages"


def test_missing_sources_name_both_places(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "_PACKAGE", tmp_path / "gemm_driver")
    with pytest.raises(FileNotFoundError, match=r"kernel sources \(cu/, ptx/\) not found beside or inside"):
        sources.source_root.__wrapped__()


def test_every_kernel_source_is_shipped_by_a_regular_install():
    """pyproject's package-data globs must cover every file in cu/ and ptx/."""
    if sys.version_info < (3, 11):
        pytest.skip("tomllib needs Python 3.11")
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    for folder in ("cu", "ptx"):
        package = f"gemm_driver._sources.{folder}"
        assert package in config["packages"]
        assert config["package-dir"][package] == folder
        patterns = config["package-data"][package]
        files = [p for p in (REPO / folder).iterdir() if p.is_file()]
        assert files
        for path in files:
            assert any(fnmatch.fnmatch(path.name, pat) for pat in patterns), f"{path} would not be installed"
    for spec in kernels.KERNELS.values():
        assert spec.source.split("/")[0] in ("cu", "ptx")
    # every folder of Python code in the package is listed (an unlisted one would not be installed)
    python_packages = {
        ".".join(py.parent.relative_to(REPO).parts)
        for py in (REPO / "gemm_driver").rglob("*.py")
        if "__pycache__" not in py.parts
    }
    missing = python_packages - set(config["packages"])
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
