"""2-byte and batched operands without a GPU: layout, guard band and NaN poison for BF16/FP16
A and B, stacked batches, the batched reference and the batched CPU GEMM.

DeviceBuffer is replaced by a byte-exact host stand-in, as in test_operands_cpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemm_driver import operands, precision
from gemm_driver.kernels.providers import host_gemm
from gemm_driver.session import check_operands
from gemm_driver import kernels
from gemm_driver.operands import (GUARD_BITS_16, POISON_BITS, POISON_BITS_16, DeviceMatrix, random_operands,
                                  upload_operands)
from gemm_driver.problem import GemmProblem
from gemm_driver.verify import check, reference

BASE = 0x7F0000000000


class HostBuffer:
    def __init__(self, nbytes: int):
        assert nbytes > 0 and nbytes % 4 == 0, nbytes
        self.nbytes, self.ptr = nbytes, BASE
        self.memory = np.zeros(nbytes, dtype=np.uint8)

    def upload(self, array, offset=0, stream=None):
        assert offset + array.nbytes <= self.nbytes
        self.memory[offset:offset + array.nbytes] = array.view(np.uint8).ravel()

    def download(self, array, offset=0, stream=None):
        array.view(np.uint8).ravel()[:] = self.memory[offset:offset + array.nbytes]
        return array

    def close(self):
        pass

    def store16(self, address: int, bits: int):
        """What a stray 2-byte store does."""
        self.memory[address - self.ptr:address - self.ptr + 2] = np.array([bits], np.uint16).view(np.uint8)


@pytest.fixture(autouse=True)
def host_buffers(monkeypatch):
    monkeypatch.setattr(operands, "DeviceBuffer", HostBuffer)


def test_sixteen_bit_patterns_are_nans_in_both_formats():
    for bits in (POISON_BITS_16, GUARD_BITS_16):
        assert np.isnan(precision.bf16_to_float32(np.array([bits]))[0])
        assert np.isnan(precision.fp16_to_float32(np.array([bits]))[0])
    assert np.isnan(precision.bf16_to_float32(np.array([POISON_BITS >> 16], np.uint16))[0])


@pytest.mark.parametrize("rows, cols, ld, guard, misalign", [(5, 7, None, 1, 0), (5, 7, 9, 2, 3), (3, 1, 2, 1, 1)])
def test_two_byte_layout(rows, cols, ld, guard, misalign):
    m = DeviceMatrix(rows, cols, ld=ld, guard=guard, misalign=misalign, itemsize=2)
    assert m.ptr - BASE == 2 * m.offset
    assert (m.ptr - 2 * misalign) % 16 == 0, "without misalignment the first element is 16-byte aligned"
    assert m.buffer.nbytes >= 2 * m.size and m.buffer.nbytes % 4 == 0


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_two_byte_fill_keeps_values_and_guard(dtype):
    values = precision.representable(np.random.default_rng(1).uniform(-1, 1, (4, 5)).astype(np.float32), dtype)
    m = DeviceMatrix(4, 5, ld=7, guard=1, misalign=1, itemsize=2)
    m.fill(precision.to_storage(values, dtype))
    bits, changed = m.read()
    assert bits.dtype == np.uint16 and changed == 0
    back = precision.bf16_to_float32(bits) if dtype == "bf16" else precision.fp16_to_float32(bits)
    assert np.array_equal(back, values), "2-byte upload is exact for representable values"
    image = m.buffer.download(np.empty(m.buffer.nbytes // 2, np.uint16))[: m.size]
    outside = np.ones(m.size, bool)
    m.window(outside)[...] = False
    assert np.all(image[outside] == GUARD_BITS_16)
    # a stray 2-byte store into the padding of row 0 is counted
    m.buffer.store16(m.ptr + 2 * 5, 0x3C00)
    assert m.read()[1] == 1


def test_two_byte_fill_refuses_float32_values():
    m = DeviceMatrix(2, 2, itemsize=2)
    with pytest.raises(ValueError, match="uint16 bit patterns"):
        m.fill(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="element size 8"):
        DeviceMatrix(2, 2, itemsize=8)


@pytest.mark.parametrize("dtype", precision.ALL_NAMES)  # fp8's scaled operands: tests/test_fp8.py
def test_upload_operands_per_precision(dtype):
    p = GemmProblem(6, 5, 4, 1.0, 0.0)
    a, b, c = random_operands(p, np.random.default_rng(2), dtype)
    assert c is None and a.dtype == np.float32
    assert np.array_equal(precision.representable(a, dtype), a), "host operands are already representable"
    dev_a, dev_b, dev_c = upload_operands(p, a, b, c, guard=1, misalign=(1, 3, 1), precision=dtype)
    size = precision.get(dtype).itemsize
    assert (dev_a.itemsize, dev_b.itemsize, dev_c.itemsize) == (size, size, 4)
    out, changed = dev_c.read()
    assert np.all(np.isnan(out)) and changed == 0, "C is FP32 and NaN-poisoned in every precision"
    # A's surroundings are the quiet NaN of its element size: a read outside A poisons C
    image = dev_a.buffer.download(np.empty(dev_a.buffer.nbytes // size, np.uint16 if size == 2 else np.uint32))
    assert image[dev_a.offset - 1] == (POISON_BITS_16 if size == 2 else POISON_BITS)
    check_operands(kernels.get(precision.get(dtype).baseline), p, dev_a, dev_b)


def test_operands_of_another_precision_are_refused():
    p = GemmProblem(4, 4, 4)
    a, b, _ = random_operands(p, np.random.default_rng(0), "bf16")
    dev_a, dev_b, _ = upload_operands(p, a, b, None, precision="bf16")
    with pytest.raises(ValueError, match="cublas takes fp32 operands"):
        check_operands(kernels.get("cublas"), p, dev_a, dev_b)
    batched = GemmProblem(4, 4, 4, batch=2)
    a, b, _ = random_operands(batched, np.random.default_rng(0))
    dev_a, dev_b, _ = upload_operands(batched, a, b, None)
    with pytest.raises(ValueError, match="naive computes one GEMM per launch; batched shapes run on cublas_batched"):
        check_operands(kernels.get("naive"), batched, dev_a, dev_b)
    check_operands(kernels.get("cublas_batched"), batched, dev_a, dev_b)


def test_batched_operands_are_stacked_and_the_reference_is_per_matrix():
    p = GemmProblem(3, 4, 5, 0.5, -1.0, batch=3)
    a, b, c = random_operands(p, np.random.default_rng(4))
    assert a.shape == (9, 5) and b.shape == (15, 4) and c.shape == (9, 4)
    ref = reference(p, a, b, c)
    for i in range(3):
        ai, bi, ci = a[3 * i:3 * i + 3], b[5 * i:5 * i + 5], c[3 * i:3 * i + 3]
        expected = 0.5 * ai.astype(np.float64) @ bi.astype(np.float64) - ci
        assert np.allclose(ref.value[3 * i:3 * i + 3], expected, rtol=1e-12, atol=1e-12)
    out = host_gemm(p, a, b, c)
    assert out.shape == (9, 4) and check(p, out, ref).ok
    # a stacked result with matrices swapped is caught
    assert not check(p, np.concatenate([out[3:6], out[:3], out[6:]]), ref).ok
    dev = upload_operands(p, a, b, c, guard=1)
    assert (dev[0].rows, dev[1].rows, dev[2].rows) == (9, 15, 9)


def test_batched_problem_counts_and_labels():
    p = GemmProblem(2, 3, 4, batch=5)
    assert p.flops == 2 * 2 * 3 * 4 * 5 and p.label == "5x2x3x4"
    assert GemmProblem(2, 3, 4).label == "2x3x4"
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        GemmProblem(2, 3, 4, batch=0)
    with pytest.raises(ValueError, match="A \\(M x K\\) has"):
        GemmProblem(2**16, 1, 2**15, batch=2)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_rounding_in_place_gives_the_values_representable_gives(dtype):
    """Chunk by chunk, in place, bit for bit what the 16-bit copies give: a draw longer than a
    chunk and not a multiple of one, exact ties either way, subnormals and overflow."""
    rng = np.random.default_rng(3)
    drawn = rng.standard_normal(precision._ROUNDING_CHUNK * 2 + 77).astype(np.float32) * 8
    halfway = np.arange(4096, dtype=np.uint32) << 16 | 0x3F808000  # BF16 ties, odd and even kept bit
    edges = np.array([0.0, -0.0, 1e-8, -3e-6, 6e-5, 65504.0, 65520.0, 7e4, 3.3e38, -3.4e38], dtype=np.float32)
    values = np.concatenate([drawn, halfway.view(np.float32), edges])
    with np.errstate(over="ignore"):
        expected = precision.representable(values, dtype)
        rounded = precision.representable_in_place(values.copy(), dtype)
    assert np.array_equal(rounded.view(np.uint32), expected.view(np.uint32))
    assert precision.representable_in_place(values, "fp32") is values  # FP32 and TF32 store float32 as is


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_uniform_draws_are_in_range_stored_exactly_and_repeat_for_a_seed(dtype):
    x = operands.uniform(np.random.default_rng(5), (300, 700), dtype)
    assert x.dtype == np.float32 and x.shape == (300, 700) and -1.0 <= x.min() and x.max() <= 1.0  # 1: rounded up
    assert np.array_equal(x, precision.representable(x, dtype))  # what the GPU reads, exactly
    assert np.array_equal(x, operands.uniform(np.random.default_rng(5), (300, 700), dtype))
    assert 0.3 < np.abs(x).mean() < 0.7 and len(np.unique(x)) > 1000  # spread, not a constant


def test_uniform_draws_the_same_data_on_any_number_of_threads(monkeypatch):
    """Each chunk from its own stream (one seed drawn from the generator, and the chunk's place):
    the data of a seed does not depend on the threads; chunks differ, and a last short chunk is
    drawn too."""
    monkeypatch.setattr(operands, "DRAW_CHUNK", 1000)  # 211 x 97 = 20 467 values: 21 chunks
    drawn = []
    for threads in (1, 3, 8):
        monkeypatch.setattr(operands, "DRAW_THREADS", threads)
        drawn.append(operands.uniform(np.random.default_rng(9), (211, 97), "bf16"))
    assert all(np.array_equal(drawn[0], x) for x in drawn[1:])
    flat = drawn[0].reshape(-1)
    assert not np.array_equal(flat[:1000], flat[1000:2000]) and 0.3 < np.abs(flat[-467:]).mean() < 0.7
    assert not np.array_equal(drawn[0], operands.uniform(np.random.default_rng(10), (211, 97), "bf16"))
