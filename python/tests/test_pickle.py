"""Pickling: Program, Function and Gradient round-trip through pickle (the
source text and the options, not the path), in this process and in a
fresh one, and unpickling the same thing twice compiles once."""

import pickle
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import egrad
from conftest import EXAMPLES, ROOT

W = np.array([1, 2, 3], np.float32)
X = np.array([4, 5, 6], np.float32)


@pytest.fixture(autouse=True)
def fresh_cache():
    egrad.pickle_cache_clear()
    yield
    egrad.pickle_cache_clear()


def untimed(report):
    return re.sub(r"[0-9.]+ (ms|s|µs)\b", "T", report)


def roundtrip(obj):
    return pickle.loads(pickle.dumps(obj))


def test_gradient_round_trip_keeps_results_and_options():
    prog = egrad.compile_file(str(EXAMPLES / "loss.eg"), lam=2.0)
    g = prog.grad("loss", wrt="w", dims={"N": 64})
    g2 = roundtrip(g)
    assert g2 is not g
    assert (g2.name, g2.wrt, g2.params, g2.signature) == (g.name, g.wrt, g.params, g.signature)
    # The options come along: λ from the program, dims from grad().
    # The report says the same, but for the time the e-graph took.
    assert untimed(g2.report()) == untimed(g.report()) and "λ = 2, at N=64" in g2.report()
    assert g2.explain() == g.explain()
    v, dw = g.value_and_grad(W, X, 0.5)
    v2, dw2 = g2.value_and_grad(W, X, 0.5)
    assert v2.tobytes() == v.tobytes() and dw2.tobytes() == dw.tobytes()
    # One name gives one array back, after the round trip too.
    assert isinstance(g2(W, X, 0.5), np.ndarray)


def test_what_grad_returns_survives_pickling():
    prog = egrad.compile_file(str(EXAMPLES / "loss.eg"))
    (listed,) = roundtrip(prog.grad("loss", wrt=["w"]))(W, X, 0.5)
    assert listed.tolist() == [252.0, 315.0, 378.0]
    every = roundtrip(prog.grad("loss"))
    assert every.wrt == ["w", "x", "y"] and len(every(W, X, 0.5)) == 3
    at_grad = roundtrip(prog.grad("dloss_dw"))
    assert isinstance(at_grad(W, X, 0.5), np.ndarray) and at_grad.wrt == ["w"]


def test_function_and_program_round_trip():
    prog = egrad.compile((EXAMPLES / "classify.eg").read_text(), name="c.eg")
    f = prog.function("logistic", no_optimize=True)
    f2 = roundtrip(f)
    rng = np.random.default_rng(1)
    args = (rng.standard_normal((5, 3)), rng.standard_normal(3), (rng.random(5) > 0.5) * 1.0)
    assert f2(*args).tobytes() == f(*args).tobytes()
    assert f2.dump("optimized") == f.dump("optimized")  # no_optimize came along
    assert f2.param_types == ["f64[N, K]", "f64[K]", "f64[N]"] and f2.result_types == ["f64"]
    p2 = roundtrip(prog)
    assert (p2.name, p2.functions) == ("c.eg", prog.functions)
    assert p2.signature("nll") == prog.signature("nll")


def test_copy_false_survives_pickling():
    prog = egrad.compile_file(str(EXAMPLES / "loss.eg"), copy=False)
    g2 = roundtrip(prog.grad("loss", wrt="w"))
    with pytest.raises(egrad.EgradTypeError):
        g2(W.astype(np.float64), X, 0.5)  # a conversion, refused
    f2 = roundtrip(egrad.compile_file(str(EXAMPLES / "loss.eg")).function("loss", copy=False))
    with pytest.raises(egrad.EgradTypeError):
        f2(W[::-1], X, 0.5)  # a strided view is not read in place


def test_pickle_holds_the_text_not_the_path(tmp_path):
    path = tmp_path / "sq.eg"
    path.write_text("fn sq[N](x: f64[N]) -> f64 = +/(x .* x)\n")
    blob = pickle.dumps(egrad.compile_file(str(path)).grad("sq", wrt="x"))
    path.unlink()
    g = pickle.loads(blob)
    assert g(np.array([1.0, -2.0])).tolist() == [2.0, -4.0]
    # Diagnostics still name the file as it was given, and show its line.
    with pytest.raises(egrad.EgradTypeError) as e:
        g(np.ones((2, 2)))
    assert e.value.location == f"{path}:1:10"
    assert "1 | fn sq[N](x: f64[N]) -> f64 = +/(x .* x)" in str(e.value)
    assert pickle.loads(pickle.dumps(g)) is g  # the cache: the same object


def test_unpickling_twice_compiles_once():
    prog = egrad.compile_file(str(EXAMPLES / "loss.eg"))
    blob = pickle.dumps(prog.grad("loss", wrt="w", lam=0.5))
    assert egrad.pickle_cache_info() == {"hits": 0, "misses": 0, "size": 0}
    a = pickle.loads(blob)
    assert egrad.pickle_cache_info() == {"hits": 0, "misses": 1, "size": 2}  # the program and the gradient
    b = pickle.loads(blob)
    assert b is a and egrad.pickle_cache_info()["hits"] == 1
    # Other options, another wrt or another name: compiled anew, on the cached program.
    c = pickle.loads(pickle.dumps(prog.grad("loss", wrt="w", lam=1.0)))
    d = pickle.loads(pickle.dumps(prog.grad("loss", wrt=["w", "y"], lam=0.5)))
    assert c is not a and d is not a and c.wrt == ["w"] and d.wrt == ["w", "y"]
    assert egrad.pickle_cache_info() == {"hits": 1, "misses": 3, "size": 4}
    # The program itself was cached by the first unpickle.
    pickle.loads(pickle.dumps(prog))
    assert egrad.pickle_cache_info()["hits"] == 2
    egrad.pickle_cache_clear()
    assert pickle.loads(blob) is not a and egrad.pickle_cache_info()["misses"] == 1


FRESH = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np
    import egrad
    blob = sys.stdin.buffer.read()
    g = pickle.loads(blob)
    again = pickle.loads(blob)
    v, dw = g.value_and_grad(np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32), 0.5)
    info = egrad.pickle_cache_info()
    print(float(v), dw.tolist(), again is g, info["hits"], info["misses"], g.report().splitlines()[3])
    """
)


def test_round_trip_in_a_fresh_process():
    g = egrad.compile_file(str(EXAMPLES / "loss.eg")).grad("loss", wrt="w", lam=3.0)
    out = subprocess.run(
        [sys.executable, "-c", FRESH], input=pickle.dumps(g), capture_output=True, check=True, cwd=ROOT / "python"
    ).stdout.decode()
    value, rest = out.split(" ", 1)
    assert float(value) == 992.25
    assert rest.startswith("[252.0, 315.0, 378.0] True 1 1 cost (flops + λ·residual bytes, λ = 3, at N=1000)"), rest
