#!/usr/bin/env python3
"""Programs written the natural way (issues 35 and 36), in JAX: the counterparts of
`examples/natural/*.eg`, float64, single-threaded, timed as
`benches/jax_suite.py` times the suite (`steady`: median and min per call of
`jit(grad(f))`, and of `jit(f)`).

Each program's inputs are drawn here (NumPy's PCG64, seed 0) and written
to `OUT/<program>.npz` under the egrad parameters' names, so
`benches/natural_table.sh` times egrad (`egrad bench --args @OUT/<program>.npz`)
on the same numbers; the loss JAX computes is written beside the times,
for the table to compare with egrad's.

Usage:
    python3 benches/jax_natural.py --out DIR [--only p1,p2]

Exits with status 2 and a message when JAX is not installed.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jax_suite import pin_and_configure, steady  # noqa: E402  (pins first)

pin_and_configure()

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.scipy.special import erfc  # noqa: E402

jax.config.update("jax_enable_x64", True)


def embed_mlp(E, W1, b1, W2, b2, tokens, labels):
    X = E[tokens]
    H = jnp.tanh(X @ W1 + b1)
    S = H @ W2 + b2
    return -jnp.mean(jax.nn.log_softmax(S)[jnp.arange(S.shape[0]), labels])


def huber_lse(W, X, y):
    S = X @ W
    m = jnp.max(S, axis=1)
    z = m + jnp.log(jnp.sum(jnp.exp(S - m[:, None]), axis=1))
    r = z - y
    return jnp.mean(jnp.where(jnp.abs(r) < 1.0, 0.5 * r * r, jnp.abs(r) - 0.5))


def ncdf(x):
    return 0.5 * erfc(-x / jnp.sqrt(2.0))


def book(S, sigma, r, T, K):
    sq = jnp.sqrt(T)
    d1 = (jnp.log(S / K) + (r + 0.5 * sigma * sigma) * T) / (sigma * sq)
    d2 = d1 - sigma * sq
    return jnp.sum(S * ncdf(d1) - K * jnp.exp(-r * T) * ncdf(d2))


def cnn(Kf, bf, Wd, bd, X, labels):
    B = X.shape[0]
    F = Kf.shape[0]
    c = jax.lax.conv(X[:, None], Kf[:, None], (1, 1), "VALID")  # (B, F, 14, 14)
    a = jnp.maximum(c + bf[None, :, None, None], 0.0)
    p = a.reshape(B, F, 7, 2, 7, 2).max(axis=(3, 5))
    S = p.reshape(B, F * 49) @ Wd + bd
    return -jnp.mean(jax.nn.log_softmax(S)[jnp.arange(B), labels])


def gp_nll(ls, sf, noise, x, y):
    d = x[:, None] - x[None, :]
    K = sf * sf * jnp.exp(-0.5 * (d * d) / (ls * ls)) + noise * jnp.eye(x.shape[0])
    L = jnp.linalg.cholesky(K)
    alpha = jax.scipy.linalg.solve_triangular(L, y, lower=True)
    return 0.5 * alpha @ alpha + jnp.sum(jnp.log(jnp.diag(L))) + 0.5 * x.shape[0] * jnp.log(2.0 * jnp.pi)


def inputs(key):
    """(function, {egrad parameter name: array}, differentiated positions)."""
    rng = np.random.default_rng(0)
    u = lambda *shape: rng.uniform(-1.0, 1.0, shape)  # noqa: E731
    if key == "embed_mlp":
        V, D, H, C, B = 1000, 64, 128, 10, 256
        args = {
            "E": u(V, D), "W1": u(D, H) / 8, "b1": u(H) / 8, "W2": u(H, C) / 11, "b2": u(C) / 11,
            "tokens": rng.integers(0, V, B), "labels": rng.integers(0, C, B),
        }
        return embed_mlp, args, (0, 1, 2, 3, 4)
    if key == "huber_lse":
        B, K, C = 1024, 64, 32
        return huber_lse, {"W": u(K, C) / 8, "X": u(B, K), "y": u(B) + 3.5}, (0,)
    if key == "greeks":
        N = 100_000
        args = {
            "S": 100 + 20 * u(N), "sigma": 0.3 + 0.1 * u(N), "r": 0.03 + 0.02 * u(N),
            "T": 1.0 + 0.5 * u(N), "K": 100 + 20 * u(N),
        }
        return book, args, (0, 1, 2, 3)
    if key == "cnn":
        B, F, C = 64, 8, 10
        args = {
            "Kf": u(F, 3, 3) / 3, "bf": u(F) / 10, "Wd": u(F * 49, C) / 20, "bd": u(C) / 10,
            "X": u(B, 16, 16), "labels": rng.integers(0, C, B),
        }
        return cnn, args, (0, 1, 2, 3)
    if key == "gp":
        N = 256
        x, y = u(N), u(N)
        args = {"ls": np.float64(0.9), "sf": np.float64(1.3), "noise": np.float64(0.1), "x": x, "y": y}
        return gp_nll, args, (0, 1, 2)
    raise KeyError(key)


KEYS = ["embed_mlp", "cnn", "greeks", "huber_lse", "gp"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the inputs (.npz) and jax_natural.json")
    ap.add_argument("--only", help="comma-separated program names")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = {}
    for key in a.only.split(",") if a.only else KEYS:
        f, named, argnums = inputs(key)
        np.savez(os.path.join(a.out, f"{key}.npz"), **named)
        args = [jnp.asarray(x) for x in named.values()]
        primal = jax.jit(f)
        grad = jax.jit(jax.grad(f, argnums=argnums))
        loss = float(primal(*args))
        p_med, p_min = steady(primal, args)
        g_med, g_min = steady(grad, args)
        results[key] = {"loss": loss, "primal_median_s": p_med, "primal_min_s": p_min,
                        "grad_median_s": g_med, "grad_min_s": g_min}
        print(f"{key}: loss {loss!r}, jit(grad) median {g_med * 1e6:.1f} µs", file=sys.stderr, flush=True)
    meta = {"jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "pinned": os.environ.get("EGRAD_JAX_PINNED") == "1"}
    with open(os.path.join(a.out, "jax_natural.json"), "w") as fh:
        json.dump({"_meta": meta, **results}, fh, indent=1)


if __name__ == "__main__":
    main()
