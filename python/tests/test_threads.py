"""The GIL is released while native code runs: threads calling one
gradient at once get bit-for-bit the single-threaded results, and Python
code runs in another thread during a long native call."""

import threading
import time

import numpy as np

import egrad
from conftest import EXAMPLES


def test_threads_match_single_thread_bit_for_bit():
    prog = egrad.compile_file(str(EXAMPLES / "classify.eg"))
    g = prog.grad("logistic", wrt=["X", "w"])
    rng = np.random.default_rng(11)
    inputs = [
        (rng.standard_normal((300, 20)), rng.standard_normal(20), (rng.random(300) > 0.5) * 1.0)
        for _ in range(8)
    ]
    expected = []
    for args in inputs:
        v, (dX, dw) = g.value_and_grad(*args)
        expected.append((v.tobytes(), dX.tobytes(), dw.tobytes()))

    results = [[] for _ in inputs]
    errors = []

    def work(k):
        try:
            for _ in range(25):
                v, (dX, dw) = g.value_and_grad(*inputs[k])
                results[k].append((v.tobytes(), dX.tobytes(), dw.tobytes()))
        except Exception as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, runs in enumerate(results):
        assert len(runs) == 25
        assert all(r == expected[k] for r in runs), f"thread {k} differs"


def test_compiling_in_threads_gives_one_program():
    prog = egrad.compile_file(str(EXAMPLES / "classify.eg"))
    out = [None] * 4

    def work(k):
        out[k] = prog.grad("dnll").explain()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == 1 and out[0].startswith("cache key of `dnll`:")


def test_python_runs_during_a_native_call():
    # About 2e7 tanh in one call: long enough to see who runs meanwhile.
    f = egrad.compile_file(str(EXAMPLES / "decay.eg")).function("decay")
    x = np.linspace(-1, 1, 1000)
    n = 20000
    f(10, x, 0.5)  # compiled and warm
    window = {}

    def call():
        window["start"] = time.perf_counter()
        f(n, x, 0.5)
        window["end"] = time.perf_counter()

    t = threading.Thread(target=call)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
    t.join()
    start, end = window["start"], window["end"]
    assert end - start > 0.02, "the call is too short to tell"
    inside = [s for s in ticks if start < s < end]
    # With the GIL held this thread could not tick during the call (at most
    # one switch interval, 5 ms, before native code starts); released, it
    # ticks all through.
    assert inside, "no Python code ran during the native call"
    covered = max(inside) - min(inside)
    assert covered > 0.5 * (end - start), (covered, end - start)
