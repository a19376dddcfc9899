"""Plan launches captured in CUDA graphs (torch.cuda.graph and the driver layer's Graph) and
replayed on new values copied into the same buffers: own kernels, cuBLAS and cuBLASLt."""

from __future__ import annotations

import pytest

import gemm_driver
from gemm_driver.kernels.providers import torch_unavailable

pytestmark = pytest.mark.gpu
# (dtype, kernel): an own kernel, cuBLAS GemmEx and cuBLASLt in each of two precisions.
KERNELS = [("float32", "autotuned"), ("float32", "cublas"), ("bfloat16", "hopper_bf16"),
           ("bfloat16", "cublas_bf16"), ("bfloat16", "cublaslt_bf16")]


@pytest.fixture(scope="module")
def torch():
    if (reason := torch_unavailable()) is not None:
        pytest.skip(reason)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def fill(torch, a, b, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a.copy_(torch.rand(a.shape, device="cuda", generator=g) * 2 - 1)
    b.copy_(torch.rand(b.shape, device="cuda", generator=g) * 2 - 1)


def expected(torch, a, b):
    return a.double() @ b.double()


def operands(torch, dtype, m=192, n=160, k=224):
    dt = getattr(torch, dtype)
    return (torch.empty(m, k, device="cuda", dtype=dt), torch.empty(k, n, device="cuda", dtype=dt),
            torch.full((m, n), float("nan"), device="cuda"))


def tolerance(dtype):
    return 1e-4 if dtype == "float32" else 2e-2


@pytest.mark.parametrize("dtype, kernel", KERNELS)
def test_torch_graph_replays_with_new_data(torch, dtype, kernel):
    if kernel.startswith("hopper") and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("hopper kernels need sm_90")
    a, b, out = operands(torch, dtype)
    p = gemm_driver.plan(*a.shape[:1], b.shape[1], a.shape[1], dtype=dtype, kernel=kernel)
    side = torch.cuda.Stream()
    fill(torch, a, b, 0)
    with torch.cuda.stream(side):
        p(a, b, out)  # warm-up outside the capture: cuBLASLt measures, kernels load
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        p(a, b, out)
    for seed in (1, 2):
        fill(torch, a, b, seed)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        want = expected(torch, a, b)
        assert torch.isfinite(out).all()
        assert ((out.double() - want).norm() / want.norm()).item() < tolerance(dtype)


@pytest.mark.parametrize("dtype, kernel", KERNELS)
def test_driver_graph_replays_with_new_data(torch, dtype, kernel):
    from gemm_driver.cuda.driver import Stream
    from gemm_driver.cuda.graph import Graph

    if kernel.startswith("hopper") and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("hopper kernels need sm_90")
    a, b, out = operands(torch, dtype)
    p = gemm_driver.plan(*a.shape[:1], b.shape[1], a.shape[1], dtype=dtype, kernel=kernel)
    stream = Stream()
    fill(torch, a, b, 0)
    torch.cuda.synchronize()
    p(a, b, out, stream=stream)
    stream.synchronize()
    graph = Graph(stream, lambda: p(a, b, out, stream=stream))
    for seed in (3, 4):
        fill(torch, a, b, seed)
        out.fill_(float("nan"))
        torch.cuda.synchronize()
        graph.launch()
        stream.synchronize()
        want = expected(torch, a, b)
        assert ((out.double() - want).norm() / want.norm()).item() < tolerance(dtype)
    graph.close()
    stream.close()
