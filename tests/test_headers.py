"""CUDA system headers for NVRTC (gemm_driver/cuda/headers.py), without a GPU.

The 16-bit kernels include <cuda_bf16.h> / <cuda_fp16.h>, which come with the CUDA runtime
wheel, not with NVRTC's. These tests pin down: the lookup finds them, a missing wheel is a
one-line error naming the package to install, the headers' bytes are part of the cache key,
and a BF16 tensor-core kernel builds for sm_80 and sm_90.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gemm_driver.cuda import cache, headers, nvrtc

BF16_SOURCE = b"""
#include <cuda_bf16.h>
// One m16n8k16 BF16 mma per warp on fragments read from global memory: enough to prove the
// header's types and the tensor-core instruction both build.
extern "C" __global__ void bf16_mma(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
    const unsigned* a32 = reinterpret_cast<const unsigned*>(a);
    const unsigned* b32 = reinterpret_cast<const unsigned*>(b);
    const int lane = threadIdx.x % 32;
    unsigned x0 = a32[lane], x1 = a32[lane + 32], x2 = a32[lane + 64], x3 = a32[lane + 96];
    unsigned y0 = b32[lane], y1 = b32[lane + 32];
    float d0 = __bfloat162float(a[0]), d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(x0), "r"(x1), "r"(x2), "r"(x3), "r"(y0), "r"(y1));
    c[lane * 4 + 0] = d0; c[lane * 4 + 1] = d1; c[lane * 4 + 2] = d2; c[lane * 4 + 3] = d3;
}
"""
PLAIN_SOURCE = b'extern "C" __global__ void plain(float* x) { x[threadIdx.x] *= 2.0f; }\n'


@pytest.fixture
def fresh_lookup():
    """Forget the per-process lookups before and after a test that changes what they see."""
    cached = (headers.include_directories, headers.digest)  # the originals, even if a test patches them
    for function in cached:
        function.cache_clear()
    yield
    for function in cached:
        function.cache_clear()


def test_the_runtime_wheel_holds_the_16bit_headers():
    (directory,) = headers.include_directories()
    names = {p.name for p in Path(directory).iterdir()}
    assert {"cuda_bf16.h", "cuda_fp16.h", "cuda_bf16.hpp", "cuda_fp16.hpp"} <= names


@pytest.mark.parametrize("major, package", [(12, "nvidia-cuda-runtime-cu12"), (13, "nvidia-cuda-runtime")])
def test_missing_wheel_is_one_line_naming_the_package(monkeypatch, fresh_lookup, major, package):
    import cuda.pathfinder

    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_header_directory", lambda libname: None)
    monkeypatch.setattr(headers, "_bindings_major", lambda: major)
    with pytest.raises(headers.HeaderPackageMissingError) as info:
        headers.include_directories()
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith(f"pip install {package}")


def test_a_directory_without_cuda_bf16_counts_as_missing(monkeypatch, fresh_lookup, tmp_path):
    import cuda.pathfinder

    (tmp_path / "cuda_runtime.h").write_text("// an unrelated toolkit layout\n")
    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_header_directory", lambda libname: str(tmp_path))
    with pytest.raises(headers.HeaderPackageMissingError):
        headers.include_directories()


def test_sources_without_system_includes_need_no_package(monkeypatch, fresh_lookup):
    import cuda.pathfinder

    def absent(libname):
        raise AssertionError("the lookup must not run for a source with no <...> include")

    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_header_directory", absent)
    assert headers.include_options(PLAIN_SOURCE) == []
    assert headers.key_for(PLAIN_SOURCE, {"local.cuh": b'#include "other.cuh"\n'}) == ""


def test_a_system_include_in_a_quoted_header_counts():
    assert headers.uses_system_headers(PLAIN_SOURCE, {"common.cuh": b"#pragma once\n  #  include <cuda_fp16.h>\n"})
    assert not headers.uses_system_headers(PLAIN_SOURCE, {"common.cuh": b'// no <system> include here\n'})


def test_digest_covers_every_file_byte(monkeypatch, fresh_lookup, tmp_path):
    (source,) = headers.include_directories()
    copy = tmp_path / "include"
    shutil.copytree(source, copy)
    monkeypatch.setattr(headers, "include_directories", lambda: (str(copy),))
    before = headers.digest()
    headers.digest.cache_clear()
    target = copy / "cuda_fp16.hpp"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 1
    target.write_bytes(bytes(data))
    assert headers.digest() != before


def test_system_header_digest_is_part_of_the_cache_key(isolated_cache, monkeypatch):
    monkeypatch.setattr(headers, "digest", lambda: "digest-one")
    first, hit = cache.build(filename="bf16.cu", source=BF16_SOURCE, arch="sm_80")
    assert not hit
    _, hit = cache.build(filename="bf16.cu", source=BF16_SOURCE, arch="sm_80")
    assert hit
    monkeypatch.setattr(headers, "digest", lambda: "digest-two")
    _, hit = cache.build(filename="bf16.cu", source=BF16_SOURCE, arch="sm_80")
    assert not hit, "new header bytes must rebuild"


def test_plain_sources_keep_their_keys_whatever_the_headers(isolated_cache, monkeypatch):
    monkeypatch.setattr(headers, "digest", lambda: "digest-one")
    _, hit = cache.build(filename="plain.cu", source=PLAIN_SOURCE, arch="sm_80")
    assert not hit
    monkeypatch.setattr(headers, "digest", lambda: "digest-two")
    _, hit = cache.build(filename="plain.cu", source=PLAIN_SOURCE, arch="sm_80")
    assert hit


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_bf16_tensor_core_kernel_builds(arch):
    compiled = nvrtc.compile_cuda(BF16_SOURCE, "bf16.cu", arch)
    resources = compiled.resources["bf16_mma"]
    assert resources.spill_bytes == 0 and resources.stack_bytes == 0
    assert re.search(rb"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16", compiled.ptx)


def test_without_the_include_path_nvrtc_cannot_find_the_header(monkeypatch):
    """The -I option is what makes the build work: take it away and NVRTC fails."""
    monkeypatch.setattr(nvrtc.system_headers, "include_options", lambda source, headers=None: [])
    with pytest.raises(nvrtc.NvrtcError, match="cuda_bf16.h"):
        nvrtc.compile_cuda(BF16_SOURCE, "bf16.cu", "sm_80")
