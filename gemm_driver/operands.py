"""Host data for a GEMM and device matrices with a guard band around them.

A DeviceMatrix sits inside a larger buffer: ``guard`` whole rows before and after it,
plus the padding between ``cols`` and the leading dimension ``ld``. Everything outside
the matrix is filled with a bit pattern that no arithmetic produces, so a stray write
is caught bit-exactly, and since the pattern is a NaN, a stray *read* poisons the result.
The matrix itself is filled with data, or poisoned with NaN when it is output only.

A and B may hold 2-byte elements (BF16/FP16, see precision.py), and so may C and the bias
vector (the problem's ``out_dtype``); 16-bit guard and poison patterns are NaNs in *both*
formats, so the same traps work for either. An operand stored transposed (``trans_a``:
A is K x M, ``trans_b``: B is N x K) is generated, stored and guarded in that stored shape,
with its own leading-dimension padding. A batched problem stores each operand's matrices
stacked one above the other in one DeviceMatrix (matrix i starts ``rows * ld`` elements
after matrix i - 1).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from . import fp8 as _fp8
from . import precision as _precision
from .cuda.driver import DeviceBuffer, Stream
from .problem import GemmProblem, fp8_rule

POISON_BITS = np.uint32(0x7FC00000)  # the canonical quiet NaN: "nobody wrote this element"
GUARD_BITS = np.uint32(0x7FA5A5A5)  # a NaN payload no kernel computes: "nobody may touch this"
# 16-bit versions: 0x7FC0 is a quiet NaN in both BF16 and FP16 (FP16's own 0x7E00 is not
# a NaN read as BF16); 0x7FA5 is a NaN in both, with a payload no kernel computes.
POISON_BITS_16 = np.uint16(0x7FC0)
GUARD_BITS_16 = np.uint16(0x7FA5)
# 0x7F and 0xFF are NaN codes in e4m3fn (its only two) and in e5m2: poison and guard, both NaN.
POISON_BITS_8, GUARD_BITS_8 = np.uint8(0x7F), np.uint8(0xFF)
_BITS = {4: (np.uint32, POISON_BITS, GUARD_BITS), 2: (np.uint16, POISON_BITS_16, GUARD_BITS_16),
         1: (np.uint8, POISON_BITS_8, GUARD_BITS_8)}

# The first element stays 16-byte aligned unless a test asks for misalignment.
ALIGN_BYTES = 16
ALIGN_ELEMENTS = ALIGN_BYTES // 4  # for FP32 elements


def stored_shapes(problem: GemmProblem) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(rows, cols) of A, B and C as stored, one matrix of a batch: A is M x K, or K x M
    when ``trans_a``; B is K x N, or N x K when ``trans_b``; C is M x N."""
    m, n, k = problem.m, problem.n, problem.k
    return (k, m) if problem.trans_a else (m, k), (n, k) if problem.trans_b else (k, n), (m, n)


def random_operands(problem: GemmProblem, rng: np.random.Generator, precision="fp32"):
    """Fresh uniform(-1, 1) A, B and, when beta != 0, C (else None), as float32 arrays in
    their stored shapes (``stored_shapes``).

    A and B hold values the precision stores exactly (BF16/FP16 are rounded here, once),
    and C values the problem's out_dtype stores exactly, so a reference computed from them
    is the reference of what the GPU reads. A batched problem's matrices are stacked: A is
    (batch*M) x K, B (batch*K) x N (their stored shapes when transposed).
    """
    batch, ((ar, ac), (br, bc), (cr, cc)) = problem.batch, stored_shapes(problem)
    a = uniform(rng, (batch * ar, ac), precision)
    b = uniform(rng, (batch * br, bc), precision)
    c = uniform(rng, (batch * cr, cc), problem.out_dtype) if problem.beta != 0 else None
    return a, b, c


def uniform(rng: np.random.Generator, shape, stored_as: str = "fp32") -> np.ndarray:
    """Uniform float32 values in [-1, 1) as ``stored_as`` stores them exactly (rounding may give
    1): drawn as float32, scaled and rounded in place, DRAW_CHUNK values at a time, each chunk
    from its own stream (seeded by one draw from ``rng`` and the chunk's place), on the host's
    cores: the data of a seed is the same whatever the number of threads. The validation set's
    operands are 12 G values: on one thread they took 82 s of a 341 s BF16 validation run on the
    H100's host (results/h100-80gb-hbm3/phases-corpus-validate-bf16.txt, "case"); NumPy's
    generator and ufuncs release the GIL, and the first touch of the pages is spread too."""
    values = np.empty(shape, dtype=np.float32)
    flat, base = values.reshape(-1), int(rng.integers(2**63))

    def draw(start: int) -> None:
        part = flat[start:start + DRAW_CHUNK]
        np.random.default_rng([base, start]).random(out=part, dtype=np.float32)
        part *= 2.0
        part -= 1.0
        _precision.representable_in_place(part, stored_as)

    starts = range(0, flat.size, DRAW_CHUNK)
    if len(starts) <= 1:  # no pool for a small array (or an empty one)
        for start in starts:
            draw(start)
    else:
        with ThreadPoolExecutor(min(len(starts), DRAW_THREADS)) as pool:
            list(pool.map(draw, starts))
    return values


DRAW_CHUNK = 1 << 22  # 16 MB of float32: a thread's share, and the unit a seed's data is cut in
DRAW_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def random_bias(problem: GemmProblem, rng: np.random.Generator) -> np.ndarray | None:
    """The bias vector of an epilogue: N uniform(-1, 1) values the out_dtype stores exactly;
    None without an epilogue (drawn after the operands, so their data does not change)."""
    if not problem.has_bias:
        return None
    return uniform(rng, problem.n, problem.out_dtype)


@dataclass(frozen=True)
class ScaledOperands:
    """FP8 operands of an "nt" problem: codes as stored (A M x K, B N x K, each in the format
    the problem's fp8_types gives it), their FP32
    dequantization scales (fp8.scale_shapes), and the dequantized values the reference reads
    (float64, exact), with C (or None) as in random_operands."""

    codes_a: np.ndarray
    codes_b: np.ndarray
    scales_a: np.ndarray
    scales_b: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray | None


def random_scaled_operands(problem: GemmProblem, rng: np.random.Generator, *, spread: int = 0,
                           offset: int = 0) -> ScaledOperands:
    """Fresh FP8 operands in the problem's scaling mode and formats (fp8_types).

    Each scale group's data is uniform(-1, 1) times 2^e, e drawn in [-spread, spread] per
    group (0: all alike; tiny and huge groups otherwise), and its scale is the group's
    amax over the format's largest value (e4m3 448, e5m2 57344) times 2^offset: offset 0 is
    the usual recipe, a positive offset pushes the stored values into the format's subnormals
    and to zero, a negative one saturates them at its largest value.
    """
    if (why := fp8_rule(problem, "fp8")) is not None:
        raise ValueError(why)
    (ar, ac), (br, bc), (cr, cc) = stored_shapes(problem)
    data = []
    for which, (rows, cols) in enumerate(((ar, ac), (br, bc))):
        fmt = problem.operand_formats[which]
        shape = _fp8.scale_shapes(problem.scaling, ar, br, problem.k)[which]
        row_block = _fp8.row_blocks(problem.scaling)[which]
        exponents = rng.integers(-spread, spread + 1, shape).astype(np.float64)
        x = rng.uniform(-1.0, 1.0, (rows, cols)) * _fp8.expand(2.0**exponents, rows, cols, row_block)
        scales = (_fp8.amax_scales(x, problem.scaling, row_block, which, fmt) * np.float32(2.0**offset)).astype(
            np.float32)
        data.append((*_fp8.quantize(x, scales, row_block, fmt), scales))
    (codes_a, a, scales_a), (codes_b, b, scales_b) = data
    c = uniform(rng, (cr, cc), problem.out_dtype) if problem.beta != 0 else None
    return ScaledOperands(codes_a, codes_b, scales_a, scales_b, a, b, c)


def upload_scales(scaling: str, scales_a: np.ndarray, scales_b: np.ndarray) -> tuple[DeviceMatrix, DeviceMatrix]:
    """A's and B's FP32 scales in the device layout of fp8.device_scales, each in a NaN-guarded
    buffer: a read past them poisons D."""
    matrices = []
    for which, scales in enumerate((scales_a, scales_b)):
        image = _fp8.device_scales(scaling, which, scales)
        matrix = DeviceMatrix(*image.shape, guard=1)
        matrix.fill(image, guard_bits=POISON_BITS)
        matrices.append(matrix)
    return matrices[0], matrices[1]


class DeviceMatrix:
    """A rows x cols matrix of ``itemsize``-byte elements (4: FP32, 2: BF16/FP16),
    row-major with leading dimension ``ld``, guarded."""

    def __init__(self, rows: int, cols: int, *, ld: int | None = None, guard: int = 0, misalign: int = 0,
                 itemsize: int = 4):
        if itemsize not in _BITS:
            raise ValueError(f"element size {itemsize} bytes is not supported; choose 4 (FP32), 2 (BF16/FP16) "
                             "or 1 (FP8 codes)")
        self.rows, self.cols, self.itemsize = rows, cols, itemsize
        self.ld = max(cols, 1) if ld is None else ld
        if self.ld < max(cols, 1):
            raise ValueError(f"leading dimension {self.ld} is smaller than the row length {cols}")
        if rows * self.ld > 2**31 - 1:
            raise ValueError(f"{rows} rows of leading dimension {self.ld} exceed 2^31 - 1 elements")
        align = ALIGN_BYTES // itemsize
        lead = -(-guard * self.ld // align) * align + misalign
        self.offset = lead  # elements before the first one of the matrix
        self.size = lead + rows * self.ld + guard * self.ld  # elements in the whole buffer
        # Whole 4-byte words, so 2-byte matrices of odd size still fill a word-sized buffer.
        self.buffer = DeviceBuffer(-(-max(self.size, 1) * itemsize // 4) * 4)
        self.ptr = self.buffer.ptr + itemsize * lead
        self._image: np.ndarray | None = None
        self._poisoned = False  # whether _image is a poison fill's (surrounded by guard_bits)
        self.guard_bits = None  # the guard pattern of the last fill (None before the first)

    def _body(self, image: np.ndarray) -> np.ndarray:
        """The rows x ld view of a flat buffer-sized array: the matrix and its padding columns."""
        return image[self.offset : self.offset + self.rows * self.ld].reshape(self.rows, self.ld)

    def window(self, image: np.ndarray) -> np.ndarray:
        """The rows x cols view of a flat buffer-sized array."""
        return self._body(image)[:, : self.cols]

    def fill(self, values: np.ndarray | None, *, guard_bits=None, stream: Stream | None = None) -> None:
        """Upload ``values`` (or NaN poison when None) surrounded by ``guard_bits``
        (default: the guard pattern of this element size).

        4-byte matrices take float32 values; 2-byte ones take the 16-bit patterns
        (precision.to_storage), so no rounding happens here unnoticed."""
        bits, poison, guard = _BITS[self.itemsize]
        guard = guard if guard_bits is None else guard_bits
        if values is None and self._poisoned and self.guard_bits == guard:
            image = self._image  # the same poison again (each checked launch of a sweep): no new image
        else:
            image = np.full(max(self.size, 1), guard, dtype=bits)
            body = self.window(image)
            if values is None:
                body[...] = poison
            else:
                if values.shape != (self.rows, self.cols):
                    raise ValueError(f"expected a {self.rows}x{self.cols} array, got shape {values.shape}")
                body[...] = _as_bits(values, self.itemsize)
        self._image, self._poisoned = image, values is None
        self.guard_bits = guard  # what every element outside the matrix holds (device_check.py compares it)
        self.buffer.upload(image, stream=stream)
        if stream is not None:
            stream.synchronize()  # the staging image must outlive the asynchronous copy

    def read(self) -> tuple[np.ndarray, int]:
        """(the matrix as float32, or as 16-bit patterns for 2-byte elements; number of
        guard elements that changed since ``fill``)."""
        bits = _BITS[self.itemsize][0]
        image = self.buffer.download(np.empty(max(self.size, 1), dtype=bits))
        # the window of a fresh image is returned as is where it is contiguous (ld == cols): a copy
        # of D's size per checked launch saved; padded rows are copied out
        window = self.window(image)
        values = window if window.flags.c_contiguous else window.copy()
        values = values.view(np.float32) if self.itemsize == 4 else values
        if self._image is None:
            return values, 0
        return values, self._changed_outside(image)

    def element(self, row: int, col: int) -> np.ndarray:
        """One element as ``read`` gives it (a 1-element array): float32, or its 16-bit pattern."""
        bits = _BITS[self.itemsize][0]
        at = self.itemsize * (self.offset + row * self.ld + col)
        value = self.buffer.download(np.empty(1, dtype=bits), offset=at)
        return value.view(np.float32) if self.itemsize == 4 else value

    def _changed_outside(self, image: np.ndarray) -> int:
        """Elements outside the matrix (the guard rows and alignment lead before it, the guard
        rows after it, the padding between cols and ld) that differ from what ``fill`` wrote,
        compared region by region: a mask of the whole buffer cost a large D's read a few
        passes over memory of its size."""
        end = self.offset + self.rows * self.ld
        changed = np.count_nonzero(image[:self.offset] != self._image[:self.offset])
        changed += np.count_nonzero(image[end:] != self._image[end:])
        if self.ld > self.cols and self.rows:
            changed += np.count_nonzero(self._body(image)[:, self.cols:] != self._body(self._image)[:, self.cols:])
        return int(changed)

    def close(self) -> None:
        self.buffer.close()


def _as_bits(values: np.ndarray, itemsize: int) -> np.ndarray:
    """The bit patterns stored for ``values``: float32 for 4-byte elements; for 2-byte
    ones, 16-bit patterns must be given (uint16/float16), never float32 to round here."""
    if itemsize == 4:
        return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    if itemsize == 1:
        if values.dtype != np.uint8:
            raise ValueError(f"a 1-byte matrix takes uint8 FP8 codes, got {values.dtype}; quantize with "
                             "gemm_driver.fp8.quantize first")
        return np.ascontiguousarray(values)
    if values.dtype not in (np.uint16, np.float16):
        raise ValueError(f"a 2-byte matrix takes uint16 bit patterns or float16, got {values.dtype}; "
                         "round with gemm_driver.precision.to_storage first")
    return np.ascontiguousarray(values).view(np.uint16)


def upload_operands(problem: GemmProblem, a, b, c, *, guard: int = 0, lds=(None, None, None), misalign=(0, 0, 0),
                    precision="fp32"):
    """Device A, B, C for ``problem``; C is NaN-poisoned when it is output only (c is None).

    ``a`` and ``b`` are float32 arrays in their stored shapes (``stored_shapes``) holding
    values of ``precision``'s format (exactly, when they come from random_operands); ``lds``
    are the stored row strides. C is stored in the problem's out_dtype. Batched problems
    stack their matrices (see random_operands). For FP8, ``a`` and ``b`` are the e4m3 codes
    (``ScaledOperands.codes_a``/``codes_b``); their scales go up with ``upload_scales``."""
    lda, ldb, ldc = lds
    p, batch, shapes = _precision.get(precision), problem.batch, stored_shapes(problem)
    dev_a, dev_b = (DeviceMatrix(batch * rows, cols, ld=ld, guard=guard, misalign=off, itemsize=p.itemsize)
                    for (rows, cols), ld, off in zip(shapes[:2], (lda, ldb), misalign[:2]))
    dev_c = DeviceMatrix(batch * problem.m, problem.n, ld=ldc, guard=guard, misalign=misalign[2],
                         itemsize=out_itemsize(problem))
    # A and B's surroundings are quiet NaN: reading outside the matrix shows up in C.
    stored = (lambda x: x) if p.scaled else (lambda x: _precision.to_storage(x, p))  # FP8: codes given
    dev_a.fill(stored(a), guard_bits=_BITS[p.itemsize][1])
    dev_b.fill(stored(b), guard_bits=_BITS[p.itemsize][1])
    fill_output(dev_c, problem, c)
    return dev_a, dev_b, dev_c


def out_itemsize(problem: GemmProblem) -> int:
    """Bytes per element of C, D and the bias: the out_dtype's."""
    return _precision.get(problem.out_dtype).itemsize


def fill_output(matrix: DeviceMatrix, problem: GemmProblem, c: np.ndarray | None, stream: Stream | None = None) -> None:
    """C's values in the out_dtype's storage, or NaN poison when it is output only (None)."""
    matrix.fill(None if c is None else _precision.to_storage(c, problem.out_dtype), stream=stream)


def read_output(matrix: DeviceMatrix, problem: GemmProblem) -> tuple[np.ndarray, int]:
    """(D as float32 values, decoded from the out_dtype's storage; changed guard elements)."""
    stored, changed = matrix.read()
    return _precision.from_storage(stored, problem.out_dtype), changed


def upload_bias(problem: GemmProblem, bias: np.ndarray | None, *, guard: int = 0, misalign: int = 0
                ) -> DeviceMatrix | None:
    """The bias vector (1 x N, out_dtype) in its own guarded buffer: ``guard`` rows of N
    elements of NaN on each side, so a read past either end poisons D; None without one."""
    if bias is None:
        return None
    vector = DeviceMatrix(1, problem.n, guard=guard, misalign=misalign, itemsize=out_itemsize(problem))
    vector.fill(_precision.to_storage(bias.reshape(1, -1), problem.out_dtype), guard_bits=_BITS[vector.itemsize][1])
    return vector
