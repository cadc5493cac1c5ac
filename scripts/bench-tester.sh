#!/usr/bin/env bash
# Reruns every figure of docs/results.md's tester section: the tester's own speed and
# repeatability, then each seed scenario at seed scale with short trials. Reports land in
# target/bench/ (<id>.md, .json, .svg); the console output in target/bench/*.log.
# SECONDS_PER_TRIAL (default 2) sets the trial length; the reports used 60-300 s.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
cargo build --release -p linerate
L=./target/release/linerate
S=${SECONDS_PER_TRIAL:-2}
OUT=target/bench
mkdir -p "$OUT"
$L bench tester --seconds "$S" --sizes 64,1518 --repeat 5 --policer 1000000 | tee "$OUT/tester.log"
for id in ME-1 ME-2 XR-3 XR-4 GR-2; do
  $L bench scenario "$id" --seconds "$S" --out "$OUT" --quiet | tee "$OUT/$id.log"
done
for id in GR-1 GR-3; do
  $L bench scenario "$id" --seconds 1 --out "$OUT" --quiet | tee "$OUT/$id.log"
done
