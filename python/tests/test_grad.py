"""Gradients: checked against central finite differences in NumPy, for
plain functions with wrt, @grad functions, several parameters, loops with
a run-time count; value_and_grad; the shape of what grad returns; the
report and explain text."""

import numpy as np
import pytest

import egrad
from conftest import EXAMPLES, central_diff

RNG = np.random.default_rng(7)


def check_fd(prog, name, args, wrt, rtol=1e-6, atol=1e-8):
    f = prog.function(name)
    g = prog.grad(name, wrt=list(wrt))
    names = f.params
    value, grads = g.value_and_grad(*args)
    assert float(value) == float(f(*args))
    assert len(grads) == len(wrt)
    for p, gr in zip(wrt, grads):
        i = names.index(p)
        fd = central_diff(f, args, i)
        assert gr.shape == np.shape(args[i]) and gr.dtype == np.float64
        np.testing.assert_allclose(gr, fd, rtol=rtol, atol=atol, err_msg=f"d{name}/d{p}")


def test_logistic_against_finite_differences(classify):
    X = RNG.standard_normal((7, 3))
    w = RNG.standard_normal(3)
    y = (RNG.random(7) > 0.5).astype(np.float64)
    check_fd(classify, "logistic", [X, w, y], ["w", "X"])


def test_nll_three_parameters(classify):
    W = RNG.standard_normal((4, 3))
    b = RNG.standard_normal(4)
    x = RNG.standard_normal(3)
    y = np.eye(4)[2]
    check_fd(classify, "nll", [W, b, x, y], ["W", "b", "x"])
    # The @grad function says the same.
    dW, db, dx = classify.grad("dnll")(W, b, x, y)
    g = classify.grad("nll", wrt=["W", "b", "x"])(W, b, x, y)
    for a, b_ in zip((dW, db, dx), g):
        assert a.tobytes() == b_.tobytes()


def test_sizes_example_against_finite_differences():
    prog = egrad.compile_file(str(EXAMPLES / "sizes.eg"))
    N, H, W, O = 4, 2, 3, 2
    args = [
        RNG.standard_normal(1),
        RNG.standard_normal(N),
        RNG.standard_normal((H, W)),
        RNG.standard_normal((O, H * W)),
        RNG.standard_normal(O),
        RNG.standard_normal(2 * N) + 2.0,  # away from the kink of sqrt at 0
    ]
    check_fd(prog, "loss", args, ["x0", "x", "Wt", "xy"], rtol=1e-5, atol=1e-7)


def test_run_time_loop_against_finite_differences():
    prog = egrad.compile_file(str(EXAMPLES / "decay.eg"))
    args = [50, RNG.standard_normal(5), 0.7]
    check_fd(prog, "decay", args, ["x", "a"])
    dx, da = prog.grad("ddecay")(*args)
    assert dx.shape == (5,) and da.shape == ()


def test_f32_gradient_of_the_seed(loss_prog):
    w = np.array([1, 2, 3], np.float32)
    x = np.array([4, 5, 6], np.float32)
    g = loss_prog.grad("loss", wrt="w")
    value, dw = g.value_and_grad(w, x, 0.5)
    assert value.dtype == np.float32 and value.shape == () and float(value) == 31.5**2
    assert dw.dtype == np.float32 and dw.tolist() == [252.0, 315.0, 378.0]
    assert g.grad(w, x, 0.5).tolist() == [252.0, 315.0, 378.0]
    assert g(w, x, 0.5).tolist() == [252.0, 315.0, 378.0]
    # The @grad function gives the same gradient.
    assert loss_prog.grad("dloss_dw")(w, x, 0.5).tobytes() == dw.tobytes()


def test_what_grad_returns(loss_prog, classify):
    w = np.array([1, 2, 3], np.float32)
    x = np.array([4, 5, 6], np.float32)
    one = loss_prog.grad("loss", wrt="w")(w, x, 0.5)
    assert isinstance(one, np.ndarray)
    (listed,) = loss_prog.grad("loss", wrt=["w"])(w, x, 0.5)  # a list: a tuple back
    assert listed.tobytes() == one.tobytes()
    g_all = loss_prog.grad("loss")  # None: every parameter, a tuple
    assert g_all.wrt == ["w", "x", "y"]
    dw, dx, dy = g_all(w, x, 0.5)
    assert dx.tolist() == [2 * 31.5 * 1, 2 * 31.5 * 2, 2 * 31.5 * 3]
    assert float(dy) == -2 * 31.5
    # A @grad function of one parameter gives one array, of three a tuple.
    assert isinstance(loss_prog.grad("dloss_dw")(w, x, 0.5), np.ndarray)
    assert classify.grad("dnll").wrt == ["W", "b", "x"]


def test_gradient_metadata(loss_prog):
    g = loss_prog.grad("loss", wrt="w")
    assert (g.name, g.wrt, g.params) == ("loss", ["w"], ["w", "x", "y"])
    assert g.signature == "loss[N](w: f32[N], x: f32[N], y: f32) -> f32"
    assert repr(g) == "<egrad.Gradient of loss[N](w: f32[N], x: f32[N], y: f32) -> f32 with respect to w>"
    # A @grad function: its body is what is differentiated, under its name.
    d = loss_prog.grad("dloss_dw")
    assert (d.name, d.wrt) == ("dloss_dw", ["w"])
    assert d.signature == "dloss_dw[N](w: f32[N], x: f32[N], y: f32) -> f32"
    for stage, needle in (("ir", "fn dloss_dw"), ("ad", "fn "), ("extracted", "fn dloss_dw"), ("clif", "function")):
        assert needle in d.dump(stage), stage


def test_report(loss_prog):
    r = loss_prog.grad("loss", wrt=["w"]).report()
    lines = r.splitlines()
    assert lines[0] == "gradient of `loss` with respect to `w`"
    assert lines[1].startswith("ops before: ")
    assert lines[2].startswith("ops after:  ")
    assert lines[3].startswith("cost (flops + λ·residual bytes, λ = 0.25, at N=1000): before ")
    assert lines[4].startswith("e-graph: ") and "stop: saturated" in lines[4]
    assert "residuals:" in r and "store or recompute:" in r
    # λ and dims reach the cost model.
    r2 = loss_prog.grad("loss", wrt=["w"], lam=2.0, dims={"N": 64}).report()
    assert "λ = 2, at N=64" in r2
    assert "e-graph: off (--no-optimize)" in loss_prog.grad("loss", wrt="w", no_optimize=True).report()


def test_explain(loss_prog):
    text = loss_prog.explain("loss", wrt=["w"])
    lines = text.splitlines()
    assert lines[0] == "cache key of `loss`:"
    assert "  function: loss" in lines
    assert "  transform: grad wrt [w] (value and gradient)" in lines
    assert "  lambda: 0.25" in lines
    assert "dynamic (checked at entry; sizes are not part of the key):" in lines
    assert "  y: f32 scalar, value dynamic" in lines
    assert any(l.startswith("residuals (λ = 0.25") for l in lines)
    # The same text from the Gradient, and from a @grad function.
    assert loss_prog.grad("loss", wrt=["w"]).explain() == text
    assert "transform: grad wrt [w]" in loss_prog.explain("dloss_dw")
    # A plain function: no transform, no residuals.
    plain = loss_prog.explain("loss")
    assert "residuals" not in plain and loss_prog.function("loss").explain() == plain
    assert "  lambda: 4.0" in loss_prog.explain("loss", wrt="w", lam=4.0).splitlines()
    diff = loss_prog.explain("loss", wrt="w", lam_before=1.0)
    assert "recompile against lam_before:\n  changed lambda" in diff
    same = loss_prog.explain("loss", wrt="w", lam_before=0.25)
    assert same.endswith("recompile against lam_before:\n  same key: the cached program would be reused\n")


def mlp2_args(B=6, I=4, H=5, O=3, seed=3):
    rng = np.random.default_rng(seed)
    shapes = [(I, H), (H,), (H, O), (O,), (B, I), (B, O)]
    return [rng.standard_normal(s) for s in shapes]


def test_mlp_against_finite_differences():
    prog = egrad.compile_file(str(EXAMPLES / "suite" / "mlp2.eg"))
    check_fd(prog, "mlp2", mlp2_args(), ["W1", "b1", "W2", "b2"])


def test_lambda_changes_the_program_not_the_values():
    prog = egrad.compile_file(str(EXAMPLES / "suite" / "mlp2.eg"))
    args = mlp2_args()
    stores = prog.grad("mlp2_grad", lam=0.0)
    recomputes = prog.grad("mlp2_grad", lam=1e6)
    assert stores.report() != recomputes.report()
    v0, g0 = stores.value_and_grad(*args)
    v1, g1 = recomputes.value_and_grad(*args)
    np.testing.assert_allclose(float(v0), float(v1), rtol=1e-12)
    assert len(g0) == len(g1) == 4
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
