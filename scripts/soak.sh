#!/usr/bin/env bash
# Soak: push N random programs (tests/random_programs.rs) through JIT versus
# interpreter versus optimizer, gradients against finite differences, forward
# versus reverse mode and second order, and print how many checks ran, how
# many were skipped (with the reason) and how many failed.
#
#   scripts/soak.sh N            # programs 0..N of the default seed stream
#   EGRAD_SOAK_CHUNK=250         # programs per test process (default 250)
#   EGRAD_SOAK_LOG=soak.log      # where every chunk's output goes
#   EGRAD_RANDOM_SEED=...        # another seed stream (the test's knobs pass through)
#   EGRAD_SOAK_FROM=K            # programs K..K+N instead (to split a soak over cores)
#
# The programs run in chunks (one test process each, EGRAD_RANDOM_FIRST and
# EGRAD_RANDOM_PROGRAMS), so the running totals printed after each chunk are
# a valid partial result if the soak is stopped. Every failing program is
# listed (EGRAD_RANDOM_KEEP_GOING) with the seed that reruns it alone:
#   EGRAD_RANDOM_PROGRAM_SEED=0x... cargo test --release --test random_programs
# Exit status: 0 when nothing failed, 1 otherwise.
set -uo pipefail

n=${1:?usage: scripts/soak.sh N}
chunk=${EGRAD_SOAK_CHUNK:-250}
cd "$(dirname "$0")/.."
log=${EGRAD_SOAK_LOG:-target/soak.log}
: >"$log"

bin=$(cargo test --release --test random_programs --no-run 2>&1 |
    grep -o 'target/release/deps/random_programs-[0-9a-f]*' | tail -1)
if [[ -z "$bin" || ! -x "$bin" ]]; then
    echo "soak: could not build the random_programs test" >&2
    exit 2
fi

# Run a copy: building the tests again beside a long soak (same path, new
# code) must not change what its later chunks run.
totals=$(mktemp)
copy=$(mktemp)
trap 'rm -f "$totals" "$copy"' EXIT
cp "$bin" "$copy" && chmod +x "$copy"
bin=$copy
start=$(date +%s)
crashed=0

summary() {
    local done=$1
    echo "soak: $done of $n programs in $(($(date +%s) - start)) s (log: $log)"
    for kind in run skip fail; do
        case $kind in
        run) echo "checks run:" ;;
        skip) echo "checks skipped (reason):" ;;
        fail) echo "failed:" ;;
        esac
        awk -v k="$kind" '$1 == k {
                n = $2; sub(/^[a-z]+ [0-9]+ /, "")
                if (!($0 in t)) w[++i] = $0
                t[$0] += n
            }
            END { for (j = 1; j <= i; j++) printf "  %9d  %s\n", t[w[j]], w[j] }' "$totals"
    done
    if ((crashed > 0)); then
        echo "  $crashed chunks ended without their counts (crash or abort; see the log)"
    fi
}

from=${EGRAD_SOAK_FROM:-0}
end=$((from + n))
first=$from
while ((first < end)); do
    size=$((end - first < chunk ? end - first : chunk))
    out=$(EGRAD_RANDOM_FIRST=$first EGRAD_RANDOM_PROGRAMS=$size EGRAD_RANDOM_KEEP_GOING=1 \
        "$bin" random_programs_jit_optimizer_and_derivatives --exact --nocapture 2>&1)
    status=$?
    {
        echo "=== programs $first..$((first + size)) (exit $status)"
        echo "$out"
    } >>"$log"
    counts=$(echo "$out" | grep '^SOAK ' | sed 's/^SOAK //')
    if [[ -z "$counts" ]]; then
        crashed=$((crashed + 1))
    else
        echo "$counts" >>"$totals"
    fi
    echo "$out" | grep '^FAIL ' || true
    if ((status != 0)) && ! echo "$out" | grep -q '^FAIL '; then
        echo "chunk $first..$((first + size)) exited with status $status without a failing program (an assertion on the counts? see the log)"
    fi
    first=$((first + size))
    summary "$((first - from))"
    echo
done

failed=$(awk '$1 == "fail" { s += $2 } END { print s + 0 }' "$totals")
((failed == 0 && crashed == 0))
