#!/usr/bin/env python3
"""Replay every GradBench recording against `egrad gradbench` and print one
markdown table: per recording, evaluates passed, and egrad's evaluate time
beside the reference tool's recorded time (summed over the evaluates, and
for the largest input), with compile time apart.

Usage: scripts/gradbench_table.py [GRADBENCH_DIR] [EGRAD_BINARY]
Defaults: ../shared/gradbench and target/release/egrad. Needs python3 with
numpy (replay.py's only dependency). The recorded reference timings come
from another machine of the same class: read the ratios as rough scale.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

# (recording, extra replay.py options)
RUNS = [
    ("llsq.jsonl", []),
    ("lse-small.jsonl", ["--rtol", "1e-9", "--atol", "1e-300"]),
    ("lse.jsonl", []),
    ("ode-small-rk4.jsonl", ["--rtol", "1e-9", "--atol", "1e-300"]),
    ("ode-small.jsonl", []),
    ("ode.jsonl", []),
    ("kmeans.jsonl", []),
    ("gmm.jsonl", []),
    ("lstm.jsonl", []),
    ("ht.jsonl", []),
    ("ht-simple.jsonl", []),
    ("det.jsonl", []),
    ("ba.jsonl", []),
    ("particle.jsonl", ["--rtol", "1e-9", "--atol", "1e-300"]),
    ("saddle.jsonl", ["--rtol", "1e-9", "--atol", "1e-300"]),
]


def ns(timings, name):
    return sum(t["nanoseconds"] for t in timings or [] if t.get("name") == name)


def evals(timings):
    runs = [t["nanoseconds"] for t in timings or [] if t.get("name") == "evaluate"]
    return sum(runs) / len(runs) if runs else 0.0


def fmt(x):
    if x >= 1e9:
        return f"{x / 1e9:.2f} s"
    if x >= 1e6:
        return f"{x / 1e6:.2f} ms"
    return f"{x / 1e3:.1f} µs"


def main():
    gb = sys.argv[1] if len(sys.argv) > 1 else "../shared/gradbench"
    egrad = sys.argv[2] if len(sys.argv) > 2 else "target/release/egrad"
    print("| recording | passed | egrad evaluate (sum) | reference (sum) | ratio | largest input: egrad / reference | egrad compile (sum) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, opts in RUNS:
        path = os.path.join(gb, name)
        if not os.path.exists(path):
            continue
        with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
            saved = f.name
        out = subprocess.run(
            [sys.executable, os.path.join(gb, "replay.py"), *opts, "--timeout", "900",
             "--save", saved, path, "--", egrad, "gradbench"],
            capture_output=True, text=True,
        ).stdout
        last = out.strip().splitlines()[-1] if out.strip() else "?"
        m = re.match(r"(\d+) passed, (\d+) failed", last)
        passed = f"{m.group(1)}/{int(m.group(1)) + int(m.group(2))}" if m else last
        # Evaluates in recording order; the saved file keeps that order.
        ref = [json.loads(line)["response"] for line in open(path)
               if json.loads(line)["message"].get("kind") == "evaluate"]
        ours, theirs, compile_ns = 0.0, 0.0, 0
        largest = None
        if os.path.exists(saved):
            mine = [json.loads(line)["response"] for line in open(saved)
                    if json.loads(line)["message"].get("kind") == "evaluate"]
            for r, ref_resp in zip(mine, ref):
                a = evals(r.get("timings"))
                b = evals(ref_resp.get("timings"))
                ours += a
                theirs += b
                compile_ns += ns(r.get("timings"), "compile")
                largest = (a, b)
            os.unlink(saved)
        ratio = f"{ours / theirs:.2f}" if theirs > 0 else "–"
        big = f"{fmt(largest[0])} / {fmt(largest[1])}" if largest and largest[1] > 0 else "–"
        print(f"| {name} | {passed} | {fmt(ours)} | {fmt(theirs) if theirs else '–'} | {ratio} | {big} | {fmt(compile_ns)} |")


if __name__ == "__main__":
    main()
