"""cuBLAS wrapper tests that need no GPU.

The row-major swap is checked against a NumPy model of reference-BLAS xGEMM (with its
transpose flags, for operands stored transposed), both directly and end to end through the
public calls with a fake library standing in for the CDLL. The real library is loaded too: version, symbol table (checked against the
shipped header when it is there) and errcheck on calls that fail the same way with or
without a GPU.
"""

from __future__ import annotations

import ctypes
import gc
import re
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_driver import precision
from gemm_driver.cuda import cublas
from helpers import FP32_DEFAULT_MATH, sgemm, sgemm_strided_batched
from gemm_driver.cuda.errors import CublasError, GemmDriverError, LibraryNotFoundError


# --- a column-major GEMM simulator (reference BLAS semantics) ------------------------
def colmajor_gemm(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, transa=0, transb=0):
    """C := alpha*op(A)@op(B) + beta*C on flat buffers, X(i, j) living at X[i + j*ldx] and
    op(X) = X, or X^T where trans is CUBLAS_OP_T (1): A then stored k x m, B n x k.

    Checks its arguments like xerbla does, reads only the elements BLAS reads (an index
    past a buffer raises), writes C in place and, like BLAS, never reads C when beta == 0.
    """
    rows_a, rows_b = ("k", k) if transa else ("m", m), ("n", n) if transb else ("k", k)
    assert min(m, n, k) >= 0, "negative size"
    assert lda >= max(1, rows_a[1]), f"BLAS rule lda >= max(1, {rows_a[0]}) broken: lda={lda}, {rows_a[0]}={rows_a[1]}"
    assert ldb >= max(1, rows_b[1]), f"BLAS rule ldb >= max(1, {rows_b[0]}) broken: ldb={ldb}, {rows_b[0]}={rows_b[1]}"
    assert ldc >= max(1, m), f"BLAS rule ldc >= max(1, m) broken: ldc={ldc}, m={m}"
    if m == 0 or n == 0:
        return
    cols = lambda rows, ncols, ld: np.arange(rows)[:, None] + np.arange(ncols)[None, :] * ld
    op_a = a[cols(k, m, lda)].T if transa else a[cols(m, k, lda)]
    op_b = b[cols(n, k, ldb)].T if transb else b[cols(k, n, ldb)]
    ic = cols(m, n, ldc)
    product = alpha * (op_a @ op_b)
    c[ic] = product if beta == 0 else product + beta * c[ic]


def rowmajor(rng, rows, cols, ld):
    """A random rows x cols matrix in a flat row-major buffer; padding is NaN so any read
    of it poisons the result and any write to it is visible."""
    buf = np.full(rows * ld, np.nan)
    mat = rng.standard_normal((rows, cols))
    buf.reshape(rows, ld)[:, :cols] = mat
    return buf, mat


def stored(rng, rows, cols, ld, trans):
    """A random rows x cols matrix, row-major or (trans) stored transposed: its transpose
    row-major, ``ld`` the column stride; returns (buffer, matrix)."""
    if not trans:
        return rowmajor(rng, rows, cols, ld)
    buf, mat_t = rowmajor(rng, cols, rows, ld)
    return buf, mat_t.T


def run_swapped(m, n, k, pad_a, pad_b, pad_c, alpha, beta, seed=0, trans_a=False, trans_b=False):
    """Row-major GEMM done the way the wrapper does it; returns (C buffer, expected, ldc)."""
    rng = np.random.default_rng(seed)
    lda = max(1, m if trans_a else k) + pad_a
    ldb = max(1, k if trans_b else n) + pad_b
    ldc = max(1, n) + pad_c
    a, am = stored(rng, m, k, lda, trans_a)
    b, bm = stored(rng, k, n, ldb, trans_b)
    c, cm0 = rowmajor(rng, m, n, ldc)
    call = cublas.column_major_call(m, n, k, lda, ldb, ldc, trans_a, trans_b)
    first, second = call.operands(a, b)
    colmajor_gemm(call.m, call.n, call.k, alpha, first, call.ld_first,
                  second, call.ld_second, beta, c, call.ldc, call.op_first, call.op_second)
    return c, alpha * am @ bm + beta * cm0, ldc


def assert_rowmajor_result(c, expected, ldc):
    m, n = expected.shape
    view = c.reshape(m, ldc)
    np.testing.assert_allclose(view[:, :n], expected, rtol=1e-12, atol=1e-12)
    assert np.isnan(view[:, n:]).all(), "padding of C was written"


SHAPES = [(1, 1, 1), (1, 7, 3), (7, 1, 3), (5, 3, 1), (3, 5, 7), (17, 13, 11), (2, 9, 64)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("pads", [(0, 0, 0), (3, 1, 2), (1, 5, 0)])
def test_swap_gives_rowmajor_product(m, n, k, pads):
    assert_rowmajor_result(*run_swapped(m, n, k, *pads, alpha=1.0, beta=0.0))


@pytest.mark.parametrize("m,n,k", [(4, 6, 5), (1, 1, 1), (9, 2, 3)])
def test_swap_with_alpha_beta(m, n, k):
    assert_rowmajor_result(*run_swapped(m, n, k, 2, 3, 1, alpha=0.5, beta=-2.0))


@pytest.mark.parametrize("m,n,k", [(0, 3, 2), (3, 0, 2), (3, 2, 0), (0, 0, 0)])
def test_swap_degenerate_sizes(m, n, k):
    assert_rowmajor_result(*run_swapped(m, n, k, 1, 1, 1, alpha=1.0, beta=0.5))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.integers(0, 3),
       st.integers(0, 3), st.integers(0, 3), st.sampled_from([1.0, -0.5]),
       st.sampled_from([0.0, 1.0, 0.25]))
def test_swap_property(m, n, k, pa, pb, pc, alpha, beta):
    assert_rowmajor_result(*run_swapped(m, n, k, pa, pb, pc, alpha, beta, seed=m * 100 + n))


def test_unswapped_call_is_wrong():
    """Passing the row-major arguments straight through computes B@A (square case) or
    breaks a BLAS rule; so the tests above can tell a right swap from a wrong one."""
    rng = np.random.default_rng(1)
    a, am = rowmajor(rng, 4, 4, 4)
    b, bm = rowmajor(rng, 4, 4, 4)
    c = np.zeros(16)
    colmajor_gemm(4, 4, 4, 1.0, a, 4, b, 4, 0.0, c, 4)
    got = c.reshape(4, 4)
    assert not np.allclose(got, am @ bm)
    np.testing.assert_allclose(got, bm @ am, rtol=1e-12)

    a, _ = rowmajor(rng, 5, 2, 2)  # row-major 5x2 has lda=2 < m=5 in column-major terms
    b, _ = rowmajor(rng, 2, 3, 3)
    with pytest.raises(AssertionError, match="lda >= max"):
        colmajor_gemm(5, 3, 2, 1.0, a, 2, b, 3, 0.0, np.zeros(15), 3)


def test_column_major_call_fields():
    call = cublas.column_major_call(3, 5, 7, lda=8, ldb=6, ldc=9)
    assert call == cublas.ColumnMajorGemm(5, 3, 7, "b", 6, "a", 8, 9)
    assert (call.op_first, call.op_second) == (cublas.Operation.N, cublas.Operation.N)
    assert call.operands("A", "B") == ("B", "A")


# --- operands stored transposed: the same swap, with cuBLAS's transpose flags -------------
TRANSPOSES = [(True, False), (False, True), (True, True)]


@pytest.mark.parametrize("trans_a,trans_b", TRANSPOSES)
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("pads", [(0, 0, 0), (3, 1, 2)])
def test_transposed_swap_gives_rowmajor_product(m, n, k, pads, trans_a, trans_b):
    assert_rowmajor_result(*run_swapped(m, n, k, *pads, alpha=0.5, beta=-2.0, seed=m + n + k,
                                        trans_a=trans_a, trans_b=trans_b))


@pytest.mark.parametrize("trans_a,trans_b", TRANSPOSES)
@pytest.mark.parametrize("m,n,k", [(0, 3, 2), (3, 0, 2), (3, 2, 0)])
def test_transposed_swap_degenerate_sizes(m, n, k, trans_a, trans_b):
    assert_rowmajor_result(*run_swapped(m, n, k, 1, 1, 1, alpha=1.0, beta=0.5, trans_a=trans_a, trans_b=trans_b))


@pytest.mark.parametrize("trans_a,trans_b", TRANSPOSES)
def test_transposed_call_keeps_b_first_and_flags_the_stored_transposes(trans_a, trans_b):
    """B goes first whatever the layouts; an operand stored transposed reads column-major as
    itself, so it (and only it) takes CUBLAS_OP_T; the leading dimensions are passed as given."""
    call = cublas.column_major_call(3, 5, 7, lda=8, ldb=9, ldc=6, trans_a=trans_a, trans_b=trans_b)
    op = {False: cublas.Operation.N, True: cublas.Operation.T}
    assert call == cublas.ColumnMajorGemm(5, 3, 7, "b", 9, "a", 8, 6, op[trans_b], op[trans_a])
    assert call.operands("A", "B") == ("B", "A")


def test_transposed_operand_leading_dimension_spans_the_other_side():
    """Row-major A (M x K) needs lda >= K; stored transposed (K x M row-major) it needs lda >= M.
    The same for B: ldb >= N row-major, ldb >= K transposed."""
    m, n, k = 5, 3, 2
    cublas.column_major_call(m, n, k, lda=5, ldb=3, ldc=3, trans_a=True)
    cublas.column_major_call(m, n, k, lda=2, ldb=2, ldc=3, trans_b=True)
    with pytest.raises(ValueError, match=re.escape("lda >= max(1, k);")):
        cublas.column_major_call(m, n, k, lda=1, ldb=3, ldc=3)
    with pytest.raises(ValueError, match=re.escape("ldb >= max(1, n);")):
        cublas.column_major_call(m, n, k, lda=2, ldb=2, ldc=3)


@pytest.mark.parametrize("args,flags,message", [
    ((5, 3, 2, 4, 3, 3), dict(trans_a=True),
     "row-major GEMM needs lda >= max(1, m) for a transposed A; got m=5, n=3, k=2, lda=4, ldb=3, ldc=3"),
    ((5, 3, 4, 4, 3, 3), dict(trans_b=True),
     "row-major GEMM needs ldb >= max(1, k) for a transposed B; got m=5, n=3, k=4, lda=4, ldb=3, ldc=3"),
    ((5, 3, 0, 5, 0, 3), dict(trans_a=True, trans_b=True),
     "row-major GEMM needs ldb >= max(1, k) for a transposed B; got m=5, n=3, k=0, lda=5, ldb=0, ldc=3"),
    ((5, 3, 2, 5, 2, 2), dict(trans_a=True, trans_b=True),
     "row-major GEMM needs ldc >= max(1, n); got m=5, n=3, k=2, lda=5, ldb=2, ldc=2"),
    ((5, 3, 2, 2**31, 3, 3), dict(trans_a=True),
     "row-major GEMM needs sizes < 2**31 (cuBLAS takes 32-bit ints); got m=5, n=3, k=2, lda=2147483648, ldb=3, "
     "ldc=3"),
])
def test_transposed_validation_names_the_rule_in_one_line(args, flags, message):
    with pytest.raises(ValueError) as info:
        cublas.column_major_call(*args, **flags)
    assert str(info.value) == message


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), *TRANSPOSES])
def test_gemm_ex_arguments_come_from_the_swap(trans_a, trans_b):
    """The cuBLAS baseline's GemmEx arguments (plain, or for operands stored transposed) are
    the swap's: flags, (n, m, k), B's pointer and ld first, then A's, then C; a broken ld rule
    is the swap's one-line ValueError."""
    m, n, k = 5, 3, 2
    lda, ldb, ldc = (m if trans_a else k) + 1, (k if trans_b else n) + 2, n + 3
    types = precision.get("bf16").cublas
    rest = cublas.gemm_ex_arguments(m, n, k, 0.5, 0xA000, lda, 0xB000, ldb, -0.0, 0xC000, ldc, types, trans_a, trans_b)
    op = {False: cublas.Operation.N, True: cublas.Operation.T}
    assert rest[:5] == (op[trans_b], op[trans_a], n, m, k)
    assert rest[6:] == (0xB000, types.ab_type, ldb, 0xA000, types.ab_type, lda, rest[12], 0xC000, types.c_type,
                        ldc, types.compute, cublas.CUBLAS_GEMM_DEFAULT)
    assert (rest[5]._obj.value, rest[12]._obj.value) == (0.5, 0.0)  # alpha; beta -0.0 passed as +0.0
    narrow = (m if trans_a else k) - 1
    rule = "lda >= max(1, m) for a transposed A" if trans_a else "lda >= max(1, k)"
    with pytest.raises(ValueError) as info:
        cublas.gemm_ex_arguments(m, n, k, 1.0, 0xA000, narrow, 0xB000, ldb, 0.0, 0xC000, ldc, types, trans_a, trans_b)
    assert str(info.value) == (f"row-major GEMM needs {rule}; got m={m}, n={n}, k={k}, lda={narrow}, "
                               f"ldb={ldb}, ldc={ldc}")


@pytest.mark.parametrize("args,rule", [
    ((-1, 2, 2, 2, 2, 2), "m >= 0"),
    ((2, -1, 2, 2, 1, 1), "n >= 0"),
    ((2, 2, -1, 1, 2, 2), "k >= 0"),
    ((2, 3, 4, 3, 3, 3), "lda >= max(1, k)"),
    ((2, 3, 0, 0, 3, 3), "lda >= max(1, k)"),
    ((2, 3, 4, 4, 2, 3), "ldb >= max(1, n)"),
    ((2, 3, 4, 4, 3, 2), "ldc >= max(1, n)"),
    ((2, 0, 4, 4, 0, 1), "ldb >= max(1, n)"),
    ((2, 3, 4, 2**31, 3, 3), "32-bit"),
])
def test_validation_names_the_rule(args, rule):
    with pytest.raises(ValueError, match=re.escape(rule)):
        cublas.column_major_call(*args)


# --- the public calls, end to end against a fake library -----------------------------
class FakeCublas:
    """Stands in for the CDLL: device memory is {pointer: flat float64 array} and the GEMM
    entry points run colmajor_gemm on it, so the public wrappers are checked for the
    exact arguments (order, leading dimensions, alpha/beta by pointer) they pass."""

    HANDLE = 0xABC

    def __init__(self):
        self.mem, self.log, self.math_mode, self.fail_gemm = {}, [], 0, False

    def put(self, array):
        ptr = 0x10000 * (len(self.mem) + 1)
        self.mem[ptr] = array
        return ptr

    def cublasCreate_v2(self, out):
        out._obj.value = self.HANDLE

    def cublasDestroy_v2(self, h):
        self.log.append(("destroy", h))

    def cublasSetStream_v2(self, h, stream):
        self.log.append(("stream", stream))

    def cublasGetMathMode(self, h, out):
        out._obj.value = self.math_mode

    def cublasSetMathMode(self, h, mode):
        self.math_mode = mode

    def cublasSgemm_v2(self, h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc):
        assert (h, ta, tb) == (self.HANDLE, 0, 0)
        colmajor_gemm(m, n, k, al._obj.value, self.mem[a], lda, self.mem[b], ldb,
                      be._obj.value, self.mem[c], ldc)

    def cublasGemmEx(self, h, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c, ct, ldc,
                     compute, algo):
        self.log.append(("gemm_ex", int(at), int(bt), int(ct), int(compute), algo,
                         self.math_mode))
        if self.fail_gemm:
            raise CublasError("CUBLAS_STATUS_NOT_SUPPORTED", "fake", "cublasGemmEx")
        self.cublasSgemm_v2(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc)

    def cublasSgemmStridedBatched(self, h, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb,
                                  be, c, ldc, sc, batch):
        assert (h, ta, tb) == (self.HANDLE, 0, 0)
        for i in range(batch):
            colmajor_gemm(m, n, k, al._obj.value, self.mem[a][i * sa:], lda,
                          self.mem[b][i * sb:], ldb, be._obj.value, self.mem[c][i * sc:], ldc)


@pytest.fixture
def fake(monkeypatch):
    lib = FakeCublas()
    monkeypatch.setattr(cublas, "_library", lambda: lib)
    return lib


def _operands(fake, m, n, k, lda, ldb, ldc, seed=3):
    rng = np.random.default_rng(seed)
    a, am = rowmajor(rng, m, k, lda)
    b, bm = rowmajor(rng, k, n, ldb)
    c, cm0 = rowmajor(rng, m, n, ldc)
    return (fake.put(a), fake.put(b), fake.put(c)), (am, bm, cm0)


@pytest.mark.parametrize("m,n,k", [(3, 5, 7), (1, 4, 1), (6, 1, 2)])
def test_sgemm_end_to_end(fake, m, n, k):
    lda, ldb, ldc = k + 2, n + 1, n + 3
    (pa, pb, pc), (am, bm, cm0) = _operands(fake, m, n, k, lda, ldb, ldc)
    with cublas.CublasHandle() as h:
        sgemm(h, m, n, k, 0.5, pa, lda, pb, ldb, -2.0, np.uint64(pc), ldc)
    assert_rowmajor_result(fake.mem[pc], 0.5 * am @ bm - 2.0 * cm0, ldc)


# Every precision cublasGemmEx computes (FP8 has no GemmEx call: cuBLASLt only), and FP32 with default math
TYPES = {**{name: p.cublas for name, p in precision.PRECISIONS.items() if p.cublas is not None},
         "fp32_default_math": FP32_DEFAULT_MATH}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_gemm_ex_end_to_end_runs_in_its_math_mode_and_sets_it_only_when_it_changes(fake, name):
    m, n, k, lda, ldb, ldc = 4, 3, 5, 6, 3, 4
    (pa, pb, pc), (am, bm, cm0) = _operands(fake, m, n, k, lda, ldb, ldc)
    p = TYPES[name]
    sets = []
    set_mode = fake.cublasSetMathMode
    fake.cublasSetMathMode = lambda h, mode: (sets.append(mode), set_mode(h, mode))
    with cublas.CublasHandle() as h:
        h.set_math_mode(16)  # another mode (a flag bit MathMode cannot represent), set before
        cublas.gemm_ex(h, m, n, k, 1.0, pa, lda, pb, ldb, 1.0, pc, ldc, types=p)
        cublas.gemm_ex(h, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, ldc, types=p)
        assert h.get_math_mode() == p.math_mode  # kept for the next call
    assert sets == [16, p.math_mode]  # the second call found its mode set
    assert fake.log[1] == ("gemm_ex", p.ab_type, p.ab_type, p.c_type, p.compute,
                           cublas.CUBLAS_GEMM_DEFAULT, p.math_mode)
    assert fake.log[2][-1] == p.math_mode
    assert_rowmajor_result(fake.mem[pc], am @ bm, ldc)


def test_after_a_failed_set_the_mode_is_set_again(fake):
    """use_math_mode trusts only what this object set: a failed set leaves the mode unknown."""
    def refuse(handle, mode):
        raise CublasError("CUBLAS_STATUS_INVALID_VALUE", "fake", "cublasSetMathMode")

    with cublas.CublasHandle() as h:
        h.use_math_mode(cublas.MathMode.PEDANTIC)
        working, fake.cublasSetMathMode = fake.cublasSetMathMode, refuse
        with pytest.raises(CublasError):
            h.set_math_mode(cublas.MathMode.DEFAULT)
        fake.cublasSetMathMode = working
        fake.math_mode = cublas.MathMode.DEFAULT  # what cuBLAS holds after the failed set is not known
        h.use_math_mode(cublas.MathMode.PEDANTIC)
        assert fake.math_mode == cublas.MathMode.PEDANTIC


def test_a_prepared_gemm_ex_call_passes_c_values_of_the_declared_types(fake, monkeypatch):
    """gemm_ex_call converts the arguments once to the ctypes the signature declares (the
    function it calls has none, so ctypes would pass a bare int as a 32-bit int) and checks the
    status itself, as the errcheck would."""
    calls, status = [], [0]
    monkeypatch.setattr(cublas, "_unchecked", lambda name: lambda *args: (calls.append((name, args)), status[0])[1])
    declared = cublas.ARGTYPES["cublasGemmEx"]
    arguments = cublas.gemm_ex_arguments(3, 4, 5, 2.0, 0x7F00_0000_1000, 5, 0x7F00_0000_2000, 4, 0.0,
                                         0x7F00_0000_3000, 4, TYPES["bf16"])
    with cublas.CublasHandle() as h:
        call = h.gemm_ex_call(arguments)
        call()
        (name, passed), = calls
        assert name == "cublasGemmEx" and len(passed) == len(declared) == len(arguments) + 1
        for ctype, value, given in zip(declared, passed, (h.ptr, *arguments)):
            if isinstance(given, int):
                assert type(value) is ctype and value.value == int(given)
            else:  # alpha and beta by reference, as given
                assert value is given
        status[0] = 7
        with pytest.raises(CublasError, match="cublasGemmEx"):
            call()
    with pytest.raises(GemmDriverError, match="closed"):
        call()


def test_the_stream_is_set_only_when_the_raw_stream_changes(fake):
    stream = types.SimpleNamespace(handle=5)
    with cublas.CublasHandle() as h:
        h.use_stream(stream)
        h.use_stream(stream)
        stream.handle = 6  # the same object at another raw stream: bound again
        h.use_stream(stream)
        h.use_stream(6)
    assert [entry for entry in fake.log if entry[0] == "stream"] == [("stream", 0), ("stream", 5), ("stream", 6)]


def test_gemm_ex_takes_types_not_names(fake):
    """The types come from the one precision table; a name is not accepted in their place."""
    with cublas.CublasHandle() as h, pytest.raises(AttributeError):
        cublas.gemm_ex(h, 2, 2, 2, 1.0, 0, 2, 0, 2, 0.0, 0, 2, types="fp64")


def test_sgemm_strided_batched_end_to_end(fake):
    m, n, k, batch = 3, 4, 2, 3
    lda, ldb, ldc = k + 1, n + 2, n + 1
    sa, sb, sc = m * lda + 1, k * ldb + 3, m * ldc  # gaps between matrices stay NaN
    rng = np.random.default_rng(7)
    bufs = [np.full(s * batch, np.nan) for s in (sa, sb, sc)]
    mats = [[], [], []]
    for i in range(batch):
        for buf, s, (r, cols, ld), out in zip(bufs, (sa, sb, sc),
                                             ((m, k, lda), (k, n, ldb), (m, n, ldc)), mats):
            piece, mat = rowmajor(rng, r, cols, ld)
            buf[i * s:i * s + piece.size] = piece
            out.append(mat)
    pa, pb, pc = (fake.put(buf) for buf in bufs)
    with cublas.CublasHandle() as h:
        sgemm_strided_batched(h, m, n, k, 1.0, pa, lda, sa, pb, ldb, sb, 1.0, pc,
                              ldc, sc, batch)
    for i in range(batch):
        piece = fake.mem[pc][i * sc:(i + 1) * sc]
        assert_rowmajor_result(piece, mats[0][i] @ mats[1][i] + mats[2][i], ldc)
    with cublas.CublasHandle() as h, pytest.raises(ValueError, match="batch"):
        sgemm_strided_batched(h, m, n, k, 1.0, pa, lda, sa, pb, ldb, sb, 1.0, pc,
                              ldc, sc, -1)


def test_handle_stream_binding(fake):
    from cuda.bindings import driver

    class Stream:
        handle = driver.CUstream(0x1234)

    s = Stream()
    with cublas.CublasHandle(s) as h:
        assert h.stream is s
        h.set_stream(None)
        assert h.stream is None
    assert fake.log == [("stream", 0x1234), ("stream", 0), ("destroy", FakeCublas.HANDLE)]


def test_handle_close_is_idempotent_and_final(fake):
    h = cublas.CublasHandle()
    h.close()
    h.close()
    assert h.closed and fake.log.count(("destroy", FakeCublas.HANDLE)) == 1
    with pytest.raises(GemmDriverError, match="closed"):
        h.set_math_mode(cublas.MathMode.DEFAULT)
    with pytest.raises(GemmDriverError, match="closed"):
        sgemm(h, 1, 1, 1, 1.0, 0, 1, 0, 1, 0.0, 0, 1)


def test_handle_finalizer_destroys_forgotten_handle(fake):
    cublas.CublasHandle()
    gc.collect()
    assert fake.log.count(("destroy", FakeCublas.HANDLE)) == 1


# --- the real library (no GPU needed) ------------------------------------------------
def test_library_loads_and_reports_version():
    major, minor, patch = cublas.version()
    assert major >= 11 and minor >= 0 and patch >= 0
    path = Path(cublas.library_path())
    assert path.is_file()
    if re.search(r"\.so\.\d+$", path.name):
        assert path.name.endswith(f".so.{major}")


def test_missing_library_gives_install_hint(monkeypatch):
    import cuda.pathfinder

    def not_found(name):
        raise cuda.pathfinder.DynamicLibNotFoundError(f"no {name}")

    monkeypatch.setattr(cuda.pathfinder, "load_nvidia_dynamic_lib", not_found)
    with pytest.raises(LibraryNotFoundError, match="pip install nvidia-cublas-cu12") as info:
        cublas._library.__wrapped__()
    assert "\n" not in str(info.value)


def test_every_signature_is_bound():
    lib = cublas._library()
    for restype, name, argtypes in cublas.SIGNATURES:
        fn = getattr(lib, name)
        assert fn.restype is restype and tuple(fn.argtypes) == argtypes, name
        assert (getattr(fn, "errcheck", None) is cublas._errcheck) == (restype is ctypes.c_int)


def _header() -> str | None:
    here = Path(cublas.library_path()).resolve().parent.parent / "include" / "cublas_api.h"
    return here.read_text() if here.is_file() else None


def test_signatures_match_header():
    """Argument count and kind (pointer / 32-bit / 64-bit) against the shipped header."""
    header = _header()
    if header is None:
        pytest.skip("cublas_api.h not shipped next to the library")

    def kind(param: str) -> str:
        if "*" in param or param.split()[-2] in ("cublasHandle_t", "cudaStream_t"):
            return "ptr"
        return "i64" if "long long" in param or "int64_t" in param or "size_t" in param else "i32"

    def ctype_kind(t) -> str:
        if t is ctypes.c_void_p or issubclass(t, ctypes._Pointer):
            return "ptr"
        return {ctypes.c_int: "i32", ctypes.c_longlong: "i64", ctypes.c_size_t: "i64"}[t]

    for _, name, argtypes in cublas.SIGNATURES:
        found = re.search(rf"CUBLASWINAPI\s+{name}\s*\((.*?)\)\s*;", header, re.S)
        assert found, name
        params = [" ".join(p.split()) for p in found.group(1).split(",")]
        assert [kind(p) for p in params] == [ctype_kind(t) for t in argtypes], name


def test_enum_values_match_header():
    header = _header()
    if header is None:
        pytest.skip("cublas_api.h not shipped next to the library")
    value = lambda name: int(re.search(rf"\b{name}\s*=\s*(-?\d+)", header).group(1))
    for member in cublas.ComputeType:
        assert value(member.name) == member.value
    assert value("CUBLAS_DEFAULT_MATH") == cublas.MathMode.DEFAULT
    assert value("CUBLAS_PEDANTIC_MATH") == cublas.MathMode.PEDANTIC
    assert value("CUBLAS_TF32_TENSOR_OP_MATH") == cublas.MathMode.TF32_TENSOR_OP
    assert value("CUBLAS_OP_N") == cublas.Operation.N and value("CUBLAS_OP_T") == cublas.Operation.T
    assert value("CUBLAS_GEMM_DEFAULT") == cublas.CUBLAS_GEMM_DEFAULT
    for status, name in cublas.STATUS_NAMES.items():
        assert value(name) == status


def test_enum_spot_checks():
    D = cublas.DataType
    assert (D.CUDA_R_32F, D.CUDA_R_16F, D.CUDA_R_16BF) == (0, 2, 14)
    assert cublas.ComputeType.CUBLAS_COMPUTE_32F == 68
    assert cublas.ComputeType.CUBLAS_COMPUTE_32F_FAST_TF32 == 77
    assert (cublas.MathMode.PEDANTIC, cublas.MathMode.TF32_TENSOR_OP) == (2, 3)
    assert cublas.CUBLAS_GEMM_DEFAULT == -1
    runtime = pytest.importorskip("cuda.bindings.runtime")
    dtype = getattr(runtime, "cudaDataType", None) or getattr(runtime, "cudaDataType_t", None)
    if dtype is not None:
        for member in cublas.DataType:
            assert int(getattr(dtype, member.name)) == member.value


def test_precision_table():
    P, D, C, M = TYPES, cublas.DataType, cublas.ComputeType, cublas.MathMode
    assert set(P) == {"fp32", "fp32_default_math", "tf32", "bf16", "fp16"}
    assert (P["fp32"].compute, P["fp32"].math_mode) == (C.CUBLAS_COMPUTE_32F, M.PEDANTIC)
    assert P["fp32_default_math"].math_mode == M.DEFAULT
    assert P["tf32"].compute == C.CUBLAS_COMPUTE_32F_FAST_TF32
    assert P["tf32"].math_mode == M.TF32_TENSOR_OP
    for name in ("fp32", "fp32_default_math"):  # no TF32 anywhere in the fp32 rows
        assert P[name].compute == C.CUBLAS_COMPUTE_32F and P[name].math_mode != M.TF32_TENSOR_OP
    storage = {"fp32": (D.CUDA_R_32F, 4), "fp32_default_math": (D.CUDA_R_32F, 4),
               "tf32": (D.CUDA_R_32F, 4), "bf16": (D.CUDA_R_16BF, 2), "fp16": (D.CUDA_R_16F, 2)}
    for name, (ab_type, ab_bytes) in storage.items():
        assert (P[name].ab_type, P[name].ab_bytes) == (ab_type, ab_bytes), name
        assert (P[name].c_type, P[name].c_bytes) == (D.CUDA_R_32F, 4), name


def test_status_names_agree_with_library():
    lib = cublas._library()
    for status, name in cublas.STATUS_NAMES.items():
        assert lib.cublasGetStatusName(status).decode() == name


def test_errcheck_on_real_failures():
    """Failures that do not depend on whether a GPU exists."""
    lib = cublas._library()
    with pytest.raises(CublasError) as info:
        lib.cublasGetProperty(99, ctypes.byref(ctypes.c_int()))  # no such property
    err = info.value
    assert (err.name, err.call) == ("CUBLAS_STATUS_INVALID_VALUE", "cublasGetProperty")
    assert err.message == lib.cublasGetStatusString(7).decode() != ""
    assert "CUBLAS_STATUS_INVALID_VALUE" in str(err)
    with pytest.raises(CublasError, match="CUBLAS_STATUS_NOT_INITIALIZED"):
        lib.cublasSetMathMode(None, 0)  # a NULL handle


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_driver_present(), reason="a CUDA driver is present; cublasCreate may succeed")
def test_handle_creation_without_driver_raises():
    with pytest.raises(CublasError, match="CUBLAS_STATUS_NOT_INITIALIZED") as info:
        cublas.CublasHandle()
    assert info.value.call == "cublasCreate_v2"


def test_errcheck_with_synthetic_status():
    class Func:
        __name__ = "cublasFake"

    assert cublas._errcheck(0, Func(), ()) == 0
    with pytest.raises(CublasError, match=r"CUBLAS_STATUS_INTERNAL_ERROR in cublasFake: \S"):
        cublas._errcheck(14, Func(), ())
    with pytest.raises(CublasError, match=re.escape("CUBLAS_STATUS_UNKNOWN(999)")):
        cublas._errcheck(999, Func(), ())
