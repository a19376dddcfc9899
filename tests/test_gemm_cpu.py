"""gemm_driver.gemm(): argument checking and the paths that need no GPU."""

from __future__ import annotations

import importlib
import types

import numpy as np
import pytest

import gemm_driver
from gemm_driver.cuda.driver import gpu_available
from gemm_driver.cuda.errors import GpuUnavailableError
from gemm_driver.call import default_kernel
from gemm_driver.plans import Plan
from gemm_driver.problem import GemmProblem
from gemm_driver.verify import check, reference

# The module, not the function: ``gemm_driver.gemm`` (and so ``import gemm_driver.gemm as m``) is the function.
gemm_module = importlib.import_module("gemm_driver.api")

gemm = gemm_driver.gemm


@pytest.fixture
def no_gpu_allowed(monkeypatch):
    """Fail the test if gemm() tries to reach the GPU at all."""
    def forbidden():
        raise AssertionError("this call must not need a GPU session")

    monkeypatch.setattr(gemm_module, "default_session", forbidden)
    monkeypatch.setattr(gemm_module, "cached_plan", lambda *a, **k: forbidden())


def mats(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32),
            rng.uniform(-1, 1, (m, n)).astype(np.float32))


def test_public_api():
    assert gemm_driver.__version__ == "0.1.0"
    assert set(gemm_driver.__all__) >= {"gemm", "GemmProblem", "Session"}


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
@pytest.mark.parametrize("which", ["A", "B"])
def test_wrong_dtype_names_the_allowed_ones(no_gpu_allowed, dtype, which):
    a, b, c = mats(4, 5, 6)
    args = {"A": a, "B": b}
    args[which] = args[which].astype(dtype)
    with pytest.raises(TypeError, match=rf"^{which} must have dtype float32, bfloat16 or float16, got "
                                        rf"{np.dtype(dtype).name}$"):
        gemm(args["A"], args["B"], c, beta=1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32])
def test_c_must_be_float32(no_gpu_allowed, dtype):
    a, b, c = mats(4, 5, 6)
    with pytest.raises(TypeError, match=rf"^C must have dtype float32, got {np.dtype(dtype).name}$"):
        gemm(a, b, c.astype(dtype), beta=1.0)


def test_not_an_array(no_gpu_allowed):
    _, b, _ = mats(2, 2, 2)
    with pytest.raises(TypeError, match=r"^A must be a NumPy array or a device array with __cuda_array_interface__ "
                                        r"or __dlpack__ \(torch, CuPy, JAX, Numba\), got list$"):
        gemm([[1.0, 2.0], [3.0, 4.0]], b)


def test_stream_is_for_device_arrays(no_gpu_allowed):
    a, b, _ = mats(2, 2, 2)
    with pytest.raises(ValueError, match=r"^stream= orders device work; NumPy arrays are copied"):
        gemm(a, b, stream=0)


# --- 2-byte NumPy inputs: float16, and ml_dtypes.bfloat16 where ml_dtypes is installed ---------
def bfloat16():
    return pytest.importorskip("ml_dtypes").bfloat16


def two_byte(name):
    return np.dtype(np.float16) if name == "float16" else np.dtype(bfloat16())


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_two_byte_inputs_of_different_dtypes_are_refused(no_gpu_allowed, name):
    a, b, _ = mats(3, 3, 3)
    other = "bfloat16" if name == "float16" else "float16"
    same = r"A and B must have the same dtype \(FP8 A and B may mix float8_e4m3fn and float8_e5m2\)$"
    with pytest.raises(TypeError, match=rf"^A is {name} and B is {other}: {same}"):
        gemm(a.astype(two_byte(name)), b.astype(two_byte(other)))
    with pytest.raises(TypeError, match=rf"^A is float32 and B is {name}: {same}"):
        gemm(a, b.astype(two_byte(name)))


@pytest.mark.parametrize("name, precision, default", [("float16", "fp16", "cublas_fp16"),
                                                      ("bfloat16", "bf16", "cublas_bf16")])
@pytest.mark.parametrize("kernel", ["naive", "cublas", "cublas_tf32", "mma_sync_tf32"])
def test_two_byte_inputs_refuse_a_kernel_of_another_precision(no_gpu_allowed, name, precision, default, kernel):
    a, b, _ = mats(3, 3, 3)
    wanted = "float32"
    with pytest.raises(ValueError, match=rf"^kernel '{kernel}' computes in (fp32|tf32) but A and B are {name}: "
                                         rf"choose a {precision} kernel \(e.g. {default}\), or pass {wanted} A and "
                                         rf"B to {kernel}$"):
        gemm(a.astype(two_byte(name)), b.astype(two_byte(name)), kernel=kernel)


def test_bfloat16_inputs_refuse_an_fp16_kernel(no_gpu_allowed):
    a, b, _ = mats(3, 3, 3)
    with pytest.raises(ValueError, match=r"computes in fp16 but A and B are bfloat16: .* pass float16 A and B"):
        gemm(a.astype(two_byte("bfloat16")), b.astype(two_byte("bfloat16")), kernel="wmma_fp16")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_two_byte_inputs_run_exactly_on_the_numpy_kernel(no_gpu_allowed, name):
    """The host reference takes 2-byte inputs as their exact float32 values."""
    a, b, c = mats(17, 9, 33)
    a2, b2 = a.astype(two_byte(name)), b.astype(two_byte(name))
    out = gemm(a2, b2, c, alpha=0.5, beta=2.0, kernel="numpy")
    a32, b32 = a2.astype(np.float32), b2.astype(np.float32)
    assert not np.array_equal(a32, a)  # the inputs really were rounded
    p = GemmProblem(17, 9, 33, 0.5, 2.0)
    v = check(p, out, reference(p, a32, b32, c))
    assert out.dtype == np.float32 and v.ok, v.message


def test_out_is_filled_and_returned(no_gpu_allowed):
    a, b, _ = mats(5, 4, 3)
    out = np.full((5, 4), np.nan, np.float32)
    assert gemm(a, b, kernel="numpy", out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-6)
    with pytest.raises(ValueError, match=r"^out must be 5x4 float32, got 4x5 float32$"):
        gemm(a, b, kernel="numpy", out=np.zeros((4, 5), np.float32))
    with pytest.raises(TypeError, match=r"^out must have dtype float32, bfloat16 or float16, got float64$"):
        gemm(a, b, kernel="numpy", out=np.zeros((5, 4), np.float64))


def test_default_kernel_follows_the_dtype(monkeypatch):
    """float32 -> cublas, bfloat16 -> cublas_bf16, float16 -> cublas_fp16 (seen by the plan)."""
    chosen = []

    class FakeSession:
        device = types.SimpleNamespace(compute_capability=(9, 0), ordinal=0)

    class StopHere(Plan):
        def __init__(self, session, *args, **kwargs):
            self.run_problem = GemmProblem(*args)
            chosen.append(kwargs["kernel"] or default_kernel(kwargs["dtype"], self.run_problem, (9, 0)))
            raise RuntimeError("stop here")

    monkeypatch.setattr(gemm_module, "default_session", FakeSession)
    monkeypatch.setattr(gemm_module, "Plan", StopHere)
    a, b, _ = mats(2, 2, 2)
    for dtype, kernel in [(np.float32, "cublas"), (np.float16, "cublas_fp16"), (bfloat16(), "cublas_bf16")]:
        with pytest.raises(RuntimeError, match="stop here"):
            gemm(a.astype(dtype), b.astype(dtype))
    assert chosen == ["cublas", "cublas_fp16", "cublas_bf16"]


def test_non_contiguous_is_refused(no_gpu_allowed):
    a, b, _ = mats(4, 5, 6)
    bad = np.repeat(a, 2, axis=1)[:, ::2]
    assert not bad.flags.c_contiguous and np.array_equal(bad, a)
    with pytest.raises(ValueError, match=r"A must be C-contiguous \(row-major\) or a transposed view of one \(x.T\); use numpy.ascontiguousarray\(A\)"):
        gemm(bad, b)


def test_not_two_dimensional(no_gpu_allowed):
    a, b, _ = mats(4, 5, 6)
    with pytest.raises(ValueError, match=r"B must be 2-D \(K x N\), got 1-D"):
        gemm(a, b[:, 0].copy())


def test_inner_dimension_mismatch_names_both_shapes(no_gpu_allowed):
    a, _, _ = mats(4, 5, 6)
    b = np.zeros((7, 5), np.float32)
    with pytest.raises(ValueError, match=r"inner dimensions differ: A is 4x6, B is 7x5"):
        gemm(a, b)


def test_c_shape_mismatch_names_the_shapes(no_gpu_allowed):
    a, b, _ = mats(4, 5, 6)
    with pytest.raises(ValueError, match=r"C must be 4x5 for A 4x6 @ B 6x5, got 5x4"):
        gemm(a, b, np.zeros((5, 4), np.float32), beta=1.0)


def test_beta_without_c(no_gpu_allowed):
    a, b, _ = mats(4, 5, 6)
    with pytest.raises(ValueError, match=r"beta=0.5 scales C, but no C was given"):
        gemm(a, b, beta=0.5)


def test_nan_alpha_is_refused(no_gpu_allowed):
    a, b, _ = mats(2, 2, 2)
    with pytest.raises(ValueError, match=r"alpha must be a finite number"):
        gemm(a, b, alpha=float("nan"))


def test_unknown_kernel(no_gpu_allowed):
    a, b, _ = mats(2, 2, 2)
    with pytest.raises(ValueError, match=r"unknown kernel 'fastest'.*`list` shows all"):
        gemm(a, b, kernel="fastest")


def test_bad_tunables(no_gpu_allowed):
    a, b, _ = mats(2, 2, 2)
    with pytest.raises(ValueError, match=r"smem_tiled: TILE=12 is not allowed; choose one of \[16, 32\]"):
        gemm(a, b, kernel="smem_tiled", TILE=12)
    with pytest.raises(ValueError, match=r"kernel 'naive' has no tunable 'TILE'"):
        gemm(a, b, kernel="naive", TILE=16)
    with pytest.raises(ValueError, match=r"cublas takes no tunables, got \['TILE'\]"):
        gemm(a, b, kernel="cublas", TILE=16)
    with pytest.raises(ValueError, match=r"numpy takes no tunables"):
        gemm(a, b, kernel="numpy", BLOCK=8)


@pytest.mark.parametrize("kernel", ["cublas", "naive", "smem_tiled", "ptx_naive", "numpy"])
@pytest.mark.parametrize("m, n", [(0, 5), (5, 0), (0, 0)])
def test_empty_output_needs_no_gpu(no_gpu_allowed, kernel, m, n):
    a, b = np.zeros((m, 3), np.float32), np.ones((3, n), np.float32)
    out = gemm(a, b, kernel=kernel)
    assert out.shape == (m, n) and out.dtype == np.float32


@pytest.mark.parametrize("kernel", ["cublas", "coalesced", "numpy"])
def test_k_zero_returns_beta_c(no_gpu_allowed, kernel):
    a, b = np.zeros((4, 0), np.float32), np.zeros((0, 5), np.float32)
    c = mats(4, 5, 1)[2]
    c_before = c.copy()
    out = gemm(a, b, c, alpha=3.0, beta=-2.0, kernel=kernel)
    np.testing.assert_array_equal(out, np.float32(-2.0) * c)
    np.testing.assert_array_equal(c, c_before)  # C itself is left unchanged
    assert out is not c and out.dtype == np.float32 and out.flags.c_contiguous
    # beta == 0: C is not read, even when it holds NaN
    nan_c = np.full((4, 5), np.nan, np.float32)
    np.testing.assert_array_equal(gemm(a, b, nan_c, beta=0.0, kernel=kernel), np.zeros((4, 5), np.float32))
    np.testing.assert_array_equal(gemm(a, b, kernel=kernel), np.zeros((4, 5), np.float32))


@pytest.mark.parametrize("m, n, k, alpha, beta", [(1, 1, 1, 1.0, 0.0), (33, 17, 65, -1.5, 0.0), (64, 32, 300, 0.5, 2.0)])
def test_numpy_kernel_matches_the_float64_reference(no_gpu_allowed, m, n, k, alpha, beta):
    a, b, c = mats(m, n, k)
    out = gemm(a, b, c if beta else None, alpha=alpha, beta=beta, kernel="numpy")
    assert out.dtype == np.float32 and out.shape == (m, n)
    p = GemmProblem(m, n, k, alpha, beta)
    v = check(p, out, reference(p, a, b, c if beta else None))
    assert v.ok, v.message


def test_numpy_kernel_ignores_nan_c_when_beta_is_zero(no_gpu_allowed):
    a, b, _ = mats(3, 3, 3)
    out = gemm(a, b, np.full((3, 3), np.nan, np.float32), kernel="numpy")
    assert np.isfinite(out).all()


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU error")
@pytest.mark.parametrize("kernel", ["cublas", "naive"])
def test_gpu_kernels_without_gpu_raise_a_typed_error(kernel):
    a, b, _ = mats(4, 4, 4)
    with pytest.raises(GpuUnavailableError, match="no NVIDIA driver found|no usable NVIDIA GPU"):
        gemm(a, b, kernel=kernel)
    assert gemm_module._default is None  # nothing half-made is kept


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU error")
def test_session_without_gpu_raises_gpu_unavailable():
    with pytest.raises(GpuUnavailableError):
        gemm_driver.Session()


def _gelu(v):
    return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
def test_numpy_linear_layer_reads_transposed_views(no_gpu_allowed, activation):
    """gemm(x, W.T, bias=b, activation=...) on NumPy arrays: W stored [out, in], read as a
    transposed view (no copy asked of the caller), the epilogue after the product."""
    rng = np.random.default_rng(1)
    x, w, bias = (rng.uniform(-1, 1, shape).astype(np.float32) for shape in ((5, 6), (4, 6), (4,)))
    y = gemm(x, w.T, bias=bias, activation=activation, kernel="numpy")
    v = x.astype(np.float64) @ w.T.astype(np.float64) + bias
    want = {None: v, "relu": np.maximum(v, 0), "gelu": _gelu(v)}[activation]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    assert y.dtype == np.float32 and y.shape == (5, 4)


def test_numpy_bf16_output_is_rounded_once():
    from ml_dtypes import bfloat16

    rng = np.random.default_rng(2)
    x, w = rng.uniform(-1, 1, (3, 8)).astype(bfloat16), rng.uniform(-1, 1, (5, 8)).astype(bfloat16)
    bias = rng.uniform(-1, 1, 5).astype(bfloat16)
    out = np.zeros((3, 5), bfloat16)
    assert gemm(x, w.T, bias=bias, activation="gelu", out=out, kernel="numpy") is out
    v = x.astype(np.float64) @ w.T.astype(np.float64) + bias.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), _gelu(v), rtol=2 ** -8, atol=1e-3)
    with pytest.raises(ValueError, match=r"^bias must be a NumPy vector of 5 bfloat16 elements"):
        gemm(x, w.T, bias=bias.astype(np.float32), out=out, kernel="numpy")
