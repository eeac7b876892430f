#!/usr/bin/env bash
# The README's promise, measured: in a fresh clone of this repository (at
# COMMIT, default HEAD), the README's first command, then `cargo test
# --release --no-run`; their times, and the crates both compiled (only
# egrad itself when the build and the tests share every dependency).
# Usage: scripts/fresh_build.sh [COMMIT]   (on an otherwise idle machine;
# logs in /tmp/m_run.log and /tmp/m_test.log; BENCHMARKS.md, "Build time").
set -u
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
rm -rf /tmp/fresh && git clone -q "$repo" /tmp/fresh && cd /tmp/fresh && git checkout -q "${1:-HEAD}"
export CARGO_TERM_COLOR=never
start=$SECONDS
cargo run --release -- run examples/loss.eg --fn dloss_dw --arg w=[1,2,3] --arg x=[4,5,6] --arg y=0.5 > /tmp/m_run.log 2>&1
echo "first command: exit $? in $((SECONDS-start)) s" | tee -a /tmp/m_run.log
start=$SECONDS
cargo test --release --no-run > /tmp/m_test.log 2>&1
echo "cargo test --release --no-run: exit $? in $((SECONDS-start)) s" | tee -a /tmp/m_test.log
grep '^ *Compiling' /tmp/m_run.log | awk '{print $2" "$3}' | sort -u > /tmp/m_run.crates
grep '^ *Compiling' /tmp/m_test.log | awk '{print $2" "$3}' | sort -u > /tmp/m_test.crates
echo "compiled by both: $(comm -12 /tmp/m_run.crates /tmp/m_test.crates | tr '\n' ' ')"
echo "compiled by the tests only: $(comm -13 /tmp/m_run.crates /tmp/m_test.crates | wc -l) crates"
