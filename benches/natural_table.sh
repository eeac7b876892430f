#!/usr/bin/env bash
# The table of BENCHMARKS.md ("Programs written the natural way", issue
# 35): each program of examples/natural/ against its JAX counterpart
# (benches/jax_natural.py) on the same inputs, one pinned core, float64.
# JAX draws the inputs and writes them as .npz; egrad's gradient
# (`egrad bench`: the value-and-gradient program as `grad.compile()` runs
# it, the fastest call) is timed on them, its loss checked against JAX's.
#
# Usage: benches/natural_table.sh      (from the repository root; needs JAX)
# Environment:
#   OUT      where the inputs and JAX's results go (default: target/natural)
#   ONLY     comma-separated program names
#   TIME_MS  milliseconds egrad times each program (default: 2000)
#   SKIP_RUN=1  only print the table from the last results
set -euo pipefail
cd "$(dirname "$0")/.."

out="${OUT:-target/natural}"
egrad=target/release/egrad
cargo build --release --quiet >&2
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c 0); fi
only=()
if [[ -n "${ONLY:-}" ]]; then only=(--only "$ONLY"); fi
if [[ "${SKIP_RUN:-}" != 1 ]]; then
    python3 benches/jax_natural.py --out "$out" "${only[@]}" >&2

    # program, loss function, gradient function
    programs=(
        "embed_mlp embed_mlp embed_mlp_grad"
        "cnn cnn cnn_grad"
        "greeks book greeks"
        "huber_lse huber_lse huber_lse_grad"
        "gp gp_nll gp_nll_grad"
    )
    for p in "${programs[@]}"; do
        read -r key loss grad <<<"$p"
        [[ -f "$out/$key.npz" ]] || continue
        src="examples/natural/$key.eg"
        "$egrad" run "$src" --fn "$loss" --args "@$out/$key.npz" --json -q >"$out/$key.run.json"
        "${pin[@]}" "$egrad" bench "$src" --fn "$grad" --args "@$out/$key.npz" --lambdas 0.25 \
            --time-ms "${TIME_MS:-2000}" --json -q >"$out/$key.bench.json"
    done
fi

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
jax = json.load(open(os.path.join(out, "jax_natural.json")))
meta = jax.pop("_meta")


def fmt(s):
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.3f} ms"


print(f"JAX {meta['jax']}, pinned={meta['pinned']}; fastest call of each.\n")
print("| program | egrad grad | JAX jit(grad) | egrad / JAX | egrad unoptimized | losses agree |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
for key, j in jax.items():
    b = json.load(open(os.path.join(out, f"{key}.bench.json")))
    r = json.load(open(os.path.join(out, f"{key}.run.json")))
    loss = r["results"][0]["data"][0] if "results" in r else None
    e = b["optimized"]["time_s"]
    agree = loss is not None and abs(loss - j["loss"]) <= 1e-9 * max(1.0, abs(j["loss"]))
    verdict = "yes" if agree else f"no ({loss!r} vs {j['loss']!r})"
    print(f"| `{key}` | {fmt(e)} | {fmt(j['grad_min_s'])} | {e / j['grad_min_s']:.2f} "
          f"| {fmt(b['unoptimized']['time_s'])} | {verdict} |")
PY
