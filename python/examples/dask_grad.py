"""Data-parallel gradients with Dask: one egrad gradient, pickled to every
worker, each chunk of the data differentiated where it lies, the chunk
gradients summed.

The loss is a sum over examples, so the sum of the chunks' gradients is
the whole data's gradient. A pickled egrad gradient carries the program's
source text and options; each worker compiles it once (the first task
that unpickles it) and reuses it for every later task. Run::

    python python/examples/dask_grad.py

It starts a local cluster of two worker processes. On a real cluster, pass
``Client("tcp://scheduler:8786")`` instead (egrad installed on every
worker, the same version as here). Needs ``dask[distributed]``.
"""

import sys

import numpy as np

import egrad

# A one-layer tanh regression, summed over the examples (rows of X).
SOURCE = """
fn sse[B, D](w: f64[D], X: f64[B, D], y: f64[B]) -> f64 {
  let r = tanh(matmul(X, w)) - y
  +/(r .* r)
}
"""


def make_data(n=4000, d=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d) / np.sqrt(d)
    y = np.tanh(X @ w_true) + 0.1 * rng.standard_normal(n)
    return rng.standard_normal(d) / np.sqrt(d), X, y


def chunk_grad(grad, w, X, y):
    """On a worker: the value and gradient of the loss over one chunk."""
    value, dw = grad.value_and_grad(w, X, y)
    return float(value), dw


def distributed_grad(client, grad, w, X, y, chunks=8):
    """The loss and its gradient over all of ``X, y``, chunk by chunk on the
    cluster behind ``client``, summed."""
    [w_remote] = client.scatter([w], broadcast=True)
    futures = [
        client.submit(chunk_grad, grad, w_remote, Xc, yc, pure=False)
        for Xc, yc in zip(np.array_split(X, chunks), np.array_split(y, chunks))
    ]
    parts = client.gather(futures)
    return sum(v for v, _ in parts), np.sum([g for _, g in parts], axis=0)


def main():
    from dask.distributed import Client, LocalCluster

    grad = egrad.compile(SOURCE, name="sse.eg").grad("sse", wrt="w")
    w, X, y = make_data()
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1) as cluster, Client(cluster) as client:
        value, dw = distributed_grad(client, grad, w, X, y)
        compiled = client.run(lambda: egrad.pickle_cache_info()["misses"])
    local_value, local_dw = grad.value_and_grad(w, X, y)
    rel = np.max(np.abs(dw - local_dw)) / np.max(np.abs(local_dw))
    print(f"loss {value:.6f} (one process: {float(local_value):.6f})")
    print(f"gradient: largest difference {rel:.1e} of the largest component")
    print(f"compiles per worker: {sorted(compiled.values())}")
    return 0 if rel < 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
