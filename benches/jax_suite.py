#!/usr/bin/env python3
"""The benchmark suite (../shared/bench-suite.md) in JAX, float64, single-threaded.

For every program: primal `jit(f)` and gradient `jit(grad(f))` steady-state
times per the suite's timing protocol (2 warm-up calls; samples of k
back-to-back calls, each blocked on, k chosen so a sample lasts >= 20 ms;
21 samples or fewer once 3 s have passed, never fewer than 5; median and
min per call), and the first-call time of `jit(grad(f))` (trace + lower +
compile + run, after a trivial warm-up jit; median of 3 fresh processes).
Inputs come from the suite's bit-exact generator, reimplemented here; each
program's loss and gradient L2 norms are checked against the reference
(`tests/data/bench-reference.json`, a copy of ../shared/bench-reference.json).

Usage:
    python3 benches/jax_suite.py [--json OUT.json] [--only k1,k2] [--first-call-procs 3]

Single thread: XLA_FLAGS gets `--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1` and the script re-runs itself under
`taskset -c 0` when taskset exists (set EGRAD_NO_TASKSET=1 to skip).
Exits with status 2 and a message when JAX is not installed.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SINGLE_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def pin_and_configure():
    """Single thread before JAX is imported: XLA flags, then taskset -c 0."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " " + SINGLE_THREAD_FLAGS).strip()
    if (
        os.environ.get("EGRAD_JAX_PINNED") != "1"
        and os.environ.get("EGRAD_NO_TASKSET") != "1"
        and shutil.which("taskset")
    ):
        os.environ["EGRAD_JAX_PINNED"] = "1"
        os.execvp("taskset", ["taskset", "-c", "0", sys.executable, *sys.argv])


pin_and_configure()

try:
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax import lax
except ImportError as e:  # pragma: no cover
    print(
        f"jax_suite.py: JAX is not installed ({e}); `pip install jax` to run the JAX column.",
        file=sys.stderr,
    )
    sys.exit(2)

jax.config.update("jax_enable_x64", True)


# --- The suite's input generator (bit-exact) --------------------------------

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x):
    """Vectorized splitmix64 on uint64 arrays (numpy wraps mod 2^64)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def U(s, n):
    """U(s, i) for i in 0..n: (splitmix64((s << 32) + i) >> 11) * 2^-53."""
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64)
        z = splitmix64((np.uint64(s) << np.uint64(32)) + i)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def V(s, shape):
    n = int(np.prod(shape)) if shape else 1
    return (2.0 * U(s, n) - 1.0).reshape(shape)


def check_generator(ref):
    for k, want in ref["_input_check"].items():
        s, i = (int(t) for t in k[2:-1].split(","))
        got = float(V(s, (i + 1,))[i])
        assert got == want, f"generator: {k} = {got!r}, reference {want!r}"


# --- The programs ------------------------------------------------------------


def linreg(w, x, y):
    e = jnp.sum(w * x) - y
    return e * e


def logistic(w, X, y):
    return jnp.sum(jnp.log(1.0 + jnp.exp(-y * (X @ w)))) / 4096.0


def rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def mlp2(W1, b1, W2, b2, X, Y):
    H = jnp.tanh(X @ W1 + b1)
    P = H @ W2 + b2
    return jnp.sum((P - Y) ** 2) / 640.0


def power_static(x):
    p = jnp.ones_like(x)
    for _ in range(20):
        p = p * x
    return jnp.sum(p)


def euler_ode(k, c):
    dt = 0.01

    def step(_, s):
        th, om = s
        return (th + dt * om, om + dt * (-k * jnp.sin(th) - c * om))

    th, _ = lax.fori_loop(0, 1000, step, (jnp.float64(1.0), jnp.float64(0.0)))
    return th * th


def inputs(key):
    """(function, args, argnums of the wrt inputs) for a suite key."""
    if key in ("linreg_16", "linreg_1M"):
        n = 16 if key == "linreg_16" else 1_000_000
        return linreg, [V(1, (n,)), V(2, (n,)), np.float64(0.5)], (0,)
    if key == "logistic":
        y = np.where(U(4, 4096) < 0.5, 1.0, -1.0)
        return logistic, [0.1 * V(5, (64,)), V(3, (4096, 64)), y], (0,)
    if key == "rosenbrock":
        return rosenbrock, [V(6, (100_000,))], (0,)
    if key == "mlp2":
        args = [
            0.1 * V(11, (128, 256)),
            0.1 * V(12, (256,)),
            0.1 * V(13, (256, 10)),
            0.1 * V(14, (10,)),
            V(10, (64, 128)),
            V(15, (64, 10)),
        ]
        return mlp2, args, (0, 1, 2, 3)
    if key == "power_static":
        return power_static, [1.0 + 0.1 * V(16, (1_000_000,))], (0,)
    if key == "euler_ode":
        return euler_ode, [np.float64(9.81), np.float64(0.5)], (0, 1)
    raise KeyError(key)


KEYS = ["linreg_16", "linreg_1M", "logistic", "rosenbrock", "mlp2", "power_static", "euler_ode"]


# --- Timing ------------------------------------------------------------------


def block(out):
    return jax.block_until_ready(out)


def steady(fn, args):
    """The suite protocol: median and min seconds per call."""
    block(fn(*args))
    block(fn(*args))
    k = 1
    while True:
        t = time.perf_counter()
        for _ in range(k):
            block(fn(*args))
        if time.perf_counter() - t >= 0.02:
            break
        k *= 2
    samples = []
    start = time.perf_counter()
    while len(samples) < 21 and (len(samples) < 5 or time.perf_counter() - start < 3.0):
        t = time.perf_counter()
        for _ in range(k):
            block(fn(*args))
        samples.append((time.perf_counter() - t) / k)
    return statistics.median(samples), min(samples)


def first_call(key):
    """Seconds from nothing compiled to the first gradient, this process."""
    block(jax.jit(lambda a: a + 1.0)(jnp.float64(1.0)))  # backend start-up
    f, args, argnums = inputs(key)
    args = [jnp.asarray(a) for a in args]
    block(args)
    t = time.perf_counter()
    block(jax.jit(jax.grad(f, argnums=argnums))(*args))
    return time.perf_counter() - t


def load_reference():
    for p in (
        os.path.join(ROOT, "tests", "data", "bench-reference.json"),
        os.path.join(ROOT, "..", "shared", "bench-reference.json"),
    ):
        if os.path.exists(p):
            with open(p) as fh:
                return json.load(fh)
    sys.exit("jax_suite.py: bench-reference.json not found")


def check(key, ref, loss, grads):
    want = ref[key]["loss"]
    assert abs(loss - want) <= 1e-10 * abs(want), f"{key}: loss {loss!r} vs reference {want!r}"
    for w, g in zip(ref[key]["wrt"], grads):
        l2 = float(np.sqrt(np.sum(np.asarray(g, dtype=np.float64) ** 2)))
        want = ref[key]["grad"][w]["l2"]
        assert abs(l2 - want) <= 1e-10 * want, f"{key}: |d/d{w}| {l2!r} vs reference {want!r}"


def fmt(s):
    if s < 1e-6:
        return f"{s * 1e9:.1f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} µs"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--only", help="comma-separated suite keys")
    ap.add_argument("--first-call-procs", type=int, default=3, help="fresh processes per first-call figure (0: skip)")
    ap.add_argument("--first-call", metavar="KEY", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.first_call:
        print(repr(first_call(a.first_call)))
        return

    ref = load_reference()
    check_generator(ref)
    keys = a.only.split(",") if a.only else KEYS
    results = {}
    for key in keys:
        f, args, argnums = inputs(key)
        args = [jnp.asarray(x) for x in args]
        primal = jax.jit(f)
        grad = jax.jit(jax.grad(f, argnums=argnums))
        check(key, ref, float(primal(*args)), grad(*args))
        p_med, p_min = steady(primal, args)
        g_med, g_min = steady(grad, args)
        firsts = []
        for _ in range(a.first_call_procs):
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--first-call", key],
                check=True,
                capture_output=True,
                text=True,
                env=os.environ,
            )
            firsts.append(float(out.stdout.strip().splitlines()[-1]))
        results[key] = {
            "primal_median_s": p_med,
            "primal_min_s": p_min,
            "grad_median_s": g_med,
            "grad_min_s": g_min,
            "grad_over_primal": g_med / p_med,
            "first_call_s": statistics.median(firsts) if firsts else None,
        }
        print(f"{key}: done", file=sys.stderr, flush=True)

    print(f"JAX {jax.__version__}, jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else '?'}, "
          f"{jax.devices()[0].platform}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}, "
          f"pinned={os.environ.get('EGRAD_JAX_PINNED') == '1'}")
    print()
    print("| program | jit(f) median | jit(grad(f)) median (min) | grad/primal | first call of jit(grad(f)) |")
    print("| --- | --- | --- | --- | --- |")
    for key, r in results.items():
        fc = fmt(r["first_call_s"]) if r["first_call_s"] is not None else "—"
        print(
            f"| `{key}` | {fmt(r['primal_median_s'])} | {fmt(r['grad_median_s'])} ({fmt(r['grad_min_s'])}) "
            f"| {r['grad_over_primal']:.2f} | {fc} |"
        )
    if a.json:
        meta = {"jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "pinned": os.environ.get("EGRAD_JAX_PINNED") == "1"}
        with open(a.json, "w") as fh:
            json.dump({"_meta": meta, **results}, fh, indent=1)


if __name__ == "__main__":
    main()
