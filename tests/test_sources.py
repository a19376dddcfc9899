"""Kernel sources: where they are found, which headers each includes, and packaging."""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_driver import kernels
from gemm_driver.bench.environment import sources_fingerprint
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
    assert sources.read_source("cu/simt/naive.cu") == (REPO / "cu" / "simt" / "naive.cu").read_bytes()


def test_real_includes():
    headers = sources.included_headers("cu/simt/smem_tiled.cu")
    assert headers == {"gemm_common.cuh": (REPO / "cu" / "simt" / "gemm_common.cuh").read_bytes()}
    assert sources.included_headers("cu/harness/hold_stream.cu") == {}


def test_cu_is_laid_out_by_family():
    """The FP32 ladder in cu/simt/, the timing harness in cu/harness/, headers several families
    share in cu/common/, nothing loose in cu/."""
    assert not [p.name for p in (REPO / "cu").iterdir() if p.is_file()]
    for spec in kernels.KERNELS.values():
        assert spec.source.startswith(("cu/simt/", "cu/tensor/", "cu/hopper/", "ptx/")), spec.source
    assert (REPO / "cu" / "harness" / "hold_stream.cu").is_file()
    assert (REPO / "cu" / "common" / "pack_transpose.cuh").is_file()


def test_a_header_beside_the_including_file_wins_over_cu(tree):
    """#include "x.cuh" looks in the including file's folder first, then in cu/ (as the
    preprocessor does), so a family's kernels find their own headers."""
    family = tree / "cu" / "family"
    family.mkdir()
    (family / "kernel.cu").write_bytes(b'#include "common.cuh"\n#include "shared.cuh"\n')
    (family / "common.cuh").write_bytes(b"// the family's own common.cuh\n")
    (tree / "cu" / "common.cuh").write_bytes(b"// cu/common.cuh, shadowed for the family\n")
    (tree / "cu" / "shared.cuh").write_bytes(b"// only in cu/\n")
    found = sources.included_headers("cu/family/kernel.cu")
    assert found == {"common.cuh": b"// the family's own common.cuh\n", "shared.cuh": b"// only in cu/\n"}


def test_two_files_under_one_include_name_are_refused(tree):
    """NVRTC serves headers by include name only: two different files under one name in a
    build would silently get one of them, so the lookup refuses it, naming both."""
    family = tree / "cu" / "family"
    family.mkdir()
    (family / "kernel.cu").write_bytes(b'#include "a.cuh"\n#include "../b.cuh"\n')
    (family / "a.cuh").write_bytes(b"// family/a.cuh\n")
    (tree / "cu" / "b.cuh").write_bytes(b'#include "a.cuh"\n')  # resolves beside b.cuh: cu/a.cuh
    (tree / "cu" / "a.cuh").write_bytes(b"// cu/a.cuh\n")
    with pytest.raises(ValueError, match=r"two different headers are included as 'a.cuh'.*rename one"):
        sources.included_headers("cu/family/kernel.cu")


def test_headers_beside_a_kernel_are_served_to_nvrtc_and_keyed(tree, isolated_cache):
    """A kernel in a family folder compiles with its sibling header, and editing that
    header changes the cache key (the header's bytes are in it)."""
    family = tree / "cu" / "family"
    family.mkdir()
    (family / "kernel.cu").write_bytes(b'#include "value.cuh"\n'
                                       b'extern "C" __global__ void k(int* p) { p[0] = VALUE; }\n')
    (family / "value.cuh").write_bytes(b"#define VALUE 7\n")
    spec = dataclasses.replace(kernels.KERNELS["naive"], name="family_kernel", source="cu/family/kernel.cu",
                               entry="k", signature=("ptr",))
    first = build(spec, "sm_80")
    assert first.cache_hit is False and build(spec, "sm_80").cache_hit is True
    (family / "value.cuh").write_bytes(b"#define VALUE 8\n")
    assert build(spec, "sm_80").cache_hit is False


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
    header = tree / "cu" / "simt" / "gemm_common.cuh"
    header.write_bytes(header.read_bytes() + b"\n// an edit that changes no code\n")
    edited = build(spec, "sm_80")
    assert edited.cache_hit is False, "an edited header must invalidate every kernel that includes it"
    assert edited.compiled.cubin[:4] == b"\x7fELF"
    assert len(list(isolated_cache.iterdir())) == 2  # the old entry and the new one
    assert first.entry == edited.entry


def test_editing_a_header_reaches_nvrtc(tree, isolated_cache):
    spec = kernels.KERNELS["smem_tiled"]
    (tree / "cu" / "simt" / "gemm_common.cuh").write_bytes(b"#error edited-header-seen-by-nvrtc\n")
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
        files = [p for p in (REPO / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        assert files
        for path in files:
            relative = path.relative_to(REPO / folder).as_posix()
            assert any(fnmatch.fnmatch(relative, pat) or fnmatch.fnmatch(path.name, pat) for pat in patterns), \
                f"{path} would not be installed"
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


def test_a_regular_install_ships_every_source_and_finds_them(tmp_path):
    """Build a wheel of a copy of the tree, install it into a folder of its own and import
    it from there (away from the checkout): every file of cu/ (all levels) and ptx/ is in
    the wheel, and the installed package reads its kernels and their headers."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for folder in ("gemm_driver", "cu", "ptx"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", str(tmp_path / "wheel"), str(src)],
                           capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and "No matching distribution found for setuptools" in built.stderr:
        pytest.skip("no package index to fetch setuptools from for the isolated build")
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob("gemm_driver-*.whl")
    import zipfile

    shipped = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("cu", "ptx"):
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert f"gemm_driver/_sources/{path.relative_to(REPO).as_posix()}" in shipped, path
    assert any(name.startswith("gemm_driver/tuned/") and name.endswith(".json") for name in shipped)
    site = tmp_path / "site"
    installed = subprocess.run([*pip, "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    probe = ("from gemm_driver import kernels\n"
             "from gemm_driver.kernels.sources import source_root, read_source, included_headers\n"
             "print(source_root())\n"
             "for spec in kernels.KERNELS.values():\n"
             "    read_source(spec.source)\n"
             "    if spec.kind == 'cu': assert included_headers(spec.source), spec.name\n"
             "assert 'gemm_common.cuh' in included_headers('cu/simt/smem_tiled.cu')\n"
             "from gemm_driver.bench.environment import sources_fingerprint\n"
             "print(sources_fingerprint())\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    root, fingerprint = ran.stdout.split()
    assert Path(root) == site / "gemm_driver" / "_sources"
    assert fingerprint == sources_fingerprint()  # the installed files are the checkout's


def test_the_sources_fingerprint_follows_the_files_not_git(tmp_path, monkeypatch):
    """Two copies of the tree give the same fingerprint, with no git metadata in either; one
    byte changed in a kernel source, or a tuned table, changes it."""
    from gemm_driver.bench import environment

    for folder in ("cu", "ptx"):
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(environment.sources, "source_root", lambda: tmp_path)
    copied = environment.sources_fingerprint()
    assert copied == sources_fingerprint() and len(copied) == 12
    kernel = tmp_path / "cu" / "simt" / "naive.cu"
    kernel.write_bytes(kernel.read_bytes() + b"\n")
    assert environment.sources_fingerprint() != copied
    package = tmp_path / "gemm_driver"
    shutil.copytree(REPO / "gemm_driver", package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(environment, "_PACKAGE", package)
    changed = environment.sources_fingerprint()
    table = next((package / "tuned").glob("*.json"))
    table.write_text(table.read_text() + " ")
    assert environment.sources_fingerprint() != changed
