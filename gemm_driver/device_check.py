"""The verdict on D computed on the GPU, for cases whose D is too large to check on the host.

verify.check reads D back and compares it on the host, element by element, with the float64
reference and bound: in a sweep on four H200s that took 81% of the trials' time, 1.4 s a
trial, about 60 ns an element of D (tools/sweep_phases.py on results/h200/
sweep-swapped-pingpong.jsonl). Here the same comparison runs where D is
(cu/harness/check_output.cu): the reference and the bound are in device memory, computed
there from the reference's products (device_epilogue.py) or uploaded once per case as
float64, and each checked launch brings back six words instead of D.

It is the same check, not a looser one: the same float64 arithmetic per element (D decoded
exactly to float, then |double(got) - expected| <= bound, NaN wrong), the guard band held
to its fill pattern bit for bit, and the same Verification (verify.verdict). Only the sum of
squared errors (the relative error, which decides nothing) is added in another order. A GPU
test holds both checks to the same verdict on correct, wrong, NaN and guard-breaking
outputs of every output type (tests/test_device_check_gpu.py).

``CHECK_ON_DEVICE_ELEMENTS``: from this many elements of D up, PreparedCase checks here.
"""

from __future__ import annotations

import numpy as np

from . import precision as _precision
from .cuda.memory import DeviceBuffer
from .verify import Verification, verdict

SOURCE = "cu/harness/check_output.cu"
ENTRY = "check_output"
SIGNATURE = ("ptr", "long long", "long long", "long long", "long long", "long long", "int", "unsigned",
             "ptr", "ptr", "ptr")
STORAGE = {"fp32": 0, "bf16": 1, "fp16": 2}  # cu/harness/harness.cuh's Storage, by the problem's out_dtype
CHECK_ON_DEVICE_ELEMENTS = 1 << 20  # about 60 ms of the host's check: below, the upload of the reference costs more
THREADS = 256
BLOCKS_PER_SM = 8
NO_WRONG = np.uint64(2**64 - 1)  # tally[2] before any wrong element: no index is this large


def grid_blocks(session, count: int) -> int:
    """Blocks of THREADS for a grid-stride harness kernel over ``count`` elements: enough to
    cover them, at most BLOCKS_PER_SM an SM (each thread then loops), at least one."""
    return max(1, min(BLOCKS_PER_SM * session.device.sm_count, -(-count // THREADS)))


class ReferenceOnDevice:
    """A case's float64 expected values and bound on D in device memory, row-major rows x cols
    (``shape``), each a DeviceBuffer it owns: uploaded from the host's reference (``uploaded``)
    or computed where they are (device_epilogue.py)."""

    def __init__(self, shape: tuple[int, int], expected: DeviceBuffer, bound: DeviceBuffer):
        rows, cols = shape
        if min(expected.nbytes, bound.nbytes) < 8 * rows * cols:
            raise ValueError(f"buffers of {expected.nbytes} and {bound.nbytes} bytes do not hold "
                             f"{rows}x{cols} float64 values")
        self.shape, self.expected, self.bound = (rows, cols), expected, bound

    @classmethod
    def uploaded(cls, expected: np.ndarray, bound: np.ndarray) -> "ReferenceOnDevice":
        """The host's expected values and bound (one 2-D shape; the bound may be broadcast), uploaded once."""
        if expected.shape != bound.shape or expected.ndim != 2:
            raise ValueError(f"reference {expected.shape} and bound {bound.shape} must be one 2-D shape")
        values = DeviceBuffer.from_array(np.ascontiguousarray(expected, dtype=np.float64))
        try:
            return cls(expected.shape, values, DeviceBuffer.from_array(np.ascontiguousarray(bound, dtype=np.float64)))
        except BaseException:
            values.close()
            raise

    def close(self) -> None:
        self.expected.close()
        self.bound.close()

    def __enter__(self) -> "ReferenceOnDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class OutputChecker:
    """check_output.cu on one session's GPU, with its tally words. ``check`` returns the
    Verification of a DeviceMatrix holding D against a ReferenceOnDevice."""

    def __init__(self, session):
        self.kernel = session.harness_kernel(SOURCE, ENTRY, SIGNATURE)
        self.stream = session.stream
        self.session = session
        self.tally = DeviceBuffer(6 * 8)

    def check(self, matrix, out_dtype: str, reference: ReferenceOnDevice, norm: float,
              guard_violations: int = 0) -> Verification:
        """D (``matrix``: C's DeviceMatrix after the launch, elements in ``out_dtype``) against
        ``reference`` (norm: ||reference||_2); ``guard_violations`` found elsewhere are added
        (the bias vector's, read on the host)."""
        rows, cols = reference.shape
        if (matrix.rows, matrix.cols) != (rows, cols):
            raise ValueError(f"output shape {(matrix.rows, matrix.cols)} differs from the reference's {(rows, cols)}")
        if matrix.itemsize != _precision.get(out_dtype).itemsize or out_dtype not in STORAGE:
            raise ValueError(f"a {matrix.itemsize}-byte matrix does not hold {out_dtype} D; "
                             f"D is one of {', '.join(STORAGE)}")
        start = np.zeros(6, np.uint64)
        start[2] = NO_WRONG
        self.tally.upload(start)
        blocks = grid_blocks(self.session, matrix.size)
        args = self.kernel.pack(matrix.buffer.ptr, matrix.size, matrix.offset, rows, cols, matrix.ld,
                                STORAGE[out_dtype], int(matrix.guard_bits), reference.expected.ptr,
                                reference.bound.ptr, self.tally.ptr)
        self.kernel.launch((blocks, 1, 1), (THREADS, 1, 1), args, self.stream)
        self.stream.synchronize()
        words = self.tally.download(np.empty(6, np.uint64))
        wrong, nan, first, _, changed = (int(w) for w in words[:5])
        worst, squares = (float(x) for x in words[[3, 5]].view(np.float64))
        at = None
        if wrong:  # the first wrong element as the host check names it: D's value decoded, and the reference's
            i, j = divmod(first, cols)
            got = _precision.from_storage(matrix.element(i, j), out_dtype)[0]
            expected = reference.expected.download(np.empty(1, np.float64), offset=8 * first)[0]
            at = (i, j, got, expected)
        return verdict(rows * cols, wrong, nan, worst, squares, norm, at, changed + guard_violations)

    def close(self) -> None:
        self.tally.close()
