"""egrad.jax: egrad functions inside jax.jit, jax.grad and jax.vmap, their
gradients checked against jax.grad of the same program written in
jax.numpy."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import egrad
from conftest import EXAMPLES, ROOT, require

jax = require("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import egrad.jax  # noqa: E402

RNG = np.random.default_rng(5)


def jnp_mlp2(W1, b1, W2, b2, X, Y):  # examples/suite/mlp2.eg in jax.numpy
    err = jnp.tanh(X @ W1 + b1) @ W2 + b2 - Y
    return jnp.sum(err * err) / 640


def jnp_loss(w, x, y):  # examples/loss.eg
    err = jnp.sum(w * x) - y
    return err * err


def jnp_decay(n, x, a):  # examples/decay.eg
    return jnp.sum(jax.lax.fori_loop(0, n, lambda _, s: s * 0.99 + 0.01 * jnp.tanh(a * s), x))


@pytest.fixture(scope="module")
def mlp2():
    return egrad.jax.function(egrad.compile_file(str(EXAMPLES / "suite" / "mlp2.eg")), "mlp2")


def mlp2_data(B=16, I=4, H=6, O=3):
    params = [RNG.standard_normal(s) for s in [(I, H), (H,), (H, O), (O,)]]
    return params, RNG.standard_normal((B, I)), RNG.standard_normal((B, O))


def assert_close(ours, theirs, rtol=1e-12, atol=1e-14):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


def test_gradients_match_jax(mlp2):
    params, X, Y = mlp2_data()
    assert mlp2.wrt == ["W1", "b1", "W2", "b2", "X", "Y"]  # every float parameter
    ours = jax.value_and_grad(mlp2, argnums=(0, 1, 2, 3, 4, 5))(*params, X, Y)
    theirs = jax.value_and_grad(jnp_mlp2, argnums=(0, 1, 2, 3, 4, 5))(*params, X, Y)
    assert_close(ours[0], theirs[0])
    for a, b in zip(ours[1], theirs[1]):
        assert_close(a, b)
    # A cotangent other than 1: the chain rule through egrad's VJP.
    ours = jax.grad(lambda *a: jnp.sin(3.0 * mlp2(*a)), argnums=(0, 3))(*params, X, Y)
    theirs = jax.grad(lambda *a: jnp.sin(3.0 * jnp_mlp2(*a)), argnums=(0, 3))(*params, X, Y)
    for a, b in zip(ours, theirs):
        assert_close(a, b)


def test_jitted_training_step_matches_jax(mlp2):
    params, X, Y = mlp2_data()

    def make_step(loss):
        @jax.jit
        def step(params, X, Y):
            # egrad's loss composed with a JAX regularizer, in one jitted step.
            def total(p):
                return loss(*p, X, Y) + 1e-3 * jnp.sum(p[0] ** 2)

            value, grads = jax.value_and_grad(total)(params)
            return [p - 0.5 * g for p, g in zip(params, grads)], value

        return step

    ours, theirs = make_step(mlp2), make_step(jnp_mlp2)
    p_ours = p_theirs = [jnp.asarray(p) for p in params]
    losses = []
    for _ in range(5):
        p_ours, l_ours = ours(p_ours, X, Y)
        p_theirs, l_theirs = theirs(p_theirs, X, Y)
        assert_close(l_ours, l_theirs)
        for a, b in zip(p_ours, p_theirs):
            assert_close(a, b)
        losses.append(float(l_ours))
    assert losses[-1] < losses[0]  # it trains


def test_float32(mlp2):
    loss = egrad.jax.function(egrad.compile_file(str(EXAMPLES / "loss.eg")), "loss")
    w, x = RNG.standard_normal(16).astype(np.float32), RNG.standard_normal(16).astype(np.float32)
    y = np.float32(0.5)
    value, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(w, x, y)
    j_value, j_grads = jax.value_and_grad(jnp_loss, argnums=(0, 1, 2))(w, x, y)
    assert value.dtype == np.float32
    assert_close(value, j_value, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads, j_grads):
        assert_close(a, b, rtol=1e-5, atol=1e-5)
    # An f64 program given float32 arrays: computed in f64, cotangents in float32.
    params, X, Y = mlp2_data()
    p32 = [p.astype(np.float32) for p in params]
    g32 = jax.grad(mlp2, argnums=(0, 1))(*p32, X, Y)
    assert [g.dtype for g in g32] == [np.float32, np.float32]
    assert_close(g32[0], jax.grad(jnp_mlp2)(*params, X, Y).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_vmap_per_example_gradients():
    loss = egrad.jax.function(egrad.compile_file(str(EXAMPLES / "loss.eg")), "loss")
    w = RNG.standard_normal(8).astype(np.float32)
    xs = RNG.standard_normal((5, 8)).astype(np.float32)
    ys = RNG.standard_normal(5).astype(np.float32)
    per_example = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))(w, xs, ys)
    expected = jax.vmap(jax.grad(jnp_loss), in_axes=(None, 0, 0))(w, xs, ys)
    assert per_example.shape == (5, 8)
    assert_close(per_example, expected, rtol=1e-5, atol=1e-5)
    values = jax.vmap(loss, in_axes=(None, 0, 0))(w, xs, ys)
    assert_close(values, jax.vmap(jnp_loss, in_axes=(None, 0, 0))(w, xs, ys), rtol=1e-5, atol=1e-5)


def test_integer_argument_and_keywords():
    decay = egrad.jax.function(egrad.compile_file(str(EXAMPLES / "decay.eg")), "decay")
    assert decay.wrt == ["x", "a"]  # not the i64 count
    x = RNG.standard_normal(5)
    ours = jax.jit(jax.grad(decay, argnums=(1, 2)))(30, x, 0.7)
    theirs = jax.grad(jnp_decay, argnums=(1, 2))(30, x, 0.7)
    for a, b in zip(ours, theirs):
        assert_close(a, b)
    # By parameter name, as egrad's own functions are called.
    assert_close(decay(30, a=0.7, x=x), jnp_decay(30, x, 0.7))
    with pytest.raises(TypeError, match="missing arguments: a"):
        decay(30, x)


def test_wrt_subset():
    prog = egrad.compile_file(str(EXAMPLES / "suite" / "mlp2.eg"))
    f = egrad.jax.function(prog, "mlp2", wrt=["W1"])
    assert f.gradient.wrt == ["W1"]
    params, X, Y = mlp2_data()
    dW1, dX = jax.grad(f, argnums=(0, 4))(*params, X, Y)
    assert_close(dW1, jax.grad(jnp_mlp2)(*params, X, Y))
    # Outside wrt a parameter is a constant, as under jax.lax.stop_gradient.
    assert not np.any(dX) and dX.shape == X.shape


def test_refusals():
    prog = egrad.compile_file(str(EXAMPLES / "suite" / "mlp2.eg"))
    with pytest.raises(ValueError, match="one f32 or f64 scalar result"):
        egrad.jax.function(prog, "mlp2_grad")  # four array results
    decay = egrad.compile_file(str(EXAMPLES / "decay.eg"))
    with pytest.raises(ValueError, match="parameter `n` of `decay` is i64"):
        egrad.jax.function(decay, "decay", wrt=["n"])
    with pytest.raises(ValueError, match="no parameter `z`"):
        egrad.jax.function(decay, "decay", wrt="z")


WITHOUT_X64 = textwrap.dedent(
    """
    import jax, numpy as np, egrad, egrad.jax
    f = egrad.jax.function(egrad.compile_file("../examples/suite/mlp2.eg"), "mlp2")
    r = np.random.default_rng(0)
    args = [r.standard_normal(s) for s in [(4, 5), (5,), (5, 3), (3,), (8, 4), (8, 3)]]
    v, g = jax.jit(jax.value_and_grad(f))(*args)
    print(v.dtype, g.dtype, g.shape)
    """
)


def test_without_x64_results_are_float32():
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_X64], capture_output=True, text=True, check=True, cwd=ROOT / "python"
    ).stdout
    assert out.split() == ["float32", "float32", "(4,", "5)"]
