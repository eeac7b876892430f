#!/usr/bin/env bash
# The side-by-side table of BENCHMARKS.md ("Side by side: hand-written Rust
# and JAX"): runs the criterion bench `benches/suite.rs` (egrad primal and
# gradient, hand-written Rust primal and gradient, egrad parse-to-callable)
# and, when JAX is installed, `benches/jax_suite.py`, then prints one
# Markdown table of medians from that run.
#
# Usage: benches/suite_table.sh            (from the repository root)
# Environment:
#   CARGO_TARGET_DIR   where cargo builds and criterion stores its results
#                      (default: target)
#   SUITE_ONLY         comma-separated suite keys (both benches)
#   RUNS=3             repeat both benches this many times (default 1) and
#                      report, per figure, the median over the runs (each
#                      run's figure is itself a median)
#   SKIP_RUN=1         only print the table from the last results
#   NO_JAX=1           leave the JAX column empty
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
runs_dir="$target/suite_runs"
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c 0); fi

if [[ "${SKIP_RUN:-}" != 1 ]]; then
    rm -rf "$runs_dir"
    cargo bench --bench suite --no-run >&2
    for ((run = 1; run <= ${RUNS:-1}; run++)); do
        echo "suite_table.sh: run $run of ${RUNS:-1} ($(uptime))" >&2
        out="$runs_dir/$run"
        mkdir -p "$out"
        rm -rf "$target/criterion/suite_"*
        "${pin[@]}" cargo bench --bench suite >&2
        cp -r "$target/criterion/suite_"* "$out/"
        if [[ "${NO_JAX:-}" != 1 ]]; then
            only=()
            if [[ -n "${SUITE_ONLY:-}" ]]; then only=(--only "$SUITE_ONLY"); fi
            # jax_suite.py pins itself with taskset and sets the XLA flags;
            # it exits with 2 when JAX is not installed.
            python3 benches/jax_suite.py --json "$out/jax_suite.json" "${only[@]}" >&2 ||
                echo "suite_table.sh: the JAX run did not complete; the JAX column is empty" >&2
        fi
    done
fi

python3 - "$runs_dir" <<'EOF'
import json, os, statistics, sys

runs_dir = sys.argv[1]
runs = sorted(os.listdir(runs_dir), key=int) if os.path.isdir(runs_dir) else []
if not runs:
    sys.exit(f"suite_table.sh: no results under {runs_dir}")
keys = ["linreg_16", "linreg_1M", "logistic", "rosenbrock", "mlp2", "power_static", "euler_ode"]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def crit_median(run, key, what):
    # criterion names the group directory `suite_<key>` for group `suite/<key>`
    p = os.path.join(runs_dir, run, f"suite_{key}", what, "new", "estimates.json")
    if not os.path.exists(p):
        return None
    with open(p) as fh:
        return json.load(fh)["median"]["point_estimate"] * 1e-9


def median(key, what):
    return med([crit_median(r, key, what) for r in runs])


jax_runs = []
for r in runs:
    p = os.path.join(runs_dir, r, "jax_suite.json")
    if os.path.exists(p):
        with open(p) as fh:
            jax_runs.append(json.load(fh))
jax = {
    k: {f: med([j.get(k, {}).get(f) for j in jax_runs])
        for f in ("grad_median_s", "primal_median_s", "first_call_s")}
    for k in keys
}
print(f"{len(runs)} run(s); JAX in {len(jax_runs)}"
      + (f" (JAX {jax_runs[0]['_meta']['jax']})" if jax_runs else "") + "; medians.")
print()


def fmt(s):
    if s is None:
        return "—"
    if s < 1e-6:
        return f"{s * 1e9:.1f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def ratio(a, b):
    if a is None or b is None:
        return "—"
    r = a / b
    return f"{r:.2f}" if r >= 0.1 else f"{r:.4f}"


print("| program | egrad grad | hand-written Rust grad | JAX grad | egrad / Rust | egrad / JAX "
      "| egrad grad / primal | Rust grad / primal | JAX grad / primal | egrad parse-to-callable | JAX first call |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for k in keys:
    eg, ep = median(k, "egrad_grad"), median(k, "egrad_primal")
    rg, rp = median(k, "rust_grad"), median(k, "rust_primal")
    ptc = median(k, "parse_to_callable")
    if eg is None:
        continue
    j = jax.get(k, {})
    jg, jp, jf = j.get("grad_median_s"), j.get("primal_median_s"), j.get("first_call_s")
    print(f"| `{k}` | {fmt(eg)} | {fmt(rg)} | {fmt(jg)} | {ratio(eg, rg)} | {ratio(eg, jg)} "
          f"| {ratio(eg, ep)} | {ratio(rg, rp)} | {ratio(jg, jp)} | {fmt(ptc)} | {fmt(jf)} |")
print()
print("Primal medians: " + ", ".join(
    f"`{k}` egrad {fmt(median(k, 'egrad_primal'))} / Rust {fmt(median(k, 'rust_primal'))} / "
    f"JAX {fmt(jax.get(k, {}).get('primal_median_s'))}"
    for k in keys if median(k, "egrad_primal") is not None))
print()
targets = []
for k in keys:
    eg, ep, rg = median(k, "egrad_grad"), median(k, "egrad_primal"), median(k, "rust_grad")
    if eg is None:
        continue
    jg = jax.get(k, {}).get("grad_median_s")
    t = [
        "≤ JAX: " + ("—" if jg is None else ("met" if eg <= jg else "missed")),
        "≤ 1.5× Rust: " + ("met" if eg <= 1.5 * rg else "missed"),
        "grad/primal ≤ 3: " + ("met" if eg <= 3 * ep else "missed"),
    ]
    targets.append(f"- `{k}`: " + "; ".join(t))
print("\n".join(targets))
EOF
