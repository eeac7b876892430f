"""egrad.torch: an egrad function in PyTorch's autograd, its gradients
checked against torch.autograd on the same program written in torch and
against finite differences (gradcheck). Skipped when torch is absent."""

import numpy as np
import pytest

import egrad
from conftest import EXAMPLES

torch = pytest.importorskip("torch")
import egrad.torch  # noqa: E402

RNG = np.random.default_rng(9)


def torch_mlp2(W1, b1, W2, b2, X, Y):  # examples/suite/mlp2.eg in torch
    err = torch.tanh(X @ W1 + b1) @ W2 + b2 - Y
    return (err * err).sum() / 640


def tensors(B=6, I=4, H=5, O=3):
    shapes = [(I, H), (H,), (H, O), (O,), (B, I), (B, O)]
    return [torch.tensor(RNG.standard_normal(s), dtype=torch.float64, requires_grad=k < 4) for k, s in enumerate(shapes)]


def test_seed_program_f32():
    loss = egrad.torch.function(egrad.compile_file(str(EXAMPLES / "loss.eg")), "loss")
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = torch.tensor([4.0, 5.0, 6.0])
    value = loss(w, x, 0.5)
    assert value.dtype == torch.float32 and value.shape == () and value.item() == 992.25
    value.backward()
    assert w.grad.dtype == torch.float32 and w.grad.tolist() == [252.0, 315.0, 378.0]


def test_mlp_matches_torch_autograd():
    mlp2 = egrad.torch.function(egrad.compile_file(str(EXAMPLES / "suite" / "mlp2.eg")), "mlp2")
    args = tensors()
    # A cotangent other than 1: the chain rule through egrad's backward.
    ours = torch.autograd.grad(torch.sin(3 * mlp2(*args)), args[:4])
    theirs = torch.autograd.grad(torch.sin(3 * torch_mlp2(*args)), args[:4])
    for a, b in zip(ours, theirs):
        assert a.dtype == torch.float64 and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    # Against finite differences, every parameter at once.
    assert torch.autograd.gradcheck(mlp2, tuple(args))


def test_integer_argument_and_wrt_subset():
    prog = egrad.compile_file(str(EXAMPLES / "decay.eg"))
    decay = egrad.torch.function(prog, "decay", wrt=["x"])
    x = torch.tensor(RNG.standard_normal(5), requires_grad=True)
    a = torch.tensor(0.7, requires_grad=True)
    decay(30, x, a).backward()
    s = x.detach().clone().requires_grad_(True)
    state = s
    for _ in range(30):
        state = state * 0.99 + 0.01 * torch.tanh(0.7 * state)
    state.sum().backward()
    torch.testing.assert_close(x.grad, s.grad, rtol=1e-12, atol=1e-14)
    assert a.grad is None  # outside wrt: no gradient
    with pytest.raises(ValueError, match="one f32 or f64 scalar result"):
        egrad.torch.function(prog, "ddecay")
