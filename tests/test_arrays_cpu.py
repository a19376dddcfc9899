"""Device arrays read in place (gemm_driver/arrays.py), checked without a GPU: stand-in objects
that expose ``__cuda_array_interface__`` or ``__dlpack__`` as torch, CuPy, JAX or Numba do.

The array-interface pointer check asks the driver which GPU a pointer is on; here it is
replaced by a stand-in (``on_gpu``). DLPack capsules come from NumPy (host memory, read
through the same ctypes structures as a GPU producer's)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from gemm_driver import arrays
from gemm_driver.arrays import device_array, layout_of, read_dlpack, stream_handle


class CudaArray:
    """A stand-in for a GPU array of another library: the CUDA array interface only."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000, stream=None, version=3):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": version}
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream


class DLPackArray:
    """A stand-in for a DLPack producer on GPU 0 (``device``), backed by a NumPy array; it
    records the stream the consumer asks it to order its work before."""

    def __init__(self, host: np.ndarray, device=(2, 0)):
        self.host, self.device, self.streams = host, device, []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.host.__dlpack__()


@pytest.fixture
def on_gpu(monkeypatch):
    """Every pointer is device memory of GPU 0 (the driver's answer on a real GPU)."""
    monkeypatch.setattr(arrays, "pointer_device", lambda ptr: 0)


def one_line(exc_info) -> str:
    text = str(exc_info.value)
    assert "\n" not in text and text, text
    return text


# --- layouts ---------------------------------------------------------------------------------
@pytest.mark.parametrize("rows, cols, strides, expected", [
    (4, 5, (5, 1), (5, False)),  # contiguous
    (4, 5, (8, 1), (8, False)),  # padded leading dimension
    (4, 5, (1, 4), (4, True)),  # a transposed view of a contiguous 5 x 4
    (4, 5, (1, 7), (7, True)),  # a transposed view of a padded one
    (1, 5, (99, 1), (5, False)),  # one row: its stride does not matter
    (4, 1, (1, 1), (1, False)),  # one column: row-major with ld 1 first
    (4, 1, (3, 17), (3, False)),
    (1, 1, (0, 0), (1, False)),
    (0, 5, (5, 1), (5, False)),
])
def test_layouts_that_are_read_in_place(rows, cols, strides, expected):
    assert layout_of("A", rows, cols, *strides) == expected


@pytest.mark.parametrize("rows, cols, strides", [
    (4, 5, (0, 1)),  # broadcast rows
    (4, 5, (5, 0)),
    (4, 5, (10, 2)),  # every other column
    (4, 5, (-5, 1)),  # flipped rows
    (4, 5, (3, 1)),  # rows overlap
    (4, 5, (1, 3)),  # transposed, columns overlap
])
def test_other_layouts_are_refused_in_one_line_naming_the_operand(rows, cols, strides):
    with pytest.raises(ValueError) as info:
        layout_of("B", rows, cols, *strides)
    text = one_line(info)
    assert text.startswith(f"B has element strides {strides} for shape {rows}x{cols}: allowed are row-major")
    assert "pass a contiguous copy" in text


def test_a_matrix_past_32_bit_indexing_is_refused():
    with pytest.raises(ValueError, match=r"^A spans 2147549183 elements; at most 2147483647"):
        layout_of("A", 32769, 65535, 65536, 1)


# --- the CUDA array interface ----------------------------------------------------------------
@pytest.mark.parametrize("typestr, dtype", [("<f4", "float32"), ("<f2", "float16")])
def test_array_interface_contiguous(on_gpu, typestr, dtype):
    x = CudaArray((3, 7), typestr, ptr=0x1000)
    got = device_array("A", x)
    assert (got.kind, got.ptr, got.rows, got.cols, got.ld, got.trans, got.dtype, got.device) == \
        ("array", 0x1000, 3, 7, 7, False, dtype, 0)
    assert got.obj is x and got.itemsize == arrays.ITEMSIZE[dtype]


def test_array_interface_strides_in_bytes(on_gpu):
    padded = device_array("A", CudaArray((3, 7), "<f2", strides=(2 * 16, 2)))
    assert (padded.ld, padded.trans) == (16, False)
    transposed = device_array("B", CudaArray((7, 3), "<f4", strides=(4, 4 * 9)))
    assert (transposed.rows, transposed.cols, transposed.ld, transposed.trans) == (7, 3, 9, True)
    assert transposed.layout == "transposed (column-major)"


def test_array_interface_keeps_the_producer_stream(on_gpu):
    assert device_array("A", CudaArray((2, 2), stream=5)).producer_stream == 5
    assert device_array("A", CudaArray((2, 2))).producer_stream is None


def test_array_interface_dtype_is_reported_as_is(on_gpu):
    assert device_array("A", CudaArray((2, 2), "<f8")).dtype == "float64"
    assert device_array("A", CudaArray((2, 2), "<i4")).dtype == "typestr '<i4'"


def test_array_interface_odd_byte_strides_are_refused(on_gpu):
    with pytest.raises(ValueError) as info:
        device_array("A", CudaArray((2, 2), "<f4", strides=(10, 4)))
    assert one_line(info) == "A has byte strides (10, 4), not whole 4-byte elements"


def test_array_interface_host_pointer_is_refused(monkeypatch):
    monkeypatch.setattr(arrays, "pointer_device", lambda ptr: None)
    with pytest.raises(ValueError) as info:
        device_array("out", CudaArray((2, 2), ptr=0x1234))
    assert one_line(info) == "out's pointer 0x1234 is not device memory the CUDA driver knows"


def test_three_dimensional_arrays_are_refused(on_gpu):
    with pytest.raises(ValueError) as info:
        device_array("A", CudaArray((2, 3, 4)))
    assert one_line(info) == "A must be 2-D, got 3-D (shape (2, 3, 4))"


# --- DLPack ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, name", [(np.float32, "float32"), (np.float16, "float16"), (np.float64, "float64")])
def test_dlpack_capsule_is_read_like_the_array(dtype, name):
    host = np.arange(12, dtype=dtype).reshape(3, 4)
    view = read_dlpack(host.__dlpack__())
    assert view.ptr == host.ctypes.data and view.shape == (3, 4) and view.dtype == name
    assert view.strides == (4, 1) and view.device_type == 1


def test_dlpack_strides_and_offset_of_views():
    host = np.zeros((6, 8), np.float32)
    view = read_dlpack(host[1:5, 2:7].T.__dlpack__())
    assert view.shape == (5, 4) and view.strides == (1, 8)
    assert view.ptr == host.ctypes.data + 4 * (8 + 2)


def test_dlpack_device_array_asks_for_our_stream():
    x = DLPackArray(np.zeros((3, 5), np.float16))
    got = device_array("A", x, stream=0)
    assert (got.kind, got.rows, got.cols, got.ld, got.trans, got.dtype, got.device) == \
        ("array", 3, 5, 5, False, "float16", 0)
    device_array("A", x, stream=0x55)
    assert x.streams == [1, 0x55]  # 0 (our legacy default stream) is spelled 1 in DLPack


def test_dlpack_on_the_cpu_is_refused():
    with pytest.raises(ValueError) as info:
        device_array("B", DLPackArray(np.zeros((2, 2), np.float32), device=(1, 0)))
    assert one_line(info) == "B is on DLPack device type 1 (1 is the CPU); a device array must be on a CUDA GPU"


def test_array_interface_with_an_unknown_type_falls_back_to_dlpack(on_gpu):
    """BF16 has no array-interface type string: a producer with both is read through DLPack."""
    class Both(DLPackArray):
        __cuda_array_interface__ = {"shape": (3, 5), "typestr": "<V2", "data": (1, False), "version": 3}

    got = device_array("A", Both(np.zeros((3, 5), np.float16)))
    assert got.dtype == "float16" and got.ptr != 1


# --- what is not a device array ------------------------------------------------------------------
def test_numpy_and_other_objects_are_refused_in_one_line():
    with pytest.raises(TypeError) as info:
        device_array("A", np.zeros((2, 2), np.float32))
    assert one_line(info).startswith("A is a NumPy array (host memory); this call takes device arrays")
    with pytest.raises(TypeError) as info:
        device_array("B", [[1.0]])
    assert one_line(info) == ("B must be a NumPy array or a device array with __cuda_array_interface__ or "
                              "__dlpack__ (torch, CuPy, JAX, Numba), got list")


def test_kind_of():
    assert arrays.kind_of(np.zeros(1)) == "numpy"
    assert arrays.kind_of(CudaArray((1, 1))) == "array"
    assert arrays.kind_of(DLPackArray(np.zeros((1, 1)))) == "array"
    assert arrays.kind_of(3.0) == "unknown"


def test_generic_arrays_need_out(on_gpu):
    like = device_array("A", CudaArray((4, 3)))
    with pytest.raises(TypeError) as info:
        arrays.allocate(like, 4, 5, trans=False, stream=0)
    assert one_line(info) == ("out= is needed: results are allocated for torch and CuPy arrays only, and A is a "
                              "CudaArray; pass a float32 4x5 device array as out=")


# --- streams ---------------------------------------------------------------------------------------
class ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0xABC)


class TorchLikeStream:
    cuda_stream = 0x111


class CupyLikeStream:
    ptr = 0x222


class NumbaLikeStream:
    handle = ctypes.c_void_p(0x333)


@pytest.mark.parametrize("stream, raw", [
    (0, 0), (0x7F00, 0x7F00), (ProtocolStream(), 0xABC), (TorchLikeStream(), 0x111), (CupyLikeStream(), 0x222),
    (NumbaLikeStream(), 0x333),
])
def test_stream_arguments(stream, raw):
    assert stream_handle(stream) == raw


def test_stream_default_is_the_legacy_stream_for_generic_arrays(on_gpu):
    assert stream_handle(None) == 0
    assert stream_handle(None, device_array("A", CudaArray((1, 1)))) == 0


@pytest.mark.parametrize("bad, error", [
    ("s", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError),
])
def test_bad_stream_arguments_are_one_line(bad, error):
    with pytest.raises(error) as info:
        stream_handle(bad)
    assert "stream must be a CUDA stream handle" in one_line(info)
