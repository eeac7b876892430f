"""Check egrad's gradients against JAX's.

The same functions are written once in egrad's language (the repository's
examples) and once in ``jax.numpy``; both are differentiated in float64 on
the same random inputs and the gradients compared. Run from anywhere::

    python python/examples/jax_check.py

It needs ``jax`` (``pip install jax``); without it, it says so and exits 0.
``python/tests/test_examples.py`` runs it under pytest (skipped when JAX is
missing).
"""

import pathlib
import sys

import numpy as np

import egrad

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def cases(jnp):
    """(egrad file, function, wrt, the same function in JAX, arguments)."""
    rng = np.random.default_rng(2024)

    def logistic(X, w, y):
        z = X @ w
        return jnp.mean(jnp.logaddexp(0.0, z) - y * z)  # softplus(z) - y z

    def nll(W, b, x, y):
        s = W @ x + b
        log_softmax = s - jax_logsumexp(jnp, s)
        return 0.1 * jnp.sqrt(jnp.sum(b * b)) - jnp.dot(log_softmax, y)

    def mlp2(W1, b1, W2, b2, X, Y):
        hidden = jnp.tanh(X @ W1 + b1)
        err = hidden @ W2 + b2 - Y
        return jnp.sum(err * err) / 640

    def loss(w, x, y):
        err = jnp.sum(w * x) - y
        return err * err

    B, I, H, O = 8, 5, 6, 3
    return [
        (
            "classify.eg",
            "logistic",
            ["X", "w"],
            logistic,
            [rng.standard_normal((20, 4)), rng.standard_normal(4), (rng.random(20) > 0.5) * 1.0],
        ),
        (
            "classify.eg",
            "nll",
            ["W", "b", "x"],
            nll,
            [rng.standard_normal((5, 4)), rng.standard_normal(5), rng.standard_normal(4), np.eye(5)[1]],
        ),
        (
            "suite/mlp2.eg",
            "mlp2",
            ["W1", "b1", "W2", "b2"],
            mlp2,
            [rng.standard_normal(s) for s in [(I, H), (H,), (H, O), (O,), (B, I), (B, O)]],
        ),
        # The seed program is f32: both sides compute in float32.
        (
            "loss.eg",
            "loss",
            ["w"],
            loss,
            [rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32), np.float32(0.5)],
        ),
    ]


def jax_logsumexp(jnp, s):
    m = jnp.max(s)
    return m + jnp.log(jnp.sum(jnp.exp(s - m)))


def compare():
    """Every case: egrad's value and gradients against JAX's. Returns the
    rows ``(case, largest relative difference)``; raises AssertionError on
    a disagreement."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    rows = []
    for file, name, wrt, jax_fn, args in cases(jnp):
        prog = egrad.compile_file(str(EXAMPLES / file))
        value, grads = prog.grad(name, wrt=wrt).value_and_grad(*args)
        params = prog.function(name).params
        argnums = tuple(params.index(p) for p in wrt)
        jax_value, jax_grads = jax.value_and_grad(jax_fn, argnums=argnums)(*args)
        f32 = value.dtype == np.float32
        rtol, atol = (1e-5, 1e-5) if f32 else (1e-10, 1e-12)
        worst = abs(float(value) - float(jax_value)) / (1 + abs(float(jax_value)))
        np.testing.assert_allclose(float(value), float(jax_value), rtol=rtol, atol=atol, err_msg=f"{name}: value")
        for p, ours, theirs in zip(wrt, grads, jax_grads):
            theirs = np.asarray(theirs)
            assert ours.shape == theirs.shape, (name, p, ours.shape, theirs.shape)
            np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=f"d{name}/d{p}")
            worst = max(worst, float(np.max(np.abs(ours - theirs) / (1 + np.abs(theirs)))))
        rows.append((f"{file}:{name} wrt {', '.join(wrt)}", worst))
    return rows


def main():
    try:
        import jax  # noqa: F401
    except ImportError:
        print("jax is not installed: nothing to compare (pip install jax)")
        return 0
    for case, worst in compare():
        print(f"{case}: egrad and JAX agree (largest relative difference {worst:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
