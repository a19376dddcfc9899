"""The on-disk cubin cache: key over every input, hits, env vars, atomicity, and healing:
every corrupt-entry variant is a miss that is rebuilt and replaced (in process and through
the CLI's compile and SASS view), concurrent writers (real processes), and an unusable
cache directory (one warning, caching off, `info` says why)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_driver.cuda import cache

REPO = Path(__file__).resolve().parents[1]
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


# --- entries validated on read: wrong content in valid JSON is a miss too -----------------
def _with_cubin(entry: dict, cubin: bytes) -> dict:
    """The entry with another cubin and its matching checksum: only the later checks can catch it."""
    return {**entry, "cubin": base64.b64encode(cubin).decode(), "cubin_blake2b": cache.checksum(cubin)}


def _resource(entry: dict, **changes) -> dict:
    (name, record), = entry["resources"].items()
    return {**entry, "resources": {name: {**record, **changes}}}


# name -> (how the entry is changed, words the rejection must contain)
CONTENT_CORRUPTIONS = {
    "empty resources": (lambda e: {**e, "resources": {}}, "resources"),
    "resources of another kernel": (lambda e: {**e, "resources": {"other": next(iter(e["resources"].values()))}},
                                    "resources"),
    "resource field missing": (lambda e: {**e, "resources": {n: {k: v for k, v in r.items() if k != "registers"}
                                                              for n, r in e["resources"].items()}}, "fields"),
    "resource as a string": (lambda e: _resource(e, registers="32"), "registers"),
    "resource negative": (lambda e: _resource(e, shared_bytes=-1), "shared_bytes"),
    "resource bool": (lambda e: _resource(e, barriers=True), "barriers"),
    "resource null where not allowed": (lambda e: _resource(e, registers=None), "registers"),
    "resources a list": (lambda e: {**e, "resources": []}, "resources"),
    "cubin not ELF, checksum right": (lambda e: _with_cubin(e, b"MZ this is not an ELF file"), "ELF"),
    "cubin ELF magic only": (lambda e: _with_cubin(e, b"\x7fELF\x02" + b"\x00" * 10), "ELF"),
    "cubin changed, checksum not": (lambda e: {**e, "cubin": base64.b64encode(
        base64.b64decode(e["cubin"])[:-1] + b"\x01").decode()}, "checksum"),
    "cubin checksum wrong": (lambda e: {**e, "cubin_blake2b": "0" * 40}, "checksum"),
    "ptx checksum wrong": (lambda e: {**e, "ptx_blake2b": "0" * 40}, "checksum"),
    "checksum missing": (lambda e: {k: v for k, v in e.items() if k != "cubin_blake2b"}, "cubin_blake2b"),
    "schema as a string": (lambda e: {**e, "schema": str(cache.SCHEMA_VERSION)}, "schema"),
    "arch not an arch": (lambda e: {**e, "arch": "x86"}, "arch"),
    "arch a number": (lambda e: {**e, "arch": 80}, "arch"),
    "log a number": (lambda e: {**e, "log": 0}, "log"),
    "compile_seconds a string": (lambda e: {**e, "compile_seconds": "0.1"}, "compile_seconds"),
    "compile_seconds negative": (lambda e: {**e, "compile_seconds": -1.0}, "compile_seconds"),
    "lowered_names a list": (lambda e: {**e, "lowered_names": []}, "lowered_names"),
    "lowered name unknown": (lambda e: {**e, "lowered_names": {"f<1>": "_Z1fILi1EEvv"}}, "lowered_names"),
}


@pytest.mark.parametrize("how", sorted(CONTENT_CORRUPTIONS))
def test_entry_with_wrong_content_is_rejected_rebuilt_and_replaced(isolated_cache, how):
    path, good = _valid_entry_text(isolated_cache)
    change, reason = CONTENT_CORRUPTIONS[how]
    bad = json.dumps(change(json.loads(good)))
    with pytest.raises(cache.InvalidEntry, match=reason):
        cache.validate(bad, name_expressions=())
    path.write_text(bad)
    assert cache.load(path.stem, isolated_cache) is None
    compiled, hit = build()
    assert hit is False  # a miss: rebuilt, never served
    assert cache.validate(path.read_text()) == compiled  # replaced by a valid entry
    assert build() == (compiled, True)


def test_a_valid_entry_passes_every_check(isolated_cache):
    path, good = _valid_entry_text(isolated_cache)
    compiled = cache.validate(good, arch="sm_80", name_expressions=())
    entry = json.loads(good)
    assert entry["cubin_blake2b"] == cache.checksum(compiled.cubin)
    assert entry["ptx_blake2b"] == cache.checksum(compiled.ptx)
    assert set(compiled.resources) == {"k"}
    with pytest.raises(cache.InvalidEntry, match="arch"):
        cache.validate(good, arch="sm_90")  # an entry found under another build's key


def test_template_entry_checks_its_name_expressions(isolated_cache):
    source = b"template <int V> __global__ void t(float* p) { p[0] = V; }\n"
    compiled, _ = cache.build(filename="t.cu", source=source, arch="sm_80", name_expressions=("t<1>",))
    (path,) = entries(isolated_cache)
    assert cache.validate(path.read_text(), name_expressions=("t<1>",)) == compiled
    with pytest.raises(cache.InvalidEntry, match="lowered_names"):
        cache.validate(path.read_text(), name_expressions=("t<2>",))


def cli(*argv, cache_dir, **env):
    """``python -m gemm_driver ...`` in a process of its own, with this cache directory."""
    environ = {**os.environ, "PYTHONPATH": str(REPO), "GEMM_DRIVER_CACHE_DIR": str(cache_dir), **env}
    environ.pop("GEMM_DRIVER_NO_CACHE", None)
    return subprocess.run([sys.executable, "-m", "gemm_driver", *argv], capture_output=True, text=True,
                          env=environ, cwd=REPO, timeout=300)


def _corrupt_the_only_entry(directory: Path, how: str) -> None:
    (path,) = entries(directory)
    path.write_text(json.dumps(CONTENT_CORRUPTIONS[how][0](json.loads(path.read_text()))))


@pytest.mark.parametrize("how", ["empty resources", "cubin not ELF, checksum right", "cubin checksum wrong"])
def test_cli_heals_a_bad_entry_for_compile_and_sass(tmp_path, how):
    """The reported failure: such an entry made `compile` crash and the SASS view fail on every run."""
    first = cli("compile", "naive", "--arch", "sm_80", "--json", cache_dir=tmp_path)
    assert first.returncode == 0, first.stderr
    _corrupt_the_only_entry(tmp_path, how)
    healed = cli("compile", "naive", "--arch", "sm_80", "--json", cache_dir=tmp_path)
    assert healed.returncode == 0 and healed.stderr == ""
    assert json.loads(healed.stdout)[0]["cache_hit"] is False
    again = cli("compile", "naive", "--arch", "sm_80", "--json", cache_dir=tmp_path)
    assert json.loads(again.stdout)[0]["cache_hit"] is True
    _corrupt_the_only_entry(tmp_path, how)
    sass = cli("inspect", "sass", "naive", "--arch", "sm_80", cache_dir=tmp_path)
    assert sass.returncode == 0 and sass.stderr == "" and "FFMA" in sass.stdout
    cache.validate((entries(tmp_path)[0]).read_text())


# --- concurrent writers -----------------------------------------------------------------
def test_processes_compiling_the_same_kernel_into_an_empty_cache_all_succeed(tmp_path):
    directory = tmp_path / "cache"  # does not exist yet: every process also races to make it
    env = {**os.environ, "PYTHONPATH": str(REPO), "GEMM_DRIVER_CACHE_DIR": str(directory)}
    env.pop("GEMM_DRIVER_NO_CACHE", None)
    argv = [sys.executable, "-m", "gemm_driver", "compile", "naive", "--arch", "sm_80", "--json"]
    racers = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
              for _ in range(3)]
    outcomes = [(p.wait(timeout=300), *p.communicate()) for p in racers]
    for code, out, err in outcomes:
        assert code == 0 and err == "", err
        assert json.loads(out)[0]["registers"] > 0
    (entry,) = [p for p in directory.iterdir()]  # one entry, no temp file left behind
    assert entry.suffix == ".json"
    cache.validate(entry.read_text(), arch="sm_80")


def _build_at_the_barrier(barrier, directory: str) -> bool:
    os.environ["GEMM_DRIVER_CACHE_DIR"] = directory
    os.environ.pop("GEMM_DRIVER_NO_CACHE", None)
    barrier.wait(timeout=120)  # every process starts its build at the same moment
    compiled, _ = cache.build(filename="k.cu", source=SOURCE, arch="sm_80")
    return compiled.resources["k"].registers > 0


def test_concurrent_builds_started_together_write_one_valid_entry(tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # fresh interpreters, as separate runs would be
    workers = 3
    barrier = ctx.Manager().Barrier(workers)
    with ctx.Pool(workers) as pool:
        assert pool.starmap(_build_at_the_barrier, [(barrier, str(tmp_path / "c"))] * workers) == [True] * workers
    (entry,) = list((tmp_path / "c").iterdir())
    cache.validate(entry.read_text())


# --- an unusable cache directory: one warning, caching off, `info` says so ----------------
def _regular_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    return path


UNUSABLE = {
    "a regular file": _regular_file,
    "under a regular file": lambda tmp_path: _regular_file(tmp_path) / "cache",
    "under /proc": lambda tmp_path: Path("/proc/gemm_driver_cache_test"),
}


@pytest.mark.parametrize("what", sorted(UNUSABLE))
def test_unusable_cache_dir_turns_caching_off_with_one_warning(tmp_path, what):
    if what == "under /proc" and not Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    target = UNUSABLE[what](tmp_path)
    # two kernels: two builds in one process, still one warning line
    result = cli("compile", "naive", "smem_tiled", "--arch", "sm_80", "--json", cache_dir=target)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gemm-driver: warning: compile cache off:"), result.stderr
    assert str(target) in lines[0] and "Traceback" not in result.stderr
    assert [row["cache_hit"] for row in json.loads(result.stdout)] == [False, False]
    info = cli("info", "--json", cache_dir=target)
    assert info.returncode == 0 and info.stderr == ""  # info reports it instead of warning
    assert json.loads(info.stdout)["cache_dir"].startswith("off: ") and str(target) in info.stdout
    text = cli("info", cache_dir=target)
    assert any(line.startswith("cache_dir: off: ") for line in text.stdout.splitlines())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories anyway")
def test_read_only_cache_dir_turns_caching_off(tmp_path):
    target = tmp_path / "read-only"
    target.mkdir()
    target.chmod(0o500)
    try:
        result = cli("compile", "naive", "--arch", "sm_80", cache_dir=target)
        assert result.returncode == 0
        assert len(result.stderr.splitlines()) == 1 and "compile cache off" in result.stderr
        assert list(target.iterdir()) == []
    finally:
        target.chmod(0o700)


def test_status_in_process(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GEMM_DRIVER_NO_CACHE", raising=False)
    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", str(tmp_path / "fine"))
    assert cache.status() == (tmp_path / "fine", "")
    monkeypatch.setenv("GEMM_DRIVER_NO_CACHE", "1")
    assert cache.status() == (None, cache.NO_CACHE_REASON)
    monkeypatch.delenv("GEMM_DRIVER_NO_CACHE")
    # a directory that refuses writes (read-only mount, or permissions for a non-root user)
    refusing = tmp_path / "refusing"
    refusing.mkdir()
    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", str(refusing))
    real_mkstemp = cache.tempfile.mkstemp

    def read_only(*args, **kw):
        if Path(kw.get("dir", "")) == refusing:
            raise OSError(30, "Read-only file system")
        return real_mkstemp(*args, **kw)

    monkeypatch.setattr(cache.tempfile, "mkstemp", read_only)
    directory, why = cache.status()
    assert directory is None and "Read-only file system" in why and str(refusing) in why
    assert capsys.readouterr().err == ""  # status() itself never prints
    build()
    build()
    assert capsys.readouterr().err.count("compile cache off") == 1
    assert list(refusing.iterdir()) == []
