#!/usr/bin/env python3
"""The Python package's per-call overhead (BENCHMARKS.md, "The Python
package's overhead"): logistic's gradient (examples/suite/logistic.eg) at
M rows of 64, the fastest of 6,000 calls through `prog.grad(...).grad`,
against `egrad bench` on the same arrays (its fastest call).

Usage: python3 scripts/python_overhead.py M [M ...]   (from the repository
root, with the package installed: `pip install ./python`; needs
target/release/egrad)
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import egrad


def measure(M, K=64):
    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, K)
    X = rng.uniform(-1, 1, (M, K))
    y = np.sign(rng.uniform(-1, 1, M))
    g = egrad.compile_file("examples/suite/logistic.eg").grad("logistic_grad")
    for _ in range(200):
        g.grad(w, X, y)
    times = []
    for _ in range(6000):
        t = time.perf_counter()
        g.grad(w, X, y)
        times.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as d:
        args = []
        for name, a in (("w", w), ("X", X), ("y", y)):
            np.save(os.path.join(d, f"{name}.npy"), a)
            args += ["--arg", f"{name}=@{os.path.join(d, name)}.npy"]
        out = subprocess.run(
            ["target/release/egrad", "bench", "examples/suite/logistic.eg", "--fn", "logistic_grad",
             *args, "--time-ms", "1500", "-q"],
            capture_output=True, text=True, check=True,
        ).stdout
    m = re.search(r"optimized ([\d.]+) (µs|ms)", out)
    bench = float(m.group(1)) * (1e-6 if m.group(2) == "µs" else 1e-3)
    py = min(times)
    print(f"M={M}: Python {py * 1e6:.1f} µs (median {statistics.median(times) * 1e6:.1f}), "
          f"egrad bench {bench * 1e6:.1f} µs, overhead {(py / bench - 1) * 100:+.1f}%")


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["2048"]:
        measure(int(arg))
