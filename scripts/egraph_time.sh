#!/usr/bin/env bash
# E-graph time (saturation and extraction, as `--report` gives it) of every
# @grad / @value_and_grad function of examples/*.eg and examples/suite/*.eg:
# runs `egrad grad FILE --fn NAME --report` RUNS times per function and
# prints the median e-graph milliseconds, the e-graph's size (the same
# binary and program always give the same size: a size that differs between
# two binaries means their e-graphs differ, not just their speed), and the
# sum of the medians. A function that fails is skipped and listed.
# Usage: scripts/egraph_time.sh [EGRAD] [RUNS] [FILE...]   (from the repository root)
#   EGRAD  the binary to time (default target/release/egrad)
#   RUNS   runs per function (default 5)
#   FILE   programs to scan (default examples/*.eg examples/suite/*.eg;
#          gradbench/*.eg works too)
# `egrad grad` refuses a @value_and_grad function (it returns more than one
# scalar), so those are listed as skipped.
set -euo pipefail
egrad=${1:-target/release/egrad}
runs=${2:-5}
shift $(($# < 2 ? $# : 2))
files=("$@")
((${#files[@]})) || files=(examples/*.eg examples/suite/*.eg)
[[ -x $egrad ]] || { echo "not an executable: $egrad" >&2; exit 2; }

# "FILE NAME" for each function whose attribute line starts with @grad or
# @value_and_grad: the name is the next `fn` after the attribute.
functions() {
  awk '/^@(grad|value_and_grad)[( ]/ { want = 1; next }
       want && match($0, /^fn[ \t]+[A-Za-z_][A-Za-z0-9_]*/) {
         name = substr($0, RSTART, RLENGTH); sub(/^fn[ \t]+/, "", name)
         print FILENAME, name; want = 0 }' "${files[@]}"
}

printf '%-32s %-20s %10s  %s\n' file function "median ms" "e-graph (first run)"
total=0
n=0
skipped=()
while read -r file fn; do
  times=()
  size=""
  ok=1
  for ((r = 0; r < runs; r++)); do
    if ! out=$("$egrad" grad "$file" --fn "$fn" --report 2>&1); then
      ok=0
      break
    fi
    line=$(grep -m1 '^e-graph:' <<<"$out") || { ok=0; break; }
    # e-graph: 30 nodes, 19 classes, 4 iterations, stop: saturated, 0.14 ms
    times+=("$(sed -E 's/.*, ([0-9.]+) ms$/\1/' <<<"$line")")
    [[ -n $size ]] || size=$(sed -E 's/^e-graph: (.*), [0-9.]+ ms$/\1/' <<<"$line")
  done
  if ((ok == 0)); then
    skipped+=("$file $fn")
    continue
  fi
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{ a[NR] = $1 }
    END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  printf '%-32s %-20s %10.3f  %s\n' "$file" "$fn" "$median" "$size"
  total=$(awk -v a="$total" -v b="$median" 'BEGIN { print a + b }')
  n=$((n + 1))
done < <(functions)
printf '\ntotal of medians over %d functions (%d runs each): %.3f ms\n' "$n" "$runs" "$total"
if ((${#skipped[@]})); then
  echo "skipped (egrad failed or printed no e-graph line):"
  printf '  %s\n' "${skipped[@]}"
fi
