"""The on-disk cubin cache: key over every input, hits, corrupt entries, env vars, atomicity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gemm_driver.cuda import cache

SOURCE = b'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 2.0f * p[threadIdx.x]; }\n'

BASE_KEY = dict(
    compiler="nvrtc",
    compiler_version=(12, 9),
    arch="sm_80",
    options=("--std=c++17", "-lineinfo"),
    name_expressions=("f<1>",),
    filename="k.cu",
    source=b"source bytes",
    headers={"a.cuh": b"header a", "b.cuh": b"header b"},
)

# One change of each input; every one must give a different key.
VARIANTS = {
    "source bytes": dict(source=b"source bytez"),
    "header bytes": dict(headers={"a.cuh": b"header a", "b.cuh": b"header B"}),
    "header name": dict(headers={"a.cuh": b"header a", "c.cuh": b"header b"}),
    "extra header": dict(headers={"a.cuh": b"header a", "b.cuh": b"header b", "c.cuh": b""}),
    "no headers": dict(headers={}),
    "arch": dict(arch="sm_90"),
    "arch suffix": dict(arch="sm_80a"),
    "option added": dict(options=("--std=c++17", "-lineinfo", "-O3")),
    "option removed": dict(options=("--std=c++17",)),
    "name expression": dict(name_expressions=("f<2>",)),
    "no name expression": dict(name_expressions=()),
    "compiler version": dict(compiler_version=(12, 8)),
    "compiler": dict(compiler="nvjitlink"),
    "filename": dict(filename="other.cu"),
}


def key(**changes) -> str:
    return cache.cache_key(**{**BASE_KEY, **changes})


@pytest.mark.parametrize("what", sorted(VARIANTS))
def test_key_changes_with_each_input(what):
    assert key(**VARIANTS[what]) != key()


def test_all_variant_keys_are_distinct_and_stable():
    keys = [key(**v) for v in VARIANTS.values()] + [key()]
    assert len(set(keys)) == len(keys)
    assert key() == key()  # deterministic (no time, no address)
    assert len(key()) == 40 and int(key(), 16) >= 0  # 20-byte hex digest, usable as a file name


def test_options_order_does_not_matter_but_header_dict_order_neither():
    assert key(options=("-lineinfo", "--std=c++17")) == key()
    assert key(headers={"b.cuh": b"header b", "a.cuh": b"header a"}) == key()


def test_labels_keep_inputs_apart():
    """Moving bytes from one input to the next must not collide (length-prefixed labels)."""
    assert key(source=b"ab", filename="k.cu") != key(source=b"b", filename="k.cua")
    assert key(headers={"ab": b"c"}) != key(headers={"a": b"bc"})
    assert key(options=("a b",)) != key(options=("a", "b"))


# --- build through the cache ------------------------------------------------------------
def build(**kw):
    return cache.build(filename="k.cu", source=SOURCE, arch="sm_80", **kw)


def entries(directory: Path) -> list[Path]:
    return sorted(directory.iterdir()) if directory.exists() else []


def test_miss_then_hit(isolated_cache):
    first, hit1 = build()
    assert hit1 is False
    files = entries(isolated_cache)
    assert [f.suffix for f in files] == [".json"]
    second, hit2 = build()
    assert hit2 is True
    assert second == first  # the round trip through JSON keeps every field
    assert second.resources["k"].registers > 0
    # any change of input is a miss and a second entry
    _, hit3 = build(options=("-lineinfo",))
    assert hit3 is False
    assert len(entries(isolated_cache)) == 2


def test_ptx_goes_through_the_cache_too(isolated_cache):
    ptx = (Path(__file__).resolve().parents[1] / "ptx" / "naive.ptx").read_bytes()
    first, hit1 = cache.build(filename="naive.ptx", source=ptx, arch="sm_90")
    second, hit2 = cache.build(filename="naive.ptx", source=ptx, arch="sm_90")
    assert (hit1, hit2) == (False, True)
    assert second.cubin == first.cubin and second.cubin[:4] == b"\x7fELF"


def test_cache_dir_env_moves_the_cache(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere" / "deeper"
    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", str(target))
    monkeypatch.delenv("GEMM_DRIVER_NO_CACHE", raising=False)
    assert cache.cache_dir() == target
    build()
    assert len(entries(target)) == 1


def test_default_cache_dir_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMM_DRIVER_CACHE_DIR", raising=False)
    monkeypatch.delenv("GEMM_DRIVER_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "gemm_driver"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "gemm_driver"


@pytest.mark.parametrize("value, disabled", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_no_cache_env(isolated_cache, monkeypatch, value, disabled):
    monkeypatch.setenv("GEMM_DRIVER_NO_CACHE", value)
    assert (cache.cache_dir() is None) == disabled
    _, hit1 = build()
    _, hit2 = build()
    assert hit1 is False
    assert hit2 is (not disabled)
    assert (len(entries(isolated_cache)) == 0) == disabled


def test_no_cache_ignores_an_existing_entry(isolated_cache, monkeypatch):
    build()
    monkeypatch.setenv("GEMM_DRIVER_NO_CACHE", "1")
    _, hit = build()
    assert hit is False


def _valid_entry_text(isolated_cache) -> tuple[Path, str]:
    build()
    (path,) = entries(isolated_cache)
    return path, path.read_text()


CORRUPTIONS = {
    "garbage": lambda text: "\x00\x01 this is not json",
    "empty": lambda text: "",
    "truncated": lambda text: text[: len(text) // 2],
    "other schema": lambda text: json.dumps({**json.loads(text), "schema": cache.SCHEMA_VERSION + 1}),
    "no schema": lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "schema"}),
    "missing field": lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "cubin"}),
    "bad base64": lambda text: json.dumps({**json.loads(text), "cubin": "!!not base64!!"}),
    "unknown resource field": lambda text: json.dumps(
        {**json.loads(text), "resources": {"k": {"registers": 1, "bogus": 2}}}),
}


@pytest.mark.parametrize("how", sorted([*CORRUPTIONS, "binary"]))
def test_corrupt_entry_is_a_miss_and_is_overwritten(isolated_cache, how):
    path, good = _valid_entry_text(isolated_cache)
    path.write_bytes(b"\xff\xfe\xfd not utf-8" if how == "binary" else CORRUPTIONS[how](good).encode())
    assert cache.load(path.stem, isolated_cache) is None
    compiled, hit = build()
    assert hit is False
    assert json.loads(path.read_text())["schema"] == cache.SCHEMA_VERSION  # rewritten whole
    assert cache.load(path.stem, isolated_cache) == compiled
    assert build()[1] is True


WRONG_SHAPES = {
    "json list": "[1, 2, 3]",
    "json null": "null",
    "json string": '"entry"',
}


@pytest.mark.parametrize("how", sorted(WRONG_SHAPES))
def test_entry_of_the_wrong_json_shape_is_a_miss(isolated_cache, how):
    path, _ = _valid_entry_text(isolated_cache)
    path.write_text(WRONG_SHAPES[how])
    assert cache.load(path.stem, isolated_cache) is None


def test_unreadable_cache_dir_is_skipped_not_fatal(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("GEMM_DRIVER_NO_CACHE", raising=False)
    _, hit1 = build()
    _, hit2 = build()
    assert (hit1, hit2) == (False, False)


def test_writes_are_atomic(isolated_cache, monkeypatch):
    """The entry appears by one os.replace of a complete temp file in the same directory."""
    real_replace = os.replace
    seen = []

    def spy(src, dst):
        src, dst = Path(src), Path(dst)
        assert src.parent == dst.parent == isolated_cache, "temp file must be on the same file system"
        assert not dst.exists(), "the final name must not exist before the rename"
        json.loads(src.read_text())  # the temp file is already complete
        seen.append((src.name, dst.name))
        real_replace(src, dst)

    monkeypatch.setattr(cache.os, "replace", spy)
    build()
    assert len(seen) == 1
    assert seen[0][0].startswith(".") and seen[0][0].endswith(".tmp")
    assert [p.name for p in entries(isolated_cache)] == [seen[0][1]]  # no temp file left behind


def test_failed_write_leaves_no_temp_file(isolated_cache, monkeypatch):
    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache.os, "replace", failing_replace)
    _, hit = build()
    assert hit is False
    assert entries(isolated_cache) == []


def test_header_bytes_reach_the_key_through_build(isolated_cache):
    source = b'#include "h.cuh"\nextern "C" __global__ void k(float* p) { p[0] = VALUE; }\n'
    one, hit1 = cache.build(filename="k.cu", source=source, arch="sm_80", headers={"h.cuh": b"#define VALUE 1.0f\n"})
    two, hit2 = cache.build(filename="k.cu", source=source, arch="sm_80", headers={"h.cuh": b"#define VALUE 2.0f\n"})
    assert (hit1, hit2) == (False, False)
    assert one.ptx != two.ptx  # the header really changed the code
    assert len(entries(isolated_cache)) == 2


def test_compiler_version_is_part_of_the_key(isolated_cache, monkeypatch):
    build()
    monkeypatch.setattr(cache.nvrtc, "version", lambda: (99, 0))
    _, hit = build()
    assert hit is False
