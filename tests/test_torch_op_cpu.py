"""gemm_driver.torch on the CPU: the op's registration (opcheck), torch.compile(fullgraph=True)
and gradients against torch's own linear layer, on the eager path and through the op; the
CPU implementation goes through gemm()'s NumPy path. The CUDA path's route cache runs here
on CPU tensors posing as GPU 0 with test_plan_cpu's stand-in Session (launches recorded,
not run). Skipped where torch is not installed (CI)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="gemm_driver.torch needs torch, which is not installed here")
gt = pytest.importorskip("gemm_driver.torch")


def reference(x, w, b, activation):
    v = torch.nn.functional.linear(x, w, b)
    return {None: v, "relu": torch.relu(v), "gelu": torch.nn.functional.gelu(v, approximate="tanh")}[activation]


def operands(m=5, k=6, n=4, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g).requires_grad_(requires_grad) for shape in ((m, k), (n, k), (n,))]


@pytest.mark.parametrize("direct", [True, False], ids=["eager-path", "op"])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_forward_and_gradients_match_torch(activation, with_bias, direct, monkeypatch):
    monkeypatch.setattr(gt, "direct_eager", direct)
    x, w, b = operands(requires_grad=True)
    b = b if with_bias else None
    y = gt.linear(x, w, b, activation)
    want = reference(x, w, b, activation)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    dy = torch.randn_like(y)
    got = torch.autograd.grad(y, [t for t in (x, w, b) if t is not None], dy)
    expected = torch.autograd.grad(want, [t for t in (x, w, b) if t is not None], dy)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    assert gt.ran["cpu"] == "numpy"


@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("save_pre", [False, True])
def test_opcheck(activation, save_pre):
    x, w, b = operands(requires_grad=True)
    torch.library.opcheck(torch.ops.gemm_driver.linear.default, (x, w, b, activation, None, save_pre))
    torch.library.opcheck(torch.ops.gemm_driver.matmul.default, (x, w.t().detach(), None))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiles_with_fullgraph_forward_and_backward(backend):
    torch._dynamo.reset()
    model = torch.nn.Sequential(gt.Linear(6, 8, activation="gelu"), gt.Linear(8, 3))
    twin = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for mine, theirs in zip(model.parameters(), twin.parameters()):
            theirs.copy_(mine)
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    x = torch.randn(5, 6)
    y = compiled(x)
    torch.testing.assert_close(y, twin(x), rtol=1e-5, atol=1e-5)
    y.square().sum().backward()
    twin(x).square().sum().backward()
    for mine, theirs in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)


def test_leading_dimensions_and_bad_activation():
    x, w, b = operands()
    x3 = x.reshape(1, 5, 6)
    assert gt.linear(x3, w, b).shape == (1, 5, 4)
    with pytest.raises(ValueError, match=r"^activation must be None, 'relu' or 'gelu'"):
        gt.linear(x, w, b, "tanh")


def test_linear_module_trains_like_nn_linear():
    torch.manual_seed(0)
    mine = gt.Linear(6, 4, activation="relu")
    theirs = torch.nn.Linear(6, 4)
    theirs.load_state_dict(mine.state_dict())
    x, target = torch.randn(16, 6), torch.randn(16, 4)
    losses = []
    for model, act in ((mine, lambda v: v), (theirs, torch.relu)):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        curve = []
        for _ in range(20):
            opt.zero_grad()
            loss = (act(model(x)) - target).square().mean()
            loss.backward()
            opt.step()
            curve.append(loss.item())
        losses.append(curve)
    assert losses[0][-1] < losses[0][0]
    torch.testing.assert_close(torch.tensor(losses[0]), torch.tensor(losses[1]), rtol=1e-4, atol=1e-6)


# --- the eager path ------------------------------------------------------------------------------
def test_eager_path_is_taken_only_for_plain_eager_calls(monkeypatch):
    x, w, b = operands()
    assert gt._plain_eager(x, w, b) and gt._plain_eager(x, torch.nn.Parameter(w), None)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        assert not gt._plain_eager(mode.from_tensor(x), mode.from_tensor(w), None)
    with torch.device("cpu"):  # a function mode
        assert not gt._plain_eager(x, w, b)
    assert not gt._plain_eager(x.to("meta"), w.to("meta"), None)
    monkeypatch.setattr(gt, "direct_eager", False)
    assert not gt._plain_eager(x, w, b)


def test_backward_skips_the_gemms_nobody_needs(monkeypatch):
    calls = []
    real = gt._gemm_cpu
    monkeypatch.setattr(gt, "_gemm_cpu", lambda a, b, bias, act: calls.append(tuple(a.shape)) or real(a, b, bias, act))
    x, w, b = operands()
    w.requires_grad_()
    gt.linear(x, w, b, "gelu").square().sum().backward()  # x needs no gradient: no dX GEMM
    assert calls == [(5, 6), (4, 5)]  # the forward, then dW = dY'^T X
    assert x.grad is None and w.grad is not None and b.grad is None


@pytest.mark.parametrize("direct", [True, False], ids=["eager-path", "op"])
def test_double_backward_matches_torch(direct, monkeypatch):
    monkeypatch.setattr(gt, "direct_eager", direct)
    x, w, b = operands(requires_grad=True)
    mine, theirs = gt.linear(x, w, b, "gelu"), reference(x, w, b, "gelu")
    (gx,) = torch.autograd.grad(mine.square().sum(), x, create_graph=True)
    (tx,) = torch.autograd.grad(theirs.square().sum(), x, create_graph=True)
    torch.testing.assert_close(gx, tx, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.autograd.grad(gx.sum(), w)[0], torch.autograd.grad(tx.sum(), w)[0],
                               rtol=1e-4, atol=1e-4)


# --- the CUDA path's routes, on CPU tensors posing as GPU 0 -------------------------------------
routes = pytest.importorskip("gemm_driver.torch.routes")


class DeviceLike:
    """What route_key reads of a tensor, on any device."""

    def __init__(self, t, device):
        self.shape, self.dtype, self._stride, self._device = t.shape, t.dtype, t.stride(), device

    def stride(self):
        return self._stride

    def get_device(self):
        return self._device


def test_route_keys_hold_what_the_plan_binds():
    x, w, b = operands()
    key = routes.route_key(x, w.t(), b, "gelu", torch.float32, None)
    assert key == routes.route_key(x.clone(), w.t().clone().t().t(), b.clone(), "gelu", torch.float32, None)
    others = [routes.route_key(x[:4], w.t(), b, "gelu", torch.float32, None),  # shape
              routes.route_key(x, w.t().contiguous(), b, "gelu", torch.float32, None),  # layout
              routes.route_key(x.double(), w.t(), b, "gelu", torch.float32, None),  # dtype
              routes.route_key(x, w.t(), None, "gelu", torch.float32, None),  # no bias
              routes.route_key(x, w.t(), b, None, torch.float32, None),  # activation
              routes.route_key(x, w.t(), b, "gelu", torch.bfloat16, None),  # output dtype
              routes.route_key(x, w.t(), b, "gelu", torch.float32, "cublas"),  # kernel
              routes.route_key(DeviceLike(x, 1), w.t(), b, "gelu", torch.float32, None)]  # device
    assert len({key, *others}) == len(others) + 1


def test_route_cache_is_bounded_and_least_recently_used_goes_first():
    cache, made = routes.RouteCache(size=2), []

    def make(name):
        return lambda: made.append(name) or name

    assert [cache.get(k, make(k)) for k in "aab"] == ["a", "a", "b"]
    cache.get("a", make("a"))  # a used last: b is the oldest now
    cache.get("c", make("c"))
    cache.get("a", make("a"))
    cache.get("b", make("b"))  # dropped, made again
    assert made == ["a", "b", "c", "b"] and len(cache) == 2
    assert (cache.hits, cache.misses) == (3, 4)


@pytest.fixture
def fake_cuda(monkeypatch):
    """The CUDA path on CPU tensors: test_plan_cpu's stand-in Session behind api.plan(), every
    tensor on GPU 0, torch's current stream a number the test sets, events recorded nowhere."""
    from test_plan_cpu import FakeSession

    from gemm_driver import api, plans

    session = FakeSession()
    monkeypatch.setattr(api, "default_session", lambda: session)
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    session.current = 7
    monkeypatch.setattr(routes, "current_stream", lambda device: session.current)
    monkeypatch.setattr(routes, "_ROUTES", routes.RouteCache())
    monkeypatch.setattr(plans, "Event", lambda: type("Event", (), {"record": lambda self, stream: None})())
    monkeypatch.setattr(plans, "stream_wait", lambda stream, event: None)
    monkeypatch.setattr(plans, "stream_is_capturing", lambda raw: False)
    return session


def bf16(*tensors):
    return [t.bfloat16() for t in tensors]


def test_a_configuration_is_planned_once_then_launched_on_raw_addresses(fake_cuda, monkeypatch):
    x, w, b = bf16(*operands())
    checked = []
    real_run = routes.api.Plan.run
    monkeypatch.setattr(routes.api.Plan, "run", lambda self, *a, **k: checked.append(1) or real_run(self, *a, **k))
    for stream in (7, 7, 9):  # another stream is the same route, launched there
        fake_cuda.current = stream
        y = gt._gemm_cuda("forward", x, w.t(), b, "gelu", torch.bfloat16, None)
    assert y.shape == (5, 4) and y.dtype == torch.bfloat16
    assert routes.stats()["routes"] == 1 and (routes._ROUTES.hits, routes._ROUTES.misses) == (2, 1)
    assert checked == [1]  # only the first call parsed and checked the tensors
    assert fake_cuda.runs == [7, 7, 9]
    name, problem, _, opb, _, _ = fake_cuda.launchers[0]
    assert (name, problem.epilogue, problem.out_dtype, problem.layout) == ("cublaslt_bf16", "bias_gelu", "bf16", "nt")
    assert opb.ptr == w.data_ptr() and opb.trans and fake_cuda.biases[0].ptr == b.data_ptr()
    assert gt.ran["forward"] == "cublaslt_bf16 (fused)"
    gt._gemm_cuda("forward", x[:3], w.t(), b, "gelu", torch.bfloat16, None)  # a new shape: a new route
    assert routes.stats()["routes"] == 2 and routes._ROUTES.misses == 2


def test_new_addresses_make_a_new_launch_in_the_same_route(fake_cuda):
    x, w = bf16(*operands()[:2])
    gt._gemm_cuda("matmul", x, w.t(), None, "none", torch.bfloat16, None)
    before = routes.stats()["launches_made"]
    gt._gemm_cuda("matmul", x.clone(), w.t(), None, "none", torch.bfloat16, None)
    assert routes.stats()["launches_made"] >= before + 1 and routes.stats()["routes"] == 1
    assert fake_cuda.launchers[-1][2].ptr != x.data_ptr()


def test_no_kernel_with_the_epilogue_runs_fp32_out_and_torch_epilogue(fake_cuda, monkeypatch):
    import dataclasses

    from gemm_driver import kernels

    for name in ("cublas_bf16", "cublaslt_bf16", "torch_bf16"):
        monkeypatch.setitem(kernels.ALL, name, dataclasses.replace(kernels.get(name), out_dtypes=("fp32",),
                                                                    epilogues=("none",)))
    x, w, b = bf16(*operands())
    for _ in range(2):
        y = gt._gemm_cuda("forward", x, w.t(), b, "relu", torch.bfloat16, None)
    assert y.dtype == torch.bfloat16 and gt.ran["forward"] == "cublas_bf16 (torch epilogue)"
    assert {(p.out_dtype, p.epilogue) for _, p, *_ in fake_cuda.launchers} == {("fp32", "none")}
    assert fake_cuda.runs == [7, 7]


def test_layouts_no_kernel_reads_are_copied_each_call(fake_cuda):
    x, w = bf16(*operands()[:2])
    strided = torch.zeros(5, 12, dtype=torch.bfloat16)[:, ::2]  # column stride 2: neither layout
    for _ in range(2):
        gt._gemm_cuda("matmul", strided, w.t(), None, "none", torch.bfloat16, None)
    route = next(iter(routes._ROUTES._routes.values()))
    assert route.copy_a and not route.copy_b and route.lda == 6
    assert all(launcher[2].ptr != strided.data_ptr() for launcher in fake_cuda.launchers)


def test_a_refused_first_call_is_not_kept_as_checked(fake_cuda):
    x, w = bf16(*operands()[:2])
    with pytest.raises(TypeError, match=r"^B has dtype float32; this call takes bfloat16"):
        gt._gemm_cuda("matmul", x, w.t().float(), None, "none", torch.bfloat16, None)
    with pytest.raises(TypeError, match=r"^B has dtype float32"):  # refused again, not launched on raw addresses
        gt._gemm_cuda("matmul", x, w.t().float(), None, "none", torch.bfloat16, None)
    assert fake_cuda.runs == []
