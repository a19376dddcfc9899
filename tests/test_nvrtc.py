"""NVRTC / nvJitLink builds without a GPU: every registered kernel, on the run's build matrix.

The matrix (tests/build_matrix.py) holds every kernel's default on each arch it runs on and
one configuration of each code path of each family, on one arch, drawn by a seed; the seed is
in the pytest header (GEMM_DRIVER_TEST_SEED replays it) and ``--full-matrix`` (or
GEMM_DRIVER_FULL_MATRIX=1) builds every configuration. The test session's cache is a fresh
temporary directory (conftest.py), so every build checked here was compiled in this run:
here, or by another test that needed the same build (the spill gate of test_inspect_kernels,
test_hopper_specs, test_tensor_specs), whose compile is then not repeated.
"""

from __future__ import annotations

import secrets

import pytest

import build_matrix
from gemm_driver import kernels
from gemm_driver.cuda import nvrtc
from gemm_driver.cuda.errors import NvrtcError
from gemm_driver.kernels.build import build
from gemm_driver.kernels.spec import cc_of
from gemm_driver.kernels.sources import read_source

ARCHS = build_matrix.ARCHS


def assert_whole_elf(cubin: bytes) -> None:
    """The cubin is a complete ELF64 image: its header tables and sections lie inside it.

    (Stripping trailing NUL bytes, as a C-string reader would, cuts the last table short.)
    """
    assert cubin[:5] == b"\x7fELF\x02", "not an ELF64 image"
    field = lambda offset, size: int.from_bytes(cubin[offset:offset + size], "little")
    phoff, phentsize, phnum = field(0x20, 8), field(0x36, 2), field(0x38, 2)
    shoff, shentsize, shnum = field(0x28, 8), field(0x3A, 2), field(0x3C, 2)
    assert shnum > 0 and shentsize == 64
    ends = [phoff + phentsize * phnum, shoff + shentsize * shnum]
    for i in range(shnum):
        header = shoff + i * shentsize
        if field(header + 4, 4) != 8:  # SHT_NOBITS sections take no room in the file
            ends.append(field(header + 0x18, 8) + field(header + 0x20, 8))
    assert max(ends) <= len(cubin), "the cubin is truncated"


BUILDS = build_matrix.selected()


def test_build_matrix_covers_every_kernel_and_both_kinds():
    run = build_matrix.this_run()
    keys = {b.key for b in run}
    for spec in kernels.KERNELS.values():  # every default on every arch it runs on (autotuned's is warptiled's)
        for arch in ARCHS:
            if spec.runs_on(cc_of(nvrtc.parse_arch(arch)[0])):
                assert build_matrix.Build(spec, tuple(spec.resolve().items()), arch).key in keys, (spec.name, arch)
    assert {b.spec.name for b in run} == set(kernels.KERNELS) - {"autotuned"}
    assert {b.spec.kind for b in run} == {"cu", "ptx"}
    assert set(build_matrix.PATHS) == {spec.source for spec in kernels.KERNELS.values()}, \
        "say in build_matrix.PATHS which tunables choose the new family's code"


def test_the_sample_holds_every_code_path_and_draws_the_rest_by_seed():
    everything = build_matrix.universe()
    # the full matrix really is the product: smem_tiled has 2 x 2 tunable values, coalesced 3
    assert sum(b.spec.name == "smem_tiled" for b in everything) == 4 * len(ARCHS)
    assert sum(b.spec.name == "coalesced" for b in everything) == 3 * len(ARCHS)
    assert build_matrix.select(everything, everything=True) == everything
    draws = [build_matrix.select(everything, run_seed=s, everything=False) for s in range(6)]
    assert draws[0] == build_matrix.select(everything, run_seed=0, everything=False)  # replayable
    assert len({tuple(b.key for b in d) for d in draws}) > 1  # and the seed changes the sample
    for drawn in draws:
        assert len({b.key for b in drawn}) == len(drawn) and {b.key for b in drawn} <= {b.key for b in everything}
        for source, path_of in build_matrix.PATHS.items():
            family = [b for b in everything if b.spec.source == source]
            paths = lambda builds: {path_of(b.spec, b.config) for b in builds}  # each on some arch
            picked = [b for b in drawn if b.spec.source == source]
            assert paths(picked) == paths(family), source
            assert len(picked) >= min(len(family), len(paths(family)) + build_matrix.EXTRA_PER_FAMILY), source
        defaults = {(b.spec.name, b.arch) for b in everything if b.config == b.spec.resolve()}
        assert defaults == {(b.spec.name, b.arch) for b in drawn if b.config == b.spec.resolve()}  # every arch
    # the arch a path is built on is drawn too: over the seeds, both archs build a non-default path
    assert {b.arch for d in draws for b in d if b.spec.source == "cu/simt/warptiled.cu" and b.config["SPLITK"] > 1} \
        == set(ARCHS)
    # e.g. double_buffered's cp.async ring and register prefetch, warptiled's split-K and stream-K
    assert {b.config["ASYNC"] for b in draws[0] if b.spec.name == "double_buffered"} == {0, 1}
    assert {(b.config["SPLITK"] > 1, b.config["STREAMK"]) for b in draws[0] if b.spec.source == "cu/simt/warptiled.cu"} \
        == {(False, 0), (True, 0), (False, 1)}


@pytest.mark.parametrize("b", BUILDS)
def test_every_kernel_builds_without_spills(b):
    spec, arch, tunables = b.spec, b.arch, b.config
    result = build_matrix.built(spec, arch, tunables)
    compiled = result.compiled
    assert compiled.arch == spec.build_arch(arch)
    assert_whole_elf(compiled.cubin)
    assert b".entry" in compiled.ptx
    assert result.entry in compiled.resources, f"ptxas -v reported nothing for {result.entry}"
    r = result.resources
    assert 0 < r.registers <= 255
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.spill_bytes == 0
    assert r.stack_bytes == 0, "a kernel using local memory (stack) is a regression"
    assert result.entry.encode() in compiled.cubin
    if spec.name == "smem_tiled":
        tile, pad = tunables["TILE"], tunables["PAD"]
        assert r.shared_bytes == 2 * tile * (tile + pad) * 4
        assert r.barriers >= 1  # __syncthreads, read from the cubin (no log needed)
        assert result.entry.startswith("_Z"), "template entries come back as mangled lowered names"
    else:  # the rest size shared memory at launch (dynamic) or keep a few static words
        assert r.shared_bytes + spec.dynamic_smem(tunables) <= 227 * 1024
    for name, logged in nvrtc.parse_ptxas_log(compiled.log).items():  # where ptxas printed its log
        assert compiled.resources[name].barriers == logged.barriers, name
    if spec.kind == "cu" and "<" in spec.entry:
        expression = spec.name_expression(tunables)
        assert compiled.lowered_names[expression] == result.entry
    # a second build of the same configuration is served by the cache, with equal content
    again = build(spec, arch, tunables)
    assert again.cache_hit is True
    assert again.compiled.cubin == compiled.cubin and again.resources == r


def test_ptx_kernel_assembles_with_nvjitlink():
    spec = kernels.KERNELS["ptx_naive"]
    compiled = nvrtc.assemble_ptx(read_source(spec.source), "naive.ptx", "sm_90")
    assert_whole_elf(compiled.cubin)
    assert compiled.ptx == read_source(spec.source)
    assert compiled.resources[spec.entry].registers > 0
    assert compiled.lowered_names == {}


def test_build_refuses_arch_below_kernel_minimum():
    spec = kernels.KERNELS["naive"]
    with pytest.raises(ValueError, match=r"naive needs sm_75 or newer; cannot build it for sm_70"):
        build(spec, "sm_70")


# --- errors -----------------------------------------------------------------------------
BROKEN = b'extern "C" __global__ void k(float* p) {\n    p[0] = undefined_thing;\n}\n'


def test_compile_error_carries_the_nvrtc_log():
    with pytest.raises(NvrtcError) as info:
        nvrtc.compile_cuda(BROKEN, "broken.cu", "sm_80")
    err = info.value
    assert err.name == "NVRTC_ERROR_COMPILATION"
    assert 'broken.cu(2): error: identifier "undefined_thing" is undefined' in err.log
    assert 'broken.cu(2): error: identifier "undefined_thing" is undefined' in str(err)
    assert "nvrtcCompileProgram(broken.cu, sm_80)" in str(err)


def test_broken_ptx_error_carries_the_ptxas_log():
    ptx = b".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry k() { bogus.instr; }\n"
    with pytest.raises(NvrtcError) as info:
        nvrtc.assemble_ptx(ptx, "bad.ptx", "sm_80")
    assert info.value.name.startswith("NVJITLINK_ERROR")
    assert "bogus" in info.value.log and "bogus" in str(info.value)


def test_headers_are_given_to_nvrtc_from_the_map_not_the_disk():
    source = b'#include "gemm_common.cuh"\nextern "C" __global__ void k() {}\n'
    with pytest.raises(NvrtcError, match="came-from-the-header-map"):
        nvrtc.compile_cuda(source, "k.cu", "sm_80", headers={"gemm_common.cuh": b"#error came-from-the-header-map\n"})
    ok = nvrtc.compile_cuda(source, "k.cu", "sm_80", headers={"gemm_common.cuh": b"#pragma once\n"})
    assert "k" in ok.resources


def test_name_expressions_are_lowered():
    source = b"template <int N> __global__ void t(float* p) { p[0] = N; }\n"
    compiled = nvrtc.compile_cuda(source, "t.cu", "sm_80", name_expressions=["t<3>", "t<7>"])
    assert set(compiled.lowered_names) == {"t<3>", "t<7>"}
    assert all(name.startswith("_Z") for name in compiled.lowered_names.values())
    assert compiled.lowered_names["t<3>"] != compiled.lowered_names["t<7>"]
    assert set(compiled.resources) == set(compiled.lowered_names.values())
    assert compiled.entry("t<3>") == compiled.lowered_names["t<3>"]
    assert compiled.entry("plain_c_name") == "plain_c_name"


@pytest.mark.parametrize("arch", ["sm90", "compute_90", "SM_90", "sm_", "sm_90b", "90", "sm_9O", ""])
def test_malformed_arch_names_the_allowed_form(arch):
    with pytest.raises(ValueError, match=r"not of the form sm_XY or sm_XYa"):
        nvrtc.parse_arch(arch)
    with pytest.raises(ValueError, match=r"sm_XY"):
        nvrtc.compile_cuda(b"", "x.cu", arch)


def test_parse_arch():
    assert nvrtc.parse_arch("sm_90a") == (90, True)
    assert nvrtc.parse_arch("sm_80") == (80, False)
    assert nvrtc.parse_arch("sm_120") == (120, False)


def test_arch_specific_suffix_below_sm_90_is_refused():
    with pytest.raises(ValueError, match=r"sm_80a"):
        nvrtc.check_arch("sm_80a")


def test_unsupported_arch_lists_what_nvrtc_supports():
    assert 99 not in nvrtc.supported_archs()
    with pytest.raises(ValueError, match=r"cannot target sm_99; it supports .*sm_80.*sm_90"):
        nvrtc.compile_cuda(b"", "x.cu", "sm_99")
    with pytest.raises(ValueError, match=r"cannot target sm_99"):
        nvrtc.assemble_ptx(b"", "x.ptx", "sm_99")


def test_versions_are_cuda_12_or_newer():
    assert nvrtc.version() >= (12, 0)
    assert nvrtc.jitlink_version() >= (12, 0)
    assert {80, 90} <= set(nvrtc.supported_archs())


# --- ptxas -v log parsing (samples captured from NVRTC 12.9 and nvJitLink 12.9) ---------
NVRTC_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z16sgemm_smem_tiledILi32ELi0EEviiifPKfiS1_ifPfi' for 'sm_80'
ptxas info    : Function properties for _Z16sgemm_smem_tiledILi32ELi0EEviiifPKfiS1_ifPfi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 8192 bytes smem, 412 bytes cmem[0]
ptxas info    : Compile time = 14.273 ms
ptxas info    : Compiling entry function 'sgemm_naive' for 'sm_80'
ptxas info    : Function properties for sgemm_naive
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 412 bytes cmem[0]
ptxas info    : Compile time = 17.007 ms
"""

NVJITLINK_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'sgemm_naive_ptx' for 'sm_90'
ptxas info    : Function properties for sgemm_naive_ptx
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, used 0 barriers
ptxas info    : Compile time = 11.986 ms
info    : 0 bytes gmem
info    : Function properties for 'sgemm_naive_ptx':
info    : used 28 registers, used 0 barriers, 0 stack, 0 bytes smem, 588 bytes cmem[0], 0 bytes lmem
"""

# nvJitLink's own summary block alone (what its info log holds besides ptxas's lines).
NVJITLINK_SUMMARY_ONLY = """\
info    : 0 bytes gmem
info    : Function properties for 'sgemm_naive_ptx':
info    : used 28 registers, used 0 barriers, 0 stack, 0 bytes smem, 588 bytes cmem[0], 0 bytes lmem
"""


def test_parse_nvrtc_log_two_functions():
    found = nvrtc.parse_ptxas_log(NVRTC_LOG)
    tiled = found["_Z16sgemm_smem_tiledILi32ELi0EEviiifPKfiS1_ifPfi"]
    assert tiled == nvrtc.Resources(registers=32, shared_bytes=8192, stack_bytes=0, spill_store_bytes=0,
                                    spill_load_bytes=0, constant_bytes=412, barriers=1)
    naive = found["sgemm_naive"]
    assert (naive.registers, naive.stack_bytes, naive.spill_store_bytes, naive.spill_load_bytes) == (255, 24, 8, 12)
    assert naive.spill_bytes == 20 and naive.shared_bytes == 0


def test_parse_nvjitlink_log():
    found = nvrtc.parse_ptxas_log(NVJITLINK_LOG)
    assert set(found) == {"sgemm_naive_ptx"}
    assert found["sgemm_naive_ptx"].registers == 28
    assert found["sgemm_naive_ptx"].spill_bytes == 0


def test_nvjitlink_summary_block_is_not_taken_for_ptxas_figures():
    """nvJitLink's own summary counts the 1 KiB reserved shared memory; only ptxas lines count."""
    assert nvrtc.parse_ptxas_log(NVJITLINK_SUMMARY_ONLY) == {}


def test_parse_ignores_noise_and_empty_logs():
    assert nvrtc.parse_ptxas_log("") == {}
    assert nvrtc.parse_ptxas_log("ptxas info    : Used 99 registers\nwarning: something\n") == {}


def _unique_kernel(body: str) -> tuple[str, bytes]:
    """A kernel no compiler cache has seen (NVRTC 13 with a driver caches by content and
    then prints no ptxas log), so the live log is really exercised."""
    name = f"k_{secrets.token_hex(6)}"
    return name, f'extern "C" __global__ void {name}(float* p) {{ {body} }}\n'.encode()


def test_real_logs_parse_to_the_reported_resources():
    """The live compiler output (not just the captured samples) is understood."""
    name, source = _unique_kernel("__shared__ float s[64]; s[threadIdx.x] = 1; __syncthreads(); "
                                  "p[threadIdx.x] = s[63 - threadIdx.x];")
    compiled = nvrtc.compile_cuda(source, "k.cu", "sm_80")
    assert_whole_elf(compiled.cubin)
    assert not compiled.ptx.endswith(b"\x00"), "PTX is text: its C-string NUL is dropped"
    assert f"Function properties for {name}" in compiled.log
    r = compiled.resources[name]
    assert r.shared_bytes == 256 and r.registers > 0 and r.barriers == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cubin_alone_gives_the_figures_ptxas_printed(arch):
    """Without a log (a compiler cache hit), the cubin still yields every size and the barrier
    count; spills are derived (0) only where the stack frame is empty, and unknown (None)
    otherwise."""
    name, source = _unique_kernel("__shared__ float s[300]; float a[64]; a[threadIdx.x & 63] = p[threadIdx.x]; "
                                  "s[threadIdx.x] = a[(threadIdx.x * 7) & 63]; __syncthreads(); "
                                  "p[threadIdx.x] = s[299 - threadIdx.x];")
    compiled = nvrtc.compile_cuda(source, "k.cu", arch)
    from_log = nvrtc.parse_ptxas_log(compiled.log)[name]
    alone = nvrtc.cubin_resources(compiled.cubin, "", arch)[name]
    assert (alone.registers, alone.shared_bytes, alone.stack_bytes, alone.barriers) == (
        from_log.registers, from_log.shared_bytes, from_log.stack_bytes, from_log.barriers)
    assert alone.shared_bytes == 1200 and alone.stack_bytes > 0 and alone.constant_bytes > 0
    assert alone.spill_bytes is None and alone.barriers == 1  # one __syncthreads
    plain = nvrtc.cubin_resources(nvrtc.compile_cuda(_unique_kernel("p[0] = 1;")[1], "k.cu", arch).cubin, "", arch)
    assert [r.spill_bytes for r in plain.values()] == [0]
