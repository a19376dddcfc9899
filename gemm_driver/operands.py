"""Host data for a GEMM and device matrices with a guard band around them.

A DeviceMatrix sits inside a larger buffer: ``guard`` whole rows before and after it,
plus the padding between ``cols`` and the leading dimension ``ld``. Everything outside
the matrix is filled with a bit pattern that no arithmetic produces, so a stray write
is caught bit-exactly, and since the pattern is a NaN, a stray *read* poisons the result.
The matrix itself is filled with data, or poisoned with NaN when it is output only.
"""

from __future__ import annotations

import numpy as np

from .cuda.driver import DeviceBuffer, Stream
from .problem import GemmProblem

POISON_BITS = np.uint32(0x7FC00000)  # the canonical quiet NaN: "nobody wrote this element"
GUARD_BITS = np.uint32(0x7FA5A5A5)  # a NaN payload no kernel computes: "nobody may touch this"

# The first element stays 16-byte aligned unless a test asks for misalignment.
ALIGN_ELEMENTS = 4


def random_operands(problem: GemmProblem, rng: np.random.Generator):
    """Fresh uniform(-1, 1) float32 A, B and, when beta != 0, C (else None)."""
    a = rng.uniform(-1.0, 1.0, (problem.m, problem.k)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (problem.k, problem.n)).astype(np.float32)
    c = rng.uniform(-1.0, 1.0, (problem.m, problem.n)).astype(np.float32) if problem.beta != 0 else None
    return a, b, c


class DeviceMatrix:
    """A rows x cols float32 matrix, row-major with leading dimension ``ld``, guarded."""

    def __init__(self, rows: int, cols: int, *, ld: int | None = None, guard: int = 0, misalign: int = 0):
        self.rows, self.cols = rows, cols
        self.ld = max(cols, 1) if ld is None else ld
        if self.ld < max(cols, 1):
            raise ValueError(f"leading dimension {self.ld} is smaller than the row length {cols}")
        if rows * self.ld > 2**31 - 1:
            raise ValueError(f"{rows} rows of leading dimension {self.ld} exceed 2^31 - 1 elements")
        lead = -(-guard * self.ld // ALIGN_ELEMENTS) * ALIGN_ELEMENTS + misalign
        self.offset = lead  # elements before the first one of the matrix
        self.size = lead + rows * self.ld + guard * self.ld  # elements in the whole buffer
        self.buffer = DeviceBuffer(max(self.size, 1) * 4)
        self.ptr = self.buffer.ptr + 4 * lead
        self._image: np.ndarray | None = None

    def window(self, image: np.ndarray) -> np.ndarray:
        """The rows x cols view of a flat buffer-sized array."""
        body = image[self.offset : self.offset + self.rows * self.ld]
        return body.reshape(self.rows, self.ld)[:, : self.cols]

    def fill(self, values: np.ndarray | None, *, guard_bits=GUARD_BITS, stream: Stream | None = None) -> None:
        """Upload ``values`` (or NaN poison when None) surrounded by ``guard_bits``."""
        image = np.full(max(self.size, 1), guard_bits, dtype=np.uint32)
        body = self.window(image)
        if values is None:
            body[...] = POISON_BITS
        else:
            if values.shape != (self.rows, self.cols):
                raise ValueError(f"expected a {self.rows}x{self.cols} array, got shape {values.shape}")
            body[...] = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
        self._image = image
        self.buffer.upload(image, stream=stream)
        if stream is not None:
            stream.synchronize()  # the staging image must outlive the asynchronous copy

    def read(self) -> tuple[np.ndarray, int]:
        """(the matrix as float32, number of guard elements that changed since ``fill``)."""
        image = self.buffer.download(np.empty(max(self.size, 1), dtype=np.uint32))
        values = self.window(image).copy().view(np.float32)
        if self._image is None:
            return values, 0
        outside = np.ones(image.shape, dtype=bool)
        self.window(outside)[...] = False
        return values, int(np.count_nonzero(image[outside] != self._image[outside]))

    def close(self) -> None:
        self.buffer.close()


def upload_operands(problem: GemmProblem, a, b, c, *, guard: int = 0, lds=(None, None, None), misalign=(0, 0, 0)):
    """Device A, B, C for ``problem``; C is NaN-poisoned when it is output only (c is None)."""
    lda, ldb, ldc = lds
    dev_a = DeviceMatrix(problem.m, problem.k, ld=lda, guard=guard, misalign=misalign[0])
    dev_b = DeviceMatrix(problem.k, problem.n, ld=ldb, guard=guard, misalign=misalign[1])
    dev_c = DeviceMatrix(problem.m, problem.n, ld=ldc, guard=guard, misalign=misalign[2])
    # A and B's surroundings are quiet NaN: reading outside the matrix shows up in C.
    dev_a.fill(a, guard_bits=POISON_BITS)
    dev_b.fill(b, guard_bits=POISON_BITS)
    dev_c.fill(c)
    return dev_a, dev_b, dev_c
