#!/usr/bin/env python3
"""Compile time and memory against program size, for each kind of long
program (issue 38): generates each program at sizes 10, 100, ... and runs
one `egrad` command on it, timing it and reading its peak memory (GNU time's
maximum resident set), then prints a Markdown table with the log-log slope
of time and of memory over the top decade measured (the figure that shows
how the cost grows; over all sizes the fixed start-up cost flattens it).

Usage: scripts/scaling.py [EGRAD] [--max N] [--kinds a,b,...] [--runs R] [--instructions]
  EGRAD   the binary (default target/release/egrad)
  --max   the largest size (default 100000)
  --kinds the kinds to run (default all; see KINDS)
  --runs  runs per point, the fastest kept (default 1)
  --instructions  also count the instructions each point executes, once
          more under valgrind's callgrind (about 50 times slower): a count
          that does not depend on the machine's load or its caches, so its
          slope is the algorithm's alone

A kind's size is its number of statements: `let`s, functions or indexes.
Each `let` of the chains below is two IR operations (`sin` and `*`).
Needs GNU time at /usr/bin/time.
"""

import math
import os
import subprocess
import sys
import tempfile


def lets(n):
    """A scalar `let` chain and its @grad: parse, check, AD (`egrad check`)."""
    out = ["fn f(x: f64) -> f64 {", "  let y0 = sin(x)"]
    out += [f"  let y{k} = sin(y{k - 1}) * x" for k in range(1, n)]
    out += [f"  y{n - 1}", "}", "@grad(x)", "fn df(x: f64) -> f64 = f(x)"]
    return "\n".join(out) + "\n"


def vlets(n):
    """A vector `let` chain's gradient."""
    out = ["fn f[N](x: f64[N]) -> f64 {", "  let y0 = sin(x)"]
    out += [f"  let y{k} = sin(y{k - 1}) * x" for k in range(1, n)]
    out += [f"  +/(y{n - 1})", "}", "@grad(x)", "fn df[N](x: f64[N]) -> f64[N] = f(x)"]
    return "\n".join(out) + "\n"


def index(n):
    """A chain of run-time indexes, each reading the one before."""
    out = ["fn f[N](i: i64[N], x: f64[N]) -> f64 {", "  let a0 = i[0]"]
    out += [f"  let a{k} = i[a{k - 1}]" for k in range(1, n)]
    out += [f"  x[a{n - 1}]", "}"]
    return "\n".join(out) + "\n"


def calls(n):
    """A chain of functions, each calling the one before."""
    out = ["fn g0(x: f64) -> f64 { sin(x) }"]
    out += [f"fn g{k}(x: f64) -> f64 {{ sin(g{k - 1}(x)) * x }}" for k in range(1, n)]
    out += [f"fn f(x: f64) -> f64 {{ g{n - 1}(x) }}"]
    return "\n".join(out) + "\n"


BIG = ["--node-limit", "1000000000", "--iter-limit", "1000", "--time-limit", "100000"]

# name: (program, command after the binary with FILE for the program, what it measures)
KINDS = {
    "lets": (lets, ["check", "FILE"], "`let` chain: parse, check and AD (`egrad check`)"),
    "index": (index, ["check", "FILE"], "run-time index chain: parse and check (`egrad check`)"),
    "calls": (calls, ["check", "FILE"], "call chain: parse and check (`egrad check`)"),
    "egraph": (
        vlets,
        ["grad", "FILE", "--fn", "df"] + BIG,
        "`let` chain's gradient with the node limit raised: AD, e-graph, extraction (`egrad grad`)",
    ),
    "build": (
        vlets,
        ["build", "FILE", "--fn", "df", "-o", "OUT.o"] + BIG,
        "`let` chain's gradient compiled to an object and C header (`egrad build`)",
    ),
}


def count_instructions(egrad, cmd, out):
    """The instructions `egrad cmd` executes, by valgrind's callgrind."""
    r = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.callgrind", egrad] + cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in r.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1].strip())
    raise SystemExit(f"callgrind counted nothing ({r.returncode}): {r.stderr[-2000:]}")


def measure(egrad, kind, n, runs, work, instructions):
    make, args, _ = KINDS[kind]
    path = os.path.join(work, f"{kind}{n}.eg")
    with open(path, "w") as f:
        f.write(make(n))
    out = os.path.join(work, f"{kind}{n}")
    cmd = [a.replace("FILE", path).replace("OUT", out) for a in args]
    best = None
    for _ in range(runs):
        r = subprocess.run(
            ["/usr/bin/time", "-f", "%e %M", egrad] + cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        last = r.stderr.strip().splitlines()[-1]
        if r.returncode != 0:
            raise SystemExit(f"{kind} n={n} failed ({r.returncode}): {r.stderr[-2000:]}")
        secs, kb = last.split()
        point = (float(secs), int(kb) * 1024)
        best = point if best is None or point[0] < best[0] else best
    extra = ""
    ir = count_instructions(egrad, cmd, out) if instructions else None
    if ir is not None:
        extra += f", {ir / 1e6:.1f} M instructions"
    if kind == "build":
        extra += f", header {os.path.getsize(out + '.h') / 1e6:.2f} MB"
    return best, ir, extra


def slope(points):
    """The log-log slope between the two largest sizes at least a decade
    apart, or None."""
    big = points[-1]
    for p in reversed(points[:-1]):
        if big[0] >= 10 * p[0] and p[1] > 0 and big[1] > 0:
            return math.log(big[1] / p[1]) / math.log(big[0] / p[0])
    return None


def main():
    argv = sys.argv[1:]
    egrad = "target/release/egrad"
    top, kinds, runs, instructions = 100000, list(KINDS), 1, False
    while argv:
        a = argv.pop(0)
        if a == "--max":
            top = int(argv.pop(0))
        elif a == "--kinds":
            kinds = argv.pop(0).split(",")
        elif a == "--runs":
            runs = int(argv.pop(0))
        elif a == "--instructions":
            instructions = True
        else:
            egrad = a
    sizes = [n for n in [10, 100, 1000, 3000, 10000, 30000, 100000] if n <= top]
    with tempfile.TemporaryDirectory() as work:
        print("| kind | size | time (s) | peak memory (MB) | |")
        print("|---|---:|---:|---:|---|")
        summary = []
        for kind in kinds:
            times, mems, irs = [], [], []
            for n in sizes:
                (secs, mem), ir, extra = measure(egrad, kind, n, runs, work, instructions)
                times.append((n, secs))
                mems.append((n, mem))
                if ir is not None:
                    irs.append((n, ir))
                print(f"| {kind} | {n} | {secs:.2f} | {mem / 1e6:.0f} | {extra.lstrip(', ')} |", flush=True)
            summary.append((kind, slope(times), slope(mems), slope(irs) if irs else None))
        print()
        ir_head = " instruction slope |" if instructions else ""
        print(f"| kind | what | time slope | memory slope |{ir_head}")
        print("|---|---|---:|---:|" + ("---:|" if instructions else ""))
        for kind, ts, ms, irs in summary:
            show = lambda s: "n/a" if s is None else f"{s:.2f}"
            ir_col = f" {show(irs)} |" if instructions else ""
            print(f"| {kind} | {KINDS[kind][2]} | {show(ts)} | {show(ms)} |{ir_col}")


if __name__ == "__main__":
    main()
