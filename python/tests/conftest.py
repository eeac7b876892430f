"""Shared fixtures: the repository's example programs, a small program of
every dtype, and central finite differences in NumPy."""

import importlib
import os
import pathlib

import numpy as np
import pytest

import egrad

def require(module):
    """Import ``module`` for an interop test (JAX, Dask, PyTorch), or skip
    the test when it is not installed; with ``EGRAD_REQUIRE_INTEROP=1`` in
    the environment (CI) a missing module fails the test instead."""
    if os.environ.get("EGRAD_REQUIRE_INTEROP") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)


ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# Every parameter and result dtype, scalars and matrices, several results,
# run-time indices: the calls of test_call.py and test_args.py.
KINDS = """
fn axpy[N](a: f64, x: f64[N], y: f64[N]) -> f64[N] = a * x + y
fn axpy32[N](a: f32, x: f32[N], y: f32[N]) -> f32[N] = a * x + y
fn total[M, K](X: f64[M, K]) -> f64 = +/X
fn scale[M, K](X: f32[M, K], s: f32) -> f32[M, K] = s * X
fn rowsums[M, K](X: f64[M, K]) -> f64[M] = tabulate[M](i => +/X[i])
fn pick[N, M](x: f64[N], idx: i64[M]) -> f64[M] = tabulate[M](i => x[idx[i]])
fn at[N](x: f64[N], k: i64) -> f64 = x[k]
fn wrap[N](k: i64[N], n: i64) -> i64[N] = (k + 1) % n
fn repeat(n: i64, x: f64) -> f64 = iterate(n, x, s => 0.5 * s + 1.0)
fn masked_sum[N](mask: bool[N], x: f64[N]) -> f64 = +/(if mask { x } else { 0.0 })
fn finite[N](x: f64[N]) -> bool[N] = x == x && abs(x) < 1.0 / 0.0
fn either(a: bool, b: bool) -> bool = a || b
fn kept[N](mask: bool[N]) -> i64 = +/i64(mask)
fn stats[N](x: f64[N]) -> (f64, f64, i64) = (+/x, max/x, argmax(x))
"""


@pytest.fixture(scope="session")
def kinds():
    return egrad.compile(KINDS, name="kinds.eg")


@pytest.fixture(scope="session")
def loss_prog():
    return egrad.compile_file(str(EXAMPLES / "loss.eg"))


@pytest.fixture(scope="session")
def classify():
    return egrad.compile_file(str(EXAMPLES / "classify.eg"))


def central_diff(f, args, i, eps=1e-6):
    """The gradient of scalar ``f(*args)`` with respect to ``args[i]`` (a
    float64 array) by central differences, element by element."""
    x = np.array(args[i], dtype=np.float64)
    grad = np.zeros_like(x)
    for k in np.ndindex(*x.shape):
        plus, minus = x.copy(), x.copy()
        plus[k] += eps
        minus[k] -= eps
        a_plus = list(args)
        a_plus[i] = plus
        a_minus = list(args)
        a_minus[i] = minus
        grad[k] = (float(f(*a_plus)) - float(f(*a_minus))) / (2 * eps)
    return grad
