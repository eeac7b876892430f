#!/usr/bin/env python3
"""The RNN of `examples/recurrent.eg` in JAX: `jit(grad(rnn))` with `lax.scan`,
float64, single-threaded, for the comparison in BENCHMARKS.md.

    rnn(W, h0, n) = sum(h_n),  h_{t+1} = tanh(W @ h_t)

Inputs are written to / read from an .npz so egrad times the same numbers
(`egrad bench examples/recurrent.eg --fn drnn --args @rnn.npz`); the script
checks that egrad's gradient (an .npz written by `egrad run --out`, if
given) matches JAX's to 1e-10.

Usage:
    python3 benches/jax_rnn.py --h 64 --n 1000 --save rnn.npz [--check grad.npz]

Timing: 2 warm-up calls, then samples of k back-to-back calls (each blocked
on) lasting >= 20 ms, 21 samples or 3 s; the median and the minimum per call.
Single thread: XLA_FLAGS `--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`, under `taskset -c 0` when it exists.
"""

import argparse
import os
import shutil
import statistics
import sys
import time

SINGLE_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
flags = os.environ.get("XLA_FLAGS", "")
if "xla_cpu_multi_thread_eigen" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " " + SINGLE_THREAD_FLAGS).strip()
if os.environ.get("EGRAD_JAX_PINNED") != "1" and shutil.which("taskset"):
    os.environ["EGRAD_JAX_PINNED"] = "1"
    os.execvp("taskset", ["taskset", "-c", "0", sys.executable, *sys.argv])

try:
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax import lax
except ImportError as e:  # pragma: no cover
    print(f"jax_rnn.py: JAX is not installed ({e}); `pip install jax`.", file=sys.stderr)
    sys.exit(2)

jax.config.update("jax_enable_x64", True)


def rnn(W, h0, n):
    def step(h, _):
        return jnp.tanh(W @ h), None

    h, _ = lax.scan(step, h0, None, length=n)
    return jnp.sum(h)


def timed(f, *args):
    for _ in range(2):
        jax.block_until_ready(f(*args))
    k = 1
    while True:
        t = time.perf_counter()
        for _ in range(k):
            jax.block_until_ready(f(*args))
        if time.perf_counter() - t >= 0.02:
            break
        k *= 2
    samples = []
    start = time.perf_counter()
    while len(samples) < 21 and (time.perf_counter() - start < 3 or len(samples) < 5):
        t = time.perf_counter()
        for _ in range(k):
            jax.block_until_ready(f(*args))
        samples.append((time.perf_counter() - t) / k)
    return statistics.median(samples), min(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--h", type=int, default=64)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", help="write W, h0 and n to this .npz")
    ap.add_argument("--check", help="an .npz of egrad's gradient (W, h0) to compare")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    # Scaled so the state neither saturates nor dies out.
    W = rng.standard_normal((a.h, a.h)) / np.sqrt(a.h)
    h0 = rng.uniform(-1, 1, a.h)
    if a.save:
        np.savez(a.save, W=W, h0=h0, n=np.int64(a.n))
    grad = jax.jit(jax.grad(rnn, argnums=(0, 1)), static_argnums=2)
    gW, gh0 = grad(W, h0, a.n)
    med, best = timed(grad, W, h0, a.n)
    print(f"jax jit(grad(rnn)) H={a.h} n={a.n}: median {med * 1e6:.1f} us, min {best * 1e6:.1f} us")
    if a.check:
        got = np.load(a.check)
        # `egrad run --out` names a tuple's parts result0, result1, ...
        for name, key, want in (("W", "result0", gW), ("h0", "result1", gh0)):
            err = np.max(np.abs(got[key] - np.asarray(want))) / max(1.0, np.max(np.abs(want)))
            print(f"egrad vs jax gradient {name}: max relative error {err:.2e}")
            if not err <= 1e-10:
                sys.exit(f"egrad's gradient {name} differs from JAX's")


if __name__ == "__main__":
    main()
