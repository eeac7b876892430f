"""Calling compiled functions: every dtype, scalars, matrices, several
results, keywords; results are NumPy arrays of the result's dtype, a
scalar a 0-d array."""

import numpy as np
import pytest

import egrad


def test_loss_example_matches_the_readme(loss_prog):
    f = loss_prog.function("loss")
    w = np.array([1, 2, 3], np.float32)
    x = np.array([4, 5, 6], np.float32)
    out = f(w, x, np.float32(0.5))
    assert isinstance(out, np.ndarray)
    assert out.shape == () and out.dtype == np.float32
    assert float(out) == 31.5 * 31.5
    # The @grad function, called as a function: the README's [252, 315, 378].
    d = loss_prog.function("dloss_dw")(w, x, 0.5)
    assert d.dtype == np.float32
    assert d.tolist() == [252.0, 315.0, 378.0]


def test_f64_and_f32_vectors(kinds):
    x = np.arange(5, dtype=np.float64)
    y = np.ones(5)
    out = kinds.function("axpy")(2.0, x, y)
    assert out.dtype == np.float64 and out.shape == (5,)
    np.testing.assert_array_equal(out, 2.0 * x + y)
    out32 = kinds.function("axpy32")(np.float32(2), x.astype(np.float32), y.astype(np.float32))
    assert out32.dtype == np.float32
    np.testing.assert_array_equal(out32, (2.0 * x + y).astype(np.float32))


def test_matrices_row_major(kinds):
    X = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert float(kinds.function("total")(X)) == X.sum()
    np.testing.assert_array_equal(kinds.function("rowsums")(X), X.sum(axis=1))
    S = kinds.function("scale")(X.astype(np.float32), 0.5)
    assert S.shape == (3, 4) and S.dtype == np.float32
    np.testing.assert_array_equal(S, (0.5 * X).astype(np.float32))


def test_i64_arrays_and_scalars(kinds):
    x = np.array([10.0, 11.0, 12.0, 13.0])
    idx = np.array([3, 0, 0, 2], dtype=np.int64)
    np.testing.assert_array_equal(kinds.function("pick")(x, idx), x[idx])
    assert float(kinds.function("at")(x, 2)) == 12.0
    k = np.array([-3, 0, 4, 9], dtype=np.int64)
    w = kinds.function("wrap")(k, 4)
    assert w.dtype == np.int64
    np.testing.assert_array_equal(w, (k + 1) % 4)  # NumPy's % (sign of the divisor)
    # A run-time loop count from a Python int.
    r = kinds.function("repeat")(3, 0.0)
    assert float(r) == ((0.0 * 0.5 + 1) * 0.5 + 1) * 0.5 + 1


def test_bool_parameters_and_results(kinds):
    x = np.array([1.0, 2.0, 4.0, 8.0])
    mask = np.array([True, False, True, False])
    assert float(kinds.function("masked_sum")(mask, x)) == 5.0
    # int64 0/1 is egrad's native bool: read as is.
    assert float(kinds.function("masked_sum")(mask.astype(np.int64), x)) == 5.0
    fin = kinds.function("finite")(np.array([1.0, np.nan, np.inf, -2.0]))
    assert fin.dtype == np.bool_
    assert fin.tolist() == [True, False, False, True]
    e = kinds.function("either")(True, np.bool_(False))
    assert e.dtype == np.bool_ and e.shape == () and bool(e) is True
    assert bool(kinds.function("either")(False, False)) is False
    n = kinds.function("kept")(mask)
    assert n.dtype == np.int64 and int(n) == 2


def test_bool_parameter_refuses_other_int_values(kinds):
    with pytest.raises(egrad.EgradTypeError, match=r"argument `mask` must be true or false"):
        kinds.function("masked_sum")(np.array([0, 2, 1, 1], dtype=np.int64), np.ones(4))


def test_several_results_are_a_tuple(kinds):
    x = np.array([3.0, -1.0, 7.0, 2.0])
    s, m, i = kinds.function("stats")(x)
    assert (float(s), float(m), int(i)) == (11.0, 7.0, 2)
    assert s.dtype == np.float64 and i.dtype == np.int64


def test_keyword_arguments(kinds):
    f = kinds.function("axpy")
    x, y = np.arange(3.0), np.ones(3)
    np.testing.assert_array_equal(f(2.0, y=y, x=x), f(2.0, x, y))
    np.testing.assert_array_equal(f(a=2.0, x=x, y=y), f(2.0, x, y))


def test_function_metadata_and_cache(kinds, loss_prog):
    f = loss_prog.function("loss")
    assert f.name == "loss"
    assert f.params == ["w", "x", "y"]
    assert f.signature == "loss[N](w: f32[N], x: f32[N], y: f32) -> f32"
    assert loss_prog.signature("dloss_dw") == "dloss_dw[N](w: f32[N], x: f32[N], y: f32) -> f32[N]"
    assert repr(f) == "<egrad.Function loss[N](w: f32[N], x: f32[N], y: f32) -> f32>"
    assert loss_prog.functions == ["loss", "dloss_dw"]
    assert "kinds.eg" == kinds.name
    # Asking again reuses the compiled code (same dump, no recompile).
    assert loss_prog.function("loss").dump("clif") == f.dump("clif")


def test_dumps(loss_prog):
    f = loss_prog.function("loss")
    assert f.dump("ir").startswith("fn loss")
    assert "sum" in f.dump("optimized")
    assert "function" in f.dump("clif")
    with pytest.raises(egrad.EgradUsageError, match="no stage `nope`"):
        f.dump("nope")


def test_options_change_nothing_numerically(kinds):
    x = np.linspace(-1, 1, 33)
    y = np.cos(x)
    base = kinds.function("axpy")(0.25, x, y)
    for opts in (dict(no_optimize=True), dict(simd=False), dict(gemm=False), dict(wide=False), dict(lam=100.0),
                 dict(dims={"N": 33}), dict(fast_math=False, node_limit=50, iter_limit=2, time_limit=0.5)):
        out = kinds.function("axpy", **opts)(0.25, x, y)
        assert out.tobytes() == base.tobytes(), opts


def test_program_level_defaults(kinds):
    prog = egrad.compile("fn f[N](x: f64[N]) -> f64 = +/(x .* x)", no_optimize=True)
    assert "e-graph: off" in prog.grad("f", wrt="x").report()
    # A call's own options win over the program's.
    assert "e-graph: off" not in prog.grad("f", wrt="x", no_optimize=False).report()


def test_without_prelude():
    src = "fn f[N](x: f64[N]) -> f64 = dot(x, x)"
    assert float(egrad.compile(src).function("f")(np.arange(3.0))) == 5.0
    with pytest.raises(egrad.EgradTypeError, match="dot"):
        egrad.compile(src, prelude=False)


def test_calls_at_other_shapes_and_after_errors_reuse_nothing_stale(kinds):
    # Each function keeps its workspaces between calls; one bound for
    # other shapes, or left by a refused call, must size itself again.
    rowsums = kinds.function("rowsums")
    for rows, cols in [(3, 4), (5, 2), (3, 4), (1, 7), (0, 3), (5, 2)]:
        X = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) - 2.5
        out = rowsums(X)
        assert out.shape == (rows,)
        np.testing.assert_array_equal(out, X.sum(axis=1))
        with pytest.raises(egrad.EgradTypeError):
            rowsums(np.ones(3))
    g = kinds.grad("total", wrt="X")
    for n in [4, 9, 4]:
        X = np.full((n, 2), 0.5)
        value, dX = g.value_and_grad(X)
        assert float(value) == X.sum()
        np.testing.assert_array_equal(dX, np.ones((n, 2)))
