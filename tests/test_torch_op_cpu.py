"""gemm_driver.torch on the CPU: the op's registration (opcheck), torch.compile(fullgraph=True)
and gradients against torch's own linear layer; the CPU implementation goes through
gemm()'s NumPy path. Skipped where torch is not installed (CI)."""

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


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_forward_and_gradients_match_torch(activation, with_bias):
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
