"""DeviceMatrix's layout and guard logic, and kernel argument packing, without a GPU.

DeviceBuffer is replaced by a host-memory stand-in with the same upload/download
interface, so the window arithmetic, poisoning and guard-band accounting that every GPU
verification relies on are checked here bit for bit.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from gemm_driver import operands
from gemm_driver.cuda.driver import C_TYPES, PackedArgs
from gemm_driver.operands import ALIGN_ELEMENTS, GUARD_BITS, POISON_BITS, DeviceMatrix, upload_operands
from gemm_driver.problem import GemmProblem

BASE = 0x7F0000000000  # a 256-byte aligned fake device address, as cuMemAlloc returns


class HostBuffer:
    """Stands in for DeviceBuffer: same interface, memory on the host."""

    def __init__(self, nbytes: int):
        assert nbytes > 0
        self.nbytes = nbytes
        self.memory = np.zeros(nbytes // 4, dtype=np.uint32)
        self.ptr = BASE
        self.closed = False

    def upload(self, array, offset=0, stream=None):
        assert array.nbytes + offset <= self.nbytes
        self.memory.view(np.uint8)[offset:offset + array.nbytes] = array.view(np.uint8).ravel()

    def download(self, array, offset=0, stream=None):
        array.view(np.uint8).ravel()[:] = self.memory.view(np.uint8)[offset:offset + array.nbytes]
        return array

    def close(self):
        self.closed = True

    # what a kernel does: write a float32 at a device address
    def store(self, address: int, value: float):
        index, rem = divmod(address - self.ptr, 4)
        assert rem == 0
        self.memory[index] = np.float32(value).view(np.uint32)


@pytest.fixture(autouse=True)
def host_buffers(monkeypatch):
    monkeypatch.setattr(operands, "DeviceBuffer", HostBuffer)


def element_address(matrix: DeviceMatrix, i: int, j: int) -> int:
    """Where a kernel given (ptr, ld) writes element (i, j)."""
    return matrix.ptr + 4 * (i * matrix.ld + j)


@pytest.mark.parametrize("rows, cols, ld, guard, misalign", [
    (1, 1, None, 0, 0), (5, 7, None, 0, 0), (5, 7, 12, 0, 0), (5, 7, None, 2, 0),
    (5, 7, 9, 2, 3), (3, 1, 2, 1, 1), (0, 4, None, 1, 0), (4, 0, 1, 1, 2),
])
def test_layout(rows, cols, ld, guard, misalign):
    m = DeviceMatrix(rows, cols, ld=ld, guard=guard, misalign=misalign)
    expected_ld = cols if ld is None else ld
    assert m.ld == expected_ld
    assert m.offset >= guard * expected_ld + misalign
    assert (m.offset - misalign) % ALIGN_ELEMENTS == 0
    assert (m.ptr - BASE) == 4 * m.offset
    assert (m.ptr - 4 * misalign) % 16 == 0, "without misalignment the first element is 16-byte aligned"
    # guard rows after the matrix, and the whole thing fits the buffer
    assert m.size == m.offset + rows * expected_ld + guard * expected_ld
    assert m.buffer.nbytes == 4 * max(m.size, 1)
    image = np.arange(max(m.size, 1))
    window = m.window(image)
    assert window.shape == (rows, cols)
    for i in range(rows):
        for j in range(cols):
            assert window[i, j] == m.offset + i * expected_ld + j


def test_zero_columns_default_to_the_blas_minimum_ld():
    m = DeviceMatrix(4, 0)  # e.g. A of a K = 0 problem
    assert m.ld == 1


def test_ld_smaller_than_row_is_refused():
    with pytest.raises(ValueError, match=r"leading dimension 4 is smaller than the row length 5"):
        DeviceMatrix(3, 5, ld=4)


def test_more_than_int32_elements_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(operands, "DeviceBuffer", lambda n: pytest.fail("must not allocate"))
    with pytest.raises(ValueError, match=r"65536 rows of leading dimension 32768 exceed 2\^31 - 1 elements"):
        DeviceMatrix(65536, 32768)


def test_fill_and_read_round_trip_with_guard_and_padding():
    values = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    m = DeviceMatrix(3, 4, ld=6, guard=2, misalign=1)
    m.fill(values)
    out, violations = m.read()
    np.testing.assert_array_equal(out, values)
    assert out.dtype == np.float32 and violations == 0
    outside = np.ones(m.buffer.memory.shape, bool)
    m.window(outside)[...] = False
    assert outside.sum() == m.size - 12
    assert (m.buffer.memory[outside] == GUARD_BITS).all(), "everything around C holds the guard pattern"


def test_fill_none_poisons_with_quiet_nan():
    m = DeviceMatrix(2, 3, guard=1)
    m.fill(None)
    out, violations = m.read()
    assert violations == 0
    assert np.isnan(out).all()
    assert (out.view(np.uint32) == POISON_BITS).all()


@pytest.mark.parametrize("ld", [None, 6])
def test_each_fill_restores_the_poison_and_the_guard_whatever_ran_between(ld):
    # a sweep poisons C before every checked launch; the staging image is made once and sent again
    m = DeviceMatrix(3, 4, ld=ld, guard=1, misalign=1)
    m.fill(None)
    staged = m._image
    for i in range(3):
        for j in range(4):
            m.buffer.store(element_address(m, i, j), i - j)  # a launch writes D
    m.buffer.store(m.ptr - 4, 1.0)  # and strays into the guard
    first, violations = m.read()
    assert violations == 1 and not np.isnan(first).any()
    m.fill(None)
    assert m._image is staged  # the same image, uploaded again
    out, violations = m.read()
    assert violations == 0 and (out.view(np.uint32) == POISON_BITS).all()
    assert not np.isnan(first).any(), "a read's values are its own, not the next read's"
    m.fill(np.full((3, 4), 2.0, np.float32))  # values, then poison again: a new poison image
    m.fill(None)
    assert m._image is not staged
    out, violations = m.read()
    assert violations == 0 and (out.view(np.uint32) == POISON_BITS).all()
    m.fill(None, guard_bits=POISON_BITS)  # another guard pattern: a new image too
    assert m.buffer.memory[m.offset - 1] == POISON_BITS


def test_guard_and_poison_patterns_are_distinct_nans():
    assert GUARD_BITS != POISON_BITS
    for bits in (GUARD_BITS, POISON_BITS):
        assert np.isnan(np.array([bits], np.uint32).view(np.float32)[0])
    # arithmetic on NaN yields the canonical NaN, never the guard payload
    nan = np.array([GUARD_BITS], np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        assert (nan * np.float32(2)).view(np.uint32)[0] != GUARD_BITS


def test_fill_checks_the_shape():
    m = DeviceMatrix(2, 3)
    with pytest.raises(ValueError, match=r"expected a 2x3 array, got shape \(3, 2\)"):
        m.fill(np.zeros((3, 2), np.float32))


@pytest.mark.parametrize("where", ["before", "after", "padding"])
def test_stray_writes_are_counted(where):
    m = DeviceMatrix(3, 4, ld=5, guard=1)
    m.fill(None)
    address = {
        "before": m.ptr - 4,  # element (-1, ld-1): the row above
        "after": element_address(m, 3, 0),  # first element past the last row
        "padding": element_address(m, 1, 4),  # between cols and ld
    }[where]
    m.buffer.store(address, 0.0)
    out, violations = m.read()
    assert violations == 1
    assert np.isnan(out).all()


@pytest.mark.parametrize("rows, cols, ld, guard, misalign", [(3, 4, 5, 1, 2), (3, 4, None, 2, 0), (0, 4, None, 1, 0),
                                                          (4, 0, 1, 1, 2), (2, 3, 7, 0, 1)])
def test_every_element_outside_the_matrix_is_a_violation_and_none_inside(rows, cols, ld, guard, misalign):
    m = DeviceMatrix(rows, cols, ld=ld, guard=guard, misalign=misalign)
    m.fill(None)
    inside = {m.offset + i * m.ld + j for i in range(rows) for j in range(cols)}
    for index in range(m.size):  # a stray write at every element of the buffer
        m.buffer.memory[index] = 0
    out, violations = m.read()
    assert violations == m.size - len(inside)
    assert out.shape == (rows, cols) and (out == 0).all()


def test_writes_inside_the_matrix_are_values_not_violations():
    m = DeviceMatrix(3, 4, ld=5, guard=1, misalign=2)
    m.fill(None)
    for i in range(3):
        for j in range(4):
            m.buffer.store(element_address(m, i, j), 10 * i + j)
    out, violations = m.read()
    assert violations == 0
    np.testing.assert_array_equal(out, np.array([[10 * i + j for j in range(4)] for i in range(3)], np.float32))


def test_upload_operands_layout():
    p = GemmProblem(3, 4, 5)
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 5), np.float32), rng.random((5, 4), np.float32)
    dev_a, dev_b, dev_c = upload_operands(p, a, b, None, guard=1, lds=(7, None, 6), misalign=(1, 2, 3))
    assert (dev_a.rows, dev_a.cols, dev_a.ld) == (3, 5, 7)
    assert (dev_b.rows, dev_b.cols, dev_b.ld) == (5, 4, 4)
    assert (dev_c.rows, dev_c.cols, dev_c.ld) == (3, 4, 6)
    np.testing.assert_array_equal(dev_a.read()[0], a)
    np.testing.assert_array_equal(dev_b.read()[0], b)
    assert np.isnan(dev_c.read()[0]).all(), "C is poisoned when it is output only"
    # A's and B's surroundings are quiet NaN, so a read outside them poisons the result
    for dev in (dev_a, dev_b):
        outside = np.ones(dev.buffer.memory.shape, bool)
        dev.window(outside)[...] = False
        assert (dev.buffer.memory[outside] == POISON_BITS).all()
    for dev in (dev_a, dev_b, dev_c):
        dev.close()
        assert dev.buffer.closed


def test_random_operands():
    p = GemmProblem(3, 4, 5, beta=1.0)
    a, b, c = operands.random_operands(p, np.random.default_rng(1))
    assert (a.shape, b.shape, c.shape) == ((3, 5), (5, 4), (3, 4))
    assert all(x.dtype == np.float32 and (np.abs(x) <= 1).all() for x in (a, b, c))
    assert operands.random_operands(GemmProblem(3, 4, 5), np.random.default_rng(1))[2] is None
    a2, _, _ = operands.random_operands(p, np.random.default_rng(1))
    np.testing.assert_array_equal(a, a2)  # the seed fixes the data


# --- typed kernel arguments (driver.PackedArgs) ------------------------------------------
def unpack(packed: PackedArgs, signature):
    pointers = (ctypes.c_void_p * len(signature)).from_address(packed.address)
    return [C_TYPES[t].from_address(pointers[i]).value for i, t in enumerate(signature)]


def test_packed_args_hold_typed_values():
    signature = ("int", "int", "float", "ptr", "unsigned long long", "double")

    class Holder:
        ptr = 0xDEADBEEF00

    packed = PackedArgs(signature, (7, -3, 0.1, Holder(), 2**63, 1 / 3))
    values = unpack(packed, signature)
    assert values[:2] == [7, -3]
    assert values[2] == pytest.approx(0.1, rel=1e-7) and values[2] != 0.1  # really a 32-bit float
    assert values[3] == 0xDEADBEEF00
    assert values[4] == 2**63
    assert values[5] == 1 / 3


def test_packed_args_refuse_float_for_int_and_wrong_count():
    with pytest.raises(TypeError, match=r"argument of C type int got a float \(1.5\)"):
        PackedArgs(("int",), (1.5,))
    with pytest.raises(TypeError, match=r"argument of C type int got a float"):
        PackedArgs(("int",), (np.float32(2.0),))
    with pytest.raises(TypeError, match=r"kernel takes 2 arguments, 1 given"):
        PackedArgs(("int", "int"), (1,))
    assert unpack(PackedArgs(("int",), (np.int64(5),)), ("int",)) == [5]
