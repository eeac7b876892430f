"""Data-parallel gradients on a Dask cluster of two worker processes
(python/examples/dask_grad.py): the sum of the chunks' gradients, each
computed on a worker by a pickled egrad gradient, is the gradient over all
the data, and each worker compiles the gradient once."""

import importlib.util
import pathlib

import numpy as np

import egrad
from conftest import require

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "dask_grad.py"


def load_example():
    spec = importlib.util.spec_from_file_location("dask_grad", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chunked_gradient_on_workers_equals_the_whole():
    distributed = require("dask.distributed")
    example = load_example()
    grad = egrad.compile(example.SOURCE, name="sse.eg").grad("sse", wrt="w")
    w, X, y = example.make_data(n=3000, d=12, seed=4)
    chunks = 6
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        value, dw = example.distributed_grad(client, grad, w, X, y, chunks=chunks)
        infos = client.run(egrad.pickle_cache_info)
        pids = client.run(lambda: __import__("os").getpid())
    local_value, local_dw = grad.value_and_grad(w, X, y)
    np.testing.assert_allclose(value, float(local_value), rtol=1e-12)
    np.testing.assert_allclose(dw, local_dw, rtol=1e-12, atol=1e-12 * np.max(np.abs(local_dw)))
    # The chunks ran in other processes, each compiling the gradient at most once.
    assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()
    assert all(i["misses"] <= 1 for i in infos.values()), infos
    assert sum(i["misses"] for i in infos.values()) >= 1, infos


def test_example_script_runs():
    require("dask.distributed")
    example = load_example()
    assert example.main() == 0
