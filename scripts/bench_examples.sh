#!/usr/bin/env bash
# Optimized against unoptimized gradients (AD straight to Cranelift) for
# every @grad function of examples/ and every suite program, on the same
# inputs, with `egrad bench`; prints a Markdown table and the geometric mean.
# Usage: scripts/bench_examples.sh [TIME_MS]   (from the repository root)
set -euo pipefail
ms=${1:-300}
egrad=target/release/egrad
cargo build --release --quiet
rows=()
# Plain examples: random inputs at N=1000 (M=100, and B=64, I=128, O=32 for
# the layer).
while read -r file fn; do
  rows+=("$file|$fn|--dim N=1000 --dim M=100 --dim B=64 --dim I=128 --dim O=32")
done < <(grep -n -A1 '^@grad' examples/*.eg | grep -- '-fn ' | sed -E 's/^(.*\.eg)-[0-9]+-fn ([a-z0-9_]+).*/\1 \2/')
# The suite, on its own inputs.
rows+=("examples/suite/linreg.eg|linreg_grad|--suite linreg_1M")
rows+=("examples/suite/logistic.eg|logistic_grad|--suite logistic")
rows+=("examples/suite/rosenbrock.eg|rosenbrock_grad|--suite rosenbrock")
rows+=("examples/suite/mlp2.eg|mlp2_grad|--suite mlp2")
rows+=("examples/suite/power_static.eg|power_static_grad|--suite power_static")
rows+=("examples/suite/euler_ode.eg|euler_ode_grad|--suite euler_ode")
echo "| program | gradient | optimized | unoptimized | speedup |"
echo "| --- | --- | --- | --- | --- |"
logsum=0
n=0
for row in "${rows[@]}"; do
  IFS='|' read -r file fn args <<<"$row"
  # shellcheck disable=SC2086
  out=$($egrad bench "$file" --fn "$fn" $args --time-ms "$ms")
  opt=$(sed -E "s/.*: optimized ([0-9.]+ [nµm]?s).*/\1/" <<<"$out")
  unopt=$(sed -E 's/.*unoptimized ([0-9.]+ [nµm]?s).*/\1/' <<<"$out")
  x=$(sed -E 's/.*speedup ([0-9.]+)x.*/\1/' <<<"$out")
  echo "| \`$file\` | \`$fn\` | $opt | $unopt | ${x}× |"
  logsum=$(awk -v a="$logsum" -v x="$x" 'BEGIN { print a + log(x) }')
  n=$((n + 1))
done
awk -v s="$logsum" -v n="$n" 'BEGIN { printf "\ngeometric mean speedup over %d gradients: %.2f×\n", n, exp(s / n) }'
