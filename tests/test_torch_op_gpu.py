"""gemm_driver.torch on the GPU: the op against torch's linear layer (forward and backward,
BF16), under torch.compile(fullgraph=True) with inductor, inside a CUDA graph, the eager
path against the op, the route cache across calls and streams, the bias gradient as a GEMM,
and short training runs of tools/train_mlp.py (the library route eager and graphed,
hopper_bf16 graphed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gt(torch):
    import gemm_driver.torch as gt

    return gt


def rel(torch, got, want):
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def operands(torch, m=256, k=192, n=320, dtype=None):
    g = torch.Generator(device="cuda").manual_seed(0)
    dtype = dtype or torch.bfloat16
    return [(torch.randn(*s, device="cuda", generator=g) * 0.5).to(dtype).requires_grad_()
            for s in ((m, k), (n, k), (n,))]


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
def test_forward_and_backward_match_torch_in_bf16(torch, gt, activation):
    x, w, b = operands(torch)
    y = gt.linear(x, w, b, activation)
    v = torch.nn.functional.linear(x.double(), w.double(), b.double())
    want = {None: v, "relu": torch.relu(v), "gelu": torch.nn.functional.gelu(v, approximate="tanh")}[activation]
    assert y.dtype == torch.bfloat16 and rel(torch, y, want) < 1e-2
    dy = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w, b), dy)
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    v = torch.nn.functional.linear(x64, w64, b64)
    ref = {None: v, "relu": torch.relu(v), "gelu": torch.nn.functional.gelu(v, approximate="tanh")}[activation]
    expected = torch.autograd.grad(ref, (x64, w64, b64), dy.double())
    for got, exp in zip(grads, expected):
        assert rel(torch, got, exp) < 2e-2
    print("ran:", gt.ran)


def test_bias_gradient_is_a_gemm_on_the_named_kernel(torch, gt, monkeypatch):
    """With hopper_bf16 named, dbias = ones (1 x M) @ dY' on it (_column_sums: a route of A 1 x M);
    against float64 and against torch's sum (dbias_gemm off), eager and in a captured graph."""
    from gemm_driver.torch import routes

    x, w, b = operands(torch, m=300)
    dy = torch.randn(300, 320, device="cuda").bfloat16()

    def grads():
        y = gt.linear(x, w, b, "gelu", kernel="hopper_bf16")
        return torch.autograd.grad(y, (x, w, b), dy)

    gemm_db = grads()[2]
    assert (300, torch.bfloat16, x.device) in gt._ONES
    assert any(key[0] == (1, 300) for key in routes._ROUTES._routes)  # a = the row of ones
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = torch.nn.functional.gelu(torch.nn.functional.linear(x64, w64, b64), approximate="tanh")
    want = torch.autograd.grad(ref, b64, dy.double())[0]
    assert rel(torch, gemm_db, want) < 2e-2
    monkeypatch.setattr(gt, "dbias_gemm", False)
    assert rel(torch, grads()[2], gemm_db) < 1e-2
    monkeypatch.setattr(gt, "dbias_gemm", True)
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        grads()  # warm-up on the capture's stream
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        captured = grads()[2]
    graph.replay()
    torch.cuda.synchronize()
    assert rel(torch, captured, want) < 2e-2


def test_compiled_fullgraph_with_inductor(torch, gt, monkeypatch):
    torch._dynamo.reset()
    # compile in this process: a pool of compile workers left behind keeps an xdist worker alive
    monkeypatch.setattr(torch._inductor.config, "compile_threads", 1)
    model = torch.nn.Sequential(gt.Linear(192, 256, activation="gelu"), gt.Linear(256, 64)).cuda().bfloat16()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(128, 192, device="cuda", dtype=torch.bfloat16)
    y = compiled(x)
    assert rel(torch, y, model(x)) < 1e-2
    y.float().square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_inside_a_cuda_graph(torch, gt):
    layer = gt.Linear(192, 256, activation="relu").cuda().bfloat16()
    x = torch.randn(128, 192, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    with torch.no_grad():
        with torch.cuda.stream(side):
            layer(x)  # warm-up: plans made, kernels loaded, routes found
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = layer(x)
        for _ in range(2):
            x.copy_(torch.randn_like(x))
            graph.replay()
            torch.cuda.synchronize()
            want = torch.relu(torch.nn.functional.linear(x.double(), layer.weight.double(), layer.bias.double()))
            assert rel(torch, y, want) < 1e-2


@pytest.mark.parametrize("graphed, kernel", [(False, None), (True, None), (True, "hopper_bf16")],
                         ids=["eager", "graph", "graph-hopper"])
def test_short_training_run_agrees_with_torch(torch, graphed, kernel):
    command = [sys.executable, str(ROOT / "tools" / "train_mlp.py"), "--steps", "60", "--rounds", "1", "--check",
               *(["--graph"] if graphed else []), *(["--kernel", kernel] if kernel else [])]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


def test_eager_path_and_op_agree_bitwise(torch, gt, monkeypatch):
    x, w, b = operands(torch)
    results = []
    for direct in (True, False):
        monkeypatch.setattr(gt, "direct_eager", direct)
        y = gt.linear(x, w, b, "gelu")
        results.append((y, *torch.autograd.grad(y.float().square().sum(), (x, w, b))))
    for mine, theirs in zip(*results):
        assert torch.equal(mine, theirs)


def test_routes_are_reused_across_calls_and_streams(torch, gt):
    from gemm_driver.torch import routes

    x, w, b = (t.detach() for t in operands(torch))
    gt.linear(x, w, b, "relu")
    before = routes.stats()
    for _ in range(5):
        y = gt.linear(x, w, b, "relu")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        z = gt.linear(x, w, b, "relu")
    torch.cuda.current_stream().wait_stream(side)
    after = routes.stats()
    assert after["misses"] == before["misses"] and after["hits"] == before["hits"] + 6
    # outs alternate between two blocks of torch's allocator, the side stream's is a third
    assert after["launches_made"] <= before["launches_made"] + 3
    want = torch.relu(torch.nn.functional.linear(x.double(), w.double(), b.double()))
    assert rel(torch, y, want) < 1e-2 and rel(torch, z, want) < 1e-2
    gt.linear(x[:128], w, b, "relu")  # a new shape: a new route
    assert routes.stats()["misses"] == after["misses"] + 1


def test_inputs_at_new_addresses_repoint_the_hopper_launch_and_stay_right(torch, gt):
    """Each x at a new address (all kept alive) makes the plan re-point its last Launch
    (Plan._repointed: A's tensor map pointed at the new address, the rest copied); every output is checked
    element by element against float64, and the first x again (a kept Launch) as well."""
    from gemm_driver.torch import routes

    g = torch.Generator(device="cuda").manual_seed(5)
    w = (torch.randn(384, 256, device="cuda", generator=g) * 0.5).bfloat16()
    b = torch.randn(384, device="cuda", generator=g).bfloat16()
    xs = [(torch.randn(200, 256, device="cuda", generator=g) * 0.5).bfloat16() for _ in range(5)]

    def check(x):
        y = gt.linear(x, w, b, "gelu", kernel="hopper_bf16")
        want = torch.nn.functional.gelu(torch.nn.functional.linear(x.double(), w.double(), b.double()),
                                        approximate="tanh")
        assert torch.all((y.double() - want).abs() <= 2.0**-7 * want.abs() + 2e-2)
        assert gt.ran["forward"] == "hopper_bf16 (fused)"

    check(xs[0])
    before = routes.stats()
    for x in xs[1:]:
        check(x)
    check(xs[0])
    after = routes.stats()
    assert after["launches_repointed"] >= before["launches_repointed"] + 4
    ours = [p for route in routes._ROUTES._routes.values() for p in (route.fused, route.wide)
            if p is not None and p.kernel == "hopper_bf16"]
    assert ours and all(p.tunables["PDL"] == 0 for p in ours)  # routes.PDL: launched without PDL


def test_a_hopper_plan_at_new_addresses_of_every_operand_reads_and_writes_there(torch):
    """A, B, out and the bias at new addresses each call (all kept alive, so none is met
    again): each Launch is re-pointed from the last, its A, B and C tensor maps pointed at the
    new addresses (tensor_map.readdress). Every out is poisoned with NaN beforehand, checked
    against float64 and its guard columns (ldc > N) must stay NaN."""
    from gemm_driver import api

    m, n, k = 300, 384, 256
    plan = api.plan(m, n, k, dtype="bfloat16", kernel="hopper_bf16", trans_b=True, out_dtype="bfloat16", bias=True)
    g = torch.Generator(device="cuda").manual_seed(9)
    kept = []
    for _ in range(4):
        a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).bfloat16()
        w = (torch.randn(n, k, device="cuda", generator=g) * 0.5).bfloat16()
        bias = torch.randn(n, device="cuda", generator=g).bfloat16()
        padded = torch.full((m, n + 8), float("nan"), device="cuda", dtype=torch.bfloat16)
        plan(a, w.t(), padded[:, :n], bias=bias)
        want = a.double() @ w.double().t() + bias.double()
        got = padded[:, :n].double()
        assert torch.all((got - want).abs() <= 2.0**-7 * want.abs() + 2e-2)
        assert torch.isnan(padded[:, n:]).all()
        kept.append((a, w, bias, padded))
    assert plan.launches_made == 4 and plan.launches_repointed == 3
