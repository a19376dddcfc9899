"""Tensor maps for TMA (gemm_driver.cuda.tensor_map).

CPU: every rule the encoder checks is refused with a one-line ValueError naming it, before the
driver is called; the 128-byte kernel argument. GPU (marked): a real encode, and a TMA copy of
one box through cu/hopper/tma_copy_probe.cu compared with the box computed on the host, plain
and with the 128-byte swizzle the Hopper kernels rely on, partly outside the matrix (zero fill).
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import numpy as np
import pytest

from gemm_driver.cuda import tensor_map as tm

ALIGNED = 0x7F0000000000  # a 16-byte aligned device-looking address


def encode_args(**over):
    args = dict(address=ALIGNED, dtype="bf16", rows=100, cols=64, ld=64, box_rows=128, box_cols=64, swizzle=128)
    args.update(over)
    return args


@pytest.mark.parametrize(
    "over, rule",
    [
        (dict(address=ALIGNED + 2), "global address 16-byte aligned"),
        (dict(ld=4099, cols=4099), "row stride a multiple of 16 bytes"),
        (dict(ld=60), "smaller than the row length"),
        (dict(rows=0), "tensor dimension in [1, 2^32]"),
        (dict(box_rows=257), "box dimension in [1, 256]"),
        (dict(box_cols=0), "box dimension in [1, 256]"),
        (dict(box_cols=4), "inner extent a multiple of 16 bytes"),
        (dict(box_cols=128, ld=128, cols=128), "128-byte swizzle needs the box's inner extent at most 128 bytes"),
        (dict(swizzle=16), "swizzle must be one of"),
        (dict(dtype="fp64"), "element type 'fp64'"),
        (dict(dtype="tf32", ld=4098, cols=4098, box_cols=32), "row stride a multiple of 16 bytes"),
    ],
)
def test_broken_rules_are_named_before_the_driver(over, rule):
    with pytest.raises(ValueError, match=rule.replace("[", r"\[").replace("]", r"\]").replace("^", r"\^")) as err:
        tm.encode_tiled_2d(**encode_args(**over))
    assert "\n" not in str(err.value)


def test_valid_layouts_pass_validation():
    for dtype, box_cols in (("bf16", 64), ("fp16", 64), ("tf32", 32), ("fp32", 32)):
        tm.validate_tiled_2d(ALIGNED, dtype, 4096, 4096, 4096, 128, box_cols, 128)
    tm.validate_tiled_2d(ALIGNED, "bf16", 1, 1, 8, 1, 8, 0)  # a 1 x 1 matrix: all but one element is fill


def test_layout_problem_says_when_to_pack():
    assert tm.tma_layout_problem(ALIGNED, 4096, "bf16") is None
    assert "multiple of 8 elements" in tm.tma_layout_problem(ALIGNED, 4099, "bf16")
    assert "multiple of 4 elements" in tm.tma_layout_problem(ALIGNED, 4099, "tf32")
    assert "2 bytes past" in tm.tma_layout_problem(ALIGNED + 2, 4096, "fp16")


def test_kernel_param_is_the_128_bytes():
    data = bytes(range(128))
    param = tm.as_kernel_param(data)
    assert ctypes.sizeof(param) == 128
    assert ctypes.string_at(ctypes.addressof(param), 128) == data
    with pytest.raises(ValueError, match="128 bytes"):
        tm.as_kernel_param(data[:64])


def test_opaque_bytes_packs_sixteen_words_little_endian():
    class Fake:
        opaque = list(range(1, 17))

    assert tm.opaque_bytes(Fake()) == struct.pack("<16Q", *range(1, 17))


# ---------------------------------------------------------------- GPU

HOPPER = Path(__file__).resolve().parent.parent / "cu" / "hopper"


def _probe_kernel():
    from gemm_driver.cuda.driver import Device, Module
    from gemm_driver.cuda.nvrtc import compile_cuda

    if Device.get(0).compute_capability != (9, 0):
        pytest.skip("the probe is built for sm_90a, which runs on Hopper (compute capability 9.0) only")
    source = (HOPPER / "tma_copy_probe.cu").read_bytes()
    headers = {"hopper_common.cuh": (HOPPER / "hopper_common.cuh").read_bytes()}
    built = compile_cuda(source, "tma_copy_probe.cu", "sm_90a", headers=headers, options=("--std=c++17",))
    return Module(built.cubin, name="tma_copy_probe")


def _copy_box(module, map_bytes, c0, c1, box_bytes):
    from cuda.bindings import driver

    from gemm_driver.cuda.driver import DeviceBuffer, Stream
    from gemm_driver.cuda.errors import check

    func = check(driver.cuModuleGetFunction(module.handle, b"tma_copy_probe"), "cuModuleGetFunction")
    out = DeviceBuffer(box_bytes)
    args = [tm.as_kernel_param(map_bytes), ctypes.c_int32(c0), ctypes.c_int32(c1), ctypes.c_int32(box_bytes),
            ctypes.c_uint64(out.ptr)]
    pointers = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    with Stream() as stream:
        check(driver.cuLaunchKernel(func, 1, 1, 1, 128, 1, 1, 0, stream.handle, ctypes.addressof(pointers), 0),
              "cuLaunchKernel(tma_copy_probe)")
        stream.synchronize()
    return out.download(np.empty(box_bytes, np.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", [0, 128])
def test_tma_box_matches_host_box(swizzle):
    from gemm_driver.cuda.driver import Context, DeviceBuffer

    with Context(0):
        module = _probe_kernel()
        rows, cols, ld = 100, 37, 40  # fp32: 160-byte rows
        rng = np.random.default_rng()
        matrix = rng.standard_normal((rows, ld)).astype(np.float32)
        buf = DeviceBuffer.from_array(matrix)
        box_rows, box_cols = 16, 32  # 128-byte box rows
        c0, c1 = 16, 90  # columns 16..47 (37.. are outside), rows 90..105 (100.. are outside)
        data = tm.encode_tiled_2d(buf.ptr, "fp32", rows, cols, ld, box_rows, box_cols, swizzle)
        assert len(data) == 128 and any(data)
        got = _copy_box(module, data, c0, c1, box_rows * box_cols * 4).view(np.float32).reshape(box_rows, box_cols)
        box = np.zeros((box_rows, box_cols), np.float32)
        inside = matrix[c1:rows, c0:cols]
        box[: inside.shape[0], : inside.shape[1]] = inside
        if swizzle == 128:  # 16-byte chunk j of row r lands at chunk j ^ (r % 8)
            expected = np.empty_like(box)
            for r in range(box_rows):
                for j in range(8):
                    expected[r, 4 * (j ^ (r % 8)) : 4 * (j ^ (r % 8)) + 4] = box[r, 4 * j : 4 * j + 4]
        else:
            expected = box
        np.testing.assert_array_equal(got, expected)
        buf.close()
