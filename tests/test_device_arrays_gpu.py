"""gemm() and plans on device arrays, on the GPU: torch and CuPy tensors read in place, every
result held to the float64 reference and its precision's bound (fresh random data, out
poisoned with NaN first), the caller's stream honoured, the result of the inputs' kind; and
the PyTorch baselines verified as the other providers are. Skips without a GPU, and per
test without torch / CuPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import gemm_driver
from gemm_driver.case import PreparedCase
from gemm_driver.checking import check_case
from gemm_driver.kernels.providers import cupy_unavailable
from gemm_driver.problem import GemmProblem
from gemm_driver.strategies import GemmCase, gemm_cases
from gemm_driver.verify import check, reference

pytestmark = pytest.mark.gpu

PRECISION = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
# Per dtype: the default (cuBLAS) and one of our kernels (sm_80+: the H100 runs them all).
KERNELS = {"float32": [None, "smem_tiled", "autotuned"], "bfloat16": [None, "mma_sync_bf16", "hopper_bf16"],
           "float16": [None, "wmma_fp16", "hopper_fp16"]}
CASES = [(dtype, kernel) for dtype, names in KERNELS.items() for kernel in names]


@pytest.fixture(scope="module")
def cupy():
    if (reason := cupy_unavailable()) is not None:
        pytest.skip(reason)
    import cupy

    return cupy


def operands(torch, m, n, k, dtype, seed, *, beta=0.0):
    """Fresh uniform(-1, 1) A, B (in ``dtype``) and C (float32, or None), and their exact
    float32 host values for the reference."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, device="cuda", generator=g) * 2 - 1  # noqa: E731
    a, b = rand(m, k).to(getattr(torch, dtype)), rand(k, n).to(getattr(torch, dtype))
    c = rand(m, n) if beta != 0 else None
    host = [x.float().cpu().numpy() if x is not None else None for x in (a, b, c)]
    return (a, b, c), host


def assert_right(problem, dtype, host, out) -> None:
    a, b, c = host
    if isinstance(out, np.ndarray):  # the NumPy path returns host arrays
        got = out
    else:
        got = out.float().cpu().numpy() if hasattr(out, "cpu") else out.get()
    v = check(problem, got, reference(problem, a, b, c), 0, PRECISION[dtype])
    assert v.ok, v.message


def nan_out(torch, m, n):
    return torch.full((m, n), float("nan"), device="cuda")


# --- torch tensors ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, kernel", CASES)
@pytest.mark.parametrize("shape, alpha, beta", [((67, 45, 129), 1.0, 0.0), ((256, 256, 256), -0.5, 1.5)])
def test_torch_results_with_out_given_and_not(torch, dtype, kernel, shape, alpha, beta):
    m, n, k = shape
    (a, b, c), host = operands(torch, m, n, k, dtype, seed=m + n + k + len(dtype), beta=beta)
    p = GemmProblem(m, n, k, alpha, beta)
    out = nan_out(torch, m, n)
    c_before = c.clone() if c is not None else None
    assert gemm_driver.gemm(a, b, c, alpha=alpha, beta=beta, kernel=kernel, out=out) is out
    torch.cuda.synchronize()
    assert_right(p, dtype, host, out)
    fresh = gemm_driver.gemm(a, b, c, alpha=alpha, beta=beta, kernel=kernel)
    torch.cuda.synchronize()
    assert isinstance(fresh, torch.Tensor) and fresh.dtype == torch.float32 and fresh.shape == (m, n)
    assert fresh.device == a.device
    assert_right(p, dtype, host, fresh)
    if c is not None:
        assert torch.equal(c, c_before)  # C is copied into out, never written


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_out_is_c_when_no_c_is_given(torch, dtype):
    (a, b, c), host = operands(torch, 33, 17, 65, dtype, seed=5, beta=1.0)
    out = c.clone()
    gemm_driver.gemm(a, b, alpha=2.0, beta=-1.0, out=out)
    torch.cuda.synchronize()
    assert_right(GemmProblem(33, 17, 65, 2.0, -1.0), dtype, host, out)


def test_torch_padded_leading_dimensions(torch):
    (a, b, _), host = operands(torch, 40, 24, 56, "float32", seed=9)
    big_a, big_b = torch.full((40, 64), float("nan"), device="cuda"), torch.full((56, 31), float("nan"), device="cuda")
    big_a[:, :56], big_b[:, :24] = a, b
    out = torch.full((40, 30), float("nan"), device="cuda")[:, :24]
    gemm_driver.gemm(big_a[:, :56], big_b[:, :24], out=out, kernel="naive")
    torch.cuda.synchronize()
    assert_right(GemmProblem(40, 24, 56), "float32", host, out)


@pytest.mark.parametrize("kernel", [None, "torch"])
@pytest.mark.parametrize("which", ["A", "B", "AB"])
def test_torch_transposed_views_through_cublas_flags(torch, kernel, which):
    (a, b, _), host = operands(torch, 70, 50, 90, "float32", seed=13)
    a_in = a.t().contiguous().t() if "A" in which else a  # same values, stored column-major
    b_in = b.t().contiguous().t() if "B" in which else b
    out = gemm_driver.gemm(a_in, b_in, kernel=kernel)
    torch.cuda.synchronize()
    assert_right(GemmProblem(70, 50, 90), "float32", host, out)


@pytest.mark.parametrize("dtype, kernel", [("float32", "naive"), ("bfloat16", "wmma_smem_bf16")])
def test_torch_all_transposed_is_the_operand_swap(torch, dtype, kernel):
    (a, b, _), host = operands(torch, 70, 50, 90, dtype, seed=17)
    out = gemm_driver.gemm(a.t().contiguous().t(), b.t().contiguous().t(), kernel=kernel)
    torch.cuda.synchronize()
    assert out.stride() == (1, 70)  # made transposed, so the kernel reads everything row-major
    assert_right(GemmProblem(70, 50, 90), dtype, host, out)


def test_torch_mixed_transposes_on_a_row_major_kernel_is_one_line(torch):
    (a, b, _), _ = operands(torch, 8, 8, 8, "float32", seed=1)
    with pytest.raises(ValueError, match=r"^smem_tiled reads row-major operands only, and here B would be read"):
        gemm_driver.gemm(a, b.t().contiguous().t(), kernel="smem_tiled")


def test_torch_two_byte_out(torch):
    """A bfloat16 out gets the product rounded once to BF16 (the default kernel, cuBLAS, writes
    it); a kernel that writes FP32 only refuses it in one line naming what it takes."""
    m, n, k = 67, 45, 129
    (a, b, _), host = operands(torch, m, n, k, "bfloat16", seed=1)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_driver.gemm(a, b, out=out)
    torch.cuda.synchronize()
    assert_right(GemmProblem(m, n, k, out_dtype="bf16"), "bfloat16", host, out)
    with pytest.raises(ValueError, match=r"^wmma_smem_bf16 does not take output type 'bf16'; it takes fp32$"):
        gemm_driver.gemm(a, b, out=out, kernel="wmma_smem_bf16")


@pytest.mark.parametrize("how", ["argument", "current", "raw handle", "protocol"])
def test_torch_callers_stream_is_honoured(torch, how):
    """A is written on a side stream after a long sleep; the product queued on that stream
    must see the new values (queued anywhere else it reads the NaN that was there)."""
    m = n = k = 512
    (a_src, b, _), host = operands(torch, m, n, k, "float32", seed=21)
    torch.cuda.synchronize()
    a = torch.full((m, k), float("nan"), device="cuda")
    out = nan_out(torch, m, n)
    torch.cuda.synchronize()  # the NaN is in place before the side stream starts
    side = torch.cuda.Stream()
    stream = {"argument": side, "current": None, "raw handle": side.cuda_stream,
              "protocol": type("P", (), {"__cuda_stream__": lambda self: (0, side.cuda_stream)})()}[how]
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on this stream
        a.copy_(a_src)
        gemm_driver.gemm(a, b, out=out, stream=stream)
    side.synchronize()
    assert_right(GemmProblem(m, n, k), "float32", host, out)


def test_torch_alternating_streams_with_scratch_kernels(torch):
    """Kernels that use the Session's scratch (split-K, packing) on two streams in turn."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for i, kernel in enumerate(["autotuned", "hopper_bf16"]):
        dtype = "float32" if kernel == "autotuned" else "bfloat16"
        results = []
        for j, stream in enumerate([s1, s2, s1, s2]):
            (a, b, _), host = operands(torch, 96, 1024, 2048, dtype, seed=100 * i + j)
            out = nan_out(torch, 96, 1024)
            gemm_driver.gemm(a, b, out=out, kernel=kernel, stream=stream)
            results.append((host, out))
        torch.cuda.synchronize()
        for host, out in results:
            assert_right(GemmProblem(96, 1024, 2048), dtype, host, out)


@pytest.mark.parametrize("kernel, dtype", [("autotuned", "float32"), ("hopper_bf16", "bfloat16"), (None, "bfloat16")])
def test_torch_cuda_graph_capture_after_eager_calls(torch, kernel, dtype):
    """gemm() captured into a torch CUDA graph after eager calls on another stream (the
    scratch's last user): the capture must not wait on that stream (the driver refuses), and
    replays on fresh operands copied into the captured buffers give right answers."""
    if kernel == "hopper_bf16" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("hopper_bf16 runs on sm_90a only")
    m, n, k = 96, 1024, 2048
    (a, b, _), _ = operands(torch, m, n, k, dtype, seed=7)
    out = nan_out(torch, m, n)
    gemm_driver.gemm(a, b, out=out, kernel=kernel)  # eager, on the current stream
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # torch captures on a side stream
        gemm_driver.gemm(a, b, out=out, kernel=kernel)
    for seed in (8, 9):
        (a_new, b_new, _), host = operands(torch, m, n, k, dtype, seed=seed)
        a.copy_(a_new)
        b.copy_(b_new)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_right(GemmProblem(m, n, k), dtype, host, out)


def test_torch_k_zero(torch):
    c = torch.rand(6, 5, device="cuda")
    a, b = torch.empty(6, 0, device="cuda"), torch.empty(0, 5, device="cuda")
    out = nan_out(torch, 6, 5)
    gemm_driver.gemm(a, b, out=out)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.zeros_like(out))
    scaled = gemm_driver.gemm(a, b, c, beta=-2.0)
    torch.cuda.synchronize()
    assert torch.equal(scaled, -2.0 * c)
    assert gemm_driver.gemm(torch.empty(0, 3, device="cuda"), torch.empty(3, 4, device="cuda")).shape == (0, 4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_plan_reuse_on_several_buffers(torch, dtype):
    p = gemm_driver.plan(100, 60, 80, dtype=getattr(torch, dtype), alpha=0.5)
    kept = []  # alive, so that each call has its own addresses (one Launch each)
    for seed in range(3):
        (a, b, _), host = operands(torch, 100, 60, 80, dtype, seed=seed)
        out = p(a, b)
        torch.cuda.synchronize()
        assert isinstance(out, torch.Tensor)
        assert_right(GemmProblem(100, 60, 80, 0.5), dtype, host, out)
        kept.append((a, b, out))
        assert p(a, b, out) is out  # the same addresses: the same Launch
    assert len(p._launches) == 3


class DLPackOnly:
    """Another library's array: DLPack only (read through the capsule, not torch's attributes)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


class ArrayInterfaceOnly:
    def __init__(self, tensor):
        self.tensor = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_generic_dlpack_and_array_interface_objects(torch, dtype):
    (a, b, _), host = operands(torch, 50, 40, 30, dtype, seed=3)
    out = nan_out(torch, 50, 40)
    assert gemm_driver.gemm(DLPackOnly(a), DLPackOnly(b), out=ArrayInterfaceOnly(out)).tensor is out
    torch.cuda.synchronize()
    assert_right(GemmProblem(50, 40, 30), dtype, host, out)
    with pytest.raises(TypeError, match=r"^out= is needed"):
        gemm_driver.gemm(DLPackOnly(a), DLPackOnly(b))


def test_cublaslt_with_beta_keeps_c_while_it_measures(torch):
    """cuBLASLt times its candidates on the operands when its launcher is made: C (here in
    out) must be saved and restored around that, or beta * C reads garbage."""
    (a, b, c), host = operands(torch, 128, 96, 64, "bfloat16", seed=31, beta=1.0)
    out = c.clone()
    gemm_driver.gemm(a, b, alpha=1.0, beta=0.75, out=out, kernel="cublaslt_bf16")
    torch.cuda.synchronize()
    assert_right(GemmProblem(128, 96, 64, 1.0, 0.75), "bfloat16", host, out)


# --- CuPy arrays ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, kernel", [("float32", None), ("float32", "smem_tiled"), ("float16", None),
                                           ("float16", "mma_sync_fp16")])
def test_cupy_results_and_kind(cupy, dtype, kernel):
    rng = cupy.random.default_rng(7)
    a = (rng.random((65, 33), dtype=cupy.float32) * 2 - 1).astype(dtype)
    b = (rng.random((33, 47), dtype=cupy.float32) * 2 - 1).astype(dtype)
    host = (a.astype(cupy.float32).get(), b.astype(cupy.float32).get(), None)
    out = cupy.full((65, 47), cupy.nan, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()  # made on the null stream, which a non-blocking one does not wait for
    stream = cupy.cuda.Stream(non_blocking=True)
    assert gemm_driver.gemm(a, b, out=out, kernel=kernel, stream=stream) is out
    stream.synchronize()
    assert_right(GemmProblem(65, 47, 33), dtype, host, out)
    fresh = gemm_driver.gemm(a, b, kernel=kernel)
    cupy.cuda.get_current_stream().synchronize()
    assert isinstance(fresh, cupy.ndarray) and fresh.dtype == cupy.float32
    assert_right(GemmProblem(65, 47, 33), dtype, host, fresh)


# --- NumPy 2-byte inputs (host path) ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_numpy_two_byte_inputs(dtype):
    np_dtype = np.float16 if dtype == "float16" else pytest.importorskip("ml_dtypes").bfloat16
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (70, 40)).astype(np_dtype)
    b = rng.uniform(-1, 1, (40, 30)).astype(np_dtype)
    c = rng.uniform(-1, 1, (70, 30)).astype(np.float32)
    out = gemm_driver.gemm(a, b, c, alpha=1.5, beta=0.5)
    assert_right(GemmProblem(70, 30, 40, 1.5, 0.5), dtype, (a.astype(np.float32), b.astype(np.float32), c), out)


# --- the PyTorch baselines, verified like every provider ----------------------------------------------
DRAWN = settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", ["torch", "torch_bf16", "torch_fp16"])
def test_torch_baselines_pass_drawn_cases(session, torch, name):
    @DRAWN
    @given(case=gemm_cases(300))
    def holds(case):
        outcome = check_case(session, name, case)
        assert outcome.ok, f"{case.describe()}: {outcome.message}"

    holds()


def test_torch_fp32_baseline_runs_without_tf32_and_restores_the_setting(session, torch):
    """With TF32 allowed by the caller, the FP32 baseline must still meet the FP32 bound
    (TF32 rounding misses it by orders of magnitude at K = 1024) and leave the setting as it was."""
    matmul = torch.backends.cuda.matmul
    name, allowed = ("fp32_precision", "tf32") if hasattr(matmul, "fp32_precision") else ("allow_tf32", True)
    saved = getattr(matmul, name)
    setattr(matmul, name, allowed)
    try:
        case = GemmCase(GemmProblem(256, 256, 1024, 1.0, 0.0), (0, 0, 0), (0, 0, 0), 5)
        outcome = check_case(session, "torch", case)
        assert outcome.ok, outcome.message
        assert getattr(matmul, name) == allowed
    finally:
        setattr(matmul, name, saved)


@pytest.mark.parametrize("name", ["torch", "torch_bf16"])
def test_torch_baseline_on_a_larger_odd_shape(session, torch, name):
    p = GemmProblem(1031, 517, 2053, -1.0, 0.5)
    with PreparedCase.random(p, "fp32" if name == "torch" else "bf16", 3, guard=1, lds=(2060, 520, 521)) as prepared:
        v = prepared.check(*prepared.run(session.launcher(name, p, *prepared.device())))
    assert v.ok, v.message
